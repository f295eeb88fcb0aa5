package socketserver_test

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// ownKey reports whether the server answers key itself, so that it
// cannot be served raw: ApiVersions, SaslHandshake, SaslAuthenticate.
func ownKey(key int16) bool { return key == 17 || key == 18 || key == 36 }

// rawAPIs serves every API kmsg knows raw, at every version it knows, but
// those the server answers itself; frames larger than streamAbove are
// streamed (0: none).
func rawAPIs(streamAbove int) []socketserver.API {
	var apis []socketserver.API
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if r := kmsg.RequestForKey(key); r != nil && !ownKey(key) {
			apis = append(apis, socketserver.API{Key: key, MaxVersion: r.MaxVersion()})
		}
	}
	apis = socketserver.Raw(apis...)
	for i := range apis {
		apis[i].StreamAbove = streamAbove
	}
	return apis
}

// rawSeen is what a host saw of a raw request, copied.
type rawSeen struct {
	key, version int16
	corr         int32
	clientID     *string
	header, tags []byte
	body         []byte // read whole, through Read, whether streamed or not
	inMemory     []byte // Body()
	streamed     bool
	bodyLen      int
	size         int
	expects      bool
}

// seeRaw copies what r, a raw request, carries, reading its body.
func seeRaw(r *socketserver.Request) (rawSeen, error) {
	raw := r.Raw
	if raw == nil || r.Body != nil {
		return rawSeen{}, fmt.Errorf("API key %d: not a raw request", r.APIKey)
	}
	s := rawSeen{
		key: r.APIKey, version: r.APIVersion, corr: r.CorrelationID, clientID: r.ClientID,
		header: bytes.Clone(raw.Header()), tags: bytes.Clone(raw.Tags()), inMemory: bytes.Clone(raw.Body()),
		streamed: raw.Streamed(), bodyLen: raw.BodyLen(), size: r.Size, expects: raw.ExpectsResponse(),
	}
	body, err := io.ReadAll(raw)
	s.body = body
	return s, err
}

// rawResponseOf is the body a test host answers a raw request with.
func rawResponseOf(key int16, corr int32) []byte {
	return fmt.Appendf(nil, "response of key %d to %d", key, corr)
}

// readRawResponse reads a response frame and checks its header as the
// server writes it for a raw answer: the correlation id, then an empty tag
// section when flexible. It returns the body.
func readRawResponse(t testing.TB, c net.Conn, corr int32, flexible bool) []byte {
	t.Helper()
	frame := readRawFrame(t, c)
	require.GreaterOrEqual(t, len(frame), 4)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "correlation id")
	body := frame[4:]
	if flexible {
		require.NotEmpty(t, body, "a flexible response header has a tag section")
		require.Equal(t, byte(0), body[0], "the response header's empty tag section")
		body = body[1:]
	}
	return body
}

// recvSeen waits for what the host saw.
func recvSeen(t testing.TB, ch <-chan rawSeen) rawSeen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no raw request reached the host")
		return rawSeen{}
	}
}

// Every API kmsg knows, at every version, served raw, reaches the host as
// the client sent it: the header's bytes (with its tagged fields when
// flexible) and the body's, byte for byte, the header's fields decoded
// beside them; and the host's bytes reach the client after the response
// header the server writes (with a tag section exactly for the flexible
// versions). Read whole, and streamed (every frame over 1 byte).
func TestRawRequestAsSent(t *testing.T) {
	for _, stream := range []int{0, 1} {
		t.Run(fmt.Sprintf("StreamAbove=%d", stream), func(t *testing.T) {
			seen := make(chan rawSeen, 1)
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = rawAPIs(stream) },
				socketserver.HandlerFunc(func(r *socketserver.Request) {
					s, err := seeRaw(r)
					if err != nil {
						t.Error(err)
						_ = r.CloseConnection()
						return
					}
					seen <- s
					assert.NoError(t, r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID)))
				}))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			corr := int32(0)
			for key := int16(0); key <= kmsg.MaxKey; key++ {
				req := kmsg.RequestForKey(key)
				if req == nil || ownKey(key) {
					continue
				}
				for v := int16(0); v <= req.MaxVersion(); v++ {
					req.SetVersion(v)
					corr++
					sent := formatter.AppendRequest(nil, req, corr)
					if key == 7 && v == 0 { // kmsg's formatter leaves the body and the size out of its header without a client id
						sent = frame(req.AppendTo(headerBytes(key, v, corr, nil, nil)[:8]))
					}
					name := fmt.Sprintf("%s v%d", kmsg.NameForKey(key), v)
					write(t, c, sent)
					s := recvSeen(t, seen)
					require.Equal(t, sent[4:], append(s.header, s.body...), "%s: header and body as sent", name)
					require.Equal(t, []int16{key, v}, []int16{s.key, s.version}, name)
					require.Equal(t, corr, s.corr, name)
					require.Equal(t, len(sent)-4, s.size, name)
					require.Equal(t, len(s.body), s.bodyLen, name)
					if key == 7 && v == 0 {
						require.Nil(t, s.clientID, "%s has no client id", name)
					} else {
						require.Equal(t, "test", *s.clientID, name)
					}
					if req.IsFlexible() {
						require.Equal(t, []byte{0}, s.tags, "%s: the header's (empty) tag section", name)
					} else {
						require.Nil(t, s.tags, name)
					}
					wantStreamed := stream > 0 && len(s.body) > 0
					require.Equal(t, wantStreamed, s.streamed, name)
					if !s.streamed {
						require.Equal(t, s.body, s.inMemory, name)
					}
					got := readRawResponse(t, c, corr, req.IsFlexible())
					require.Equal(t, rawResponseOf(key, corr), got, name)
				}
			}
		})
	}
}

