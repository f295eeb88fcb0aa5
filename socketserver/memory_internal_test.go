package socketserver

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// takeAsync runs a waiting take on its own goroutine and returns its
// result's channel.
func takeAsync(p *memoryPool, n, held, missing int64, done <-chan struct{}) <-chan bool {
	got := make(chan bool, 1)
	go func() { got <- p.take(n, held, missing, true, done) }()
	return got
}

// waitingFor fails the test unless got stays empty for a while, shorter
// than stuckAfter: the take is waiting.
func waitingFor(t *testing.T, got <-chan bool, what string) {
	t.Helper()
	select {
	case <-got:
		t.Fatalf("%s: taken while it should wait", what)
	case <-time.After(stuckAfter / 2):
	}
}

// The pool lets a take in while any memory is left (Kafka's
// SimpleMemoryPool, strict=false): the take that spends it may overshoot,
// the next waits, and a take larger than the pool is served once memory
// is free.
func TestMemoryPoolNonStrict(t *testing.T) {
	p := newMemoryPool(100)
	never := make(chan struct{})
	require.True(t, p.take(60, 0, 60, true, never))
	p.frameRead(60) // read whole: the host holds it
	require.True(t, p.take(60, 0, 60, true, never), "40 left: taken, overshooting by 20")
	p.frameRead(60)
	used, _ := p.stats()
	assert.EqualValues(t, 120, used)

	got := takeAsync(p, 1000, 0, 1000, never)
	waitingFor(t, got, "a take while the pool is spent")
	p.release(60) // 40 left
	require.True(t, <-got, "a take larger than the pool is served once memory is free")
	used, depleted := p.stats()
	assert.EqualValues(t, 1060, used)
	assert.GreaterOrEqual(t, depleted, stuckAfter/2)
	p.release(60)
	p.release(1000)
	used, _ = p.stats()
	assert.Zero(t, used)
}

// A frame that needs little (wait false) takes its memory even while the
// pool is spent: large claims never block small requests.
func TestMemoryPoolSmallNeverWaits(t *testing.T) {
	p := newMemoryPool(100)
	require.True(t, p.take(150, 0, 1000, true, nil))
	require.True(t, p.take(10, 0, 10, false, nil), "a small frame while the pool is spent")
	used, _ := p.stats()
	assert.EqualValues(t, 160, used)
}

// A waiting take gives up, taking nothing, when its connection closes.
func TestMemoryPoolTakeGivesUp(t *testing.T) {
	p := newMemoryPool(10)
	require.True(t, p.take(10, 0, 10, true, nil))
	p.frameRead(10)
	done := make(chan struct{})
	got := takeAsync(p, 5, 0, 5, done)
	waitingFor(t, got, "a take while the pool is spent")
	close(done)
	require.False(t, <-got)
	p.release(10)
	used, _ := p.stats()
	assert.Zero(t, used)
	assert.Empty(t, p.waiters)
}

// When every byte taken belongs to frames that wait for more, no answer
// will ever give memory back: the frame nearest to whole gets its step
// anyway, completes, and its answer lets the next one go on.
func TestMemoryPoolBreaksDeadlock(t *testing.T) {
	p := newMemoryPool(100)
	never := make(chan struct{})
	require.True(t, p.take(50, 0, 400, true, never)) // far: 50 of 400
	require.True(t, p.take(50, 0, 100, true, never)) // near: 50 of 100; the pool is spent
	far := takeAsync(p, 300, 50, 350, never)
	waitingFor(t, far, "the far frame, while the near one still reads")
	near := takeAsync(p, 50, 50, 50, never)
	require.True(t, <-near, "every byte is held by waiters: the nearest goes on")
	p.frameRead(100) // the near frame is whole, and the host's
	waitingFor(t, far, "the far frame, while the host holds the near one")
	p.release(100) // the near frame was answered
	require.True(t, <-far)
	used, _ := p.stats()
	assert.EqualValues(t, 350, used)
}

// A frame that is not the nearest waits even when every byte is held by
// waiters; the nearest is granted in its place.
func TestMemoryPoolGrantsTheNearest(t *testing.T) {
	p := newMemoryPool(100)
	never := make(chan struct{})
	require.True(t, p.take(60, 0, 200, true, never))
	require.True(t, p.take(40, 0, 50, true, never))
	far := takeAsync(p, 100, 60, 140, never) // waits: the near frame is still reading
	waitingFor(t, far, "the far frame")
	near := takeAsync(p, 10, 40, 10, never) // now all is held by waiters: the near one is granted
	require.True(t, <-near)
	p.frameRead(50) // the near frame is whole
	waitingFor(t, far, "the far frame after the near one was granted")
	p.release(50)
	require.True(t, <-far, "memory came back")
}

// A frame that holds memory and whose peer stopped sending would keep
// every waiter waiting: once no large frame has taken memory for
// stuckAfter, the waiter nearest to a whole frame goes on.
func TestMemoryPoolStuckReader(t *testing.T) {
	p := newMemoryPool(100)
	never := make(chan struct{})
	require.True(t, p.take(100, 0, 1000, true, never)) // a claim that stalls, holding everything
	start := time.Now()
	got := takeAsync(p, 10, 0, 50, never)
	require.True(t, <-got)
	assert.GreaterOrEqual(t, time.Since(start), stuckAfter)

	// Memory the host holds is not stuck: its answer gives it back.
	p = newMemoryPool(100)
	require.True(t, p.take(100, 0, 100, true, never))
	p.frameRead(100)
	got = takeAsync(p, 10, 0, 50, never)
	select {
	case <-got:
		t.Fatal("granted while the host holds the pool")
	case <-time.After(3 * stuckAfter):
	}
	p.release(100)
	require.True(t, <-got)
}

// Under contention, frames that take their memory in steps as their bytes
// arrive all complete (the pool never deadlocks), and the pool never lets
// in more than its size plus one step and one frame's remainder.
func TestMemoryPoolBoundUnderContention(t *testing.T) {
	const size, frame, workers = 1000, 640, 16
	steps := []int64{40, 160, 640} // a frame's buffer as it grows
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
			for range 20 {
				var held int64
				for i, next := range steps {
					arrived := int64(0)
					if i > 0 {
						arrived = steps[i-1]
					}
					if !p.take(next-held, held, frame-arrived, true, nil) {
						t.Error("take failed")
						return
					}
					mu.Lock()
					inUse += next - held
					peak = max(peak, inUse)
					mu.Unlock()
					held = next
					time.Sleep(20 * time.Microsecond) // the bytes arrive
				}
				p.frameRead(held) // read whole: the request is the host's
				mu.Lock()
				served++
				mu.Unlock()
				time.Sleep(100 * time.Microsecond) // the host answers
				mu.Lock()
				inUse -= held
				mu.Unlock()
				p.release(held)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, workers*20, served)
	assert.LessOrEqual(t, peak, int64(size+2*frame), "at most one step and one frame beyond the pool")
	assert.Empty(t, p.waiters)
}
