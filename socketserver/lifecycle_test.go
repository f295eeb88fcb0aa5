package socketserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// newUnstarted builds a server from props without starting it; it is
// closed when the test ends.
// Without listeners in props, the server listens on PLAINTEXT://127.0.0.1:0,
// not on Kafka's default of every interface's port 9092, which a local
// Kafka may hold.
func newUnstarted(t testing.TB, props config.Properties, configure ...func(*socketserver.Config)) *socketserver.Server {
	t.Helper()
	all := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := config.Server(all)
	require.NoError(t, err)
	cfg.APIs = allAPIs()
	for _, f := range configure {
		f(&cfg)
	}
	srv, err := socketserver.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// fixedHost is the loopback address of the tests whose listeners bind a
// port they chose (freePort) and leave it unbound for a while: no test
// binds port 0 or dials from there, so the kernel never hands that port
// to another test's socket meanwhile, as it may on 127.0.0.1.
const fixedHost = "127.0.0.66"

// freePort returns a port of fixedHost that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	return freePortOf(t, fixedHost)
}

// freePortOf returns a port of host that was free a moment ago.
func freePortOf(t testing.TB, host string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func requireBindable(t testing.TB, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(fixedHost, strconv.Itoa(port)))
	require.NoError(t, err, "port %d is held", port)
	require.NoError(t, ln.Close())
}

// New binds nothing; Start binds every listener or none, naming the one
// that failed.
func TestStartBindsAllOrNone(t *testing.T) {
	busy, err := net.Listen("tcp", net.JoinHostPort(fixedHost, "0"))
	require.NoError(t, err)
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	freeA := freePort(t)

	srv := newUnstarted(t, config.Properties{
		"listeners":                      "A://" + fixedHost + ":" + strconv.Itoa(freeA) + ",B://" + fixedHost + ":" + strconv.Itoa(busyPort),
		"listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
		"inter.broker.listener.name":     "A",
	})
	requireBindable(t, freeA) // New bound nothing
	assert.Nil(t, srv.Addr("A"))
	assert.Nil(t, srv.Addr("B"))

	err = srv.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listener B")
	assert.Contains(t, err.Error(), strconv.Itoa(busyPort))
	requireBindable(t, freeA) // A was released
	assert.Nil(t, srv.Addr("A"), "Addr of a listener that Start released")

	// Once the port is free, Start succeeds.
	require.NoError(t, busy.Close())
	require.NoError(t, srv.Start(context.Background()))
	require.NotNil(t, srv.Addr("A"))
	assert.Equal(t, net.JoinHostPort(fixedHost, strconv.Itoa(freeA)), srv.Addr("a").String(), "Addr ignores case")
	assert.Equal(t, net.JoinHostPort(fixedHost, strconv.Itoa(busyPort)), srv.Addr("B").String())
	assert.Nil(t, srv.Addr("C"))
	require.NoError(t, srv.Close())
	requireBindable(t, freeA)
	requireBindable(t, busyPort)
}

func TestStartTwiceAndAfterClose(t *testing.T) {
	srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, srv.Start(context.Background()))
	addr := srv.Addr("PLAINTEXT")
	require.NotNil(t, addr)
	err := srv.Start(context.Background())
	require.Error(t, err)
	assert.NotErrorIs(t, err, socketserver.ErrServerClosed)
	assert.Equal(t, addr, srv.Addr("PLAINTEXT"), "a second Start changed the address")
	require.NoError(t, srv.Close())
	assert.ErrorIs(t, srv.Start(context.Background()), socketserver.ErrServerClosed)
}

// Stats may be read before Start, as a metrics exporter registered early
// does.
func TestStatsBeforeStart(t *testing.T) {
	srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": "2"})
	st := srv.Stats()
	assert.Equal(t, 0, st.ConnectionCount["PLAINTEXT"])
	assert.Equal(t, 0, st.RequestQueueSize[protocolmap.DataPlane])
	assert.Len(t, st.ProcessorBusy, 2)
	assert.True(t, st.Started.IsZero())
	assert.Equal(t, map[int]float64{0: 1, 1: 1}, st.ProcessorIdleRatio(socketserver.Stats{}), "idle before Start")
}