// Headers kmsg's formatter does not write reach the host as sent too: a
// tag section with a field, a null client id, a client id too long for a
// streamed frame's header to fit the read buffer (the frame is then read
// whole), and the acks of Produce requests, which say whether the client
// expects a response.
func TestRawRequestHeaders(t *testing.T) {
	seen := make(chan rawSeen, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = rawAPIs(1) },
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			s, err := seeRaw(r)
			if err != nil {
				t.Error(err)
			}
			seen <- s
			if r.Raw.ExpectsResponse() {
				_ = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
			} else {
				_ = r.NoResponse()
			}
		}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	long := string(bytes.Repeat([]byte{'c'}, 300))
	txn := "txn"
	produce := func(version, acks int16, txnID *string) kmsg.Request {
		req := produceOf(1000)
		req.Version, req.Acks, req.TransactionID = version, acks, txnID
		return req
	}
	for _, tt := range []struct {
		name     string
		req      kmsg.Request
		clientID *string
		tags     []byte
		streamed bool
		expects  bool
	}{
		{"a tagged field in the header", metadataReq(12), strp("c"), []byte{1, 0, 3, 'a', 'b', 'c'}, true, true},
		{"a null client id", metadataReq(12), nil, []byte{0}, true, true},
		{"a null client id, not flexible", metadataReq(8), nil, nil, true, true},
		{"a client id too long to stream", metadataReq(12), &long, []byte{0}, false, true},
		{"Produce v2 acks=0", produce(2, 0, nil), strp("p"), nil, true, false},
		{"Produce v3 acks=0 with a transactional id", produce(3, 0, &txn), strp("p"), nil, true, false},
		{"Produce v8 acks=1 with a transactional id", produce(8, 1, &txn), strp("p"), nil, true, true},
		{"Produce v9 acks=0 with a transactional id", produce(9, 0, &txn), strp("p"), []byte{0}, true, false},
		{"Produce v12 acks=-1", produce(12, -1, nil), strp("p"), []byte{0}, true, true},
		{"Produce v13 acks=0 with a long transactional id (read whole)", produce(13, 0, &long), strp("p"), []byte{0}, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hdr := headerBytes(tt.req.Key(), tt.req.GetVersion(), 7, tt.clientID, tt.tags)
			sent := frame(tt.req.AppendTo(hdr))
			write(t, c, sent)
			s := recvSeen(t, seen)
			require.Equal(t, hdr, s.header)
			require.Equal(t, tt.tags, s.tags)
			require.Equal(t, sent[4+len(hdr):], s.body)
			require.Equal(t, tt.clientID, s.clientID)
			require.Equal(t, tt.streamed, s.streamed)
			require.Equal(t, tt.expects, s.expects, "ExpectsResponse")
			if tt.expects {
				require.Equal(t, rawResponseOf(tt.req.Key(), 7), readRawResponse(t, c, 7, tt.req.IsFlexible()))
			}
		})
	}
	send(t, c, metadataReq(1), 99)
	require.Equal(t, rawResponseOf(3, 99), readRawResponse(t, c, 99, false), "the connection is still in step")
}

// metadataResp is an empty Metadata response of a version.
func metadataResp(version int16) *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	return resp
}

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends.
func tcpPair(t testing.TB) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	b := <-accepted
	require.NotNil(t, b)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// A raw answer reaches the client as the host gave it, after the response
