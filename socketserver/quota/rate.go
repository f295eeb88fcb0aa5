package quota

import (
	"math"
	"time"
)

// Defaults of Kafka's quota sampling.
const (
	// DefaultSamples is quota.window.num's default.
	DefaultSamples = 11
	// DefaultWindow is quota.window.size.seconds's default.
	DefaultWindow = time.Second
)

// Rate measures a quantity per second the way Kafka's Rate over a
// WindowedSum does (Kafka 3.8 and later, which keep a window that overlaps
// the measured span). What is recorded is summed in windows of a fixed
// length; a window whose last event is samples*window old is forgotten;
// the rate is the sum over the time elapsed since the oldest remaining
// window began, counted as at least samples-1 whole windows.
//
// A Rate is not safe for concurrent use: its owner serializes access, as
// Kafka's Sensor does. The zero Rate is not usable; see [NewRate].
type Rate struct {
	samples int           // the configured number of samples
	window  time.Duration // each sample's length
	slots   []sample      // up to samples+1, used in turn
	current int
}

type sample struct {
	start     time.Time
	lastEvent time.Time
	value     float64
}

// NewRate returns a rate over samples windows of window each (Kafka's
// quota.window.num and quota.window.size.seconds). A samples below 1 is
// taken as 1, a window below one millisecond as one millisecond.
func NewRate(samples int, window time.Duration) *Rate {
	samples = max(samples, 1)
	window = max(window, time.Millisecond)
	// Kafka keeps one slot more than samples for the window that began
	// before the measured span and overlaps it.
	return &Rate{samples: samples, window: window, slots: make([]sample, 0, samples+1)}
}

// Samples returns the number of windows the rate keeps.
func (r *Rate) Samples() int { return r.samples }

// Window returns the length of each window.
func (r *Rate) Window() time.Duration { return r.window }

// Record adds value at now: an amount such as a request's bytes, or a
// negative one to take back what was recorded. A window that has run its
// length is closed first, and the next slot is reused for the new window.
func (r *Rate) Record(value float64, now time.Time) {
	if len(r.slots) == 0 {
		r.slots = append(r.slots, sample{start: now, lastEvent: now})
		r.current = 0
	}
	if now.Sub(r.slots[r.current].start) >= r.window {
		r.current = (r.current + 1) % cap(r.slots)
		if r.current == len(r.slots) {
			r.slots = append(r.slots, sample{start: now, lastEvent: now})
		} else {
			r.slots[r.current] = sample{start: now, lastEvent: now}
		}
	}
	s := &r.slots[r.current]
	s.value += value
	s.lastEvent = now
}

// purge resets every window whose last event is samples*window old or
// older: it no longer overlaps the measured span.
func (r *Rate) purge(now time.Time) {
	expire := time.Duration(r.samples) * r.window
	for i := range r.slots {
		if now.Sub(r.slots[i].lastEvent) >= expire {
			r.slots[i] = sample{start: now, lastEvent: now}
		}
	}
}

// Expired reports whether every window has been forgotten at now: the
// rate then measures exactly as a new one would, and its owner may drop it.
func (r *Rate) Expired(now time.Time) bool {
	expire := time.Duration(r.samples) * r.window
	for _, s := range r.slots {
		if now.Sub(s.lastEvent) < expire {
			return false
		}
	}
	return true
}

// WindowSize returns the span the rate is measured over at now, as Kafka's
// Rate.windowSize: the time since the oldest remaining window began, plus
// whole windows to make at least samples-1 of them. Unlike Kafka it is
// never below one millisecond (Kafka's is zero with one sample at the
// instant its window begins, which makes any amount an infinite rate and
// its throttle time undefined).
func (r *Rate) WindowSize(now time.Time) time.Duration {
	r.purge(now)
	oldest := now
	for _, s := range r.slots {
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	elapsed := now.Sub(oldest)
	full := int(elapsed / r.window)
	if min := r.samples - 1; full < min {
		elapsed += time.Duration(min-full) * r.window
	}
	return max(elapsed, time.Millisecond)
}

// Measure returns the rate at now, per second.
func (r *Rate) Measure(now time.Time) float64 {
	size := r.WindowSize(now) // purges first
	sum := 0.0
	for _, s := range r.slots {
		sum += s.value
	}
	return sum / size.Seconds()
}

// Throttle returns the throttle time of a rate above bound at now, as
// Kafka's QuotaUtils.throttleTime computes it (see [ThrottleTime]), or
// zero when the rate is within bound.
func (r *Rate) Throttle(bound float64, now time.Time) time.Duration {
	observed := r.Measure(now)
	if observed <= bound {
		return 0
	}
	return ThrottleTime(observed, bound, r.WindowSize(now))
}

// MaxThrottle is the longest throttle time [ThrottleTime] returns: the
// throttle_time_ms field of Kafka's responses is an int32 of milliseconds.
const MaxThrottle = math.MaxInt32 * time.Millisecond

// ThrottleTime returns how long a client whose rate is observed, over a
// span of window, must wait for its rate to come down to bound if it sends
// nothing more (Kafka's QuotaUtils.throttleTime): the delay X with
// observed*window/(window+X) = bound, that is (observed-bound)/bound*window,
// rounded to the millisecond. It is zero when observed is within bound and
// [MaxThrottle] when bound is zero or the delay is longer.
func ThrottleTime(observed, bound float64, window time.Duration) time.Duration {
	if !(observed > bound) { // and NaN
		return 0
	}
	ms := math.Floor((observed-bound)/bound*float64(window.Milliseconds()) + 0.5) // Java's Math.round
	if ms >= float64(MaxThrottle/time.Millisecond) || math.IsNaN(ms) {            // and +Inf
		return MaxThrottle
	}
	return time.Duration(ms) * time.Millisecond
}

// BoundedThrottleTime is [ThrottleTime] capped at limit, as Kafka's
// QuotaUtils.boundedThrottleTime: Kafka caps request-time and connection
// quotas at one quota window.
func BoundedThrottleTime(observed, bound float64, window, limit time.Duration) time.Duration {
	return min(ThrottleTime(observed, bound, window), limit)
}
