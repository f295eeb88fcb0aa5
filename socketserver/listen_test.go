package socketserver_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// listenOn is a Config.Listen that serves every listener on ln.
func listenOn(ln net.Listener) func(context.Context, listener.Listener) (net.Listener, error) {
	return func(context.Context, listener.Listener) (net.Listener, error) { return ln, nil }
}

// pipeDial connects to pl, with a deadline of a minute on every read and
// write; the connection is closed when the test ends.
func pipeDial(t testing.TB, pl *socketservertest.PipeListener) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pl.Dial(ctx)
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Minute)))
	t.Cleanup(func() { c.Close() })
	return c
}

// A listener served on an in-memory net.Listener of the host's (net.Pipe
// connections, no IP address): requests are served end to end, through the
// host's handler and by the server itself, by hand and by kgo; the
// connection is listed and parks like any other; the per-address quotas,
// having no address to count, do not apply; and Close closes the listener.
func TestServeOnInMemoryListener(t *testing.T) {
	pl := socketservertest.NewPipeListener("in-memory")
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, config.Properties{"max.connections.per.ip": "1"}, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.Listen = listenOn(pl)
	}, recording(seen))
	assert.Equal(t, pl.Addr(), srv.Addr("PLAINTEXT"))

	c := pipeDial(t, pl)
	versionsRoundTrip(t, c, 1)
	metadataRoundTrip(t, c, 12, 2)
	r := recv(t, seen)
	assert.Equal(t, "pipe-pipe-0-0", r.Conn.ID, "net.Pipe's addresses, as the connection gives them")
	assert.False(t, r.Conn.ClientAddr.IsValid())
	assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), r.Conn.Listener)
	listed := srv.Registry().Snapshot(connregistry.Filter{})
	require.Len(t, listed, 1)
	assert.Equal(t, r.Conn.ID, listed[0].ID)
	assert.Empty(t, connregistry.Record(listed[0]).ClientAddress, "listed with no client address")

	// max.connections.per.ip is 1, but a pipe has no address to count by.
	others := []net.Conn{pipeDial(t, pl), pipeDial(t, pl)}
	for i, o := range others {
		metadataRoundTrip(t, o, 12, int32(10+i))
		recv(t, seen)
	}
	total, byListener, byIP := socketserver.QuotaCounts(srv)
	assert.Equal(t, 3, total)
	assert.Equal(t, 3, byListener["PLAINTEXT"])
	assert.Empty(t, byIP)

	// Read deadlines work on a pipe, so idle connections park and wake.
	waitParked(t, srv, 3)
	metadataRoundTrip(t, c, 12, 3)
	recv(t, seen)

	// A real client over the pipe.
	cl, err := kgo.NewClient(kgo.SeedBrokers("in-memory:9092"), kgo.Dialer(pl.DialContext))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	cl.Close()

	require.NoError(t, srv.Close())
	_, err = pl.Dial(context.Background())
	assert.ErrorIs(t, err, net.ErrClosed, "Close closed the host's listener")
	total, _, _ = socketserver.QuotaCounts(srv)
	assert.Zero(t, total, "every slot given back")
}

// A TCP listener the host bound itself (an inherited socket, say) is
// served as one the server binds: connection ids and client addresses are
// TCP's. A Listen may supply some listeners and let ListenTCP bind the
// others; the server closes them all.
func TestStartWithPreBoundListener(t *testing.T) {
	pre, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pre.Close()
	var asked []protocolmap.ListenerName
	seen := make(chan *socketserver.Request, 1)
	srv := newUnstarted(t, config.Properties{"num.io.threads": "1",
		"listeners":                      "INHERITED://127.0.0.1:9,BOUND://127.0.0.1:0",
		"listener.security.protocol.map": "INHERITED:PLAINTEXT,BOUND:PLAINTEXT",
		"inter.broker.listener.name":     "BOUND",
	}, func(c *socketserver.Config) {
		c.Listen = func(ctx context.Context, l listener.Listener) (net.Listener, error) {
			asked = append(asked, l.Name)
			if l.Name == "INHERITED" {
				return pre, nil // not port 9, which nobody binds
			}
			return socketserver.ListenTCP(ctx, l)
		}
	})
	require.NoError(t, srv.Start(context.Background()))
	assert.Equal(t, []protocolmap.ListenerName{"INHERITED", "BOUND"}, asked, "once per listener, in order")
	assert.Equal(t, pre.Addr(), srv.Addr("INHERITED"))
	bound := srv.Addr("BOUND").String()
	go func() { _ = srv.Serve(context.Background(), protocolmap.DataPlane, queueHandler(seen)) }()

	c := socketservertest.Dial(t, srv, "INHERITED")
	send(t, c, metadataReq(1), 1)
	r := recv(t, seen)
	local, remote, _, _ := parseConnID(t, r.Conn.ID)
	assert.Equal(t, pre.Addr().String(), local)
	assert.Equal(t, c.LocalAddr().String(), remote)
	assert.Equal(t, c.LocalAddr().String(), r.Conn.ClientAddr.String())
	require.NoError(t, respondEmpty(r))
	readRawFrame(t, c)

	require.NoError(t, srv.Close())
	_, err = pre.Accept()
	assert.ErrorIs(t, err, net.ErrClosed, "the server closed the listener it was given")
	requireBindable(t, tcpPort(t, bound))
}

func tcpPort(t testing.TB, addr string) int {
	t.Helper()
	ap, err := net.ResolveTCPAddr("tcp", addr)
	require.NoError(t, err)
	return ap.Port
}

// trackedListener records whether it was closed.
type trackedListener struct {
	net.Listener
	closed atomic.Bool
}

