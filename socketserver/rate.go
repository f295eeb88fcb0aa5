package socketserver

import (
	"math"
	"time"
)

// sampledRate measures events per second the way Kafka's Rate over a
// windowed sum does (org.apache.kafka.common.metrics.stats.Rate), so that
// the bursts a connection-rate quota lets through match a Kafka broker's:
// events are summed in samples windows of window each; a sample older than
// samples*window is forgotten; the rate divides the sum by the time elapsed
// since the oldest sample began, taken to be at least samples-1 whole
// windows.
type sampledRate struct {
	window  time.Duration
	samples []rateSample
	current int
}

type rateSample struct {
	start time.Time
	value float64
}

func newSampledRate(samples int, window time.Duration) *sampledRate {
	return &sampledRate{window: window, samples: make([]rateSample, 0, max(samples, 2))}
}

// record adds value (1 for an event, -1 to take one back) at now.
func (r *sampledRate) record(value float64, now time.Time) {
	if len(r.samples) == 0 {
		r.samples = append(r.samples, rateSample{start: now})
		r.current = 0
	}
	if s := &r.samples[r.current]; now.Sub(s.start) >= r.window {
		r.current++
		if r.current == cap(r.samples) {
			r.current = 0
		}
		if r.current == len(r.samples) {
			r.samples = append(r.samples, rateSample{start: now})
		} else {
			r.samples[r.current] = rateSample{start: now}
		}
	}
	r.samples[r.current].value += value
}

// purge forgets samples that ended more than samples*window ago.
func (r *sampledRate) purge(now time.Time) {
	expire := time.Duration(cap(r.samples)) * r.window
	for i := range r.samples {
		if now.Sub(r.samples[i].start) >= expire {
			r.samples[i] = rateSample{start: now}
		}
	}
}

// expired reports whether every sample has expired at now: the rate
// then measures exactly as a new one would, and may be forgotten.
func (r *sampledRate) expired(now time.Time) bool {
	expire := time.Duration(cap(r.samples)) * r.window
	for _, s := range r.samples {
		if now.Sub(s.start) < expire {
			return false
		}
	}
	return true
}

// elapsed is the time the rate is measured over, in Kafka's way.
func (r *sampledRate) elapsed(now time.Time) time.Duration {
	r.purge(now)
	oldest := now
	for _, s := range r.samples {
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	total := now.Sub(oldest)
	full := int(total / r.window)
	if min := cap(r.samples) - 1; full < min {
		total += time.Duration(min-full) * r.window
	}
	return max(total, time.Millisecond)
}

// rate returns events per second at now.
func (r *sampledRate) rate(now time.Time) float64 {
	elapsed := r.elapsed(now)
	sum := 0.0
	for _, s := range r.samples {
		sum += s.value
	}
	return sum / elapsed.Seconds()
}

// throttle returns how long to delay after an event to bring the rate back
// to bound, as Kafka's QuotaUtils.boundedThrottleTime does, capped at one
// window; zero when the rate is within bound. A bound of zero admits
// nothing: Kafka's delay divides by it, and the infinity is capped to the
// window.
func (r *sampledRate) throttle(bound float64, now time.Time) time.Duration {
	value := r.rate(now)
	if value <= bound {
		return 0
	}
	ms := math.Round((value - bound) / bound * float64(r.elapsed(now).Milliseconds()))
	if ms >= float64(r.window.Milliseconds()) { // and +Inf, which no Duration holds
		return r.window
	}
	return time.Duration(ms) * time.Millisecond
}
