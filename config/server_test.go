package config_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Configuration is parsed once: Server reads the keys, and
// socketserver.New consumes the typed values it returned (or a host's) and
// reads no property. Keys that Server refuses do not reach New.
func TestNewReadsNoProperty(t *testing.T) {
	for _, tc := range []struct {
		key, value string
	}{
		{"socket.request.max.bytes", "nonsense"},
		{"num.network.threads", "0"},
		{"queued.max.request.bytes", "1"},
		{"max.connections", "-5"},
		{"listener.name.sasl_plaintext.sasl.enabled.mechanisms", ""},
		{"listener.name.sasl_plaintext.connections.max.reauth.ms", "soon"},
		{"kafkanet.proxy.protocol", "required"}, // without trusted networks
		{"listener.name.plaintext.kafkanet.proxy.protocol.trusted.networks", "10.0.0.0/99"},
		{config.KeyRequestMinByteRate, "fast"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			props := config.Properties{
				"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
				tc.key:      tc.value,
			}
			lc, err := config.Listeners(props)
			require.NoError(t, err)
			_, err = config.Server(props)
			require.Error(t, err, "Server refuses %s=%q", tc.key, tc.value)

			users, err := sasl.NewUsers(map[string]string{"alice": "alice-secret"})
			require.NoError(t, err)
			srv, err := socketserver.New(socketserver.Config{Listeners: lc,
				PerListener: map[protocolmap.ListenerName]*socketserver.ListenerConfig{
					"SASL_PLAINTEXT": {Security: security.Settings{EnabledMechanisms: []string{"PLAIN"}}},
				},
				Credentials: users,
			})
			require.NoError(t, err, "New reads no property")
			assert.NoError(t, srv.Close())
		})
	}
}

// kafkanet.request.min.byte.rate is the floor of a request still
// arriving, in bytes a second: Kafka's behaviour (every byte counts) is
// -1, which sets no floor; 0, which once meant the same, and a value that
// is no integer are refused with the key named.
func TestRequestMinByteRateKey(t *testing.T) {
	for _, tc := range []struct {
		value string // "": unset
		want  int
	}{
		{"", socketserver.DefaultRequestMinByteRate},
		{"4096", 4096},
		{"1", 1},
		{"-1", -1},
		{"0", 0},
		{"-2", 0},
		{"fast", 0},
		{"1.5", 0},
	} {
		t.Run(tc.value, func(t *testing.T) {
			props := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
			if tc.value != "" {
				props[config.KeyRequestMinByteRate] = tc.value
			}
			cfg, err := config.Server(props)
			if tc.want == 0 {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, config.KeyRequestMinByteRate, ce.Key)
				assert.Equal(t, tc.value, ce.Value)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, cfg.RequestMinByteRate)
		})
	}
}

// The keys of kafkanet's own that turn a feature off take -1 for off and
// refuse 0, which has no literal meaning for them, with an error that
// says to use -1 (docs/configuration.md); unset is the default.
func TestKafkanetKeysOffIsMinusOne(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		want       func(socketserver.Config) bool
		refused    bool
	}{
		{key: config.KeyRequestStallMs, want: func(c socketserver.Config) bool {
			return c.RequestStallTimeout == socketserver.DefaultRequestStallTimeout
		}},
		{key: config.KeyRequestStallMs, value: "-1", want: func(c socketserver.Config) bool { return c.RequestStallTimeout < 0 }},
		{key: config.KeyRequestStallMs, value: "250", want: func(c socketserver.Config) bool { return c.RequestStallTimeout == 250*time.Millisecond }},
		{key: config.KeyRequestStallMs, value: "0", refused: true},
		{key: config.KeyRequestStallMs, value: "-5", refused: true},
		{key: config.KeyRequestMinByteRate, value: "-1", want: func(c socketserver.Config) bool { return c.RequestMinByteRate < 0 }},
		{key: config.KeyRequestMinByteRate, value: "0", refused: true},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			props := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
			if tc.value != "" {
				props[tc.key] = tc.value
			}
			cfg, err := config.Server(props)
			if tc.refused {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.key, ce.Key)
				assert.Equal(t, tc.value, ce.Value)
				assert.ErrorIs(t, err, listener.ErrInvalidValue)
				if tc.value == "0" {
					assert.Contains(t, err.Error(), "-1")
				}
				return
			}
			require.NoError(t, err)
			assert.True(t, tc.want(cfg), "%+v", cfg)
		})
	}
}

