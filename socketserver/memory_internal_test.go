package socketserver

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pool admits while any memory is left (Kafka's SimpleMemoryPool,
// strict=false): the request that spends it may overshoot, the next waits.
func TestMemoryPoolNonStrict(t *testing.T) {
	p := newMemoryPool(100)
	never := make(chan struct{})
	require.True(t, p.acquire(60, never))
	require.True(t, p.acquire(60, never), "40 left: admitted, overshooting by 20")
	used, _ := p.stats()
	assert.EqualValues(t, 120, used)

	got := make(chan bool)
	go func() { got <- p.acquire(1000, never) }() // larger than the pool: waits until it is free
	select {
	case <-got:
		t.Fatal("admitted while the pool is spent")
	case <-time.After(50 * time.Millisecond):
	}
	p.release(60) // 40 left
	require.True(t, <-got, "a request larger than the pool is served once memory is free")
	used, depleted := p.stats()
	assert.EqualValues(t, 1060, used)
	assert.GreaterOrEqual(t, depleted, 50*time.Millisecond)
	p.release(60)
	p.release(1000)
	used, _ = p.stats()
	assert.Zero(t, used)
}

// A waiting acquire gives up, taking nothing, when its connection closes.
func TestMemoryPoolAcquireGivesUp(t *testing.T) {
	p := newMemoryPool(10)
	require.True(t, p.acquire(10, nil))
	done := make(chan struct{})
	got := make(chan bool)
	go func() { got <- p.acquire(5, done) }()
	close(done)
	require.False(t, <-got)
	p.release(10)
	used, _ := p.stats()
	assert.Zero(t, used)
}

// Under contention the pool never lets more in than its size plus one
// request, and every waiter is served once memory comes back.
func TestMemoryPoolBoundUnderContention(t *testing.T) {
	const size, req, workers = 1000, 300, 16
	p := newMemoryPool(size)
	var (
		mu     sync.Mutex
		inUse  int64
		peak   int64
		wg     sync.WaitGroup
		served int
	)
	for range workers {
		wg.Go(func() {
			for range 50 {
				require.True(t, p.acquire(req, nil))
				mu.Lock()
				inUse += req
				peak = max(peak, inUse)
				served++
				mu.Unlock()
				time.Sleep(100 * time.Microsecond)
				mu.Lock()
				inUse -= req
				mu.Unlock()
				p.release(req)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, workers*50, served)
	assert.LessOrEqual(t, peak, int64(size+req-1), "at most one request beyond the pool")
}
