package testkit

import (
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// GoroutineBaseline records the goroutines running when it was taken, so
// that RequireReturned can check that every goroutine started since has
// ended.
type GoroutineBaseline struct {
	count  int
	ignore goleak.Option
}

// TakeGoroutineBaseline records the goroutines running now.
func TakeGoroutineBaseline() GoroutineBaseline {
	return GoroutineBaseline{count: runtime.NumGoroutine(), ignore: goleak.IgnoreCurrent()}
}

// RequireReturned polls, for up to 15 seconds, until no goroutine started
// after b is left and the count is back to b's, and fails t otherwise.
func (b GoroutineBaseline) RequireReturned(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := goleak.Find(b.ignore)
		n := runtime.NumGoroutine()
		if err == nil && n <= b.count {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines did not return: %d running, %d before; leaked: %v", n, b.count, err)
		}
		time.Sleep(10 * time.Millisecond) // between polls
	}
}
