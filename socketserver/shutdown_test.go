package socketserver_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// requireQuotasReleased polls until the connection quotas count no
// connection: every admitted connection gave its slot back.
func requireQuotasReleased(t testing.TB, srv *socketserver.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		total, byListener, byIP := socketserver.QuotaCounts(srv)
		zero := total == 0 && len(byIP) == 0
		for _, n := range byListener {
			zero = zero && n == 0
		}
		if zero {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connection quotas still count connections: total %d, by listener %v, by address %v", total, byListener, byIP)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startServing starts a server from props (with every API) and Serve with
// workers handler goroutines, on a context the test controls. It returns
// the server and a function that waits for Serve to return, bounded.
func startServing(t *testing.T, props config.Properties, workers int, h socketserver.Handler) (*socketserver.Server, func()) {
	t.Helper()
	srv := newUnstarted(t, props, func(c *socketserver.Config) { c.IOThreads = workers })
	require.NoError(t, srv.Start(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, protocolmap.DataPlane, h) }()
	t.Cleanup(cancel)
	return srv, func() {
		t.Helper()
		select {
		case err := <-served:
			assert.ErrorIs(t, err, socketserver.ErrServerClosed)
		case <-time.After(15 * time.Second):
			t.Fatal("Serve did not return after the server stopped")
		}
	}
}

// isCloseErr reports whether err is how a client sees a server-side
// close: EOF, or a reset when the server closed with unread bytes.
func isCloseErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// pipelineClient writes requests on one connection without waiting for
// their responses, up to ahead of them (numbered from 1; every seventh is ApiVersions, which the
// server answers itself, the others Metadata) until a write fails, and
// reads responses on another goroutine until the server closes, then
// closes the connection.
type pipelineClient struct {
	conn     net.Conn
	written  atomic.Int32 // highest correlation id written whole
	answered []int32      // correlation ids of the responses, in arrival order
	readErr  error        // what ended the reading
	done     chan struct{}
}

func isAPIVersionsCorr(corr int32) bool { return corr%7 == 0 }

func startPipelineClient(t *testing.T, addr string, ahead int, stop <-chan struct{}) *pipelineClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	t.Cleanup(func() { conn.Close() })
	pc := &pipelineClient{conn: conn, done: make(chan struct{})}
	window := make(chan struct{}, ahead) // requests written and not yet answered
	// The writer:
	go func() {
		var corr int32
		for {
			var batch []byte
			for range 1 + rand.IntN(8) {
				select {
				case window <- struct{}{}:
				case <-stop:
					return
				case <-pc.done:
					return
				}
				corr++
				var req kmsg.Request = metadataReq(1)
				if isAPIVersionsCorr(corr) {
					req = kmsg.NewPtrApiVersionsRequest()
				}
				batch = append(batch, formatter.AppendRequest(nil, req, corr)...) // AppendRequest writes the size at dst[0]
			}
			if _, err := conn.Write(batch); err != nil {
				return
			}
			pc.written.Store(corr)
		}
	}()
	// The reader:
	go func() {
		defer close(pc.done)
		defer conn.Close() // as a client does when the server closes
		var size [4]byte
		for {
			if _, err := io.ReadFull(conn, size[:]); err != nil {
				pc.readErr = err
				return
			}
			frame := make([]byte, binary.BigEndian.Uint32(size[:]))
			if _, err := io.ReadFull(conn, frame); err != nil {
				pc.readErr = err
				return
			}
			pc.answered = append(pc.answered, int32(binary.BigEndian.Uint32(frame)))
			select {
			case <-window:
			default: // a response to a request not yet counted: the checks catch it
			}
		}
	}()
	return pc
}

// Shutdown while many connections pipeline requests: every request the
// handler received is answered and its response reaches the client; each
// client's responses are an unbroken prefix of its requests, in order,
// followed by the close; Shutdown returns nil and leaves nothing behind.
func TestShutdownUnderLoadAnswersEveryHandledRequest(t *testing.T) {
	tests := []struct {
		name  string
		async bool // answer from another goroutine after a short delay
		ahead int  // requests a client writes ahead of the responses
	}{
		{"answered inline", false, 32},
		{"answered later", true, 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			const conns = 24
			var (
				mu        sync.Mutex
				received  = map[string][]int32{} // by client address
				answering sync.WaitGroup
			)
			h := socketserver.HandlerFunc(func(r *socketserver.Request) {
				mu.Lock()
				received[r.Conn.ClientAddr.String()] = append(received[r.Conn.ClientAddr.String()], r.CorrelationID)
				mu.Unlock()
				answer := func() {
					resp := kmsg.NewPtrMetadataResponse()
					resp.ControllerID = r.CorrelationID
					assert.NoError(t, r.Respond(resp))
				}
				if !tt.async {
					answer()
					return
				}
				delay := time.Duration(rand.IntN(2000)) * time.Microsecond
				answering.Go(func() {
					time.Sleep(delay) // the host's own work
					answer()
				})
			})
			srv, waitServe := startServing(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": "2"}, 4, h)
			addr := srv.Addr("PLAINTEXT").String()

			stop := make(chan struct{})
			var stopOnce sync.Once
			stopWriting := func() { stopOnce.Do(func() { close(stop) }) }
			defer stopWriting()
			clients := make([]*pipelineClient, conns)
			for i := range clients {
				clients[i] = startPipelineClient(t, addr, tt.ahead, stop)
			}
			// Load for a while, and until every connection has had responses.
			loadUntil := time.Now().Add(500 * time.Millisecond)
			require.Eventually(t, func() bool {
				if time.Now().Before(loadUntil) {
					return false
				}
				mu.Lock()
				defer mu.Unlock()
				if len(received) < conns {
					return false
				}
				for _, ids := range received {
					if len(ids) < 5 {
						return false
					}
				}
				return true
			}, 20*time.Second, 5*time.Millisecond, "not every connection was served")

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			require.NoError(t, srv.Shutdown(ctx))
			t.Logf("Shutdown took %v with %d pipelining connections", time.Since(start), conns)
			answering.Wait()
			waitServe()

			total := 0
			for i, pc := range clients {
				select {
				case <-pc.done:
				case <-time.After(10 * time.Second):
					t.Fatalf("client %d: the server did not close the connection", i)
				}
				require.Truef(t, isCloseErr(pc.readErr), "client %d: want a close after the last response, got %v", i, pc.readErr)
				for j, corr := range pc.answered {
					require.Equalf(t, int32(j+1), corr, "client %d: response %d out of order or one is missing", i, j)
				}
				require.LessOrEqual(t, int32(len(pc.answered)), pc.written.Load()+8, "client %d: responses to requests never written", i)
				var want []int32
				for corr := int32(1); corr <= int32(len(pc.answered)); corr++ {
					if !isAPIVersionsCorr(corr) {
						want = append(want, corr)
					}
				}
				mu.Lock()
				got := received[pc.conn.LocalAddr().String()]
				mu.Unlock()
				// Every request handed to the handler was answered on the
				// wire, and nothing else was.
				require.Equalf(t, want, got, "client %d: requests handled vs. responses received (%d)", i, len(pc.answered))
				total += len(pc.answered)
			}
			t.Logf("%d responses received in order before the close", total)

			_, ok := <-socketserver.Requests(srv, protocolmap.DataPlane)
			assert.False(t, ok, "the request channel is open after Shutdown")
			assert.Zero(t, srv.Stats().ConnectionCount["PLAINTEXT"])
			requireQuotasReleased(t, srv)
			stopWriting()
			for _, pc := range clients {
				pc.conn.Close()
			}
			base.RequireReturned(t)
		})
	}
}

// Shutdown honours its context: with handlers that never answer, it
// returns ctx.Err() close to the deadline, every connection is closed
// without a response, the server's goroutines have ended and the quotas
// count nothing; once the host's handlers return, no goroutine is left.
func TestShutdownDeadlineWithUnansweredRequests(t *testing.T) {
	tests := []struct {
		name string
		// hold keeps r unanswered; release ends the holding.
		hold func(r *socketserver.Request, release <-chan struct{})
	}{
		{"handler waits for the request's context", func(r *socketserver.Request, _ <-chan struct{}) {
			<-r.Context().Done()
		}},
		{"handler blocks regardless", func(_ *socketserver.Request, release <-chan struct{}) {
			<-release
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			const conns, workers = 12, 12
			release := make(chan struct{})
			var releaseOnce sync.Once
			releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
			defer releaseAll()
			var held atomic.Int32
			h := socketserver.HandlerFunc(func(r *socketserver.Request) {
				held.Add(1)
				tt.hold(r, release)
			})
			srv, waitServe := startServing(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}, workers, h)
			addr := srv.Addr("PLAINTEXT").String()
			cs := make([]net.Conn, conns)
			for i := range cs {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				require.NoError(t, err)
				defer c.Close()
				cs[i] = c
				send(t, c, metadataReq(1), int32(i+1))
			}
			require.Eventually(t, func() bool { return held.Load() == conns }, 10*time.Second, 5*time.Millisecond)

			const wait = 300 * time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			start := time.Now()
			err := srv.Shutdown(ctx)
			took := time.Since(start)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.GreaterOrEqual(t, took, wait-10*time.Millisecond)
			assert.Less(t, took, wait+2*time.Second, "Shutdown overran its deadline")
			t.Logf("Shutdown returned %v after %v (deadline %v)", err, took, wait)
			select {
			case <-srv.Done():
			default:
				t.Fatal("the server's goroutines still run after Shutdown returned")
			}
			for _, c := range cs {
				requireClosedNoResponse(t, c)
			}
			assert.Zero(t, srv.Stats().ConnectionCount["PLAINTEXT"])
			requireQuotasReleased(t, srv)
			assert.ErrorIs(t, srv.Shutdown(context.Background()), socketserver.ErrServerClosed)

			releaseAll()
			waitServe()
			for _, c := range cs {
				c.Close()
			}
			base.RequireReturned(t)
		})
	}
}

