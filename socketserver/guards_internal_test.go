package socketserver

import (
	"runtime"
	"testing"
	"unsafe"
)

// The guards of the package's internals; see guards_test.go for the list
// and the rules all guards follow. These count no allocation, so they run
// under the race detector too.

const (
	// decodedRequestClass is the size class, in bytes, of the one
	// allocation holding a decoded request (requestBuf: the Request and its
	// client id). It was 416 while Request.Conn was a copy of the
	// connection's description (connregistry.Info, 296 bytes); it now
	// points to the copy the connection's requests share.
	decodedRequestClass = 128
	// rawRequestClass is the size class, in bytes, of the one allocation
	// holding a raw request (rawRequestBuf: the Request, its RawRequest and
	// its client id); 768 with Request.Conn a copy.
	rawRequestClass = 480
	// connBytes is the size of a connection's state (conn): every open
	// connection holds one, so a field added here is paid 10,000 times over
	// by a broker with 10,000 idle clients. 208 is a size class: it was 448
	// while the connection kept its own copy of its description (the
	// registry entry's is now the only one), 240 while it held its
	// request context and cancel where a pointer to both now is, and 224
	// while its own context was context.WithCancel's (a context and a
	// cancel function, and two objects of their own) where connLife's word
	// now is.
	connBytes = 208
)

// sizeClass returns the bytes the runtime allocates for one object of size
// bytes: its size class, from the runtime's own table
// (runtime.MemStats.BySize), after the 8-byte header the runtime puts
// before an object of more than 512 bytes that holds pointers.
func sizeClass(t *testing.T, size uintptr, pointers bool) uintptr {
	t.Helper()
	if pointers && size > 512 {
		size += 8
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	for _, c := range ms.BySize {
		if uintptr(c.Size) >= size {
			return uintptr(c.Size)
		}
	}
	t.Fatalf("an object of %d bytes is over the runtime's size classes", size)
	return 0
}

// TestGuardRequestSizeClass holds the allocation every request pays to
// its size class, so that one byte added to Request, beyond what the class
// has spare, fails.
func TestGuardRequestSizeClass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   uintptr
		budget uintptr
	}{
		{"decoded request (requestBuf)", unsafe.Sizeof(requestBuf{}), decodedRequestClass},
		{"raw request (rawRequestBuf)", unsafe.Sizeof(rawRequestBuf{}), rawRequestClass},
	} {
		if got := sizeClass(t, tc.size, true); got > tc.budget {
			t.Errorf("%s: %d bytes, in the %d-byte size class: over its budget, the %d-byte class", tc.name, tc.size, got, tc.budget)
		} else {
			t.Logf("%s: %d bytes, in the %d-byte size class", tc.name, tc.size, got)
		}
	}
}

// TestGuardConnSize holds a connection's state to connBytes.
func TestGuardConnSize(t *testing.T) {
	if size := unsafe.Sizeof(conn{}); size > connBytes {
		t.Errorf("conn is %d bytes, over its budget of %d", size, connBytes)
	}
}

// ParkedStacks returns, for the guards of the external tests
// (TestGuardParkedConnectionFootprint), how many of s's connections are
// parked, the bytes of stack their goroutines started on in all, and the
// largest, as the runtime reported its starting size when each parked.
func ParkedStacks(s *Server) (parked int, stacks, largest uint64) {
	for _, ls := range s.serving() {
		for _, p := range ls.processors {
			p.mu.Lock()
			for c := range p.conns {
				if c.wait.Load() == waitParked {
					stack := uint64(c.parkedStack.Load())
					parked, stacks, largest = parked+1, stacks+stack, max(largest, stack)
				}
			}
			p.mu.Unlock()
		}
	}
	return parked, stacks, largest
}

// Reading the runtime's starting stack size, at every park and at every
// tick of a processor with parked connections, allocates nothing: a
// sample made for each reading escaped to the heap, garbage an idle
// server made 20 times a second per processor.
func TestGuardStackStartReadAllocatesNothing(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector's instrumentation allocates")
	}
	var s stackStart
	if got := s.read(); got < 2048 {
		t.Fatalf("starting stack %d bytes, want at least the runtime's smallest, 2048", got)
	}
	if n := testing.AllocsPerRun(100, func() { s.read() }); n != 0 {
		t.Errorf("a reading allocates %v times", n)
	}
}
