package socketserver

import (
	"testing"
	"time"
	"unsafe"
)

func TestAdaptParkWait(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		wait, parkedFor, want time.Duration
	}{
		{0, 10 * ms, 200 * ms},                            // woke at once: wait twice as long
		{0, 799 * ms, 200 * ms},                           // under 8 times the wait
		{0, 800 * ms, parkAfter},                          // long enough: never below parkAfter
		{400 * ms, 3200 * ms, 200 * ms},                   // long park: halve
		{400 * ms, time.Hour, 200 * ms},                   //
		{8 * time.Second, time.Second, maxParkAfter},      // capped
		{maxParkAfter, time.Second, maxParkAfter},         //
		{maxParkAfter, 80 * time.Second, 5 * time.Second}, //
	} {
		var c conn
		c.parkDelay.Store(int64(tc.wait))
		c.adaptParkWait(tc.parkedFor)
		if got := c.parkWait(); got != tc.want {
			t.Errorf("wait %v, parked for %v: next wait %v, want %v", tc.wait, tc.parkedFor, got, tc.want)
		}
	}
}

// TestConnSize keeps a connection's state in the 448-byte size class:
// every open connection holds one, so a field added here is paid 10,000
// times over by a broker with 10,000 idle clients (issue 7's target (c)).
func TestConnSize(t *testing.T) {
	if size := unsafe.Sizeof(conn{}); size > 448 {
		t.Errorf("conn is %d bytes, over the 448-byte size class", size)
	}
}
