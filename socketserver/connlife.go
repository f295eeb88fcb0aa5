package socketserver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// connLife is a connection's own context: done when the connection
// closes, which the server's waits watch and its TLS handshake and SASL
// exchanges derive their deadlines from. It is a field of the connection,
// one word, where context.WithCancel made two objects (about 96 bytes) that
// every connection kept as long as it lived; its state is made only when
// something first waits on it (Done, or a context derived from it), which
// a parked connection never does.
type connLife struct{ s atomic.Pointer[lifeState] }

// lifeState is a connLife's state once something waits on it, or once it
// has ended.
type lifeState struct {
	done  chan struct{}
	mu    sync.Mutex
	ended bool
	after map[*func()]struct{} // AfterFunc's functions, run when it ends
}

var _ context.Context = (*connLife)(nil)

// state returns l's state, making it at the first call.
func (l *connLife) state() *lifeState {
	if s := l.s.Load(); s != nil {
		return s
	}
	s := &lifeState{done: make(chan struct{})}
	if l.s.CompareAndSwap(nil, s) {
		return s
	}
	return l.s.Load()
}

// Deadline reports none: a connection lives until it closes.
func (*connLife) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done returns a channel closed when the connection closes.
func (l *connLife) Done() <-chan struct{} { return l.state().done }

// Err returns context.Canceled once the connection has closed, nil
// before.
func (l *connLife) Err() error {
	s := l.s.Load()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return context.Canceled
	}
	return nil
}

// Value returns nil: the connection's context carries no values.
func (*connLife) Value(any) any { return nil }

// AfterFunc arranges for f to run in its own goroutine once the
// connection closes, as context.AfterFunc does; stop undoes it if f has
// not been started. The context package calls it for the contexts
// derived from l, which then cost no goroutine each while they wait.
func (l *connLife) AfterFunc(f func()) (stop func() bool) {
	s := l.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		go f()
		return func() bool { return false }
	}
	if s.after == nil {
		s.after = make(map[*func()]struct{})
	}
	key := &f
	s.after[key] = struct{}{}
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.after[key]
		delete(s.after, key)
		return ok
	}
}

// end ends the connection's life: Done's channel closes, Err reports
// context.Canceled and the AfterFunc functions start. Only its first call
// does anything.
func (l *connLife) end() {
	s := l.state()
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	close(s.done)
	after := s.after
	s.after = nil
	s.mu.Unlock()
	for f := range after {
		go (*f)()
	}
}

// String names the context, as the context package's own do.
func (*connLife) String() string { return "socketserver.connLife" }
