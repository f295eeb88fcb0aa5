package quota_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kafkanet/kafkanet/socketserver/quota"
)

var t0 = time.Unix(1000, 0)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

type event struct {
	at    time.Time
	value float64
}

// The measured span and rate, worked out by hand with Kafka's Rate and
// SampledStat (3.8 and later): samples*window expiry by last event, the
// overlapping window kept, at least samples-1 whole windows.
func TestRateMatchesKafka(t *testing.T) {
	for _, tc := range []struct {
		name     string
		samples  int
		window   time.Duration
		events   []event
		at       time.Time
		wantSpan time.Duration
		wantRate float64
	}{
		{"first event: samples-1 windows", 3, 100 * time.Millisecond, []event{{t0, 10}}, t0, 200 * time.Millisecond, 50},
		{"second window", 3, 100 * time.Millisecond, []event{{t0, 10}, {ms(250), 5}}, ms(250), 250 * time.Millisecond, 60},
		// The t0 window's last event is 300 ms old: forgotten; 50 ms since
		// the t0+250ms window began, plus two windows.
		{"expired window", 3, 100 * time.Millisecond, []event{{t0, 10}, {ms(250), 5}}, ms(300), 250 * time.Millisecond, 20},
		// The t0 window began 2.5 s ago but its last event (t0+900ms) is
		// within samples*window: it overlaps the span and counts, and the
		// span runs from its start (Kafka before 3.8 dropped it: 10/s).
		{"overlapping window kept", 2, time.Second, []event{{t0, 10}, {ms(900), 10}, {ms(1500), 10}}, ms(2500), 2500 * time.Millisecond, 12},
		{"burst at Kafka's defaults", 11, time.Second, []event{{t0, 101}}, t0, 10 * time.Second, 10.1},
		{"quiet for samples*window", 11, time.Second, []event{{t0, 100}}, ms(11000), 10 * time.Second, 0},
		{"taken back", 11, time.Second, []event{{t0, 100}, {ms(10), -100}}, ms(10), 10*time.Second + 10*time.Millisecond, 0},
		// One sample: Kafka's span is 0 at the instant the window begins;
		// kafkanet's is at least 1 ms.
		{"one sample, same instant", 1, time.Second, []event{{t0, 5}}, t0, time.Millisecond, 5000},
		{"one sample", 1, time.Second, []event{{t0, 5}}, ms(500), 500 * time.Millisecond, 10},
		{"no event", 11, time.Second, nil, t0, 10 * time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := quota.NewRate(tc.samples, tc.window)
			for _, e := range tc.events {
				r.Record(e.value, e.at)
			}
			assert.Equal(t, tc.wantSpan, r.WindowSize(tc.at))
			assert.InDelta(t, tc.wantRate, r.Measure(tc.at), 1e-9)
		})
	}
}

// Windows are reused in turn: with samples+1 slots, a steady 1 per window
// of 100 ms measures 10/s once the span is full.
func TestRateSteady(t *testing.T) {
	r := quota.NewRate(3, 100*time.Millisecond)
	for i := range 50 {
		r.Record(1, ms(i*100))
	}
	// Windows at 4600, 4700, 4800 and 4900 ms remain (4600's last event is
	// 300 ms before 4900: forgotten); span 4700..4900 is 200 ms: 3/0.2.
	assert.Equal(t, 200*time.Millisecond, r.WindowSize(ms(4900)))
	assert.InDelta(t, 15, r.Measure(ms(4900)), 1e-9)
	// Halfway into the last window: 250 ms since 4700.
	assert.InDelta(t, 3/0.25, r.Measure(ms(4950)), 1e-9)
}

func TestRateExpired(t *testing.T) {
	r := quota.NewRate(11, time.Second)
	assert.True(t, r.Expired(t0), "a new rate")
	r.Record(1, t0)
	r.Record(1, ms(5000))
	assert.False(t, r.Expired(ms(15999)))
	assert.True(t, r.Expired(ms(16000)))
	assert.Equal(t, 11, r.Samples())
	assert.Equal(t, time.Second, r.Window())
}

// QuotaUtils.throttleTime: (O-T)/T*W, rounded half up.
func TestThrottleTime(t *testing.T) {
	for _, tc := range []struct {
		observed, bound float64
		window          time.Duration
		want            time.Duration
	}{
		{10.1, 10, 10 * time.Second, 100 * time.Millisecond},
		{2e6, 1e6, 10 * time.Second, 10 * time.Second},
		{1.5e6, 1e6, 10500 * time.Millisecond, 5250 * time.Millisecond},
		{12.5, 10, 2 * time.Millisecond, time.Millisecond}, // 0.5 ms rounds up
		{11.25, 10, 2 * time.Millisecond, 0},               // 0.25 ms rounds down
		{10, 10, 10 * time.Second, 0},                      // within bound
		{5, 10, 10 * time.Second, 0},
		{1, 0, 10 * time.Second, quota.MaxThrottle}, // a zero bound admits nothing
		{1e15, 1, 10 * time.Second, quota.MaxThrottle},
		{math.NaN(), 1, time.Second, 0},
	} {
		t.Run(fmt.Sprintf("%g/%g/%v", tc.observed, tc.bound, tc.window), func(t *testing.T) {
			assert.Equal(t, tc.want, quota.ThrottleTime(tc.observed, tc.bound, tc.window))
			assert.Equal(t, min(tc.want, time.Second), quota.BoundedThrottleTime(tc.observed, tc.bound, tc.window, time.Second))
		})
	}
}

// A Rate's own Throttle: 100 events at one instant with a bound of 10/s fit
// Kafka's defaults (measured over 10 s); the 101st is throttled 100 ms.
func TestRateThrottle(t *testing.T) {
	r := quota.NewRate(quota.DefaultSamples, quota.DefaultWindow)
	for i := range 100 {
		r.Record(1, t0)
		assert.Zero(t, r.Throttle(10, t0), "event %d", i+1)
	}
	r.Record(1, t0)
	assert.Equal(t, 100*time.Millisecond, r.Throttle(10, t0))
	r.Record(-1, t0)
	assert.Zero(t, r.Throttle(10, t0))
}
