package socketserver

import (
	"context"
	"sync"
	"testing"
)

// A connection without a BaseContext or ConnContext makes its requests'
// context when one first asks for it (requestContext): cancelled however
// the cancellation and the first ask are ordered, and the same context at
// every ask.
func TestRequestContextMadeLazily(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before func(c *conn) // before the first ask
		after  func(c *conn) // after it
		done   bool
	}{
		{"neither cancelled", func(*conn) {}, func(*conn) {}, false},
		{"the client's EOF before the first ask", (*conn).cancelReq, func(*conn) {}, true},
		{"the client's EOF after it", func(*conn) {}, (*conn).cancelReq, true},
		{"closed before the first ask", func(c *conn) { c.ctx.end(); c.cancelReq() }, func(*conn) {}, true},
		{"closed after it", func(*conn) {}, func(c *conn) { c.ctx.end(); c.cancelReq() }, true},
		{"closed between the cancels", func(c *conn) { c.ctx.end() }, func(c *conn) { c.cancelReq() }, true},
		{"the EOF twice", func(c *conn) { c.cancelReq(); c.cancelReq() }, func(*conn) {}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &conn{}
			defer c.ctx.end()
			if c.req.Load() != nil {
				t.Fatal("a request context before any ask")
			}
			tt.before(c)
			ctx := c.requestContext()
			tt.after(c)
			if got := c.requestContext(); got != ctx {
				t.Error("a second ask made another context")
			}
			if got := ctx.Err() != nil; got != tt.done {
				t.Errorf("cancelled: %v, want %v", got, tt.done)
			}
		})
	}
}

// Asks from many goroutines at once, racing the connection's close, get
// one context, cancelled.
func TestRequestContextConcurrentAsks(t *testing.T) {
	for range 100 {
		c := &conn{}
		var wg sync.WaitGroup
		got := make([]context.Context, 8)
		for i := range got {
			wg.Go(func() { got[i] = c.requestContext() })
		}
		wg.Go(func() { c.ctx.end(); c.cancelReq() })
		wg.Wait()
		for _, ctx := range got {
			if ctx != got[0] {
				t.Fatal("concurrent asks made different contexts")
			}
			if ctx.Err() == nil {
				t.Fatal("a context asked for before the close is not cancelled by it")
			}
		}
	}
}
