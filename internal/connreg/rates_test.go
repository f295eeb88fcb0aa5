package connreg_test

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/connreg"
)

// only returns the registry's one open connection.
func only(t *testing.T, r *connreg.Registry) connregistry.Conn {
	t.Helper()
	got := r.Snapshot(connregistry.Filter{})
	require.Len(t, got, 1)
	return got[0]
}

// TestRates: a connection's rates are per second over about the last
// minute, from the times the server recorded, and decay while it is idle
// without anything recording.
func TestRates(t *testing.T) {
	t.Run("a burst is its count over the window", func(t *testing.T) {
		r := connreg.New(0)
		now := time.Now()
		e := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", now.Add(-time.Hour)), nil)
		for range 120 {
			e.Request(now, 100, "c")
			e.Response(now, 50)
		}
		c := only(t, r)
		// 120 requests just now: 2 per second over the minute, decayed by
		// the moment between the requests and the snapshot.
		assert.InEpsilon(t, 2.0, c.RequestRate, 0.01)
		assert.InEpsilon(t, 200.0, c.BytesInRate, 0.01)
		assert.InEpsilon(t, 100.0, c.BytesOutRate, 0.01)
		assert.LessOrEqual(t, c.RequestRate, 2.0)
	})
	t.Run("a steady rate shows as itself", func(t *testing.T) {
		r := connreg.New(0)
		now := time.Now()
		start := now.Add(-10 * time.Minute)
		e := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", start), nil)
		for i := range 6000 { // 10 per second for 10 minutes
			at := start.Add(time.Duration(i+1) * 100 * time.Millisecond)
			e.Request(at, 1000, "c")
			e.Response(at, 10)
		}
		c := only(t, r)
		// 1 - e^-10 of the rate after ten windows, the last request 100 ms
		// ago.
		assert.InEpsilon(t, 10.0, c.RequestRate, 0.01)
		assert.InEpsilon(t, 10_000.0, c.BytesInRate, 0.01)
		assert.InEpsilon(t, 100.0, c.BytesOutRate, 0.01)
	})
	t.Run("an idle connection decays", func(t *testing.T) {
		now := time.Now()
		given := conn("a", "User:alice", "127.0.0.1:1", "CLIENT", now.Add(-time.Hour))
		given.LastActivity = now.Add(-connregistry.RateWindow)
		given.RequestRate, given.BytesInRate, given.BytesOutRate = 10, 1000, 100
		r := connreg.New(0)
		connreg.Add(r, given, nil)
		c := only(t, r)
		assert.InEpsilon(t, 10/math.E, c.RequestRate, 0.001, "a window idle: 1/e of the rate")
		assert.InEpsilon(t, 1000/math.E, c.BytesInRate, 0.001)
		assert.InEpsilon(t, 100/math.E, c.BytesOutRate, 0.001)
		assert.True(t, given.LastActivity.Equal(c.LastActivity), "reading decays nothing stored")
		again := only(t, r)
		assert.LessOrEqual(t, again.RequestRate, c.RequestRate)
		assert.InEpsilon(t, c.RequestRate, again.RequestRate, 0.001)
	})
	t.Run("a request after a rest decays what came before", func(t *testing.T) {
		r := connreg.New(0)
		now := time.Now()
		e := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", now.Add(-time.Hour)), nil)
		long := now.Add(-30 * time.Minute)
		for range 600 {
			e.Request(long, 10, "c")
		}
		e.Request(now, 10, "c")
		c := only(t, r)
		assert.InEpsilon(t, 1.0/60, c.RequestRate, 0.01, "600 requests half an hour ago weigh 600·e^-30")
	})
	t.Run("a closed connection keeps its rates at its close", func(t *testing.T) {
		r := connreg.New(0)
		now := time.Now()
		e := connreg.Add(r, conn("a", "User:alice", "127.0.0.1:1", "CLIENT", now.Add(-time.Hour)), nil)
		for range 60 {
			e.Request(now.Add(-connregistry.RateWindow), 10, "c")
		}
		e.Remove(now.Add(-connregistry.RateWindow), connregistry.CloseByClient)
		closed := r.Closed(connregistry.Filter{})
		require.Len(t, closed, 1)
		assert.InEpsilon(t, 1.0, closed[0].RequestRate, 0.001, "as it was when it closed, a window ago")
	})
}