// Shutdown stops accepting, closes idle connections, lets every request
// already read be answered and written, then closes: no client loses a
// response.
func TestShutdownDeliversInFlightResponses(t *testing.T) {
	const conns = 20
	seen := make(chan *socketserver.Request, conns)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	addr := srv.Addr("PLAINTEXT").String()
	idle := socketservertest.Dial(t, srv, "PLAINTEXT")
	apiVersionsRoundTrip(t, idle, apiVersionsReq(0, "", ""), 0) // answered by the server
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = socketservertest.Dial(t, srv, "PLAINTEXT")
		send(t, cs[i], metadataReq(1), int32(100+i))
	}
	held := make([]*socketserver.Request, 0, conns)
	for range conns {
		held = append(held, recv(t, seen))
	}

	shutdown := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shutdown <- srv.Shutdown(ctx)
	}()
	// The listener closes and idle connections close at once.
	requireClosedNoResponse(t, idle)
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}, 10*time.Second, 5*time.Millisecond, "still accepting connections during Shutdown")
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned (%v) with %d requests unanswered", err, conns)
	default:
	}

	for _, r := range held {
		resp := kmsg.NewPtrMetadataResponse()
		resp.ControllerID = r.CorrelationID
		require.NoError(t, r.Respond(resp))
	}
	for i, c := range cs {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 1
		readResponse(t, c, resp, int32(100+i))
		assert.Equal(t, int32(100+i), resp.ControllerID)
		requireClosedNoResponse(t, c)
	}
	select {
	case err := <-shutdown:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after every request was answered")
	}
	select {
	case <-srv.Done():
	default:
		t.Fatal("Done is open after Shutdown returned")
	}
	_, ok := <-socketserver.Requests(srv, protocolmap.DataPlane)
	assert.False(t, ok, "the request channel is open after Shutdown")
	assert.ErrorIs(t, srv.Shutdown(context.Background()), socketserver.ErrServerClosed)
}

// Shutdown gives up when its context ends, closing at once.
func TestShutdownHonoursContext(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, withAPIs, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	r := recv(t, seen) // and never answered

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := srv.Shutdown(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, took, 190*time.Millisecond)
	assert.Less(t, took, 3*time.Second)
	requireClosedNoResponse(t, c)
	select {
	case <-r.Context().Done():
	default:
		t.Fatal("the held request's context is not cancelled")
	}
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("server goroutines still running")
	}
	assert.NoError(t, respondEmpty(r), "answering after the close is harmless")
}

// Close is idempotent; afterwards Shutdown, Start and Serve report
// ErrServerClosed.
func TestCloseIdempotent(t *testing.T) {
	for _, started := range []bool{true, false} {
		t.Run("started="+strconv.FormatBool(started), func(t *testing.T) {
			srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", "num.io.threads": "2"})
			served := make(chan error, 1)
			if started {
				require.NoError(t, srv.Start(context.Background()))
				go func() { served <- srv.Serve(context.Background(), protocolmap.DataPlane, echoMetadata) }()
				metadataRoundTrip(t, socketservertest.Dial(t, srv, "PLAINTEXT"), 1, 1)
			}
			require.NoError(t, srv.Close())
			require.NoError(t, srv.Close())
			if started {
				select {
				case err := <-served:
					assert.ErrorIs(t, err, socketserver.ErrServerClosed)
				case <-time.After(10 * time.Second):
					t.Fatal("Serve did not return after Close")
				}
			}
			assert.ErrorIs(t, srv.Shutdown(context.Background()), socketserver.ErrServerClosed)
			assert.ErrorIs(t, srv.Start(context.Background()), socketserver.ErrServerClosed)
			assert.ErrorIs(t, srv.Serve(context.Background(), protocolmap.DataPlane, echoMetadata), socketserver.ErrServerClosed)
			select {
			case <-srv.Done():
			default:
				t.Fatal("Done is open after Close")
			}
		})
	}
}

// Serve returns the context's error when its context ends first.
func TestServeContextCancelled(t *testing.T) {
	srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", "num.io.threads": "3"})
	require.NoError(t, srv.Start(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, protocolmap.DataPlane, echoMetadata) }()
	metadataRoundTrip(t, socketservertest.Dial(t, srv, "PLAINTEXT"), 1, 1)
	cancel()
	assert.ErrorIs(t, <-served, context.Canceled)
}