// header the server writes, whatever it comes from: slices (one vectored
// write), none, more slices than a raw answer holds without allocating, a
// reader, a file (sendfile), a TCP connection (splice); on plaintext and
// TLS listeners. RespondRawFrom returns once its source has been read.
func TestRawRespondSources(t *testing.T) {
	pki := newTestPKI(t)
	body := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: more than a socket buffer takes at once
	path := filepath.Join(t.TempDir(), "response")
	require.NoError(t, os.WriteFile(path, append([]byte("SKIP"), body...), 0o600))
	up, upServer := tcpPair(t)

	type mode struct {
		name string
		want []byte
		ans  func(r *socketserver.Request) error
	}
	modes := []mode{
		{"one slice", body, func(r *socketserver.Request) error { return r.RespondRaw(body) }},
		{"no slice", nil, func(r *socketserver.Request) error { return r.RespondRaw() }},
		{"seven slices", body, func(r *socketserver.Request) error {
			var parts [][]byte
			for i := 0; i < len(body); i += len(body) / 7 {
				parts = append(parts, body[i:min(i+len(body)/7, len(body))])
			}
			return r.RespondRaw(parts...)
		}},
		{"a reader", body, func(r *socketserver.Request) error {
			return r.RespondRawFrom(bytes.NewReader(body), int64(len(body)))
		}},
		{"part of a reader", body[:1000], func(r *socketserver.Request) error {
			return r.RespondRawFrom(bytes.NewReader(body), 1000)
		}},
		{"a file", body, func(r *socketserver.Request) error {
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.Seek(4, io.SeekStart); err != nil {
				return err
			}
			return r.RespondRawFrom(f, int64(len(body)))
		}},
		{"a TCP connection", body, func(r *socketserver.Request) error {
			go func() { _, _ = up.Write(body) }()
			return r.RespondRawFrom(upServer, int64(len(body)))
		}},
	}
	current := make(chan mode, 1)
	answered := make(chan error, 1)
	srv := socketservertest.NewServer(t, merge(config.Properties{
		"listeners":                      "PLAIN://127.0.0.1:0,TLS://127.0.0.1:0",
		"listener.security.protocol.map": "PLAIN:PLAINTEXT,TLS:SSL",
		"inter.broker.listener.name":     "PLAIN",
	}, pki.props("")), func(c *socketserver.Config) { c.APIs = rawAPIs(0) },
		socketserver.HandlerFunc(func(r *socketserver.Request) { answered <- (<-current).ans(r) }))
	for _, l := range []protocolmap.ListenerName{"PLAIN", "TLS"} {
		var c net.Conn = socketservertest.Dial(t, srv, l)
		if l == "TLS" {
			c = tls.Client(c, pki.clientConfig())
		}
		for i, m := range modes {
			for _, v := range []int16{8, 12} { // a header without and with tags
				t.Run(fmt.Sprintf("%s/%s/Metadata v%d", l, m.name, v), func(t *testing.T) {
					current <- m
					corr := int32(i*100 + int(v))
					send(t, c, metadataReq(v), corr)
					got := readRawResponse(t, c, corr, v >= 9)
					require.NoError(t, <-answered)
					require.True(t, bytes.Equal(m.want, got), "%d bytes, want %d", len(got), len(m.want))
				})
			}
		}
	}
}

// A source that ends early cannot complete the response, whose size
// comes first: RespondRawFrom says so, and the client's connection closes
// without a whole response.
func TestRawRespondFromShortSource(t *testing.T) {
	answered := make(chan error, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = rawAPIs(0) },
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			answered <- r.RespondRawFrom(bytes.NewReader([]byte("short")), 100)
		}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	err := <-answered
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NotErrorIs(t, err, socketserver.ErrConnectionClosed, "the source was read")
	got, err := io.ReadAll(c)
	if err != nil {
		requireClosedErr(t, err)
	}
	require.Less(t, len(got), 4+104, "the connection closed before a whole frame")
}

// The response header of a raw answer to a decoded request: Metadata v12
// has a tag section; ApiVersions v3, which the host answers when it lists
// key 18, never has one (its response header is always v0).
func TestRespondRawToDecodedRequests(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{
			socketserver.KmsgAPI(kmsg.Metadata, 0, 13),
			socketserver.KmsgAPI(kmsg.ApiVersions, 0, 4),
		}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		assert.Nil(t, r.Raw)
		err := r.RespondRawFrom(bytes.NewReader(nil), 0)
		assert.ErrorContains(t, err, "RespondRaw", "RespondRawFrom answers raw requests only")
		assert.NoError(t, r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID)))
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(12), 1)
	require.Equal(t, rawResponseOf(3, 1), readRawResponse(t, c, 1, true))
	send(t, c, metadataReq(4), 2)
	require.Equal(t, rawResponseOf(3, 2), readRawResponse(t, c, 2, false))
	send(t, c, apiVersionsReq(3, "raw", "1"), 3)
	require.Equal(t, rawResponseOf(18, 3), readRawResponse(t, c, 3, false))
}

