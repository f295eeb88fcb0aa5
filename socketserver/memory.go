package socketserver

import (
	"sync"
	"time"
)

// memoryPool is queued.max.request.bytes: it counts the bytes of requests
// that connections have read and the host has not yet answered, and makes a
// connection that would read more wait until some are given back. It is
// Kafka's SimpleMemoryPool in its non-strict mode: a request is admitted
// while any memory is left, so the pool overshoots by at most one request
// (socket.request.max.bytes), and a request larger than the whole pool is
// still served once the pool is empty. The pool only counts; the bytes are
// ordinary heap.
type memoryPool struct {
	size int64

	mu            sync.Mutex
	available     int64
	freed         chan struct{} // closed, and replaced, when memory is given back while someone waits
	waiting       int
	depletedSince time.Time     // when available last fell to zero or below; zero while some is left
	depleted      time.Duration // total time spent depleted, up to depletedSince
}

func newMemoryPool(size int64) *memoryPool {
	return &memoryPool{size: size, available: size, freed: make(chan struct{})}
}

// acquire takes n bytes, waiting while the pool is spent. It returns false,
// having taken nothing, when done is closed first.
func (p *memoryPool) acquire(n int64, done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		if p.available > 0 {
			p.available -= n
			if p.available <= 0 && p.depletedSince.IsZero() {
				p.depletedSince = time.Now()
			}
			p.mu.Unlock()
			return true
		}
		freed := p.freed
		p.waiting++
		p.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			p.mu.Lock()
			p.waiting--
			p.mu.Unlock()
			return false
		}
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
	}
}

// release gives back n bytes taken by acquire and wakes the connections
// waiting for memory.
func (p *memoryPool) release(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wasSpent := p.available <= 0
	p.available += n
	if wasSpent && p.available > 0 && !p.depletedSince.IsZero() {
		p.depleted += time.Since(p.depletedSince)
		p.depletedSince = time.Time{}
	}
	if p.waiting > 0 && p.available > 0 {
		close(p.freed)
		p.freed = make(chan struct{})
	}
}

// stats returns the bytes in use (which may exceed the size by one
// request) and the total time the pool has been spent.
func (p *memoryPool) stats() (used int64, depleted time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	depleted = p.depleted
	if !p.depletedSince.IsZero() {
		depleted += time.Since(p.depletedSince)
	}
	return p.size - p.available, depleted
}
