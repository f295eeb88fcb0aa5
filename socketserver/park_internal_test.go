package socketserver

import (
	"runtime"
	"testing"
	"time"
)

func TestAdaptParkWait(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		parkAfter, wait, parkedFor, want time.Duration
	}{
		{DefaultParkAfter, 0, 10 * ms, 200 * ms},                            // woke at once: wait twice as long
		{DefaultParkAfter, 0, 799 * ms, 200 * ms},                           // under 8 times the wait
		{DefaultParkAfter, 0, 800 * ms, DefaultParkAfter},                   // long enough: never below ParkAfter
		{DefaultParkAfter, 400 * ms, 3200 * ms, 200 * ms},                   // long park: halve
		{DefaultParkAfter, 400 * ms, time.Hour, 200 * ms},                   //
		{DefaultParkAfter, 8 * time.Second, time.Second, maxParkAfter},      // capped
		{DefaultParkAfter, maxParkAfter, time.Second, maxParkAfter},         //
		{DefaultParkAfter, maxParkAfter, 80 * time.Second, 5 * time.Second}, //
		{time.Second, 0, 10 * ms, 2 * time.Second},                          // Config.ParkAfter is the first wait
		{time.Second, 0, time.Hour, time.Second},                            // and the least
		{time.Minute, 0, 10 * ms, time.Minute},                              // and the cap, when above maxParkAfter
	} {
		c := conn{p: &processor{srv: &Server{cfg: Config{ParkAfter: tc.parkAfter}}}}
		c.parkDelay.Store(int32(tc.wait / time.Microsecond))
		c.adaptParkWait(tc.parkedFor)
		if got := c.parkWait(); got != tc.want {
			t.Errorf("ParkAfter %v, wait %v, parked for %v: next wait %v, want %v", tc.parkAfter, tc.wait, tc.parkedFor, got, tc.want)
		}
	}
}

// A connection's first wait before parking is a twentieth of ParkAfter.
func TestFirstParkWait(t *testing.T) {
	for _, tc := range []struct{ parkAfter, want time.Duration }{
		{DefaultParkAfter, 5 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{time.Millisecond, 50 * time.Microsecond},
	} {
		c := conn{p: &processor{srv: &Server{cfg: Config{ParkAfter: tc.parkAfter}}}}
		if got := c.parkWait(); got != tc.want {
			t.Errorf("ParkAfter %v: first wait %v, want %v", tc.parkAfter, got, tc.want)
		}
	}
}

// A parked connection asked to park again (askToRepark, which the
// processor does once the runtime starts goroutines on a smaller stack
// than the parked one got) parks on a fresh goroutine if nothing arrived,
// and serves the request if one did, however the two race.
func TestReparkRacesRequests(t *testing.T) {
	srv, c, roundTrip := parkTestConn(t)
	defer srv.Close()
	parkNow := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for c.wait.Load() != waitAwaiting && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		c.active.Store(0)
		c.parkMoved.Store(0)
		c.parkDelay.Store(0)
		c.askToPark(time.Now())
		for c.wait.Load() != waitParked && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		if c.wait.Load() != waitParked {
			t.Fatal("the connection did not park")
		}
	}
	parkNow()
	for i := range 200 {
		c.parkedStack.Store(1 << 20) // larger than any starting stack: askToRepark applies
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(time.Duration(i%7) * 30 * time.Microsecond)
			c.askToRepark(c.p.srv.stackStart.read())
		}()
		if i%2 == 0 { // a request racing the re-park
			time.Sleep(time.Duration(i%5) * 40 * time.Microsecond)
			roundTrip()
			<-done
			parkNow()
		} else { // no request: it parks again, on a fresh goroutine that notes its stack
			<-done
			deadline := time.Now().Add(5 * time.Second)
			for (c.wait.Load() != waitParked || c.parkedStack.Load() == 1<<20) && time.Now().Before(deadline) {
				runtime.Gosched()
			}
			if c.wait.Load() != waitParked || c.parkedStack.Load() == 1<<20 {
				t.Fatalf("round %d: not parked again (wait state %d)", i, c.wait.Load())
			}
		}
		if got := srv.parked.Load(); got != 1 {
			t.Fatalf("round %d: %d parked connections, want 1", i, got)
		}
	}
	roundTrip()
}