// New refuses what cannot be served raw: the APIs the server answers
// itself, its own ListClientConnections and CloseClientConnections
// handlers, a key nothing says the
// flexible versions of, and a stream threshold without Raw or below 0. A
// key kmsg does not know is served raw with New's request type.
func TestRawAPIConfig(t *testing.T) {
	lc := socketserver.ListClientConnectionsAPI(93, nil)
	for _, tt := range []struct {
		name string
		api  socketserver.API
		err  string
	}{
		{"ApiVersions", socketserver.API{Key: 18, MaxVersion: 3, Raw: true}, "cannot be served raw"},
		{"SaslHandshake", socketserver.API{Key: 17, MaxVersion: 1, Raw: true}, "cannot be served raw"},
		{"SaslAuthenticate", socketserver.API{Key: 36, MaxVersion: 2, Raw: true}, "cannot be served raw"},
		{"ListClientConnections", socketserver.Raw(lc)[0], "ListClientConnectionsAPI cannot be served raw"},
		{"CloseClientConnections", socketserver.Raw(socketserver.CloseClientConnectionsAPI(1093, nil))[0], "CloseClientConnectionsAPI cannot be served raw"},
		{"a key kmsg does not know", socketserver.API{Key: 9999, MaxVersion: 1, Raw: true}, "kmsg does not know"},
		{"StreamAbove without Raw", func() socketserver.API {
			a := socketserver.KmsgAPI(kmsg.Produce, 3, 12)
			a.StreamAbove = 10
			return a
		}(), "not Raw"},
		{"StreamAbove below 0", socketserver.API{Key: 0, MaxVersion: 12, Raw: true, StreamAbove: -1}, "negative"},
		{"Pipeline without Raw", func() socketserver.API {
			a := socketserver.KmsgAPI(kmsg.Produce, 3, 12)
			a.Pipeline = 5
			return a
		}(), "Pipeline is set but not Raw"},
		{"Pipeline below 0", socketserver.API{Key: 0, MaxVersion: 12, Raw: true, Pipeline: -1}, "want 0 to 1024"},
		{"Pipeline over MaxPipeline", socketserver.API{Key: 0, MaxVersion: 12, Raw: true, Pipeline: socketserver.MaxPipeline + 1}, "want 0 to 1024"},
		{"Pipeline at MaxPipeline", socketserver.API{Key: 0, MaxVersion: 12, Raw: true, Pipeline: socketserver.MaxPipeline}, ""},
		{"a key kmsg does not know, with New", socketserver.API{Key: 9999, MaxVersion: 1, Raw: true,
			New: func() kmsg.Request { return kmsg.NewPtrMetadataRequest() }}, ""},
		{"versions kmsg does not decode", socketserver.API{Key: 3, MaxVersion: 99, Raw: true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Server(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
			require.NoError(t, err)
			cfg.APIs = []socketserver.API{tt.api}
			_, err = socketserver.New(cfg)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.err)
		})
	}
}

// A version kmsg does not know reaches the host raw (a proxy forwards what
// its upstream speaks), with its header read by the version at which the
// API's headers became flexible.
func TestRawVersionKmsgDoesNotKnow(t *testing.T) {
	seen := make(chan rawSeen, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{{Key: 3, MaxVersion: 99, Raw: true}}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		s, _ := seeRaw(r)
		seen <- s
		_ = r.RespondRaw([]byte("future"))
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	hdr := headerBytes(3, 42, 5, strp("c"), []byte{0})
	write(t, c, frame(append(hdr, "some future body"...)))
	s := recvSeen(t, seen)
	require.Equal(t, hdr, s.header)
	require.Equal(t, []byte("some future body"), s.body)
	require.Equal(t, []byte("future"), readRawResponse(t, c, 5, true))
}

// Until the handshake is over no raw request is served: one sent before
// authenticating closes the connection, as any request the SASL exchange
// does not allow. After it, raw requests carry the principal.
func TestRawSASL(t *testing.T) {
	seen := make(chan connregistry.Principal, 1)
	srv := socketservertest.NewServer(t, saslProps(nil), func(c *socketserver.Config) {
		c.APIs = rawAPIs(0)
		c.Credentials = newUsers(t)
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		seen <- r.Conn.Principal
		_ = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
	}))

	early := socketservertest.Dial(t, srv, "SASL_PLAINTEXT")
	send(t, early, metadataReq(12), 1)
	requireClosedNoResponse(t, early)

	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	resp := rc.login("PLAIN", "alice", alicePassword, 1)
	require.Zero(t, resp.ErrorCode)
	send(t, rc.c, metadataReq(12), 50)
	require.Equal(t, rawResponseOf(3, 50), readRawResponse(t, rc.c, 50, true))
	require.Equal(t, alice, <-seen)
}

// Frames over socket.request.max.bytes, and versions or keys the listener
// does not enable, close the connection without a response, raw or
// streamed as decoded.
func TestRawLimits(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{"socket.request.max.bytes": "100000"}, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{
			{Key: 0, MinVersion: 3, MaxVersion: 12, Raw: true, StreamAbove: 1000},
			{Key: 3, MinVersion: 1, MaxVersion: 12, Raw: true},
		}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		_, _ = io.Copy(io.Discard, r.Raw)
		_ = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
	}))
	for _, tt := range []struct {
		name string
		req  kmsg.Request
		ok   bool
	}{
		{"a streamed Produce within the limit", produceOf(90000), true},
		{"a streamed Produce over the limit", produceOf(100001), false},
		{"Metadata within the limit", metadataReq(12), true},
		{"a Metadata version not enabled", metadataReq(13), false},
		{"Metadata v0, not enabled", metadataReq(0), false},
		{"a Produce version not enabled", func() kmsg.Request { r := produceOf(5000); r.Version = 2; return r }(), false},
		{"an API not enabled", kmsg.NewPtrFetchRequest(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			send(t, c, tt.req, 1)
			if !tt.ok {
				requireClosedNoResponse(t, c)
				return
			}
			require.Equal(t, rawResponseOf(tt.req.Key(), 1), readRawResponse(t, c, 1, tt.req.IsFlexible()))
		})
	}
}