// disconnectModes are the ways a client goes away.
var disconnectModes = []struct {
	name string
	gone func(t *testing.T, c *net.TCPConn)
	// halfClose: the client still reads. The host learns of the EOF (the
	// request's context is cancelled), but the responses to the requests
	// read before it are written, then the connection closes, as in Kafka,
	// which reads the EOF only once the response has gone
	// (SocketServerTest.testGracefulClose).
	halfClose bool
}{
	{"close", func(t *testing.T, c *net.TCPConn) { require.NoError(t, c.Close()) }, false},
	{"reset", func(t *testing.T, c *net.TCPConn) {
		require.NoError(t, c.SetLinger(0)) // close sends RST
		require.NoError(t, c.Close())
	}, false},
	{"close write", func(t *testing.T, c *net.TCPConn) { require.NoError(t, c.CloseWrite()) }, true},
}

// readResponsesThenEOF reads one response frame for each correlation id, in
// order, then requires the server's close.
func readResponsesThenEOF(t testing.TB, c net.Conn, corrs ...int32) {
	t.Helper()
	for _, corr := range corrs {
		f := readRawFrame(t, c)
		require.GreaterOrEqual(t, len(f), 4)
		require.Equal(t, corr, int32(binary.BigEndian.Uint32(f)), "correlation id")
	}
	requireClosedNoResponse(t, c)
}

