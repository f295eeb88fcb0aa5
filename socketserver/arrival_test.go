package socketserver_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
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

// arrivalIdle is connections.max.idle.ms in the tests of a request's
// arrival: short, so that a frame trickled over a few seconds outlasts it
// several times.
const arrivalIdle = 600 * time.Millisecond

// Link speeds, as pieces written every so often: fast is about 3 kB/s,
// above the default floor (kafkanet.request.min.byte.rate, 1 KiB/s); slow
// is 40 B/s, a slowloris.
var (
	fastLink = link{piece: 64, every: 20 * time.Millisecond}
	slowLink = link{piece: 4, every: 100 * time.Millisecond}
)

type link struct {
	piece int
	every time.Duration
}

// trickle writes b to w at l's pace, and returns how many bytes it wrote
// before a write failed (the server closed) or b ended, and when it wrote
// the last.
func (l link) trickle(w io.Writer, b []byte) (sent int, last time.Time) {
	for sent < len(b) {
		n, err := w.Write(b[sent:min(sent+l.piece, len(b))])
		sent += n
		if n > 0 {
			last = time.Now()
		}
		if err != nil {
			return sent, last
		}
		if sent < len(b) {
			time.Sleep(l.every)
		}
	}
	return sent, last
}

// slowConn writes through a link once slow is set: what a TLS client
// writes as one record reaches the server a piece at a time.
type slowConn struct {
	net.Conn
	l    link
	slow atomic.Bool
}

func (c *slowConn) Write(b []byte) (int, error) {
	if !c.slow.Load() {
		return c.Conn.Write(b)
	}
	if n, _ := c.l.trickle(c.Conn, b); n < len(b) {
		return n, io.ErrClosedPipe
	}
	return len(b), nil
}

