package socketserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// With Kafka's defaults (11 windows of 1 s) and a bound of 10 per second, a
// burst at one instant is measured over at least 10 s: 100 connections fit,
// the 101st is delayed by round((10.1-10)/10*10000) = 100 ms.
func TestSampledRateBurstMatchesKafka(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := newSampledRate(11, time.Second)
	for i := 0; i < 100; i++ {
		r.record(1, t0)
		assert.Zero(t, r.throttle(10, t0), "connection %d", i+1)
	}
	r.record(1, t0)
	assert.Equal(t, 100*time.Millisecond, r.throttle(10, t0))
	assert.InDelta(t, 10.1, r.rate(t0), 1e-9)

	// Taking the event back restores the rate.
	r.record(-1, t0)
	assert.Zero(t, r.throttle(10, t0))

	// A delay never exceeds one window.
	for i := 0; i < 1000; i++ {
		r.record(1, t0)
	}
	assert.Equal(t, time.Second, r.throttle(10, t0))
}

// Samples older than samples*window are forgotten; elapsed time grows past
// the minimum once more than samples-1 windows have passed.
func TestSampledRateWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := newSampledRate(3, 100*time.Millisecond)
	r.record(10, t0)
	assert.Equal(t, 200*time.Millisecond, r.elapsed(t0)) // 2 full windows at least
	assert.InDelta(t, 50, r.rate(t0), 1e-9)
	t1 := t0.Add(250 * time.Millisecond)
	r.record(5, t1)
	assert.Equal(t, 250*time.Millisecond, r.elapsed(t1))
	assert.InDelta(t, 60, r.rate(t1), 1e-9)
	// At t0+300ms the first sample (started t0) expires: only the t1 one remains.
	t2 := t0.Add(300 * time.Millisecond)
	// Elapsed: 50 ms since the t1 sample began, plus 2 windows to reach the
	// minimum of samples-1 whole windows.
	assert.Equal(t, 250*time.Millisecond, r.elapsed(t2))
	assert.InDelta(t, 5/0.25, r.rate(t2), 1e-9)
}

// A bound of zero, which Kafka's connection rate keys allow (atLeast(0)),
// delays every event by the cap of one window: QuotaUtils.throttleTime
// divides by the bound, and boundedThrottleTime caps the infinity.
func TestSampledRateZeroBound(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := newSampledRate(11, time.Second)
	r.record(1, t0)
	assert.Equal(t, time.Second, r.throttle(0, t0))
	r.record(-1, t0)
	assert.Zero(t, r.throttle(0, t0), "no event, no delay")
}