// Requests pipelined on one connection, raw and decoded, whole and
// streamed, answered from other goroutines in any order of time, some
// streamed ones before their body was read: the host holds one at a time,
// and the answers leave in order.
func TestRawPipelined(t *testing.T) {
	var inFlight, most atomic.Int32
	var answering sync.WaitGroup
	defer answering.Wait()
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = append(socketserver.Raw(
			socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, StreamAbove: 4096},
			socketserver.API{Key: 1, MinVersion: 4, MaxVersion: 17},
		), socketserver.KmsgAPI(kmsg.Metadata, 0, 12))
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		answering.Go(func() {
			time.Sleep(time.Duration(r.CorrelationID%3) * time.Millisecond)
			resp := rawResponseOf(r.APIKey, r.CorrelationID)
			if r.Raw != nil && (!r.Raw.Streamed() || r.CorrelationID%2 == 0) { // odd streamed ones: answered unread
				body, err := io.ReadAll(r.Raw)
				assert.NoError(t, err)
				assert.Equal(t, r.Raw.BodyLen(), len(body))
			}
			inFlight.Add(-1)
			if r.Raw == nil {
				_ = r.Respond(kmsg.NewPtrMetadataResponse())
				return
			}
			_ = r.RespondRaw(resp)
		})
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	var reqs []kmsg.Request
	var all []byte
	for i := range 60 {
		var req kmsg.Request
		switch i % 4 {
		case 0:
			req = produceOf(100000 + i) // streamed
		case 1:
			req = produceOf(100) // whole
		case 2:
			f := kmsg.NewPtrFetchRequest()
			f.Version = 12
			req = f
		case 3:
			req = metadataReq(12)
		}
		reqs = append(reqs, req)
		all = append(all, formatter.AppendRequest(nil, req, int32(i))...)
	}
	go func() { _, _ = c.Write(all) }()
	for i, req := range reqs {
		if req.Key() == 3 {
			readResponse(t, c, metadataResp(12), int32(i))
			continue
		}
		require.Equal(t, rawResponseOf(req.Key(), int32(i)), readRawResponse(t, c, int32(i), req.IsFlexible()))
	}
	require.EqualValues(t, 1, most.Load(), "requests the host held at once")
}

// A raw request answered after the host throttled it: the answer leaves at
// once, then the connection reads nothing until the throttle has passed,
// with RespondRaw and RespondRawFrom alike.
func TestRawThrottle(t *testing.T) {
	const throttle = 300 * time.Millisecond
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = rawAPIs(0) },
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			if r.CorrelationID%2 == 1 {
				_ = r.Throttle(throttle)
			}
			resp := rawResponseOf(r.APIKey, r.CorrelationID)
			if r.CorrelationID < 3 {
				_ = r.RespondRaw(resp)
				return
			}
			assert.NoError(t, r.RespondRawFrom(bytes.NewReader(resp), int64(len(resp))))
		}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	for _, corr := range []int32{1, 3} {
		start := time.Now()
		write(t, c, append(formatter.AppendRequest(nil, metadataReq(12), corr), formatter.AppendRequest(nil, metadataReq(12), corr+1)...))
		require.Equal(t, rawResponseOf(3, corr), readRawResponse(t, c, corr, true))
		require.Less(t, time.Since(start), throttle, "the throttled answer left at once")
		require.Equal(t, rawResponseOf(3, corr+1), readRawResponse(t, c, corr+1, true))
		require.GreaterOrEqual(t, time.Since(start), throttle, "the next request was read after the throttle")
	}
}

// The hooks and the request log see raw requests as decoded ones: the
// frame's size (a streamed frame's whole size), the response's, the
// latency, and the request logged once.
func TestRawHooksAndRequestLog(t *testing.T) {
	m := &recorder{}
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = rawAPIs(1000)
		c.Hooks = []socketserver.Hook{m, logs}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		_, _ = io.Copy(io.Discard, r.Raw)
		resp := rawResponseOf(r.APIKey, r.CorrelationID)
		if r.Raw.Streamed() {
			_ = r.RespondRawFrom(bytes.NewReader(resp), int64(len(resp)))
			return
		}
		_ = r.RespondRaw(resp)
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	reqs := []kmsg.Request{metadataReq(12), produceOf(50000)}
	for i, req := range reqs {
		f := formatter.AppendRequest(nil, req, int32(i))
		write(t, c, f)
		resp := readRawResponse(t, c, int32(i), true)
		l := logs.of(t, id, i+1)[i]
		assert.Equal(t, req.Key(), l.APIKey)
		assert.Equal(t, int32(i), l.CorrelationID)
		assert.Equal(t, "test", l.ClientID)
		assert.Equal(t, len(f)-4, l.RequestBytes)
		assert.Equal(t, 4+4+1+len(resp), l.ResponseBytes)
		assert.False(t, l.ServerAnswered)
		assert.False(t, l.Closed)
		assert.Positive(t, l.Latency.Total)
		require.Eventually(t, func() bool { return len(m.of("done")) == i+1 }, 5*time.Second, time.Millisecond)
		assert.Contains(t, m.of("request"), hookEvent{Kind: "request", Listener: "PLAINTEXT", Key: req.Key(), Bytes: len(f) - 4})
		assert.Contains(t, m.of("response"), hookEvent{Kind: "response", Listener: "PLAINTEXT", Key: req.Key(), Bytes: l.ResponseBytes})
	}
}

