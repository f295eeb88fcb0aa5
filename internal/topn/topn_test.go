package topn

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

// TestHeapAgreesWithSort: for every order and many n, the heap's first n
// are a full sort's first n, in the same order.
func TestHeapAgreesWithSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]Key, 500)
	for i := range keys {
		keys[i] = Key{
			RequestRate: float64(rng.IntN(20)), BytesInRate: rng.Float64() * 100, BytesOutRate: float64(rng.IntN(3)),
			LastActivity: rng.Int64N(50), ConnectedAt: rng.Int64N(50), ID: fmt.Sprintf("conn-%03d", i),
		}
	}
	for _, name := range []string{"requests", "bytes-in", "bytes-out", "idle", "age"} {
		by, ok := Parse(name)
		require.True(t, ok, name)
		want := slices.Clone(keys)
		slices.SortFunc(want, func(a, b Key) int { return Compare(by, &a, &b) })
		for _, n := range []int{1, 2, 7, 10, 499, 500, 600} {
			h := New(by, n)
			stored := make([]Key, min(n, len(keys)))
			for i := range keys {
				if slot := h.Offer(&keys[i]); slot >= 0 {
					stored[slot] = keys[i]
				}
			}
			n := h.Order(func(i, j int) { stored[i], stored[j] = stored[j], stored[i] })
			var got []string
			for _, k := range stored[:n] {
				got = append(got, k.ID)
			}
			var ids []string
			for _, k := range want[:min(n, len(want))] {
				ids = append(ids, k.ID)
			}
			assert.Equal(t, ids, got, "%s, n=%d", name, n)
		}
	}
}

func TestCompare(t *testing.T) {
	busy := Key{RequestRate: 5, BytesInRate: 1, BytesOutRate: 9, LastActivity: 100, ConnectedAt: 10, ID: "b"}
	quiet := Key{RequestRate: 1, BytesInRate: 7, BytesOutRate: 2, LastActivity: 50, ConnectedAt: 20, ID: "a"}
	for _, tc := range []struct {
		by   string
		want int // the sign of Compare(busy, quiet)
	}{{"requests", -1}, {"bytes-in", 1}, {"bytes-out", -1}, {"idle", 1}, {"age", -1}} {
		by, _ := Parse(tc.by)
		assert.Equal(t, tc.want, cmp.Compare(Compare(by, &busy, &quiet), 0), tc.by)
		assert.Equal(t, -tc.want, cmp.Compare(Compare(by, &quiet, &busy), 0), tc.by)
	}
	tie := busy
	tie.ID = "c"
	assert.Negative(t, Compare(ByRequests, &busy, &tie), "a tie goes to the lower id")
	_, ok := Parse("Requests")
	assert.False(t, ok)
}
