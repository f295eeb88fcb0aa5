package connreg

import (
	"math"
	"testing"
	"time"
)

// TestDecay checks decay against math.Exp: within an ulp or two wherever
// it takes the series (gaps up to shortDecay of the window), and exact
// beyond, where it calls math.Exp.
func TestDecay(t *testing.T) {
	window := time.Duration(windowNanos)
	tests := []struct {
		name string
		gap  time.Duration
	}{
		{"no gap", 0},
		{"a nanosecond", 1},
		{"a request's round trip", 40 * time.Microsecond},
		{"a millisecond", time.Millisecond},
		{"just under the series' bound", time.Duration(shortDecay*windowNanos) - 1},
		{"at the series' bound", time.Duration(shortDecay * windowNanos)},
		{"a second", time.Second},
		{"the window", window},
		{"ten windows", 10 * window},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const last = int64(1_700_000_000_000_000_000)
			got := decay(last, last+int64(tt.gap))
			want := math.Exp(-float64(tt.gap) / windowNanos)
			if ulps := math.Abs(got-want) / (math.Nextafter(want, 2) - want); ulps > 2 {
				t.Errorf("decay over %v = %.17g, math.Exp gives %.17g: %.1f ulps apart", tt.gap, got, want, ulps)
			}
		})
	}
	t.Run("a later time than now keeps the sums", func(t *testing.T) {
		if got := decay(10, 5); got != 1 {
			t.Errorf("decay(10, 5) = %v, want 1", got)
		}
	})
}
