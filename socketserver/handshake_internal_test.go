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
	timeouts := func(props map[string]string) map[string]time.Duration {
		t.Helper()
		// The configuration package reads these keys (and imports this
		// one); here the listeners are built in code and the settings
		// read as it reads them.
		lc := loopbackSet("PLAINTEXT", "INTERNAL")
		lc.InterBrokerListener = "INTERNAL"
		lc.All[0].InterBroker, lc.All[1].InterBroker = false, true
		lc.SetProperties(props)
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
	assert.Equal(t, map[string]time.Duration{"PLAINTEXT": 2500 * time.Millisecond, "INTERNAL": 4 * time.Second}, timeouts(map[string]string{
		"kafkanet.handshake.timeout.ms":                        "2500",
		"listener.name.internal.kafkanet.handshake.timeout.ms": "4000",
	}))

	// A host that fills Config itself, without Security, gets the default.
	srv, err := New(Config{Listeners: loopbackSet("PLAINTEXT")})
	require.NoError(t, err)
	defer srv.Close()
	assert.Equal(t, 10*time.Second, srv.listeners[0].sec.timeout)
}

// loopbackSet builds in code the Set of PLAINTEXT listeners with the
// given names on 127.0.0.1 port 0, the first the inter-broker listener.
func loopbackSet(names ...protocolmap.ListenerName) *listener.Set {
	s := &listener.Set{InterBrokerListener: names[0]}
	for i, n := range names {
		ep := listener.EndPoint{Name: n, Host: "127.0.0.1", SecurityProtocol: protocolmap.Plaintext}
		s.All = append(s.All, listener.Listener{Name: n, SecurityProtocol: protocolmap.Plaintext, Bind: ep, Advertised: ep, InterBroker: i == 0})
	}
	return s
}
