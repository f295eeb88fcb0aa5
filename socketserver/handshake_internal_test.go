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

// A host that fills Config itself, without Security, gets the default
// handshake timeout (TestHandshakeTimeoutKeyAndDefault reads the key).
func TestHandshakeTimeoutDefault(t *testing.T) {
	srv, err := New(Config{Listeners: loopbackSet("PLAINTEXT")})
	require.NoError(t, err)
	defer srv.Close()
	assert.Equal(t, security.DefaultHandshakeTimeout, srv.listeners[0].sec.timeout)
	assert.Equal(t, 10*time.Second, security.DefaultHandshakeTimeout)
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