// streamProps are a listener with a request memory budget smaller than
// the bodies streamed through it at once.
var streamProps = config.Properties{
	"socket.request.max.bytes": strconv.Itoa(8 << 20),
	"queued.max.request.bytes": strconv.Itoa(8 << 20),
}

// writerOnlyFunc is a writer without ReadFrom: a streamed body goes to it
// through the server's pooled buffer.
type writerOnlyFunc func([]byte) (int, error)

func (f writerOnlyFunc) Write(p []byte) (int, error) { return f(p) }

// Streamed bodies of several MiB, three connections at once with a
// request memory budget smaller than the three, on plaintext and TLS: each
// reaches the host while the others are held (a streamed body takes no
// budget but for its header), and the host moves it whole: with Read, to
// a TCP connection (splice from a plaintext client), and to a writer that
// has only Write.
func TestRawStreamedBodies(t *testing.T) {
	pki := newTestPKI(t)
	const size = 3 << 20
	held := make(chan *socketserver.Request, 3)
	srv := socketservertest.NewServer(t, merge(streamProps, config.Properties{
		"listeners":                      "PLAIN://127.0.0.1:0,TLS://127.0.0.1:0",
		"listener.security.protocol.map": "PLAIN:PLAINTEXT,TLS:SSL",
		"inter.broker.listener.name":     "PLAIN",
	}, pki.props("")), func(c *socketserver.Config) { c.APIs = rawAPIs(64 << 10) },
		socketserver.HandlerFunc(func(r *socketserver.Request) { held <- r }))

	for _, l := range []protocolmap.ListenerName{"PLAIN", "TLS"} {
		t.Run(string(l), func(t *testing.T) {
			var conns []net.Conn
			var sent [][]byte
			for i := range 3 {
				var c net.Conn = socketservertest.Dial(t, srv, l)
				if l == "TLS" {
					c = tls.Client(c, pki.clientConfig())
				}
				req := produceOf(size)
				for j := range req.Topics[0].Partitions[0].Records {
					req.Topics[0].Partitions[0].Records[j] = byte(j*7 + i)
				}
				f := formatter.AppendRequest(nil, req, int32(i))
				sent = append(sent, f)
				conns = append(conns, c)
				go func() { _, _ = c.Write(f) }()
			}
			var reqs [3]*socketserver.Request
			for range 3 {
				r := recv(t, held)
				require.True(t, r.Raw.Streamed())
				reqs[r.CorrelationID] = r
			}
			used := srv.Stats().RequestMemory[protocolmap.DataPlane].Used
			require.Less(t, used, 4096, "three streamed requests held take only their headers' memory")

			var got [3]bytes.Buffer
			var wg sync.WaitGroup
			// 0: Read, in small pieces.
			wg.Go(func() {
				buf := make([]byte, 1000)
				for {
					n, err := reqs[0].Raw.Read(buf)
					got[0].Write(buf[:n])
					if err == io.EOF {
						return
					}
					if !assert.NoError(t, err) {
						return
					}
				}
			})
			// 1: io.Copy to a TCP connection.
			sink, sinkServer := tcpPair(t)
			wg.Go(func() {
				done := make(chan struct{})
				go func() { _, _ = io.Copy(&got[1], sinkServer); close(done) }()
				_, err := io.Copy(sink, reqs[1].Raw)
				assert.NoError(t, err)
				_ = sink.CloseWrite()
				<-done
			})
			// 2: io.Copy to a writer with Write alone.
			wg.Go(func() {
				_, err := io.Copy(writerOnlyFunc(got[2].Write), reqs[2].Raw)
				assert.NoError(t, err)
			})
			wg.Wait()
			for i, r := range reqs {
				hdr := r.Raw.Header()
				require.Equal(t, sent[i][4:4+len(hdr)], hdr)
				require.True(t, bytes.Equal(sent[i][4+len(hdr):], got[i].Bytes()), "body %d: %d bytes, want %d", i, got[i].Len(), len(sent[i])-4-len(hdr))
				require.NoError(t, r.RespondRaw(rawResponseOf(0, int32(i))))
				require.Equal(t, rawResponseOf(0, int32(i)), readRawResponse(t, conns[i], int32(i), true))
				send(t, conns[i], metadataReq(12), 10) // the connection reads on, in step
				next := recv(t, held)
				require.Equal(t, int32(10), next.CorrelationID)
				require.NoError(t, next.RespondRaw(rawResponseOf(3, 10)))
				require.Equal(t, rawResponseOf(3, 10), readRawResponse(t, conns[i], 10, true))
			}
		})
	}
}