func dialTCP(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// Clients that go away while their request is queued for the handler, held
// by it, half sent, or while its large response is being written: each
// held request's context is cancelled, answering it afterwards is harmless,
// the server closes the connection, gives its quota slot back and keeps no
// goroutine for it; the server goes on serving others. A client that only
// half-closed gets the responses to every request it sent whole first.
func TestDisconnectWhileRequestInFlight(t *testing.T) {
	bigResponse := func(r *socketserver.Request) *kmsg.MetadataResponse {
		resp := kmsg.NewPtrMetadataResponse()
		for i := range 6000 { // over 1 MB: more than the socket buffers hold
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr("a-topic-name-long-enough-to-weigh-something-" + string(rune('a'+i%26)))
			mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 4)
			resp.Topics = append(resp.Topics, mt)
		}
		return resp
	}
	stages := []struct {
		name string
		// serve runs the host: it takes requests from the queue as the stage
		// needs; reached is called when the clients may go.
		// With halfClose the clients still read.
		run func(t *testing.T, srv *socketserver.Server, conns []*net.TCPConn, disconnect func(), halfClose bool)
	}{
		{"held by the handler", func(t *testing.T, srv *socketserver.Server, conns []*net.TCPConn, disconnect func(), halfClose bool) {
			var held []*socketserver.Request
			for i, c := range conns {
				send(t, c, metadataReq(1), int32(i+1))
				held = append(held, recvFrom(t, srv))
			}
			for _, r := range held {
				requireNotDone(t, r.Context())
			}
			disconnect()
			for _, r := range held {
				requireDone(t, r.Context())
				assert.NoError(t, respondEmpty(r), "answering a request of a gone client")
			}
			if halfClose {
				for i, c := range conns {
					readResponsesThenEOF(t, c, int32(i+1))
				}
			}
		}},
		{"pipelined, first held", func(t *testing.T, srv *socketserver.Server, conns []*net.TCPConn, disconnect func(), halfClose bool) {
			var held []*socketserver.Request
			for _, c := range conns {
				var b []byte
				for corr := int32(1); corr <= 5; corr++ {
					b = append(b, formatter.AppendRequest(nil, metadataReq(1), corr)...)
				}
				write(t, c, b)
				held = append(held, recvFrom(t, srv))
			}
			disconnect()
			// With the next requests already buffered no read notices the
			// client going until they have been served: the host answers
			// every request until the connections are gone.
			stop := make(chan struct{})
			var answering sync.WaitGroup
			answering.Go(func() {
				for {
					select {
					case r, ok := <-socketserver.Requests(srv, protocolmap.DataPlane):
						if !ok {
							return
						}
						assert.NoError(t, respondEmpty(r))
					case <-stop:
						return
					}
				}
			})
			defer func() {
				close(stop)
				answering.Wait()
			}()
			for _, r := range held {
				assert.NoError(t, respondEmpty(r))
			}
			if halfClose {
				for _, c := range conns {
					readResponsesThenEOF(t, c, 1, 2, 3, 4, 5)
				}
			}
			requireConnCount(t, srv, "PLAINTEXT", 0)
		}},
		{"queued, not yet taken", func(t *testing.T, srv *socketserver.Server, conns []*net.TCPConn, disconnect func(), halfClose bool) {
			for i, c := range conns {
				send(t, c, metadataReq(1), int32(i+1))
			}
			require.Eventually(t, func() bool { return srv.Stats().RequestQueueSize[protocolmap.DataPlane] == len(conns) },
				10*time.Second, 5*time.Millisecond)
			disconnect()
			for range conns {
				r := recvFrom(t, srv)
				requireDone(t, r.Context())
				assert.NoError(t, respondEmpty(r))
			}
			if halfClose {
				for i, c := range conns {
					readResponsesThenEOF(t, c, int32(i+1))
				}
			}
		}},
		{"half sent", func(t *testing.T, srv *socketserver.Server, conns []*net.TCPConn, disconnect func(), halfClose bool) {
			for i, c := range conns {
				b := formatter.AppendRequest(nil, metadataReq(1), int32(i+1))
				write(t, c, b[:len(b)-3])
			}
			requireConnCount(t, srv, "PLAINTEXT", len(conns))
			disconnect()
		}},
		{"response being written", func(t *testing.T, srv *socketserver.Server, conns []*net.TCPConn, disconnect func(), halfClose bool) {
			for i, c := range conns {
				send(t, c, metadataReq(1), int32(i+1))
				r := recvFrom(t, srv)
				require.NoError(t, r.Respond(bigResponse(r)))
				// The response has begun to arrive; the client reads no more,
				// so the server's write blocks.
				_, err := io.ReadFull(c, make([]byte, 8))
				require.NoError(t, err)
			}
			disconnect()
			if halfClose { // the client reads on: the rest of the response comes, then the close
				for _, c := range conns {
					require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
					rest, err := io.ReadAll(c)
					require.NoError(t, err)
					resp := kmsg.NewPtrMetadataResponse()
					resp.Version = 1
					require.NoError(t, resp.ReadFrom(rest))
					assert.Len(t, resp.Topics, 6000, "the whole response")
				}
			}
		}},
	}
	for _, stage := range stages {
		for _, mode := range disconnectModes {
			t.Run(stage.name+"/"+mode.name, func(t *testing.T) {
				base := testkit.TakeGoroutineBaseline()
				srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", "socket.send.buffer.bytes": "65536"})
				require.NoError(t, srv.Start(context.Background()))
				addr := srv.Addr("PLAINTEXT").String()
				conns := make([]*net.TCPConn, 6)
				for i := range conns {
					conns[i] = dialTCP(t, addr)
					require.NoError(t, conns[i].SetReadBuffer(64<<10))
				}
				requireConnCount(t, srv, "PLAINTEXT", len(conns))
				stage.run(t, srv, conns, func() {
					for _, c := range conns {
						mode.gone(t, c)
					}
				}, mode.halfClose)
				requireConnCount(t, srv, "PLAINTEXT", 0)
				requireQuotasReleased(t, srv)

				// The server goes on serving.
				other := dialTCP(t, addr)
				send(t, other, metadataReq(1), 99)
				r := recvFrom(t, srv)
				require.NoError(t, respondEmpty(r))
				resp := kmsg.NewPtrMetadataResponse()
				resp.Version = 1
				readResponse(t, other, resp, 99)
				require.NoError(t, other.Close())
				requireConnCount(t, srv, "PLAINTEXT", 0)
				requireQuotasReleased(t, srv)
				for _, c := range conns {
					c.Close()
				}
				require.NoError(t, srv.Close())
				base.RequireReturned(t)
			})
		}
	}
}

