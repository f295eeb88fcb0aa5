package quota_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/socketserver/quota"
)

// The eight entity levels of Kafka's DefaultQuotaCallback, most specific
// first, for user alice and client id c1.
var levels = []quota.Entity{
	{User: quota.Named("alice"), ClientID: quota.Named("c1")},
	{User: quota.Named("alice"), ClientID: quota.DefaultComponent()},
	{User: quota.Named("alice")},
	{User: quota.DefaultComponent(), ClientID: quota.Named("c1")},
	{User: quota.DefaultComponent(), ClientID: quota.DefaultComponent()},
	{User: quota.DefaultComponent()},
	{ClientID: quota.Named("c1")},
	{ClientID: quota.DefaultComponent()},
}

// With quotas at levels i..8, the one of level i applies.
func TestManagerPrecedence(t *testing.T) {
	for i := range levels {
		t.Run(levels[i].String(), func(t *testing.T) {
			m := quota.NewManager(quota.Config{})
			for j := i; j < len(levels); j++ {
				require.NoError(t, m.Set(levels[j], quota.ProducerByteRate, float64(1000*(j+1))))
			}
			got, ok := m.Limit(quota.ProducerByteRate, "alice", "c1")
			assert.True(t, ok)
			assert.Equal(t, float64(1000*(i+1)), got)
			_, ok = m.Limit(quota.ConsumerByteRate, "alice", "c1")
			assert.False(t, ok, "another key")
		})
	}
}