// Byte sizes are ints; the keys that bound a frame are Kafka ints, at
// most math.MaxInt32, and a larger value is refused with the key named
// (it was cut down to math.MaxInt32 before).
func TestFrameSizeKeys(t *testing.T) {
	for _, key := range []string{config.KeySocketRequestMaxBytes, config.KeySASLServerMaxReceiveSize} {
		for _, tc := range []struct {
			value   string
			want    int
			refused bool
		}{
			{value: "2147483647", want: math.MaxInt32},
			{value: "1", want: 1},
			{value: "2147483648", refused: true},
			{value: "0", refused: true},
		} {
			t.Run(key+"="+tc.value, func(t *testing.T) {
				cfg, err := config.Server(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", key: tc.value})
				if tc.refused {
					var ce *config.Error
					require.ErrorAs(t, err, &ce)
					assert.Equal(t, key, ce.Key)
					return
				}
				require.NoError(t, err)
				got := cfg.RequestMaxBytes
				if key == config.KeySASLServerMaxReceiveSize {
					got = cfg.SASLMaxReceiveSize
				}
				assert.Equal(t, tc.want, got)
			})
		}
	}
	lc, err := config.Listeners(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, err)
	for _, c := range []socketserver.Config{
		{Listeners: lc, RequestMaxBytes: math.MaxInt32 + 1},
		{Listeners: lc, SASLMaxReceiveSize: math.MaxInt32 + 1},
		{Listeners: lc, SASLMaxReceiveSize: -1},
	} {
		_, err := socketserver.New(c)
		assert.Error(t, err, "New checks Kafka's frame limit on a value built in code")
	}
}

// The keys Kafka types INT take at most math.MaxInt32, as Kafka's parser
// does: a queued.max.requests of 3e9 made a channel of that size, and
// num.network.threads as many processors. Its LONG keys take 64 bits.
func TestIntKeysAre32Bit(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		refused    string // the rule, when refused
		is         error  // the sentinel wrapped, when refused; nil: listener.ErrInvalidValue
	}{
		{key: config.KeyQueuedMaxRequests, value: "3000000000", refused: "32-bit integer, at most 2147483647"},
		{key: config.KeyQueuedMaxRequests, value: "2147483647"},
		{key: config.KeyNumIOThreads, value: "2147483648", refused: "32-bit"},
		{key: "listener.name.plaintext." + config.KeyNumNetworkThreads, value: "4294967296", refused: "32-bit"},
		{key: config.KeyNumNetworkThreads, value: "4294967296", refused: "32-bit"},
		{key: config.KeySocketSendBufferBytes, value: "2147483648", refused: "32-bit"},
		{key: config.KeySocketReceiveBufferBytes, value: "2147483648", refused: "32-bit"},
		{key: config.KeyMaxConnections, value: "99999999999", refused: "32-bit"},
		{key: "listener.name.plaintext." + config.KeyMaxConnections, value: "99999999999", refused: "32-bit"},
		{key: config.KeyMaxConnectionsPerIP, value: "99999999999", refused: "32-bit"},
		{key: config.KeyMaxConnectionsPerIPOverrides, value: "127.0.0.1:3000000000", refused: "32-bit", is: socketserver.ErrInvalidConnectionQuotas},
		{key: config.KeyMaxConnectionCreationRate, value: "99999999999", refused: "32-bit"},
		{key: config.KeyQuotaWindowNum, value: "2147483648", refused: "32-bit"},
		{key: config.KeyConnectionFailedAuthenticationDelayMs, value: "2147483648", refused: "32-bit"},
		{key: config.KeyMaxConnectionsPerPrincipal, value: "3000000000", refused: "32-bit"}, // as its overrides and max.connections
		{key: config.KeyConnectionsMaxIdleMs, value: "3000000000"},                          // a LONG
		{key: config.KeyConnectionsMaxIdleMs, value: "99999999999999999999", refused: "64-bit integer"},
		{key: config.KeyQueuedMaxRequests, value: "many", refused: "Expected value to be an integer"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			_, err := config.Server(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0", tc.key: tc.value})
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			if tc.is == nil {
				tc.is = listener.ErrInvalidValue
			}
			require.ErrorIs(t, err, tc.is)
			assert.Equal(t, tc.key, ce.Key)
			assert.Equal(t, tc.value, ce.Value)
			assert.Contains(t, ce.Rule, tc.refused)
		})
	}
}

// connection.failed.authentication.delay.ms, read by Server: 0 (no delay)
// becomes socketserver.Config's -1.
func TestFailedAuthenticationDelay(t *testing.T) {
	tests := []struct {
		name   string
		kv     []string
		want   time.Duration
		errKey string
		msg    string
	}{
		{name: "defaults", want: 100 * time.Millisecond},
		{name: "zero", kv: []string{"connection.failed.authentication.delay.ms", "0"}, want: -1},
		{name: "set", kv: []string{"connection.failed.authentication.delay.ms", "2500"}, want: 2500 * time.Millisecond},
		{name: "idle off", kv: []string{"connection.failed.authentication.delay.ms", "700000", "connections.max.idle.ms", "-1"}, want: 700 * time.Second},
		{name: "not less than the default idle", kv: []string{"connection.failed.authentication.delay.ms", "600000"}, errKey: "connection.failed.authentication.delay.ms",
			msg: "connection.failed.authentication.delay.ms=600000 should always be less than connections.max.idle.ms=600000 to prevent failed authentication responses from timing out"},
		{name: "idle below the default delay", kv: []string{"connections.max.idle.ms", "50"}, errKey: "connection.failed.authentication.delay.ms",
			msg: "connection.failed.authentication.delay.ms=100 should always be less than connections.max.idle.ms=50"},
		{name: "idle zero", kv: []string{"connection.failed.authentication.delay.ms", "0", "connections.max.idle.ms", "0"}, errKey: "connection.failed.authentication.delay.ms"},
		{name: "negative delay", kv: []string{"connection.failed.authentication.delay.ms", "-1"}, errKey: "connection.failed.authentication.delay.ms", msg: "at least 0"},
		{name: "delay not a number", kv: []string{"connection.failed.authentication.delay.ms", "1s"}, errKey: "connection.failed.authentication.delay.ms"},
		{name: "idle not a number", kv: []string{"connections.max.idle.ms", "never"}, errKey: "connections.max.idle.ms", msg: "integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			props := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
			for i := 0; i+1 < len(tt.kv); i += 2 {
				props[tt.kv[i]] = tt.kv[i+1]
			}
			c, err := config.Server(props)
			if tt.errKey != "" {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.errKey, ce.Key)
				require.ErrorIs(t, err, listener.ErrInvalidValue)
				assert.Contains(t, err.Error(), tt.msg)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, c.FailedAuthenticationDelay)
		})
	}
}