// ranked builds a registry of n connections whose request rates, bytes
// and activity differ, and returns it.
func ranked(n int) *connreg.Registry {
	r := connreg.New(0)
	now := time.Now()
	for i := range n {
		c := conn(fmt.Sprintf("conn-%05d", i), "User:alice", "127.0.0.1:1", "CLIENT", now.Add(-time.Hour+time.Duration(i)*time.Millisecond))
		if i%2 == 1 {
			c.Principal.Name = "bob"
		}
		c.LastActivity = now.Add(-time.Duration((i*7919)%n) * time.Millisecond)
		c.RequestRate = float64((i * 31) % 97)
		c.BytesInRate = float64((i * 13) % 101)
		c.BytesOutRate = float64(i % 5)
		connreg.Add(r, c, nil)
	}
	return r
}

// TestTop: a registry's Top is its snapshot sorted in the key's order and
// cut, for every key, filter and n.
func TestTop(t *testing.T) {
	r := ranked(500)
	keys := []connregistry.SortKey{connregistry.SortByRequests, connregistry.SortByBytesIn, connregistry.SortByBytesOut, connregistry.SortByIdle, connregistry.SortByAge}
	less := map[connregistry.SortKey]func(a, b connregistry.Conn) bool{
		connregistry.SortByRequests: func(a, b connregistry.Conn) bool { return a.RequestRate > b.RequestRate },
		connregistry.SortByBytesIn:  func(a, b connregistry.Conn) bool { return a.BytesInRate > b.BytesInRate },
		connregistry.SortByBytesOut: func(a, b connregistry.Conn) bool { return a.BytesOutRate > b.BytesOutRate },
		connregistry.SortByIdle:     func(a, b connregistry.Conn) bool { return a.LastActivity.Before(b.LastActivity) },
		connregistry.SortByAge:      func(a, b connregistry.Conn) bool { return a.ConnectedAt.Before(b.ConnectedAt) },
	}
	for _, f := range []connregistry.Filter{{}, {Principal: sp("User:bob")}} {
		all := r.Snapshot(f) // connection-time order: ties keep it
		for _, by := range keys {
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b connregistry.Conn) int {
				switch {
				case less[by](a, b):
					return -1
				case less[by](b, a):
					return 1
				}
				return 0
			})
			for _, n := range []int{1, 10, 249, 250, 251, 1000, 0, -1} {
				got := r.Top(f, by, n)
				cut := want
				if n > 0 && n < len(want) {
					cut = want[:n]
				}
				require.Len(t, got, len(cut), "%s n=%d", by, n)
				for i := range cut {
					// The rates decay between two readings: compare ids.
					require.Equal(t, cut[i].ID, got[i].ID, "%s n=%d, #%d", by, n, i)
				}
			}
		}
	}
	assert.Nil(t, r.Top(connregistry.Filter{}, "busiest", 10), "an unknown key lists nothing")
	assert.Nil(t, r.Top(connregistry.Filter{Principal: sp("alice")}, connregistry.SortByAge, 10), "nor does a bad filter")
	assert.Empty(t, connreg.New(0).Top(connregistry.Filter{}, connregistry.SortByAge, 10))
}

// heapBytes returns the bytes f allocates, on average over runs.
func heapBytes(runs int, f func()) uint64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// raceSkip is why a guard that counts allocations skips under the race
// detector.
const raceSkip = "the race detector allocates: this guard runs without it (go test -run '^TestGuard' work)"

// TestGuardTopAllocations: with 10,000 connections, the top 10 take
// three allocations (the entries' pointers, the heap, the 10 records)
// where a snapshot of them all takes two (the pointers, a slice of a
// record per connection), and a small part of its bytes: the heap keeps
// 10 records, not one per connection. It counts allocations, so it skips
// under the race detector, whose instrumentation allocates, as the other
// guards do: the guards' command runs it without (go test -run '^TestGuard'
// work).
func TestGuardTopAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip(raceSkip)
	}
	r := ranked(10_000)
	all := func() { _ = r.Snapshot(connregistry.Filter{}) }
	top := func() { _ = r.Top(connregistry.Filter{}, connregistry.SortByRequests, 10) }
	allAllocs, topAllocs := testing.AllocsPerRun(5, all), testing.AllocsPerRun(5, top)
	allBytes, topBytes := heapBytes(5, all), heapBytes(5, top)
	t.Logf("10,000 connections: all %v allocations, %d B; the top 10 %v allocations, %d B", allAllocs, allBytes, topAllocs, topBytes)
	// The entries' pointers are copied either way (80 kB); a snapshot adds
	// a record per connection, the top 10 only ten.
	assert.LessOrEqual(t, topBytes, allBytes/10)
	assert.LessOrEqual(t, topAllocs, 3.0, "the pointers, the heap, the 10 records")
}
