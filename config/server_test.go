package config_test

import (
	"testing"

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
			props := listener.Properties{
				"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
				tc.key:      tc.value,
			}
			lc, err := listener.Resolve(props)
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
// zero or negative, which sets no floor (-1); a value that is no integer
// is refused with the key named.
func TestRequestMinByteRateKey(t *testing.T) {
	for _, tc := range []struct {
		value string // "": unset
		want  int64
	}{
		{"", socketserver.DefaultRequestMinByteRate},
		{"4096", 4096},
		{"1", 1},
		{"0", -1},
		{"-1", -1},
		{"fast", 0},
		{"1.5", 0},
	} {
		t.Run(tc.value, func(t *testing.T) {
			props := listener.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
			if tc.value != "" {
				props[config.KeyRequestMinByteRate] = tc.value
			}
			cfg, err := config.Server(props)
			if tc.want == 0 {
				var ce *protocolmap.ConfigError
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
