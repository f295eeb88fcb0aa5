package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// kip103 is a broker with several listeners sharing one protocol and a
// control plane.
func kip103() config.Properties {
	return config.Properties{
		"listeners":                      "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9095",
		"advertised.listeners":           "CLIENT://kafka.example:19092,REPLICATION://10.0.0.1:9093,INTERNAL://127.0.0.1:9094,CONTROLLER://10.0.0.1:9095",
		"listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":     "REPLICATION",
		"control.plane.listener.name":    "CONTROLLER",
	}
}

func with(p config.Properties, kv ...string) config.Properties {
	out := config.Properties{}
	for k, v := range p {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(out, kv[i])
			continue
		}
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestResolveDefaults(t *testing.T) {
	c, err := config.Listeners(config.Properties{})
	require.NoError(t, err)
	require.Len(t, c.All, 1)
	l := c.All[0]
	assert.Equal(t, listener.Listener{
		Name: "PLAINTEXT", SecurityProtocol: protocolmap.Plaintext,
		Bind:        listener.EndPoint{Name: "PLAINTEXT", Port: 9092},
		Advertised:  listener.EndPoint{Name: "PLAINTEXT", Port: 9092},
		Plane:       protocolmap.DataPlane,
		InterBroker: true,
	}, l)
	assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), c.InterBrokerListener)
	assert.Equal(t, protocolmap.Plaintext, c.InterBrokerSecurityProtocol)
	assert.Empty(t, c.ControlPlaneListener)
	assert.Equal(t, protocolmap.Default(), c.SecurityProtocolMap)
}

func TestResolveKIP103(t *testing.T) {
	c, err := config.Listeners(kip103())
	require.NoError(t, err)
	type row struct {
		name, bind, adv string
		proto           protocolmap.SecurityProtocol
		plane           protocolmap.Plane
		inter           bool
	}
	var got []row
	for _, l := range c.All {
		got = append(got, row{string(l.Name), l.Bind.Address(), l.Advertised.Address(), l.SecurityProtocol, l.Plane, l.InterBroker})
	}
	assert.Equal(t, []row{
		{"CLIENT", "127.0.0.1:9092", "kafka.example:19092", protocolmap.SASLPlaintext, protocolmap.DataPlane, false},
		{"REPLICATION", "127.0.0.1:9093", "10.0.0.1:9093", protocolmap.Plaintext, protocolmap.DataPlane, true},
		{"INTERNAL", "127.0.0.1:9094", "127.0.0.1:9094", protocolmap.Plaintext, protocolmap.DataPlane, false},
		{"CONTROLLER", "127.0.0.1:9095", "10.0.0.1:9095", protocolmap.Plaintext, protocolmap.ControlPlane, false},
	}, got)
	assert.Equal(t, protocolmap.ListenerName("CONTROLLER"), c.ControlPlaneListener)
	assert.Equal(t, protocolmap.ListenerName("REPLICATION"), c.InterBrokerListener)

	l, ok := c.Listener("replication")
	require.True(t, ok)
	assert.True(t, l.InterBroker)
	_, ok = c.Listener("nope")
	assert.False(t, ok)
	assert.Len(t, c.AdvertisedEndPoints(), 4)
}

