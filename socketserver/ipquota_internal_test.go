package socketserver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The per-address creation rates of addresses that have opened no
// connection for a rate span (quota.window.num windows) are forgotten, so
// that addresses coming and going do not grow the server's memory for ever
// (Kafka expires an address's rate sensor an hour after its last record);
// forgetting them changes no decision, since their samples had all
// expired. A recent address keeps its rate and is still throttled.
func TestIPRatesOfGoneAddressesForgotten(t *testing.T) {
	q := DefaultConnectionQuotas()
	q.IPConnectionCreationRate = 1
	q.WindowNum = 2
	cq := newConnectionQuotas(q, nil, "", 1)
	now := time.Unix(1000, 0)
	cq.now = func() time.Time { return now }
	const l = "PLAINTEXT"

	for i := range 1000 {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		_, err := cq.acquire(l, ip, nil, nil)
		require.NoError(t, err)
		cq.release(l, ip)
	}
	assert.Equal(t, 1000, len(cq.ipRate))

	recent := netip.MustParseAddr("10.1.0.1")
	now = now.Add(1500 * time.Millisecond)
	_, err := cq.acquire(l, recent, nil, nil)
	require.NoError(t, err)
	defer cq.release(l, recent)
	now = now.Add(time.Second) // the 1000 went 2.5 s ago: over 2 windows of 1 s
	other := netip.MustParseAddr("10.1.0.2")
	_, err = cq.acquire(l, other, nil, nil)
	require.NoError(t, err)
	defer cq.release(l, other)
	assert.Equal(t, 2, len(cq.ipRate), "only the recent addresses keep a rate")

	_, err = cq.acquire(l, recent, nil, nil)
	assert.ErrorIs(t, err, ErrConnectionThrottled, "a kept rate still throttles")
}

// logLimiter lets the first event through, holds back the next within
// logEvery, and tells the next line it lets through how many it held.
func TestLogLimiterCountsHeld(t *testing.T) {
	var l logLimiter
	now := time.Unix(1000, 0)
	for i, tc := range []struct {
		after time.Duration
		ok    bool
		held  int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{logEvery - 2*time.Second, false, 0},
		{logEvery - time.Second, false, 0},
		{logEvery, true, 3},
		{logEvery + time.Second, false, 0},
		{3 * logEvery, true, 1},
		{5 * logEvery, true, 0},
	} {
		ok, held := l.allow(now.Add(tc.after))
		assert.Equal(t, tc.ok, ok, "event %d", i)
		assert.Equal(t, tc.held, held, "event %d", i)
	}
}