// A streamed request is handed over as soon as its head (header, and a
// Produce's body up to acks) has come, without waiting for more of the
// body: read from the bytes that came with its size, from bytes that came
// after the size alone, and on a parked connection, whose parked
// goroutine reads the size alone and hands the rest to the connection.
// (The last two waited for a read buffer's worth of the body, which a
// client that sends only the head before it hears back never sends.)
func TestRawStreamedHeadHandedOverAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		park  bool // the connection parks before the request
		split bool // the size alone first, then the head
	}{
		{"the head with its size", false, false},
		{"the size alone, then the head", false, true},
		{"parked, then the head with its size", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
				c.APIs = rawAPIs(64 << 10)
				c.ParkAfter = -1
				if tc.park {
					c.ParkAfter = time.Millisecond
				}
			}, socketserver.HandlerFunc(func(r *socketserver.Request) { held <- r }))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			if tc.park {
				waitParked(t, srv, 1)
			}
			f := formatter.AppendRequest(nil, produceOf(1<<20), 1)
			const first = 64 // the size, the header, acks and some of the records, less than the read buffer
			sent := 0
			if tc.split {
				_, err := c.Write(f[:4])
				require.NoError(t, err)
				sent = 4
				time.Sleep(50 * time.Millisecond) // the server reads the size alone
			}
			_, err := c.Write(f[sent:first])
			require.NoError(t, err)
			r := recv(t, held) // fails after its wait if the server waits for more
			require.True(t, r.Raw.Streamed())
			go func() { _, _ = c.Write(f[first:]) }()
			var body bytes.Buffer
			_, err = io.Copy(&body, r.Raw)
			require.NoError(t, err)
			require.True(t, bytes.Equal(f[4+len(r.Raw.Header()):], body.Bytes()), "the body as sent")
			require.NoError(t, r.RespondRaw(rawResponseOf(0, 1)))
			require.Equal(t, rawResponseOf(0, 1), readRawResponse(t, c, 1, true))
		})
	}
}

// A host that answers a streamed request without reading its body, or
// having read part of it: the server reads the rest and drops it, and the
// connection's next request (pipelined behind it) is served. CloseConnection
// closes without reading it.
func TestRawStreamAnsweredUnread(t *testing.T) {
	for _, tt := range []struct {
		name   string
		read   int
		answer func(r *socketserver.Request) error
	}{
		{"RespondRaw, unread", 0, func(r *socketserver.Request) error { return r.RespondRaw([]byte("early")) }},
		{"RespondRaw, part read", 1 << 20, func(r *socketserver.Request) error { return r.RespondRaw([]byte("early")) }},
		{"RespondRawFrom, unread", 0, func(r *socketserver.Request) error {
			return r.RespondRawFrom(bytes.NewReader([]byte("early")), 5)
		}},
		{"Respond, unread", 0, func(r *socketserver.Request) error {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = r.APIVersion
			return r.Respond(resp)
		}},
		{"NoResponse, unread", 0, func(r *socketserver.Request) error { return r.NoResponse() }},
		{"CloseConnection, unread", 0, func(r *socketserver.Request) error { return r.CloseConnection() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
				c.APIs = append(socketserver.Raw(socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, StreamAbove: 1000}),
					socketserver.KmsgAPI(kmsg.Metadata, 0, 12))
			}, socketserver.HandlerFunc(func(r *socketserver.Request) {
				if r.Raw == nil {
					_ = r.Respond(kmsg.NewPtrMetadataResponse())
					return
				}
				if tt.read > 0 {
					_, err := io.CopyN(io.Discard, r.Raw, int64(tt.read))
					assert.NoError(t, err)
				}
				assert.NoError(t, tt.answer(r))
				_, err := r.Raw.Read(make([]byte, 10))
				assert.ErrorIs(t, err, socketserver.ErrAlreadyAnswered, "reading after the answer")
			}))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			go func() {
				_, _ = c.Write(append(formatter.AppendRequest(nil, produceOf(5<<20), 1), formatter.AppendRequest(nil, metadataReq(12), 2)...))
			}()
			switch tt.name {
			case "CloseConnection, unread":
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err := io.ReadAll(c)
				if err != nil {
					requireClosedErr(t, err)
				}
				return
			case "NoResponse, unread":
			case "Respond, unread":
				resp := kmsg.NewPtrProduceResponse()
				resp.Version = 9
				readResponse(t, c, resp, 1)
			default:
				require.Equal(t, []byte("early"), readRawResponse(t, c, 1, true))
			}
			readResponse(t, c, metadataResp(12), 2)
		})
	}
}

// A client that closes in the middle of a streamed body: the host's read
// fails, the request's context ends, its answer is dropped (and a
// RespondRawFrom reads nothing of its source), and the connection is gone
// from the registry and the request log says the request closed.
func TestRawClientClosesMidStream(t *testing.T) {
	logs := &requestLogs{}
	type outcome struct {
		read, answer error
		ctxDone      bool
		left         int
	}
	outcomes := make(chan outcome, 1)
	srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
		c.APIs = rawAPIs(1000)
		c.Hooks = []socketserver.Hook{logs}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		var o outcome
		_, o.read = io.Copy(io.Discard, r.Raw)
		select {
		case <-r.Context().Done():
			o.ctxDone = true
		case <-time.After(5 * time.Second):
		}
		src := bytes.NewReader([]byte("never read"))
		o.answer = r.RespondRawFrom(src, src.Size())
		o.left = src.Len()
		outcomes <- o
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	id := connID(t, srv, c)
	f := formatter.AppendRequest(nil, produceOf(1<<20), 1)
	write(t, c, f[:len(f)/2])
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, c.Close())
	o := <-outcomes
	require.ErrorIs(t, o.read, io.ErrUnexpectedEOF)
	require.True(t, o.ctxDone, "the request's context ended")
	require.ErrorIs(t, o.answer, socketserver.ErrConnectionClosed)
	require.Equal(t, len("never read"), o.left, "the source was not read")
	l := logs.of(t, id, 1)[0]
	assert.True(t, l.Closed)
	assert.Equal(t, len(f)-4, l.RequestBytes)
	assert.Zero(t, l.ResponseBytes)
}