func TestResolveValid(t *testing.T) {
	tests := []struct {
		name  string
		props config.Properties
		check func(t *testing.T, c *listener.Set)
	}{
		{"IPv4 and IPv6 literal share a port",
			config.Properties{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092"}, nil},
		{"names are case-insensitive",
			config.Properties{"listeners": "plaintext://localhost:9091,SsL://localhost:9092"},
			func(t *testing.T, c *listener.Set) {
				assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), c.All[0].Name)
				assert.Equal(t, protocolmap.ListenerName("SSL"), c.All[1].Name)
			}},
		{"port 0 may repeat",
			config.Properties{"listeners": "PLAINTEXT://localhost:0,SSL://localhost:0"}, nil},
		{"advertised listeners may share a port",
			config.Properties{"listeners": "PLAINTEXT://:9092,SSL://:9093", "advertised.listeners": "PLAINTEXT://lb:9000,SSL://lb:9000"}, nil},
		{"advertised subset leaves a listener unadvertised",
			config.Properties{"listeners": "PLAINTEXT://:9092,SSL://:9093", "advertised.listeners": "PLAINTEXT://a:9092"},
			func(t *testing.T, c *listener.Set) {
				ssl, _ := c.Listener("SSL")
				assert.False(t, ssl.IsAdvertised())
				assert.Len(t, c.AdvertisedEndPoints(), 1)
			}},
		{"inter-broker listener from security.inter.broker.protocol",
			config.Properties{"listeners": "PLAINTEXT://:9092,SSL://:9093", "security.inter.broker.protocol": "SSL"},
			func(t *testing.T, c *listener.Set) {
				assert.Equal(t, protocolmap.ListenerName("SSL"), c.InterBrokerListener)
				assert.Equal(t, protocolmap.SSL, c.InterBrokerSecurityProtocol)
			}},
		{"inter-broker listener name, lower case",
			config.Properties{"listeners": "A://:9092,B://:9093", "listener.security.protocol.map": "A:SSL,B:SASL_SSL", "inter.broker.listener.name": "b"},
			func(t *testing.T, c *listener.Set) {
				assert.Equal(t, protocolmap.ListenerName("B"), c.InterBrokerListener)
				assert.Equal(t, protocolmap.SASLSSL, c.InterBrokerSecurityProtocol)
				assert.True(t, c.All[1].InterBroker)
				assert.False(t, c.All[0].InterBroker)
			}},
		{"values are trimmed",
			config.Properties{"listeners": "  PLAINTEXT://:9092 , SSL://:9093 ", "security.inter.broker.protocol": " SSL "},
			func(t *testing.T, c *listener.Set) {
				assert.Len(t, c.All, 2)
				assert.Equal(t, protocolmap.ListenerName("SSL"), c.InterBrokerListener)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Listeners(tt.props)
			require.NoError(t, err)
			if tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	tests := []struct {
		name     string
		props    config.Properties
		key      string
		sentinel error
		rule     string
	}{
		{"unknown protocol in map", with(kip103(), "listener.security.protocol.map", "CLIENT:TLS"),
			"listener.security.protocol.map", protocolmap.ErrUnknownSecurityProtocol, "Invalid security protocol `TLS` defined in listener.security.protocol.map"},
		{"duplicate map key", with(kip103(), "listener.security.protocol.map", "CLIENT:SSL,client:SSL"),
			"listener.security.protocol.map", protocolmap.ErrDuplicateKey, "more than once"},
		{"listener not in map", with(kip103(), "listener.security.protocol.map", "CLIENT:SSL,REPLICATION:SSL,INTERNAL:SSL"),
			"listeners", listener.ErrNoSecurityProtocol, "No security protocol defined for listener CONTROLLER"},
		{"empty map", config.Properties{"listener.security.protocol.map": ""},
			"listeners", listener.ErrNoSecurityProtocol, "No security protocol defined for listener PLAINTEXT"},
		{"bad endpoint", config.Properties{"listeners": "PLAINTEXT://localhost"},
			"listeners", listener.ErrInvalidEndPoint, "Unable to parse PLAINTEXT://localhost to a broker endpoint"},
		{"negative port", config.Properties{"listeners": "PLAINTEXT://localhost:-1"},
			"listeners", listener.ErrInvalidEndPoint, "out of range"},
		{"duplicate listener name", config.Properties{"listeners": "PLAINTEXT://a:9092,plaintext://b:9093"},
			"listeners", listener.ErrDuplicateName, "Each listener must have a different name, listeners: PLAINTEXT://a:9092,plaintext://b:9093"},
		{"duplicate port, host names", config.Properties{"listeners": "PLAINTEXT://localhost:9092,SSL://localhost:9092"},
			"listeners", listener.ErrDuplicatePort, "Each listener must have a different port, listeners: PLAINTEXT://localhost:9092,SSL://localhost:9092"},
		{"duplicate port, wildcard hosts", config.Properties{"listeners": "PLAINTEXT://:9092,SSL://:9092"},
			"listeners", listener.ErrDuplicatePort, "Each listener must have a different port"},
		{"two IPv6 on one port", config.Properties{"listeners": "PLAINTEXT://[::1]:9092,SSL://[::1]:9092"},
			"listeners", listener.ErrDuplicatePort, "If you have two listeners on the same port then one needs to be IPv4 and the other IPv6"},
		{"two IPv4 on one port", config.Properties{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.2:9092"},
			"listeners", listener.ErrDuplicatePort, "one needs to be IPv4 and the other IPv6, listeners: PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.2:9092, port: 9092"},
		{"IPv4, IPv6 and a wildcard on one port", config.Properties{"listeners": "SSL://[::1]:9096,PLAINTEXT://127.0.0.1:9096,SASL_SSL://:9096"},
			"listeners", listener.ErrDuplicatePort, "one needs to be IPv4 and the other IPv6"},
		{"host name and IPv6 on one port", config.Properties{"listeners": "PLAINTEXT://apache.org:9092,SSL://[::1]:9092"},
			"listeners", listener.ErrDuplicatePort, "Each listener must have a different port unless exactly one listener has an IPv4 address and the other IPv6 address"},
		{"three IP literals on one port", config.Properties{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092,SASL_SSL://127.0.0.2:9092"},
			"listeners", listener.ErrDuplicatePort, "unless exactly one listener has an IPv4 address"},
		{"advertised name not a listener", config.Properties{"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://a:9092,SSL://a:9093"},
			"advertised.listeners", listener.ErrNotAdvertised, "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. Found PLAINTEXT,SSL. The valid options based on the current configuration are PLAINTEXT"},
		{"duplicate advertised name", config.Properties{"advertised.listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9092"},
			"advertised.listeners", listener.ErrDuplicateName, "Each listener must have a different name"},
		{"advertised 0.0.0.0", config.Properties{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
			"advertised.listeners", listener.ErrNonRoutable, "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."},
		{"listeners 0.0.0.0 without advertised.listeners", config.Properties{"listeners": "PLAINTEXT://0.0.0.0:9092"},
			"advertised.listeners", listener.ErrNonRoutable, "nonroutable meta-address 0.0.0.0"},
		{"no listeners", config.Properties{"listeners": ""},
			"advertised.listeners", listener.ErrNotAdvertised, "There must be at least one broker advertised listener."},
		{"inter-broker name and protocol both set", with(kip103(), "security.inter.broker.protocol", "SSL"),
			"security.inter.broker.protocol", listener.ErrConflictingKeys, "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."},
		{"inter-broker name and protocol set to its default", with(kip103(), "security.inter.broker.protocol", "PLAINTEXT"),
			"security.inter.broker.protocol", listener.ErrConflictingKeys, "Only one of"},
		{"inter-broker name not in map", with(kip103(), "inter.broker.listener.name", "BOGUS"),
			"inter.broker.listener.name", listener.ErrNoSecurityProtocol, "Listener with name BOGUS defined in inter.broker.listener.name not found in listener.security.protocol.map."},
		{"inter-broker listener not advertised", with(kip103(), "advertised.listeners", "CLIENT://a:1,CONTROLLER://a:2"),
			"inter.broker.listener.name", listener.ErrNotAdvertised, "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are CLIENT,CONTROLLER"},
		{"default inter-broker listener absent", config.Properties{"listeners": "SSL://:9093"},
			"security.inter.broker.protocol", listener.ErrNotAdvertised, "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are SSL"},
		{"inter-broker protocol unknown", config.Properties{"security.inter.broker.protocol": "TLS"},
			"security.inter.broker.protocol", protocolmap.ErrUnknownSecurityProtocol, "String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"},
		{"inter-broker protocol in lower case", config.Properties{"security.inter.broker.protocol": "plaintext"},
			"security.inter.broker.protocol", protocolmap.ErrUnknownSecurityProtocol, "String must be one of"},
		{"blank inter-broker listener name", with(kip103(), "inter.broker.listener.name", " "),
			"inter.broker.listener.name", protocolmap.ErrBlankListenerName, "null or empty"},
		{"blank control-plane listener name", with(kip103(), "control.plane.listener.name", ""),
			"control.plane.listener.name", protocolmap.ErrBlankListenerName, "null or empty"},
		{"control plane not in map", with(kip103(), "control.plane.listener.name", "ADMIN"),
			"control.plane.listener.name", listener.ErrNoSecurityProtocol, "Listener with ADMIN defined in control.plane.listener.name not found in listener.security.protocol.map."},
		{"control plane not advertised", with(kip103(), "advertised.listeners", "CLIENT://a:1,REPLICATION://a:2"),
			"control.plane.listener.name", listener.ErrNotAdvertised, "control.plane.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are CLIENT,REPLICATION"},
		{"control plane is the inter-broker listener", with(kip103(), "control.plane.listener.name", "replication"),
			"control.plane.listener.name", listener.ErrSameListener, "control.plane.listener.name, when defined, should have a different value from the inter broker listener name. Currently they both have the value REPLICATION"},
		{"control plane is the default inter-broker listener", config.Properties{"listeners": "PLAINTEXT://:9092,SSL://:9093", "control.plane.listener.name": "PLAINTEXT"},
			"control.plane.listener.name", listener.ErrSameListener, "Currently they both have the value PLAINTEXT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Listeners(tt.props)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, tt.sentinel)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.key, ce.Key, "the error must name the offending key")
			assert.Contains(t, ce.Rule, tt.rule)
			assert.Contains(t, err.Error(), tt.key)
			if v, ok := tt.props[tt.key]; ok {
				assert.Equal(t, strings.TrimSpace(v), ce.Value, "the error must carry the value given")
			}
		})
	}
}

func TestListenerValue(t *testing.T) {
	props := with(kip103(),
		"num.network.threads", "3",
		"listener.name.client.num.network.threads", "5",
		"listener.name.CLIENT.max.connections", "7", // upper case prefix: not applied, as in Kafka
		"listener.name.internal.num.network.threads", "x",
	)
	_, err := config.Listeners(props)
	require.NoError(t, err)

	v, from, ok := props.ListenerValue("CLIENT", "num.network.threads")
	assert.True(t, ok)
	assert.Equal(t, "5", v)
	assert.Equal(t, "listener.name.client.num.network.threads", from)

	v, from, ok = props.ListenerValue("REPLICATION", "num.network.threads")
	assert.True(t, ok)
	assert.Equal(t, "3", v)
	assert.Equal(t, "num.network.threads", from)

	_, _, ok = props.ListenerValue("CLIENT", "max.connections")
	assert.False(t, ok)

	n, err := props.ListenerInt("CLIENT", "num.network.threads", 3, 1)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	n, err = props.ListenerInt("CLIENT", "max.connections", 1<<31-1, 0)
	require.NoError(t, err)
	assert.Equal(t, 1<<31-1, n)

	_, err = props.ListenerInt("INTERNAL", "num.network.threads", 3, 1)
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "listener.name.internal.num.network.threads", ce.Key)
	assert.Equal(t, "x", ce.Value)

	_, err = props.Int("num.network.threads", 3, 4)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "num.network.threads", ce.Key)
	assert.Contains(t, ce.Rule, "at least 4")
	n, err = props.Int("queued.max.requests", 500, 1)
	require.NoError(t, err)
	assert.Equal(t, 500, n)
}

func TestProperties(t *testing.T) {
	p, err := config.ParseProperties([]byte(`# a comment
! another comment
listeners = PLAINTEXT://:9092,\
    SSL://:9093
advertised.listeners:PLAINTEXT://a:9092
inter.broker.listener.name PLAINTEXT
ssl.key.password=p\u00e4ss\tword
empty=
expand=${listeners}
`))
	require.NoError(t, err)
	assert.Equal(t, config.Properties{
		"listeners":                  "PLAINTEXT://:9092,SSL://:9093",
		"advertised.listeners":       "PLAINTEXT://a:9092",
		"inter.broker.listener.name": "PLAINTEXT",
		"ssl.key.password":           "p\u00e4ss\tword",
		"empty":                      "",
		"expand":                     "${listeners}",
	}, p)

	over, err := p.With("listeners=SSL://:1", "new.key = v")
	require.NoError(t, err)
	assert.Equal(t, "SSL://:1", over["listeners"])
	assert.Equal(t, " v", over["new.key"])
	assert.Equal(t, "PLAINTEXT://:9092,SSL://:9093", p["listeners"], "With must not change its receiver")
	_, err = p.With("novalue")
	assert.Error(t, err)

	_, err = config.Load("testdata/does-not-exist.properties")
	assert.Error(t, err)
}
