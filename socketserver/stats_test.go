package socketserver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// Stats is a snapshot with no side effects: a reader that reads often does
// not take from another reader the busy time of its own interval, which
// it would if reading reset a baseline. Two readings with nothing between
// them agree.
func TestStatsReadersDoNotAffectEachOther(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	metadataRoundTrip(t, c, 12, 0) // the connection is registered: its processor is known

	a0 := srv.Stats() // reader A's first reading
	for i := range 200 {
		metadataRoundTrip(t, c, 12, int32(i+1))
		srv.Stats() // reader B reads after every request, last after all of them
	}
	b := srv.Stats()
	a1 := srv.Stats() // reader A's second reading, after B's last

	var busy time.Duration
	for id, d := range a1.ProcessorBusy {
		busy += d - a0.ProcessorBusy[id]
		assert.Equal(t, b.ProcessorBusy[id], d, "two readings with no request between them")
	}
	require.Positive(t, busy, "A's interval holds the busy time of 200 requests")
	ratios := a1.ProcessorIdleRatio(a0)
	least := 1.0
	for _, r := range ratios {
		least = min(least, r)
	}
	assert.Less(t, least, 1.0, "A sees its processor busy, whatever B read: %v", ratios)
	assert.False(t, a1.At.Before(a0.At))
	assert.False(t, a1.Started.IsZero())
	assert.Equal(t, a0.Started, a1.Started)
}

func TestProcessorIdleRatio(t *testing.T) {
	start := time.Now()
	at := func(d time.Duration, busy map[int]time.Duration) socketserver.Stats {
		return socketserver.Stats{Started: start, At: start.Add(d), ProcessorBusy: busy}
	}
	for _, tc := range []struct {
		name       string
		since, now socketserver.Stats
		want       map[int]float64
	}{
		{"a quarter busy, and idle", at(time.Second, map[int]time.Duration{0: 0, 1: 100 * time.Millisecond}),
			at(2*time.Second, map[int]time.Duration{0: 250 * time.Millisecond, 1: 100 * time.Millisecond}),
			map[int]float64{0: 0.75, 1: 1}},
		{"no earlier reading: since Start", socketserver.Stats{},
			at(2*time.Second, map[int]time.Duration{0: 500 * time.Millisecond}), map[int]float64{0: 0.75}},
		{"a processor new since", at(time.Second, map[int]time.Duration{}),
			at(2*time.Second, map[int]time.Duration{3: 500 * time.Millisecond}), map[int]float64{3: 0.5}},
		{"more busy than elapsed (readings race the counters): never below 0", at(time.Second, map[int]time.Duration{0: 0}),
			at(2*time.Second, map[int]time.Duration{0: 3 * time.Second}), map[int]float64{0: 0}},
		{"no time between the readings", at(time.Second, map[int]time.Duration{0: 0}),
			at(time.Second, map[int]time.Duration{0: 0}), map[int]float64{0: 1}},
		{"before Start", socketserver.Stats{},
			socketserver.Stats{At: start, ProcessorBusy: map[int]time.Duration{0: 0}}, map[int]float64{0: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.now.ProcessorIdleRatio(tc.since)
			require.Len(t, got, len(tc.want))
			for id, want := range tc.want {
				assert.InDelta(t, want, got[id], 1e-9, "processor %d", id)
			}
		})
	}
}