// A connection that closes while the host holds a raw request read whole
// (the registry's operator close): RespondRawFrom then reads nothing and
// says so; RespondRaw is dropped, as a late Respond.
func TestRawRespondFromAfterClose(t *testing.T) {
	held := make(chan *socketserver.Request, 1)
	logs := &requestLogs{}
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = rawAPIs(0)
		c.Hooks = []socketserver.Hook{logs}
	}, queueHandler(held))
	for _, fromSrc := range []bool{false, true} {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		id := connID(t, srv, c)
		send(t, c, metadataReq(12), 1)
		r := recv(t, held)
		srv.Registry().Close(connregistry.Filter{}, "test")
		require.True(t, logs.of(t, id, 1)[0].Closed, "the connection stopped waiting for the answer")
		if !fromSrc {
			require.NoError(t, r.RespondRaw([]byte("late")))
			continue
		}
		src := bytes.NewReader([]byte("late"))
		require.ErrorIs(t, r.RespondRawFrom(src, 4), socketserver.ErrConnectionClosed)
		require.Equal(t, 4, src.Len(), "the source was not read")
		require.ErrorIs(t, r.RespondRaw([]byte("late")), socketserver.ErrAlreadyAnswered)
	}
}

// RespondRawFrom from an inline handler: on the handler's own goroutine
// (the connection's: it writes itself rather than wait for itself), from
// another goroutine while the handler waits for it, and from one the
// handler handed the request to before returning; with streamed bodies
// left unread for the answer to drain, and pipelined requests behind.
func TestRawRespondFromInline(t *testing.T) {
	var answering sync.WaitGroup
	defer answering.Wait()
	answer := func(r *socketserver.Request) {
		resp := rawResponseOf(r.APIKey, r.CorrelationID)
		assert.NoError(t, r.RespondRawFrom(bytes.NewReader(resp), int64(len(resp))))
	}
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		switch r.CorrelationID % 3 {
		case 0:
			answer(r)
		case 1:
			done := make(chan struct{})
			go func() { answer(r); close(done) }()
			<-done
		case 2:
			answering.Go(func() { answer(r) })
		}
	})
	srv := socketservertest.NewServer(t, streamProps, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(h, rawAPIs(1000)...)
	}, answerAll)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	var all []byte
	var reqs []kmsg.Request
	for i := range 90 {
		var req kmsg.Request = metadataReq(12)
		if i%2 == 0 {
			req = produceOf(20000 + i)
		}
		reqs = append(reqs, req)
		all = append(all, formatter.AppendRequest(nil, req, int32(i))...)
	}
	go func() { _, _ = c.Write(all) }()
	for i, req := range reqs {
		require.Equal(t, rawResponseOf(req.Key(), int32(i)), readRawResponse(t, c, int32(i), true))
	}
}

// Shutdown ends the reads of a streamed body still arriving, as it ends a
// frame still arriving (the connection closes), and does not wait for the
// client to send the rest; a raw request read whole is answered and
// written first, as any request in flight.
func TestRawShutdown(t *testing.T) {
	type outcome struct {
		streamed bool
		read     error
		answer   error
	}
	outcomes := make(chan outcome, 2)
	streamStarted, wholeStarted := make(chan struct{}), make(chan struct{})
	release := newGate()
	defer release.open()
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = rawAPIs(1000) },
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			o := outcome{streamed: r.Raw.Streamed()}
			if o.streamed {
				close(streamStarted)
			} else {
				close(wholeStarted)
				release.wait()
			}
			_, o.read = io.Copy(io.Discard, r.Raw)
			o.answer = r.RespondRaw(rawResponseOf(r.APIKey, r.CorrelationID))
			outcomes <- o
		}))
	whole := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, whole, metadataReq(12), 1)
	streaming := socketservertest.Dial(t, srv, "PLAINTEXT")
	f := formatter.AppendRequest(nil, produceOf(1<<20), 2)
	write(t, streaming, f[:len(f)/2])
	<-streamStarted // both requests are the host's
	<-wholeStarted

	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(t.Context()) }()
	o := <-outcomes
	require.True(t, o.streamed)
	require.Error(t, o.read, "the streamed body's read ends")
	requireClosedNoResponse(t, streaming)
	release.open()
	o = <-outcomes
	require.False(t, o.streamed)
	require.NoError(t, o.read)
	require.NoError(t, o.answer)
	require.Equal(t, rawResponseOf(3, 1), readRawResponse(t, whole, 1, true))
	require.NoError(t, <-shutdown)
}
