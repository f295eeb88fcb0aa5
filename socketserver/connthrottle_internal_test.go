package socketserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/kafkanet/kafkanet/socketserver/quota"
)

// A connection's delay is Kafka's throttle time capped at one window; a
// bound of zero (the rate keys allow it) delays by the cap.
func TestConnectionThrottle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name   string
		events float64
		bound  float64
		want   time.Duration
	}{
		{"within", 100, 10, 0},
		{"101st of a burst", 101, 10, 100 * time.Millisecond}, // (10.1-10)/10*10 s
		{"capped at a window", 1000, 10, time.Second},
		{"zero bound", 1, 0, time.Second},
		{"zero bound, taken back", 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := quota.NewRate(11, time.Second)
			r.Record(tc.events, t0)
			assert.Equal(t, tc.want, connectionThrottle(r, tc.bound, t0))
		})
	}
}
