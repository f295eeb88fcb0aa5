package socketservertest

import (
	"context"
	"net"
	"sync"
)

// PipeListener is an in-memory net.Listener: each Dial makes a net.Pipe and
// hands the server's end to Accept, with no socket and no port. Give it to
// a server through socketserver.Config.Listen to test a handler, or the
// server itself, without the network (grpc's bufconn and kfake's virtual
// network do the same). Its connections have no IP addresses: see
// Config.Listen for what that changes.
type PipeListener struct {
	addr  pipeAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewPipeListener returns a PipeListener whose Addr is name.
func NewPipeListener(name string) *PipeListener {
	return &PipeListener{addr: pipeAddr(name), conns: make(chan net.Conn), done: make(chan struct{})}
}

// Accept waits for the next Dial and returns the server's end of its pipe.
// After Close it returns an error wrapping net.ErrClosed.
func (l *PipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "pipe", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops the listener: Accept and Dial fail from now on. Connections
// made before stay open. It is safe to call more than once.
func (l *PipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr returns the listener's name as a net.Addr of network "pipe".
func (l *PipeListener) Addr() net.Addr { return l.addr }

// Dial connects to the listener: it returns the client's end of a new pipe
// once Accept has taken the server's, or fails when ctx ends or the
// listener closes.
func (l *PipeListener) Dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		err := &net.OpError{Op: "dial", Net: "pipe", Addr: l.addr, Err: net.ErrClosed}
		client.Close()
		server.Close()
		return nil, err
	case <-ctx.Done():
		client.Close()
		server.Close()
		return nil, ctx.Err()
	}
}

// DialContext is Dial with the signature of net.Dialer.DialContext and
// kgo.Dialer: network and address are ignored, so a kgo client can reach
// a server served on the listener.
func (l *PipeListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	return l.Dial(ctx)
}

// pipeAddr is a PipeListener's address.
type pipeAddr string

func (pipeAddr) Network() string  { return "pipe" }
func (a pipeAddr) String() string { return string(a) }
