package socketserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// tappedConn keeps a copy of everything a client writes.
type tappedConn struct {
	net.Conn
	tap *wireTap
	buf *bytes.Buffer
}

func (c *tappedConn) Write(p []byte) (int, error) {
	c.tap.mu.Lock()
	c.buf.Write(p)
	c.tap.mu.Unlock()
	return c.Conn.Write(p)
}

// wireTap dials for kgo and keeps what each connection wrote.
type wireTap struct {
	mu      sync.Mutex
	streams []*bytes.Buffer
}

func (w *wireTap) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	buf := &bytes.Buffer{}
	w.mu.Lock()
	w.streams = append(w.streams, buf)
	w.mu.Unlock()
	return &tappedConn{Conn: c, tap: w, buf: buf}, nil
}

// sent reports whether some connection wrote frame, size prefix and all.
func (w *wireTap) sent(frame []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.streams {
		if bytes.Contains(s.Bytes(), frame) {
			return true
		}
	}
	return false
}

// kgo producing through a Produce served raw, on PLAINTEXT and, logged in
// with SCRAM, SASL_PLAINTEXT: each Produce reaches the host as kgo wrote
// it on the wire, byte for byte (small ones read whole, one of 2 MiB
// streamed), carrying the principal; the host decodes it itself and
// answers with kmsg's encoding, which kgo takes as any broker's answer.
func TestRawKgo(t *testing.T) {
	type produced struct {
		frame     []byte // size prefix, header and body, as the host saw them
		principal connregistry.Principal
		records   int
		streamed  bool
	}
	seen := make(chan produced, 100)
	srv := socketservertest.NewServerFunc(t, saslProps(nil), func(c *socketserver.Config) {
		c.APIs = append(socketserver.Raw(socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, StreamAbove: 64 << 10}),
			socketserver.KmsgAPI(kmsg.Metadata, 0, 12))
		c.Credentials = newUsers(t)
	}, func(srv *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			if req, ok := r.Body.(*kmsg.MetadataRequest); ok {
				_ = r.Respond(srv.SingleNodeMetadata(req, r.Conn.Listener, singleNode))
				return
			}
			body, err := io.ReadAll(r.Raw)
			if !assert.NoError(t, err) {
				_ = r.CloseConnection()
				return
			}
			p := produced{principal: r.Conn.Principal, streamed: r.Raw.Streamed()}
			p.frame = binary.BigEndian.AppendUint32(nil, uint32(r.Size))
			p.frame = append(append(p.frame, r.Raw.Header()...), body...)
			req := kmsg.NewPtrProduceRequest()
			req.Version = r.APIVersion
			if !assert.NoError(t, req.ReadFrom(body)) {
				_ = r.CloseConnection()
				return
			}
			resp := req.ResponseKind().(*kmsg.ProduceResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewProduceResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					var batch kmsg.RecordBatch
					assert.NoError(t, batch.ReadFrom(rp.Records))
					p.records += int(batch.NumRecords)
					sp := kmsg.NewProduceResponseTopicPartition()
					sp.Partition = rp.Partition
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			assert.Equal(t, r.Raw.ExpectsResponse(), req.Acks != 0)
			seen <- p
			_ = r.RespondRaw(resp.AppendTo(nil))
		})
	})

	for _, tt := range []struct {
		listener  protocolmap.ListenerName
		opts      []kgo.Opt
		principal connregistry.Principal
	}{
		{"PLAINTEXT", nil, connregistry.Principal{Type: "User", Name: "ANONYMOUS"}},
		{"SASL_PLAINTEXT", []kgo.Opt{socketservertest.KgoSASL("SCRAM-SHA-256", "alice", alicePassword)}, alice},
	} {
		t.Run(string(tt.listener), func(t *testing.T) {
			tap := &wireTap{}
			cl := newKgo(t, srv, tt.listener, append(tt.opts, kgo.Dialer(tap.dial), kgo.ProducerBatchMaxBytes(4<<20),
				kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var recs []*kgo.Record
			for i := range 20 {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 3), Value: []byte("small")})
			}
			require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
			large := bytes.Repeat([]byte("L"), 2<<20)
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: large}).FirstErr())

			records, streamed := 0, false
			for records < 21 {
				var p produced
				select {
				case p = <-seen:
				case <-ctx.Done():
					t.Fatalf("%d of 21 records reached the host", records)
				}
				records += p.records
				streamed = streamed || p.streamed
				require.Equal(t, len(p.frame) > 4+64<<10, p.streamed, "a Produce of %d bytes", len(p.frame))
				require.Equal(t, tt.principal, p.principal)
				require.True(t, tap.sent(p.frame), "a Produce of %d bytes the host saw is not what kgo sent", len(p.frame))
			}
			require.True(t, streamed, "the large Produce was streamed")
		})
	}
}