// recvFrom takes the next request from srv's data-plane queue.
func recvFrom(t *testing.T, srv *socketserver.Server) *socketserver.Request {
	t.Helper()
	select {
	case r, ok := <-socketserver.Requests(srv, protocolmap.DataPlane):
		require.True(t, ok, "the request channel closed")
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the host")
		return nil
	}
}

func requireDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context was not cancelled when its client went away")
	}
}

func requireNotDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatal("the request's context is cancelled while its client is connected")
	default:
	}
}

// Shutdown while clients that pipelined requests have not yet read their
// responses: the responses the server wrote must reach them even though the
// server closes with their later requests unread (a reset would make the
// kernel discard the responses it had not yet sent to the slow readers).
func TestShutdownDeliversResponsesToSlowReaders(t *testing.T) {
	base := testkit.TakeGoroutineBaseline()
	const conns, pipelined, answered = 6, 200, 21
	name := string(make([]byte, 1000))
	hold := make(chan *socketserver.Request, conns)
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.CorrelationID == answered {
			hold <- r // answered once Shutdown has begun
			return
		}
		resp := kmsg.NewPtrMetadataResponse()
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(name) // a response of about 1 kB
		resp.Topics = append(resp.Topics, mt)
		assert.NoError(t, r.Respond(resp))
	})
	srv, waitServe := startServing(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", "socket.send.buffer.bytes": "1048576"}, 2, h)
	addr := srv.Addr("PLAINTEXT").String()
	req := metadataReq(1)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(string(make([]byte, 100)))
	req.Topics = append(req.Topics, rt)
	cs := make([]*net.TCPConn, conns)
	for i := range cs {
		cs[i] = dialTCP(t, addr)
		require.NoError(t, cs[i].SetReadBuffer(2048)) // a window far smaller than the responses
		var b []byte
		for corr := int32(1); corr <= pipelined; corr++ {
			b = append(b, formatter.AppendRequest(nil, req, corr)...)
		}
		write(t, cs[i], b)
	}
	var held []*socketserver.Request
	for range conns {
		select {
		case r := <-hold:
			held = append(held, r)
		case <-time.After(10 * time.Second):
			t.Fatal("the handler did not get every connection's request")
		}
	}

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shutdown <- srv.Shutdown(ctx)
	}()
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, 5*time.Millisecond, "Shutdown did not begin")
	for _, r := range held {
		require.NoError(t, respondEmpty(r))
	}
	select {
	case err := <-shutdown:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	waitServe()

	// Only now do the clients read, all at once as clients of their own.
	start := time.Now()
	var reading sync.WaitGroup
	for i, c := range cs {
		reading.Go(func() {
			defer c.Close()
			for corr := int32(1); corr <= answered; corr++ {
				frame, err := readFrameFrom(c)
				if !assert.NoErrorf(t, err, "client %d: response %d of %d lost", i, corr, answered) {
					return
				}
				assert.Equalf(t, corr, int32(binary.BigEndian.Uint32(frame)), "client %d", i)
			}
			_, err := readFrameFrom(c)
			assert.Truef(t, isCloseErr(err), "client %d: want the close after %d responses, got %v", i, answered, err)
		})
	}
	reading.Wait()
	t.Logf("the clients read their responses in %v", time.Since(start))
	requireQuotasReleased(t, srv)
	base.RequireReturned(t)
}

func readFrameFrom(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, frame)
	return frame, err
}