// A handler that panics loses its connection; the server and the other
// connections go on. The log (an error record) carries the panic value and
// the stack, down to the handler's frame; no goroutine or memory is left
// behind. A panic after the handler answered closes the connection too.
func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	var mu sync.Mutex
	panicked := 0
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.ClientID == nil {
			_ = respondEmpty(r)
			return
		}
		switch *r.ClientID {
		case "boom", "boom-error", "boom-after-answer":
			mu.Lock()
			panicked++
			mu.Unlock()
		}
		switch *r.ClientID {
		case "boom":
			panic("handler bug")
		case "boom-error":
			panic(fmt.Errorf("handler error %d", 42))
		case "boom-after-answer":
			_ = respondEmpty(r)
			panic("handler bug after answering")
		}
		_ = respondEmpty(r)
	})
	logs, logger := newLogCapture()
	srv := socketservertest.NewServer(t, config.Properties{"num.io.threads": "1"}, func(c *socketserver.Config) {
		withAPIs(c)
		c.Logger = logger
	}, h)
	good := socketservertest.Dial(t, srv, "PLAINTEXT")
	metadataRoundTrip(t, good, 1, 1)
	base := takeBaseline()
	for range 3 {
		bad := socketservertest.Dial(t, srv, "PLAINTEXT")
		write(t, bad, requestFrame(metadataReq(1), 2, strp("boom")))
		requireClosedNoResponse(t, bad)
		metadataRoundTrip(t, good, 1, 3)
	}
	bad := socketservertest.Dial(t, srv, "PLAINTEXT")
	write(t, bad, requestFrame(metadataReq(1), 2, strp("boom-error")))
	requireClosedNoResponse(t, bad)

	// Answered, then panicked: the connection closes all the same (the
	// answer, which may or may not have left by then, is not waited for).
	bad = socketservertest.Dial(t, srv, "PLAINTEXT")
	write(t, bad, requestFrame(metadataReq(1), 5, strp("boom-after-answer")))
	readUntilClosed(t, bad, 5*time.Second)

	metadataRoundTrip(t, good, 1, 4)
	other := socketservertest.Dial(t, srv, "PLAINTEXT")
	metadataRoundTrip(t, other, 1, 4)
	require.NoError(t, other.Close())
	mu.Lock()
	assert.Equal(t, 5, panicked)
	mu.Unlock()

	errs := logs.atLeast(slog.LevelError)
	require.Len(t, errs, 5, "one error record per panic")
	values := map[string]int{}
	for _, r := range errs {
		values[r.attrs["panic"]]++
		stack := r.attrs["stack"]
		assert.Contains(t, stack, "goroutine ", "the stack trace")
		assert.Contains(t, stack, "TestHandlerPanicClosesOnlyItsConnection.func1", "the stack reaches the handler")
		assert.Contains(t, stack, "lifecycle_test.go:", "the stack names the handler's file and line")
		assert.NotEmpty(t, r.attrs["conn_id"])
	}
	assert.Equal(t, map[string]int{"handler bug": 3, "handler error 42": 1, "handler bug after answering": 1}, values)

	// The panicking connections are gone, and nothing of them remains.
	require.NoError(t, good.Close())
	requireConnCount(t, srv, "PLAINTEXT", 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := takeBaseline()
		if now.goroutines <= base.goroutines && now.heap <= base.heap+heapSlack {
			break
		}
		require.True(t, time.Now().Before(deadline), "goroutines %d (baseline %d), HeapInuse %d KiB (baseline %d KiB)",
			now.goroutines, base.goroutines, now.heap>>10, base.heap>>10)
		time.Sleep(10 * time.Millisecond) // between polls
	}
}

// slowHandOver is a HookConnAccepted that lets the test know of each
// accepted connection and then holds the acceptor a while, between
// admitting the connection and handing it to a processor, so that the
// test's Close or Shutdown lands in that gap.
type slowHandOver struct{ accepted chan struct{} }

func (h slowHandOver) OnConnAccepted(protocolmap.ListenerName) {
	select {
	case h.accepted <- struct{}{}:
	default:
	}
	time.Sleep(50 * time.Millisecond)
}

// A connection the acceptor admitted while Close or Shutdown began, and
// hands to a processor that has stopped, is closed and its quota slot
// given back; it is not left open with nobody reading it. The hand-over
// races the stop, so each case runs several rounds: before the fix half
// of them left the socket open.
func TestStopClosesConnectionsBeingHandedOver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		props    config.Properties
		shutdown bool
	}{
		{"close", nil, false},
		{"shutdown", nil, true},
		{"close PROXY", proxyProps(), false},
		{"shutdown PROXY", proxyProps(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 6 {
				hook := slowHandOver{accepted: make(chan struct{}, 1)}
				srv, stop, err := socketservertest.Start(tc.props, func(c *socketserver.Config) {
					withAPIs(c)
					c.Hooks = append(c.Hooks, hook)
				}, answerAll)
				require.NoError(t, err)
				c := socketservertest.Dial(t, srv, "PLAINTEXT")
				<-hook.accepted
				if tc.shutdown {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					require.NoError(t, srv.Shutdown(ctx), "round %d", round)
					cancel()
				} else {
					require.NoError(t, srv.Close(), "round %d", round)
				}
				require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
				n, err := c.Read(make([]byte, 1))
				require.Zero(t, n)
				require.Truef(t, errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET),
					"round %d: want the connection closed by the server, got %v", round, err)
				requireQuotasReleased(t, srv)
				require.NoError(t, stop())
			}
		})
	}
}