// forwarder is the forwarding sketch of docs/raw-forwarding.md: a host
// that forwards each raw request to an upstream broker over a connection
// of its own per client connection, and answers with the upstream's
// response, moved from socket to socket.
type forwarder struct {
	t        testing.TB
	upstream string
	mu       sync.Mutex
	conns    map[string]*net.TCPConn // by client connection id
	done     sync.WaitGroup
}

func (f *forwarder) upstreamFor(r *socketserver.Request) (*net.TCPConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if up := f.conns[r.Conn.ID]; up != nil {
		return up, nil
	}
	c, err := net.Dial("tcp", f.upstream)
	if err != nil {
		return nil, err
	}
	f.conns[r.Conn.ID] = c.(*net.TCPConn)
	return c.(*net.TCPConn), nil
}

func (f *forwarder) close() {
	f.done.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

func (f *forwarder) ServeKafka(r *socketserver.Request) {
	f.done.Go(func() {
		up, err := f.upstreamFor(r)
		if err != nil {
			_ = r.CloseConnection()
			return
		}
		raw := r.Raw
		size := binary.BigEndian.AppendUint32(nil, uint32(r.Size))
		bufs := net.Buffers{size, raw.Header(), raw.Body()}
		_, err = bufs.WriteTo(up)
		if err == nil && raw.Streamed() {
			_, err = io.Copy(up, raw) // client socket to upstream socket
		}
		if err != nil {
			_ = r.CloseConnection()
			return
		}
		if !raw.ExpectsResponse() {
			_ = r.NoResponse()
			return
		}
		hdr := make([]byte, 8, 9) // upstream's size and correlation id, and its tag count
		if raw.Tags() != nil {
			hdr = hdr[:9]
		}
		if _, err := io.ReadFull(up, hdr); err != nil || len(hdr) == 9 && hdr[8] != 0 {
			_ = r.CloseConnection()
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr)) - int64(len(hdr)) + 4
		assert.NoError(f.t, r.RespondRawFrom(up, n))
	})
}

// The forwarding sketch of docs/raw-forwarding.md between kgo and a
// broker (startSingleNode's, which decodes): Produce requests, small and
// streamed, go through the raw host upstream, whole, and its answers back,
// which kgo takes; acks=0 ones are forwarded without waiting.
func TestRawForwardingSketch(t *testing.T) {
	seen := &recorder{}
	upstream := startSingleNode(t, func(c *socketserver.Config) { c.Hooks = []socketserver.Hook{seen} })
	f := &forwarder{t: t, upstream: upstream.Addr("PLAINTEXT").String(), conns: map[string]*net.TCPConn{}}
	defer f.close()
	proxy := socketservertest.NewServerFunc(t, streamProps, func(c *socketserver.Config) {
		c.APIs = append(socketserver.Inline(f, socketserver.Raw(socketserver.API{Key: 0, MinVersion: 3, MaxVersion: 12, StreamAbove: 64 << 10})...),
			socketserver.KmsgAPI(kmsg.Metadata, 0, 12))
	}, func(srv *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			_ = r.Respond(srv.SingleNodeMetadata(r.Body.(*kmsg.MetadataRequest), r.Conn.Listener, singleNode))
		})
	})
	for _, acks := range []kgo.Acks{kgo.AllISRAcks(), kgo.NoAck()} {
		opts := []kgo.Opt{kgo.RequiredAcks(acks), kgo.ProducerBatchMaxBytes(4 << 20), kgo.ProducerBatchCompression(kgo.NoCompression())}
		if acks == kgo.NoAck() {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl := newKgo(t, proxy, "PLAINTEXT", opts...)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		for range 5 {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("small")}).FirstErr())
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: bytes.Repeat([]byte("L"), 1<<20)}).FirstErr())
		}
		cancel()
	}
	var large int
	require.Eventually(t, func() bool {
		produces := 0
		large = 0
		for _, e := range seen.of("request") {
			if e.Key == 0 {
				produces++
				if e.Bytes > 1<<20 {
					large++
				}
			}
		}
		return produces == 20
	}, 10*time.Second, time.Millisecond, "the Produce requests upstream received")
	require.Equal(t, 10, large, "large Produce requests, streamed through the host")
}
