package socketserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// kafkanet.handshake.timeout.ms, a key of this library's (Kafka bounds the
// TLS handshake and SASL exchange only by connections.max.idle.ms), defaults
// to 10 s, whether the host reads the properties or fills Config itself;
// set, it applies per listener. TestHandshakeTimeout and
// TestHandshakeBoundedByIdleAndHandshakeTimeout show it at work.
func TestHandshakeTimeoutKeyAndDefault(t *testing.T) {
	timeouts := func(props listener.Properties) map[string]time.Duration {
		t.Helper()
		all := listener.Properties{
			"listeners":                      "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
			"inter.broker.listener.name":     "INTERNAL",
		}
		for k, v := range props {
			all[k] = v
		}
		// The configuration package reads these keys (and imports this
		// one); here the settings are read as it reads them.
		lc, err := listener.Resolve(all)
		require.NoError(t, err)
		cfg := Config{Listeners: lc, PerListener: map[protocolmap.ListenerName]*ListenerConfig{}}
		for _, l := range lc.All {
			sec, err := security.ForListener(lc, l.Name)
			require.NoError(t, err)
			cfg.PerListener[l.Name] = &ListenerConfig{Security: sec}
		}
		srv, err := New(cfg)
		require.NoError(t, err)
		defer srv.Close()
		out := map[string]time.Duration{}
		for _, ls := range srv.listeners {
			out[string(ls.cfg.Name)] = ls.sec.timeout
		}
		return out
	}
	assert.Equal(t, "kafkanet.handshake.timeout.ms", security.KeyHandshakeTimeoutMs)
	assert.Equal(t, map[string]time.Duration{"PLAINTEXT": 10 * time.Second, "INTERNAL": 10 * time.Second}, timeouts(nil), "the default")
	assert.Equal(t, map[string]time.Duration{"PLAINTEXT": 2500 * time.Millisecond, "INTERNAL": 4 * time.Second}, timeouts(listener.Properties{
		"kafkanet.handshake.timeout.ms":                        "2500",
		"listener.name.internal.kafkanet.handshake.timeout.ms": "4000",
	}))

	// A host that fills Config itself, without Security, gets the default.
	lc, err := listener.Resolve(listener.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, err)
	srv, err := New(Config{Listeners: lc})
	require.NoError(t, err)
	defer srv.Close()
	assert.Equal(t, 10*time.Second, srv.listeners[0].sec.timeout)
}
