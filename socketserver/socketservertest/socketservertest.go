// Package socketservertest starts socket servers for a host's tests, as
// net/http/httptest starts HTTP servers: on 127.0.0.1, ephemeral ports,
// with a handler, cleaned up when the test ends ([NewServer];
// [NewServerFunc] when the handler needs the server it serves, [Start] and
// [StartFunc] outside a test). It also dials a listener ([Dial]), connects
// kgo clients ([ConnectKgo], [KgoSASL]), serves listeners in memory
// ([PipeListener]) and makes throwaway certificates ([NewPKI], [NewPKIDir]
// outside a test, and [NewServerCert] for a certificate per TLS server
// name).
package socketservertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// NewServer starts a server for t. props are broker properties laid over a
// single PLAINTEXT listener on 127.0.0.1:0; configure may change the server
// configuration before the server is built (nil leaves it). h serves both
// planes, as [socketserver.Server.Serve] runs it: num.io.threads workers
// (Config.IOThreads, default 8) on the data plane, one on the control
// plane if props name one. The server is closed, and its handlers stopped, when
// the test ends. A handler that needs the server, to name it in Metadata,
// is built with [NewServerFunc]. A test of a handler with a real client:
//
//	func TestMetadata(t *testing.T) {
//		srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs = apis }, handler)
//		cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()))
//		require.NoError(t, err)
//		defer cl.Close()
//		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
//		...
//	}
func NewServer(t testing.TB, props config.Properties, configure func(*socketserver.Config), h socketserver.Handler) *socketserver.Server {
	t.Helper()
	return NewServerFunc(t, props, configure, func(*socketserver.Server) socketserver.Handler { return h })
}

// NewServerFunc is [NewServer] for a handler that needs its server, to
// name it in Metadata ([socketserver.Server.SingleNodeMetadata],
// [socketserver.Server.Broker]) or to read its registry: newHandler is
// called once, with the started server (every listener bound, so its
// addresses are known), and the handler it returns serves both planes, as
// NewServer's does. APIs with a Handler of their own (socketserver.Inline)
// are answered from Start on, before newHandler runs; configure sets them.
// See [StartFunc] for an example.
func NewServerFunc(t testing.TB, props config.Properties, configure func(*socketserver.Config), newHandler func(*socketserver.Server) socketserver.Handler) *socketserver.Server {
	t.Helper()
	srv, stop, err := StartFunc(props, configure, newHandler)
	if err != nil {
		t.Fatalf("socketservertest: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("socketservertest: %v", err)
		}
	})
	return srv
}

// Start is [NewServer] outside a test (an example, a harness of another
// kind): it starts the server and its handlers and returns stop, which
// closes the server, waits for the handlers and reports a handler loop
// that ended with an error.
func Start(props config.Properties, configure func(*socketserver.Config), h socketserver.Handler) (srv *socketserver.Server, stop func() error, err error) {
	return StartFunc(props, configure, func(*socketserver.Server) socketserver.Handler { return h })
}

// StartFunc is [NewServerFunc] outside a test, as [Start] is [NewServer]:
// newHandler is called with the started server, and its handler serves
// both planes.
func StartFunc(props config.Properties, configure func(*socketserver.Config), newHandler func(*socketserver.Server) socketserver.Handler) (srv *socketserver.Server, stop func() error, err error) {
	all := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := config.Server(all)
	if err != nil {
		return nil, nil, err
	}
	if configure != nil {
		configure(&cfg)
	}
	lc := cfg.Listeners // as configure left them: it may replace the set
	srv, err = socketserver.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := srv.Start(context.Background()); err != nil {
		return nil, nil, err
	}
	h := newHandler(srv)
	if h == nil {
		srv.Close()
		return nil, nil, errors.New("newHandler returned a nil Handler")
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ctx, protocolmap.DataPlane, h) }()
	if lc.ControlPlaneListener != "" {
		go func() { served <- srv.Serve(ctx, protocolmap.ControlPlane, h) }()
	} else {
		served <- socketserver.ErrServerClosed
	}
	stop = func() error {
		srv.Close()
		cancel()
		var errs []error
		for range 2 {
			if err := <-served; err != nil && !errors.Is(err, socketserver.ErrServerClosed) && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("Serve: %w", err))
			}
		}
		return errors.Join(errs...)
	}
	return srv, stop, nil
}

// Dial connects to the named listener of srv, with a deadline of a minute
// on every read and write so that a failing test does not hang; the
// connection is closed when the test ends.
func Dial(t testing.TB, srv *socketserver.Server, listenerName protocolmap.ListenerName) net.Conn {
	t.Helper()
	addr := srv.Addr(listenerName)
	if addr == nil {
		t.Fatalf("socketservertest: no listener %s", listenerName)
	}
	c, err := net.DialTimeout("tcp", addr.String(), 10*time.Second)
	if err != nil {
		t.Fatalf("socketservertest: %v", err)
	}
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	t.Cleanup(func() { c.Close() })
	return c
}
