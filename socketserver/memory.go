package socketserver

import (
	"slices"
	"sync"
	"time"
)

// memoryPool is queued.max.request.bytes: it counts the bytes of requests
// that connections are reading, or have read and the host has not yet
// answered, and makes a connection that would take more wait until some
// are given back. The pool only counts; the bytes are ordinary heap.
//
// A connection takes memory as its frame's bytes arrive, not for the size
// the frame announces (see readBody and frameMemory): a peer that claims a
// large frame and sends little holds little. Kafka's SimpleMemoryPool, in
// its non-strict mode, is the model for when a connection may take more:
// while any memory is left, so the pool overshoots by at most one step.
// While the pool is spent, waiters are granted nearest to a whole frame
// first, so that frames complete, are answered and give memory back
// before new claims take more.
//
// Taking memory while holding some can deadlock where Kafka's all-at-once
// charge cannot: every byte may be held by frames that each wait for more,
// or by peers that stopped sending. So when all the memory taken belongs
// to frames still being read (none to requests the host holds, whose
// answers will give it back), the waiter nearest to a whole frame gets its
// step anyway, at once if every one of those frames waits for memory, or
// once no large frame has taken memory for stuckAfter (some have stopped
// sending). Some frame therefore always completes. A peer that
// holds memory and sends nothing is closed after
// Config.RequestStallTimeout.
//
// Frames of at most smallRequestBytes take their memory without waiting
// (take's wait false): they need little and are served at once, and so
// are never blocked behind large claims; but on a pipelining connection
// whose earlier requests the host holds, they wait as large ones do
// (frameMemory.take).
type memoryPool struct {
	size int64

	mu            sync.Mutex
	available     int64
	reading       int64           // taken by frames still being read (the rest by requests the host holds)
	waiters       []*memoryWaiter // in the order they came (nearestWaiter breaks ties by it)
	waitingHeld   int64           // what the waiters hold already
	moved         time.Time       // when a frame that may wait (take's wait) last took memory
	depletedSince time.Time       // when available last fell to zero or below; zero while some is left
	depleted      time.Duration   // total time spent depleted, up to depletedSince
}

// stuckAfter is how long a spent pool whose memory is all held by frames
// still being read may go without a large frame taking memory before the
// waiter nearest to a whole frame goes on anyway.
const stuckAfter = 50 * time.Millisecond

// memoryWaiter is a connection waiting to take n more bytes for a frame of
// which it holds held bytes and still lacks missing bytes.
type memoryWaiter struct {
	n, held, missing int64
	granted          chan struct{} // closed when n has been taken for it
}

func newMemoryPool(size int64) *memoryPool {
	return &memoryPool{size: size, available: size}
}

// take takes n more bytes for a frame being read, of which the
// connection holds held bytes already and still lacks missing bytes. With
// wait, it waits while the pool is spent (see memoryPool); without, it
// takes them at once. It returns false, having taken nothing, when done is
// closed first.
func (p *memoryPool) take(n, held, missing int64, wait bool, done <-chan struct{}) bool {
	p.mu.Lock()
	if !wait || p.available > 0 || p.allReadingWaits(held) && p.nearestWaiter(missing) == nil {
		p.takeLocked(n)
		if wait {
			p.moved = time.Now()
		}
		p.mu.Unlock()
		return true
	}
	w := &memoryWaiter{n: n, held: held, missing: missing, granted: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.waitingHeld += held
	p.grantLocked() // this waiter may complete a deadlock, which grants the nearest
	p.mu.Unlock()
	stuck := time.NewTimer(stuckAfter)
	defer stuck.Stop()
	for {
		select {
		case <-w.granted:
			return true
		case <-done:
			p.giveUp(w)
			return false
		case <-stuck.C:
			p.mu.Lock()
			if p.isWaiting(w) && p.available <= 0 && p.size-p.available == p.reading &&
				time.Since(p.moved) >= stuckAfter && p.nearestWaiter(1<<62) == w {
				p.grant(w)
			}
			p.mu.Unlock()
			stuck.Reset(stuckAfter)
		}
	}
}

// giveUp ends w's wait when its connection closes: it gives back what was
// granted meanwhile, or leaves the waiters.
func (p *memoryPool) giveUp(w *memoryWaiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isWaiting(w) {
		p.removeLocked(w)
	} else { // granted meanwhile
		p.reading -= w.n
		p.available += w.n
	}
	p.grantLocked() // a deadlock may have waited on this waiter's choice
}

// allReadingWaits reports whether every byte taken belongs to frames that
// wait for memory, counting a caller that holds held bytes as one.
func (p *memoryPool) allReadingWaits(held int64) bool {
	return p.size-p.available == p.waitingHeld+held && p.reading == p.waitingHeld+held
}

// isWaiting reports whether w is still among the waiters.
func (p *memoryPool) isWaiting(w *memoryWaiter) bool { return slices.Contains(p.waiters, w) }

// frameRead moves n bytes taken for a frame that has been read whole (or
// whose reading failed) to the requests the host holds: they come back
// with its answer (release).
func (p *memoryPool) frameRead(n int64) {
	p.mu.Lock()
	p.reading -= n
	p.mu.Unlock()
}

// nearestWaiter returns the waiter that lacks the fewest bytes, if it lacks
// fewer than missing; nil otherwise.
func (p *memoryPool) nearestWaiter(missing int64) *memoryWaiter {
	var best *memoryWaiter
	for _, w := range p.waiters {
		if w.missing < missing && (best == nil || w.missing < best.missing) {
			best = w
		}
	}
	return best
}

func (p *memoryPool) takeLocked(n int64) {
	p.available -= n
	p.reading += n
	if p.available <= 0 && p.depletedSince.IsZero() {
		p.depletedSince = time.Now()
	}
}

// removeLocked takes w off the waiters.
func (p *memoryPool) removeLocked(w *memoryWaiter) {
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.waitingHeld -= w.held
			return
		}
	}
}

// grantLocked grants waiters while memory is left, nearest to a whole
// frame first; then, if every byte taken belongs to frames that wait for
// more, it grants the nearest one anyway.
func (p *memoryPool) grantLocked() {
	for len(p.waiters) > 0 && p.available > 0 {
		p.grant(p.nearestWaiter(1 << 62))
	}
	if len(p.waiters) > 0 && p.allReadingWaits(0) {
		p.grant(p.nearestWaiter(1 << 62))
	}
}

func (p *memoryPool) grant(w *memoryWaiter) {
	p.removeLocked(w)
	p.takeLocked(w.n)
	p.moved = time.Now()
	close(w.granted)
}

// release gives back n bytes taken by take and wakes the connections that
// may take memory now.
func (p *memoryPool) release(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wasSpent := p.available <= 0
	p.available += n
	if wasSpent && p.available > 0 && !p.depletedSince.IsZero() {
		p.depleted += time.Since(p.depletedSince)
		p.depletedSince = time.Time{}
	}
	p.grantLocked()
}

// stats returns the bytes in use (which may exceed the size by a step of
// one frame's growth, and by what frames of at most smallRequestBytes
// took) and the total time the pool has been spent.
func (p *memoryPool) stats() (used int64, depleted time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	depleted = p.depleted
	if !p.depletedSince.IsZero() {
		depleted += time.Since(p.depletedSince)
	}
	return p.size - p.available, depleted
}