// Cases where the level chosen is not the obvious one.
func TestManagerPrecedenceCases(t *testing.T) {
	for _, tc := range []struct {
		name           string
		set            map[int]float64 // level (1-8) to quota
		user, clientID string
		want           float64 // 0: no quota
	}{
		{"user before client id", map[int]float64{3: 300, 7: 700}, "alice", "c1", 300},
		{"client id of another user", map[int]float64{3: 300, 7: 700}, "bob", "c1", 700},
		{"nothing for bob/c2", map[int]float64{3: 300, 7: 700}, "bob", "c2", 0},
		{"default user before client id", map[int]float64{6: 600, 7: 700}, "bob", "c1", 600},
		{"user+client id of another client", map[int]float64{1: 100}, "alice", "c2", 0},
		{"default client id of the user", map[int]float64{2: 200, 3: 300}, "alice", "c9", 200},
		{"default pair", map[int]float64{5: 500, 8: 800}, "carol", "c7", 500},
		{"client id default only", map[int]float64{8: 800}, "", "c7", 800},
		{"anonymous empty client id", map[int]float64{8: 800}, "ANONYMOUS", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := quota.NewManager(quota.Config{})
			for level, v := range tc.set {
				require.NoError(t, m.Set(levels[level-1], quota.ConsumerByteRate, v))
			}
			got, ok := m.Limit(quota.ConsumerByteRate, tc.user, tc.clientID)
			assert.Equal(t, tc.want != 0, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A quota of a user alone is shared by all its client ids; one of the
// default user and client id is each pair's own (Kafka's metric tags).
func TestManagerSharedRate(t *testing.T) {
	for _, tc := range []struct {
		entity quota.Entity
		want   time.Duration
	}{
		// 5000+6000 bytes at once over 10 s: 1100/s against 1000/s:
		// (1100-1000)/1000*10000 ms.
		{quota.Entity{User: quota.Named("alice")}, time.Second},
		{quota.Entity{User: quota.DefaultComponent(), ClientID: quota.DefaultComponent()}, 0},
	} {
		t.Run(tc.entity.String(), func(t *testing.T) {
			m := quota.NewManager(quota.Config{})
			require.NoError(t, m.Set(tc.entity, quota.ProducerByteRate, 1000))
			assert.Zero(t, m.Record(quota.ProducerByteRate, "alice", "c1", 5000, t0))
			assert.Equal(t, tc.want, m.Record(quota.ProducerByteRate, "alice", "c2", 6000, t0))
		})
	}
}

// recordAndGetThrottleTimeMs: the value counts, then the rate is measured;
// byte rates are not capped, request_percentage is capped at one window.
func TestManagerRecord(t *testing.T) {
	for _, tc := range []struct {
		key    quota.Key
		bound  float64
		cfg    quota.Config
		values []float64 // recorded at t0
		want   time.Duration
	}{
		{quota.ProducerByteRate, 1e6, quota.Config{}, []float64{1e7}, 0},                          // exactly 1 MB/s over 10 s
		{quota.ProducerByteRate, 1e6, quota.Config{}, []float64{1e7, 1}, 0},                       // over by 0.1 B/s: 0.001 ms rounds to 0
		{quota.ProducerByteRate, 1e6, quota.Config{}, []float64{1e7, 1e4}, 10 * time.Millisecond}, // 0.001*10 s
		{quota.ProducerByteRate, 1e6, quota.Config{}, []float64{2e7}, 10 * time.Second},           // (2-1)/1*10 s, not capped
		// 5 windows of 2 s: an 8 s span; 1.5 MB/s: 0.5*8 s.
		{quota.ConsumerByteRate, 1e6, quota.Config{Samples: 5, Window: 2 * time.Second}, []float64{1.2e7}, 4 * time.Second},
		// 10 s of one thread over 10 s is 100%: (100-50)/50*10 s, capped at 1 s.
		{quota.RequestPercentage, 50, quota.Config{}, []float64{quota.ThreadPercent(10 * time.Second)}, time.Second},
		{quota.RequestPercentage, 50, quota.Config{}, []float64{quota.ThreadPercent(5200 * time.Millisecond)}, 400 * time.Millisecond},
		{quota.RequestPercentage, 50, quota.Config{}, []float64{quota.ThreadPercent(5020 * time.Millisecond)}, 40 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%s %g %v", tc.key, tc.bound, tc.values), func(t *testing.T) {
			m := quota.NewManager(tc.cfg)
			require.NoError(t, m.Set(quota.Entity{ClientID: quota.DefaultComponent()}, tc.key, tc.bound))
			var got time.Duration
			for _, v := range tc.values {
				got = m.Record(tc.key, "alice", "c1", v, t0)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A throttled Fetch takes its bytes back (Kafka's unrecordQuotaSensor).
func TestManagerUnrecord(t *testing.T) {
	m := quota.NewManager(quota.Config{})
	require.NoError(t, m.Set(quota.Entity{User: quota.Named("alice")}, quota.ConsumerByteRate, 1e6))
	assert.Equal(t, 10*time.Second, m.Record(quota.ConsumerByteRate, "alice", "c1", 2e7, t0))
	m.Unrecord(quota.ConsumerByteRate, "alice", "c1", 2e7, t0)
	assert.Zero(t, m.Record(quota.ConsumerByteRate, "alice", "c2", 1e7, t0), "the shared rate was taken back")
}

// getMaxValueInQuotaWindow: quota * (samples-1) * window seconds.
func TestManagerMaxValueInQuotaWindow(t *testing.T) {
	m := quota.NewManager(quota.Config{Samples: 5, Window: 2 * time.Second})
	assert.Equal(t, math.MaxFloat64, m.MaxValueInQuotaWindow(quota.ConsumerByteRate, "alice", "c1"))
	require.NoError(t, m.Set(quota.Entity{User: quota.DefaultComponent()}, quota.ConsumerByteRate, 1e6))
	assert.Equal(t, 8e6, m.MaxValueInQuotaWindow(quota.ConsumerByteRate, "alice", "c1"))
	assert.Equal(t, quota.Config{Samples: 5, Window: 2 * time.Second}, m.Config())
	assert.Equal(t, quota.Config{Samples: quota.DefaultSamples, Window: quota.DefaultWindow}, quota.NewManager(quota.Config{}).Config())
}

// Removing a quota lifts it; with no quota of a key left, its rates start
// afresh.
func TestManagerRemove(t *testing.T) {
	m := quota.NewManager(quota.Config{})
	e := quota.Entity{ClientID: quota.Named("c1")}
	require.NoError(t, m.Set(e, quota.ProducerByteRate, 1000))
	require.NoError(t, m.Set(e, quota.RequestPercentage, 10))
	assert.Equal(t, 10*time.Second, m.Record(quota.ProducerByteRate, "", "c1", 20000, t0))
	m.Remove(e, quota.ProducerByteRate)
	m.Remove(e, quota.ProducerByteRate) // twice: nothing
	assert.Zero(t, m.Record(quota.ProducerByteRate, "", "c1", 20000, t0))
	assert.Equal(t, []quota.EntityQuotas{{Entity: e, Quotas: map[quota.Key]float64{quota.RequestPercentage: 10}}}, m.Quotas())
	require.NoError(t, m.Set(e, quota.ProducerByteRate, 1000))
	assert.Zero(t, m.Record(quota.ProducerByteRate, "", "c1", 10000, t0), "the old bytes were forgotten")
	m.Remove(e, quota.ProducerByteRate)
	m.Remove(e, quota.RequestPercentage)
	assert.Empty(t, m.Quotas())
}

func TestManagerQuotasOrder(t *testing.T) {
	m := quota.NewManager(quota.Config{})
	for i := len(levels) - 1; i >= 0; i-- {
		require.NoError(t, m.Set(levels[i], quota.ProducerByteRate, float64(i+1)))
	}
	var got []string
	for _, eq := range m.Quotas() {
		got = append(got, eq.Entity.String())
	}
	assert.Equal(t, []string{
		"/config/users/<default>/clients/<default>",
		"/config/users/<default>/clients/\"c1\"",
		"/config/users/<default>",
		"/config/users/\"alice\"/clients/<default>",
		"/config/users/\"alice\"/clients/\"c1\"",
		"/config/users/\"alice\"",
		"/config/clients/<default>",
		"/config/clients/\"c1\"",
	}, got)
}

// What Kafka's ClientQuotaControlManager refuses.
func TestManagerSetInvalid(t *testing.T) {
	user := quota.Entity{User: quota.Named("alice")}
	for _, tc := range []struct {
		name   string
		entity quota.Entity
		key    quota.Key
		value  float64
	}{
		{"empty entity", quota.Entity{}, quota.ProducerByteRate, 1},
		{"empty user name", quota.Entity{User: quota.Named("")}, quota.ProducerByteRate, 1},
		{"default with a name", quota.Entity{User: quota.Component{Set: true, Default: true, Name: "x"}}, quota.ProducerByteRate, 1},
		{"name not set", quota.Entity{User: quota.Component{Name: "x"}, ClientID: quota.Named("c")}, quota.ProducerByteRate, 1},
		{"unknown key", user, "controller_mutation_rate", 1},
		{"zero", user, quota.ProducerByteRate, 0},
		{"negative", user, quota.RequestPercentage, -1},
		{"NaN", user, quota.RequestPercentage, math.NaN()},
		{"infinite", user, quota.RequestPercentage, math.Inf(1)},
		{"fractional byte rate", user, quota.ConsumerByteRate, 1.5},
		{"beyond a long", user, quota.ProducerByteRate, 1e19},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := quota.NewManager(quota.Config{})
			err := m.Set(tc.entity, tc.key, tc.value)
			assert.True(t, errors.Is(err, quota.ErrInvalid), "%v", err)
			assert.Empty(t, m.Quotas())
		})
	}
	m := quota.NewManager(quota.Config{})
	assert.NoError(t, m.Set(user, quota.RequestPercentage, 0.5), "a fractional percentage")
}

// Concurrent records, changes and listings (run with -race), leaving what
// the last changes made.
func TestManagerConcurrent(t *testing.T) {
	m := quota.NewManager(quota.Config{Samples: 2, Window: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			client := fmt.Sprintf("c%d", g)
			for i := range 500 {
				now := t0.Add(time.Duration(i) * 100 * time.Microsecond)
				switch i % 50 {
				case 0:
					assert.NoError(t, m.Set(quota.Entity{ClientID: quota.Named(client)}, quota.ProducerByteRate, 100))
				case 25:
					m.Remove(quota.Entity{ClientID: quota.Named(client)}, quota.ProducerByteRate)
				}
				m.Record(quota.ProducerByteRate, "alice", client, 10, now)
				m.Unrecord(quota.ProducerByteRate, "alice", client, 1, now)
				_ = m.Quotas()
			}
		})
	}
	wg.Wait()
	assert.Empty(t, m.Quotas(), "each client's last change removed its quota (i = 475)")
}

func TestThreadPercent(t *testing.T) {
	assert.InDelta(t, 1, quota.ThreadPercent(10*time.Millisecond), 1e-12)
	assert.InDelta(t, 100, quota.ThreadPercent(time.Second), 1e-12)
}
