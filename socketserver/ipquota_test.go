package socketserver_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// requireHeldThenClosed asserts that a connection over its address's
// creation rate is held, then closed without a response, and returns how
// long that took.
func requireHeldThenClosed(t testing.TB, srv *socketserver.Server, source string) time.Duration {
	t.Helper()
	c := dialFrom(t, srv, "PLAINTEXT", source)
	start := time.Now()
	requireClosedNoResponse(t, c)
	return time.Since(start)
}

// Kafka's connection_creation_rate quota of the ips entity has a default
// and per-address overrides (ConnectionQuotas.connectionRateForIp: the
// override, else the default). kafkanet.ip.connection.creation.rate is the
// default, kafkanet.ip.connection.creation.rate.overrides the overrides: an
// override raises or lowers one address's rate, 0 admits none of its
// connections (held for one window, then closed, as Kafka caps the infinite
// throttle time), and 2147483647 exempts it.
func TestIPConnectionCreationRateOverrides(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"kafkanet.ip.connection.creation.rate":           "1",
		"kafkanet.ip.connection.creation.rate.overrides": "127.0.0.5:2, 127.0.0.6:0, 127.0.0.7:2147483647",
		"quota.window.num":                               "2", // a burst is measured over one 1 s window
	}, withAPIs, answerAll)
	for _, tc := range []struct {
		source string
		rate   int
	}{{"127.0.0.8", 1}, {"127.0.0.5", 2}} {
		for i := range tc.rate {
			c := dialFrom(t, srv, "PLAINTEXT", tc.source)
			require.True(t, served(t, c, int32(i), 5*time.Second), "%s: connection %d of %d", tc.source, i+1, tc.rate)
		}
		held := requireHeldThenClosed(t, srv, tc.source)
		assert.Less(t, held, 1500*time.Millisecond, "%s: held at most a window", tc.source)
	}
	held := requireHeldThenClosed(t, srv, "127.0.0.6")
	assert.InDelta(t, 1000, held.Milliseconds(), 300, "a rate of 0 holds the connection for a window")
	for i := range 6 {
		c := dialFrom(t, srv, "PLAINTEXT", "127.0.0.7")
		require.True(t, served(t, c, int32(i), 5*time.Second), "the exempt address was throttled")
	}
}

// SetConnectionQuotas changes the per-address creation rates while the server runs,
// and a change applies to the next connection. As Kafka's
// ConnectionQuotas.updateIpConnectionRateQuota changes the bound of the
// address's existing rate sensor, the connections it recorded still count
// against the new rate; and as Kafka records an address's connections only
// while a rate limits it (recordIpConnectionMaybeThrottle), connections made
// while it was unlimited do not. With Kafka's 11 windows of 1 s a burst is
// measured over 10 s: a rate of 1 admits 10, a rate of 2 admits 20.
func TestSetQuotasChangesIPConnectionCreationRates(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, answerAll)
	q := socketserver.DefaultConnectionQuotas()
	limited, unlimited := "127.0.0.9", "127.0.0.10"
	admit := func(source string, n int) {
		t.Helper()
		for i := range n {
			c := dialFrom(t, srv, "PLAINTEXT", source)
			require.True(t, served(t, c, int32(i), 5*time.Second), "%s: connection %d of %d", source, i+1, n)
		}
	}

	q.IPConnectionCreationRateOverrides = map[netip.Addr]int{netip.MustParseAddr(limited): 1}
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	admit(unlimited, 3) // an address without an override is not limited
	admit(limited, 10)
	requireHeldThenClosed(t, srv, limited)

	// Raised to 2 per second: the 10 connections recorded still count, so
	// 10 more are admitted, not 20; the unlimited address's 3 were not
	// recorded, so at 1 per second it is admitted 10.
	q.IPConnectionCreationRateOverrides = map[netip.Addr]int{
		netip.MustParseAddr(limited):   2,
		netip.MustParseAddr(unlimited): 1,
	}
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	admit(limited, 10)
	requireHeldThenClosed(t, srv, limited)
	admit(unlimited, 10)
	requireHeldThenClosed(t, srv, unlimited)

	// Removing the override brings back the default, unlimited here.
	q.IPConnectionCreationRateOverrides = nil
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	admit(limited, 3)

	q.IPConnectionCreationRateOverrides = map[netip.Addr]int{netip.MustParseAddr(limited): -1}
	assert.ErrorIs(t, srv.SetConnectionQuotas(context.Background(), q), socketserver.ErrInvalidConnectionQuotas)
	q.IPConnectionCreationRateOverrides = map[netip.Addr]int{{}: 1}
	assert.ErrorIs(t, srv.SetConnectionQuotas(context.Background(), q), socketserver.ErrInvalidConnectionQuotas)
}

// kafkanet.ip.connection.creation.rate.overrides is address:rate,... with
// the syntax of max.connections.per.ip.overrides; bad entries name the key.
func TestIPConnectionCreationRateOverridesConfig(t *testing.T) {
	read := func(v string) (*socketserver.ConnectionQuotas, error) {
		cfg, err := config.Server(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0",
			config.KeyIPConnectionCreationRateOverrides: v})
		return cfg.ConnectionQuotas, err
	}
	q, err := read(" 127.0.0.1:5, ::1:0 ,[2001:db8::7]:9,::ffff:10.0.0.1:2147483647,fe80::1%eth0:3 ")
	require.NoError(t, err)
	assert.Equal(t, map[netip.Addr]int{
		netip.MustParseAddr("127.0.0.1"):   5,
		netip.MustParseAddr("::1"):         0,
		netip.MustParseAddr("2001:db8::7"): 9,
		netip.MustParseAddr("10.0.0.1"):    socketserver.Unlimited,
		netip.MustParseAddr("fe80::1"):     3,
	}, q.IPConnectionCreationRateOverrides)
	q, err = read("")
	require.NoError(t, err)
	assert.Empty(t, q.IPConnectionCreationRateOverrides)

	for _, bad := range []string{
		"broker.example.com:3",         // a host name
		"127.0.0.1:x",                  // not a number
		"127.0.0.1:-1",                 // negative
		"127.0.0.1:2147483648",         // over Int.MaxValue
		"127.0.0.1",                    // no rate
		"::1:1,0:0:0:0:0:0:0:1:2",      // one address twice
		"10.0.0.1:1,::ffff:10.0.0.1:2", // one address twice
		"127.0.0.1:1,,127.0.0.2:1",     // an empty entry
		"127.0.0.1:1,127.0.0.1:1",      // a repeated entry
		"300.0.0.1:1",                  // not an address
		"127.0.0.0/8:1",                // a prefix
	} {
		_, err := read(bad)
		var ce *config.Error
		require.ErrorAs(t, err, &ce, "%q", bad)
		assert.Equal(t, config.KeyIPConnectionCreationRateOverrides, ce.Key, "%q", bad)
	}
}
