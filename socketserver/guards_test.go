package socketserver_test

// The guards: tests that hold what the server costs to a budget and time
// nothing. Each budget is a named constant (or a column of a table) saying
// what it counts: allocations, bytes, a size class, goroutines; each is
// what the code costs today, so that the first unit over it fails (but
// for the heap of a parked TLS connection, which varies: see
// parkedTLSHeapBytes). Their
// names begin with TestGuard, and the test command runs them twice: under
// the race detector with the rest of the suite, where those that count
// allocations or memory skip (its instrumentation allocates, and its
// sync.Pool drops a quarter of what it is given), and alone without it,
// where none skips:
//
//	go test -race work && go test -run '^TestGuard' work
//
// The per-request guards are TestGuardAllocationsPerRequest,
// TestGuardAllocationsPerRawRequest and
// TestGuardAllocationsPerRequestWithHooks; TestGuardRequestSizeClass and
// TestGuardConnSize hold the size of a request's allocation and of a
// connection's state; TestGuardParkedConnectionFootprint
// (guards_unix_test.go: its clients are bare sockets) holds what a parked
// idle connection keeps. docs/performance.md lists them.

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// raceSkip is why a guard that counts allocations or memory skips under the
// race detector.
const raceSkip = "the race detector allocates, and its sync.Pool drops a quarter of what it is given: " +
	"this guard runs without it (go test -run '^TestGuard' work)"

// perRequest is what the server allocates per round trip of a request:
// heap allocations, and their bytes as the runtime counts them (each
// object's size class).
type perRequest struct{ allocs, bytes uint64 }

// The budgets per request of the per-request guards.
var (
	// answeredInPlace is an ApiVersions request the server answers from
	// its read buffer: nothing.
	answeredInPlace = perRequest{0, 0}
	// smallDecoded is a small Metadata request (22 or 23 bytes) through the
	// request channel: the request with its client id (its 128-byte size
	// class, TestGuardRequestSizeClass), its frame (24) and its decoded
	// body (48). Before the requests of a connection shared its
	// description the request's class was 416: 488 bytes.
	smallDecoded = perRequest{3, 128 + 24 + 48}
	// smallRaw is a small raw request read whole, or a streamed one's
	// header: the request with its raw form and client id (its 480-byte
	// size class) and its frame (24); 792 bytes before.
	smallRaw = perRequest{2, 480 + 24}
	// fetchByReference is a small Fetch of one topic and partition
	// answered with records by reference (FetchResponse): the request,
	// its frame, its decoded body with its topic and partition, and the
	// response's cuts (one per partition with records, allocated at
	// once). Writing the response allocated 5 more before issue 36
	// (net.Buffers growing with each piece).
	fetchByReference = perRequest{6, 528}
	// fetchByReference400 is the same with 400 partitions: a frame of 10
	// KiB, read in two steps (nextFrame), one allocation more. 29
	// allocations before issue 36: the cuts grew too.
	fetchByReference400 = perRequest{7, 57296}
)

// measurePerRequest measures bc's round trips after warming the server's
// buffers: 1,000 round trips with the collector off, so that no pool is
// emptied meanwhile, five times, keeping the least. What another goroutine
// allocates meanwhile (the runtime, the test binary's watcher) only adds,
// so the least is the requests' own. bc allocates nothing itself.
func measurePerRequest(t *testing.T, bc *benchClient) perRequest {
	t.Helper()
	for range 100 {
		require.NoError(t, bc.roundTrip())
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const n = 1000
	least := perRequest{^uint64(0), ^uint64(0)}
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			if err := bc.roundTrip(); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		least.allocs = min(least.allocs, (after.Mallocs-before.Mallocs)/n)
		least.bytes = min(least.bytes, (after.TotalAlloc-before.TotalAlloc)/n)
	}
	return least
}

// requirePerRequest fails t when bc's round trips cost more than budget.
func requirePerRequest(t *testing.T, bc *benchClient, budget perRequest) {
	t.Helper()
	got := measurePerRequest(t, bc)
	if got.allocs > budget.allocs || got.bytes > budget.bytes {
		t.Errorf("%d allocations, %d bytes per request of %d bytes: over the budget of %d allocations, %d bytes",
			got.allocs, got.bytes, len(bc.req), budget.allocs, budget.bytes)
		return
	}
	t.Logf("%d allocations, %d bytes per request of %d bytes (budget %d, %d)", got.allocs, got.bytes, len(bc.req), budget.allocs, budget.bytes)
}