// bigMetadata is a Metadata request of about 5 kB: at fastLink's pace it
// takes about 2 s, more than three times arrivalIdle, to arrive.
func bigMetadata() *kmsg.MetadataRequest {
	req := metadataReq(12)
	for i := range 120 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(fmt.Sprintf("a-topic-of-a-long-name-%04d", i))
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// closedAs waits until the registry lists c's connection as closed, and
// returns its record.
func closedAs(t *testing.T, srv *socketserver.Server, c net.Conn) connregistry.Conn {
	t.Helper()
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	var closed connregistry.Conn
	require.Eventually(t, func() bool {
		for _, cc := range srv.Registry().Closed(connregistry.Filter{}) {
			if cc.ClientAddr == local {
				closed = cc
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the connection was not closed")
	return closed
}

// A request still arriving is not idle: a frame whose bytes keep coming
// above the floor is read whole and answered although it takes more than
// three times connections.max.idle.ms to arrive, over TLS too, where it is
// one record, whose bytes count as they arrive, before the record is
// whole. One that trickles below the floor is still closed at the limit,
// as too slow (connregistry.CloseSlowRequest), and one that stops half way as
// idle. With the floor off (kafkanet.request.min.byte.rate=-1) every byte
// counts, as in Kafka: the slowloris is served.
func TestRequestArrival(t *testing.T) {
	pki := newTestPKI(t)
	answered := func(r *socketserver.Request) { _ = r.Respond(kmsg.NewPtrMetadataResponse()) }
	newServer := func(t *testing.T, rate string) *socketserver.Server {
		props := merge(pki.props(""), config.Properties{
			"listeners":                     "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
			"connections.max.idle.ms":       strconv.Itoa(int(arrivalIdle / time.Millisecond)),
			config.KeyRequestMinByteRate:    rate,
			"kafkanet.handshake.timeout.ms": "10000",
		})
		return socketservertest.NewServer(t, props, func(c *socketserver.Config) {
			c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
		}, socketserver.HandlerFunc(answered))
	}
	big := requestFrame(bigMetadata(), 1, strp("arriving"))
	small := requestFrame(metadataReq(12), 1, strp(strings.Repeat("s", 80))) // about 2.5 s at slowLink's pace
	for _, tc := range []struct {
		name     string
		listener protocolmap.ListenerName
		rate     string // kafkanet.request.min.byte.rate
		frame    []byte
		link     link
		half     bool                     // the frame stops half way
		want     connregistry.CloseReason // "": answered
	}{
		{name: "above the floor", listener: "PLAINTEXT", rate: "1024", frame: big, link: fastLink},
		{name: "above the floor, one TLS record", listener: "SSL", rate: "1024", frame: big, link: fastLink},
		{name: "below the floor", listener: "PLAINTEXT", rate: "1024", frame: big, link: slowLink, want: connregistry.CloseSlowRequest},
		{name: "below the floor, one TLS record", listener: "SSL", rate: "1024", frame: big, link: slowLink, want: connregistry.CloseSlowRequest},
		{name: "below a higher floor", listener: "PLAINTEXT", rate: "65536", frame: big, link: fastLink, want: connregistry.CloseSlowRequest},
		{name: "stops half way", listener: "PLAINTEXT", rate: "1024", frame: big, link: fastLink, half: true, want: connregistry.CloseIdle},
		{name: "no floor, a slowloris", listener: "PLAINTEXT", rate: "-1", frame: small, link: slowLink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.rate)
			raw := socketservertest.Dial(t, srv, tc.listener)
			var c net.Conn = raw
			sc := &slowConn{Conn: raw, l: tc.link}
			if tc.listener == "SSL" {
				tc := tls.Client(sc, pki.clientConfig())
				require.NoError(t, tc.Handshake())
				c = tc
			}
			sc.slow.Store(true)
			frame := tc.frame
			if tc.half {
				frame = frame[:len(frame)/2]
			}
			start := time.Now()
			type wrote struct {
				n    int
				last time.Time
			}
			sent := make(chan wrote, 1)
			go func() {
				if tc.listener == "SSL" {
					n, _ := c.Write(frame) // one record, trickled by sc
					sent <- wrote{n, time.Now()}
					return
				}
				n, last := tc.link.trickle(c, frame)
				sent <- wrote{n, last}
			}()
			if tc.want == "" {
				readResponse(t, c, metadataResp(12), 1)
				took := time.Since(start)
				t.Logf("%d bytes arrived in %v and were answered", len(frame), took.Round(time.Millisecond))
				require.Greater(t, took, 2*arrivalIdle, "the frame arrived within the idle limit: the test shows nothing")
				<-sent
				requireOpen(t, c, 50*time.Millisecond)
				return
			}
			closed := closedAs(t, srv, raw)
			_ = raw.Close() // ends a trickle still writing
			w := <-sent
			from := start // a slowloris's frame is closed at the limit from its start
			if tc.half {
				from = w.last // one that stops, at the limit from its last bytes
				require.Equal(t, len(frame), w.n)
				require.Greater(t, w.last.Sub(start), arrivalIdle, "the half frame arrived within the idle limit: the test shows nothing")
			}
			took := closed.ClosedAt.Sub(from)
			t.Logf("closed %v after %s as %q, %d bytes of %d sent", took.Round(time.Millisecond),
				map[bool]string{true: "the last bytes", false: "the start"}[tc.half], closed.CloseReason, w.n, len(frame))
			assert.Equal(t, tc.want, closed.CloseReason)
			assert.GreaterOrEqual(t, took, arrivalIdle-100*time.Millisecond, "closed before connections.max.idle.ms")
			assert.Less(t, took, arrivalIdle+time.Second, "not closed at connections.max.idle.ms")
		})
	}
}

// A streamed body is the rest of its frame: read by the host (Read, a
// buffered WriteTo, or a splice to a TCP connection), its bytes keep the
// connection active while they come above the floor, past
// connections.max.idle.ms; below it the connection is closed at the limit
// as too slow, the host's read failing. The host may tighten it with a
// deadline on the body (the read fails with os.ErrDeadlineExceeded and
// the connection closes as too slow, although the bytes came above the
// floor), never loosen it (a far deadline does not keep a slowloris).
func TestStreamedBodyArrival(t *testing.T) {
	type outcome struct {
		read     int64
		err      error
		setErr   error
		answered bool
	}
	methods := map[string]func(r *socketserver.Request) (int64, error){
		"Read": func(r *socketserver.Request) (int64, error) {
			buf := make([]byte, 100)
			var total int64
			for {
				n, err := r.Raw.Read(buf)
				total += int64(n)
				if err == io.EOF {
					return total, nil
				}
				if err != nil {
					return total, err
				}
			}
		},
		"WriteTo": func(r *socketserver.Request) (int64, error) { return r.Raw.WriteTo(io.Discard) },
	}
	for _, tc := range []struct {
		name     string
		idle     time.Duration
		link     link
		deadline time.Duration // from the request's arrival; 0: none
		want     connregistry.CloseReason
		after    time.Duration // closed about this long after the request arrived
	}{
		{name: "above the floor", idle: arrivalIdle, link: fastLink},
		{name: "below the floor", idle: arrivalIdle, link: slowLink, want: connregistry.CloseSlowRequest, after: arrivalIdle},
		{name: "the host's deadline", idle: 5 * time.Second, link: fastLink, deadline: 300 * time.Millisecond,
			want: connregistry.CloseSlowRequest, after: 300 * time.Millisecond},
		{name: "a far deadline of the host's, below the floor", idle: arrivalIdle, link: slowLink, deadline: time.Hour,
			want: connregistry.CloseSlowRequest, after: arrivalIdle},
	} {
		for _, method := range []string{"Read", "WriteTo", "splice"} {
			t.Run(tc.name+", "+method, func(t *testing.T) {
				outcomes := make(chan outcome, 1)
				arrived := make(chan time.Time, 1)
				srv := socketservertest.NewServer(t, merge(streamProps, config.Properties{
					"connections.max.idle.ms": strconv.Itoa(int(tc.idle / time.Millisecond)),
				}), func(c *socketserver.Config) { c.APIs = rawAPIs(1024) },
					socketserver.HandlerFunc(func(r *socketserver.Request) {
						arrived <- time.Now()
						var o outcome
						if tc.deadline > 0 {
							o.setErr = r.Raw.SetReadDeadline(time.Now().Add(tc.deadline))
						}
						if method == "splice" {
							sink, sinkServer := tcpPair(t)
							go func() { _, _ = io.Copy(io.Discard, sinkServer) }()
							o.read, o.err = io.Copy(sink, r.Raw)
						} else {
							o.read, o.err = methods[method](r)
						}
						o.answered = o.err == nil && r.RespondRaw(rawResponseOf(0, r.CorrelationID)) == nil
						outcomes <- o
					}))
				c := socketservertest.Dial(t, srv, "PLAINTEXT")
				f := formatter.AppendRequest(nil, produceOf(5000), 1)
				const head = 100 // the request's head, and more, at once: the host holds it before the body trickles
				write(t, c, f[:head])
				sent := make(chan int, 1)
				go func() {
					n, _ := tc.link.trickle(c, f[head:])
					sent <- head + n
				}()
				var start time.Time
				select {
				case start = <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("the request's head did not reach the host")
				}
				o := <-outcomes
				require.NoError(t, o.setErr)
				if tc.want == "" {
					require.NoError(t, o.err)
					require.True(t, o.answered)
					require.Equal(t, rawResponseOf(0, 1), readRawResponse(t, c, 1, true))
					took := time.Since(start)
					t.Logf("the body arrived in %v and was answered", took.Round(time.Millisecond))
					require.Greater(t, took, 2*tc.idle, "the body arrived within the idle limit: the test shows nothing")
					<-sent
					return
				}
				require.Error(t, o.err, "the host's read of the body")
				if tc.deadline > 0 && tc.deadline < tc.idle {
					require.ErrorIs(t, o.err, os.ErrDeadlineExceeded)
				}
				closed := closedAs(t, srv, c)
				_ = c.Close()
				<-sent
				took := closed.ClosedAt.Sub(start)
				t.Logf("closed after %v as %q; the host read %d bytes of the body: %v", took.Round(time.Millisecond), closed.CloseReason, o.read, o.err)
				assert.Equal(t, tc.want, closed.CloseReason)
				assert.GreaterOrEqual(t, took, tc.after-100*time.Millisecond, "closed early")
				assert.Less(t, took, tc.after+time.Second, "closed late")
				assert.Less(t, o.read, int64(len(f)), "the host read the whole body")
			})
		}
	}
}
