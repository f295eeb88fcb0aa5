package socketserver

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// A connection's own context behaves as context.WithCancel's: done and
// cancelled once the connection ends, whether or not anything waited
// before; contexts derived from it end with it without a goroutine each
// while they wait; AfterFunc's stop undoes what has not run.
func TestConnLife(t *testing.T) {
	for _, tt := range []struct {
		name        string
		waitFirst   bool // Done before the end
		deriveFirst bool // a context derived before the end
	}{
		{"nothing waits before the end", false, false},
		{"Done before the end", true, false},
		{"a derived context before the end", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var l connLife
			if l.Err() != nil {
				t.Fatal("ended before its end")
			}
			var done <-chan struct{}
			if tt.waitFirst {
				done = l.Done()
			}
			var derived context.Context
			var cancel context.CancelFunc
			if tt.deriveFirst {
				before := runtime.NumGoroutine()
				derived, cancel = context.WithDeadline(&l, time.Now().Add(time.Hour))
				defer cancel()
				// More goroutines is a start; fewer, another test's ending.
				if n := runtime.NumGoroutine(); n > before {
					t.Errorf("a derived context started %d goroutines", n-before)
				}
			}
			l.end()
			l.end() // a second end does nothing
			if !errors.Is(l.Err(), context.Canceled) {
				t.Errorf("Err after the end: %v", l.Err())
			}
			if done == nil {
				done = l.Done()
			}
			select {
			case <-done:
			default:
				t.Error("Done's channel open after the end")
			}
			if derived != nil {
				select {
				case <-derived.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("a derived context outlived the connection")
				}
				if !errors.Is(derived.Err(), context.Canceled) {
					t.Errorf("a derived context's Err: %v", derived.Err())
				}
			}
			late, cancelLate := context.WithCancel(&l) // derived after the end: done at once
			defer cancelLate()
			if late.Err() == nil {
				t.Error("a context derived after the end is not done")
			}
		})
	}
}

func TestConnLifeAfterFuncStop(t *testing.T) {
	var l connLife
	ran := make(chan string, 2)
	stop := l.AfterFunc(func() { ran <- "stopped" })
	l.AfterFunc(func() { ran <- "kept" })
	if !stop() {
		t.Error("stop before the end reports false")
	}
	if stop() {
		t.Error("a second stop reports true")
	}
	l.end()
	select {
	case got := <-ran:
		if got != "kept" {
			t.Errorf("ran %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the function kept did not run")
	}
	after := l.AfterFunc(func() { ran <- "after" })
	if after() {
		t.Error("stop after the end reports true")
	}
	if got := <-ran; got != "after" {
		t.Errorf("a function registered after the end: %q", got)
	}
	select {
	case got := <-ran:
		t.Errorf("ran %q too", got)
	default:
	}
}