func (l *trackedListener) Close() error {
	l.closed.Store(true)
	return l.Listener.Close()
}

// Start makes every listener or none: when Listen fails for one, or gives
// no listener, or BaseContext gives no context, the listeners already made
// are closed, the ones after are not asked for, the error names the
// listener (and wraps Listen's), and a later Start may succeed.
func TestStartClosesListenersWhenOneFails(t *testing.T) {
	broken := errors.New("no socket for you")
	props := config.Properties{
		"listeners":                      "A://127.0.0.1:0,B://127.0.0.1:0,C://127.0.0.1:0",
		"listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT,C:PLAINTEXT",
		"inter.broker.listener.name":     "A",
	}
	for _, tc := range []struct {
		name        string
		listenB     func() (net.Listener, error)
		baseContext func(listener.Listener, net.Listener) context.Context
		want        string
	}{
		{"Listen fails", func() (net.Listener, error) { return nil, broken }, nil, "listener B: Config.Listen: no socket for you"},
		{"Listen gives nothing", func() (net.Listener, error) { return nil, nil }, nil, "listener B: Config.Listen returned no listener"},
		{"BaseContext gives nil", nil, func(l listener.Listener, _ net.Listener) context.Context {
			if l.Name == "B" {
				return nil
			}
			return context.Background()
		}, "listener B: Config.BaseContext returned a nil context"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var made []*trackedListener
			var asked []protocolmap.ListenerName
			fail := true
			srv := newUnstarted(t, props, func(c *socketserver.Config) {
				c.BaseContext = tc.baseContext
				c.Listen = func(ctx context.Context, l listener.Listener) (net.Listener, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, l.Name)
					if l.Name == "B" && fail && tc.listenB != nil {
						return tc.listenB()
					}
					ln, err := socketserver.ListenTCP(ctx, l)
					if err != nil {
						return nil, err
					}
					tl := &trackedListener{Listener: ln}
					made = append(made, tl)
					return tl, nil
				}
			})
			err := srv.Start(context.Background())
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.listenB != nil {
				assert.Equal(t, []protocolmap.ListenerName{"A", "B"}, asked, "C is not asked for once B failed")
				if _, e := tc.listenB(); e != nil {
					assert.ErrorIs(t, err, broken)
				}
			}
			for _, l := range made {
				assert.True(t, l.closed.Load(), "a listener made before the failure is closed")
			}
			assert.Nil(t, srv.Addr("A"))

			fail, tc.baseContext = false, nil
			if tc.listenB == nil {
				return // BaseContext is the server's copy: it stays
			}
			require.NoError(t, srv.Start(context.Background()), "a Start that failed may be called again")
			assert.NotNil(t, srv.Addr("C"))
		})
	}
}

type ctxKey string

// Request contexts derive from the listener's BaseContext and the
// connection's ConnContext, which sees each new connection once, and are
// cancelled when the connection closes.
func TestConnectionContexts(t *testing.T) {
	type seenConn struct {
		info   connregistry.Info
		remote string
		base   any
	}
	var mu sync.Mutex
	var conns []seenConn
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.BaseContext = func(l listener.Listener, ln net.Listener) context.Context {
			return context.WithValue(context.Background(), ctxKey("base"), string(l.Name)+"@"+ln.Addr().String())
		}
		c.ConnContext = func(ctx context.Context, nc net.Conn, info connregistry.Info) context.Context {
			mu.Lock()
			conns = append(conns, seenConn{info, nc.RemoteAddr().String(), ctx.Value(ctxKey("base"))})
			mu.Unlock()
			return context.WithValue(ctx, ctxKey("conn"), info.ID)
		}
	}, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	for i := range 2 {
		send(t, c, metadataReq(1), int32(i))
		r := recv(t, seen)
		assert.Equal(t, "PLAINTEXT@"+srv.Addr("PLAINTEXT").String(), r.Context().Value(ctxKey("base")))
		assert.Equal(t, r.Conn.ID, r.Context().Value(ctxKey("conn")))
		require.NoError(t, respondEmpty(r))
		readRawFrame(t, c)
	}
	mu.Lock()
	require.Len(t, conns, 1, "ConnContext sees each connection once")
	assert.Equal(t, c.LocalAddr().String(), conns[0].remote)
	assert.Equal(t, "PLAINTEXT@"+srv.Addr("PLAINTEXT").String(), conns[0].base, "ConnContext derives from the base")
	assert.Equal(t, connregistry.Anonymous(), conns[0].info.Principal)
	mu.Unlock()

	send(t, c, metadataReq(1), 9)
	r := recv(t, seen)
	require.NoError(t, r.Context().Err())
	require.NoError(t, c.Close())
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context was not cancelled when its connection closed")
	}
	assert.Equal(t, r.Conn.ID, r.Context().Value(ctxKey("conn")), "values outlive the cancellation")
	require.NoError(t, respondEmpty(r))
}

// Cancelling the base context cancels the contexts of requests in flight,
// as net/http's does, but the connections are the server's: they stay open,
// the responses are written, and later requests are served.
func TestBaseContextCancelledKeepsConnections(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.BaseContext = func(listener.Listener, net.Listener) context.Context { return base }
	}, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	r := recv(t, seen)
	cancel()
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the base context's cancellation did not reach the request's")
	}
	time.Sleep(50 * time.Millisecond) // a server that tied the connection to the context would close it now
	require.NoError(t, respondEmpty(r))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	readResponse(t, c, resp, 1)
	send(t, c, metadataReq(1), 2)
	require.NoError(t, respondEmpty(recv(t, seen)))
	readResponse(t, c, resp, 2)
	requireConnCount(t, srv, "PLAINTEXT", 1)
}
