package listener_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// codeListener builds a listener as a host would in code, bound and
// advertised at host:port.
func codeListener(name string, p protocolmap.SecurityProtocol, host string, port int) listener.Listener {
	ep := listener.EndPoint{Name: protocolmap.ListenerName(name), Host: host, Port: port, SecurityProtocol: p}
	return listener.Listener{Name: ep.Name, SecurityProtocol: p, Bind: ep, Advertised: ep}
}

// A Config built in code is held to Resolve's rules (Kafka's
// KafkaConfig/SocketServerConfigs validation), and its fields must agree
// with each other.
func TestValidateConfigBuiltInCode(t *testing.T) {
	client := codeListener("CLIENT", protocolmap.SASLPlaintext, "127.0.0.1", 9092)
	repl := codeListener("REPLICATION", protocolmap.Plaintext, "127.0.0.1", 9093)
	repl.InterBroker = true
	ctrl := codeListener("CONTROLLER", protocolmap.Plaintext, "127.0.0.1", 9095)
	ctrl.Plane = protocolmap.ControlPlane
	valid := func() *listener.Set {
		return &listener.Set{All: []listener.Listener{client, repl, ctrl},
			InterBrokerListener: "REPLICATION", ControlPlaneListener: "CONTROLLER"}
	}
	for _, tc := range []struct {
		name    string
		change  func(c *listener.Set)
		wantKey string // the key named by the error, "" for a valid config
		wantErr error
	}{
		{name: "valid", change: func(*listener.Set) {}},
		{name: "valid with an explicit map", change: func(c *listener.Set) {
			c.SecurityProtocolMap = protocolmap.Map{"CLIENT": protocolmap.SASLPlaintext, "REPLICATION": protocolmap.Plaintext,
				"CONTROLLER": protocolmap.Plaintext, "UNUSED": protocolmap.SSL}
		}},
		{name: "two listeners on one port", change: func(c *listener.Set) { c.All[1].Bind.Port = 9092 },
			wantKey: "listeners", wantErr: listener.ErrDuplicatePort},
		{name: "a listener missing from the map", change: func(c *listener.Set) {
			c.SecurityProtocolMap = protocolmap.Map{"CLIENT": protocolmap.SASLPlaintext, "REPLICATION": protocolmap.Plaintext}
		}, wantKey: "listeners"},
		{name: "no inter-broker listener named: Kafka's default PLAINTEXT is absent", change: func(c *listener.Set) {
			c.InterBrokerListener, c.All[1].InterBroker = "", false
		}, wantKey: "security.inter.broker.protocol", wantErr: listener.ErrNotAdvertised},
		{name: "the control plane is the inter-broker listener", change: func(c *listener.Set) {
			c.ControlPlaneListener, c.All[2].Plane = "REPLICATION", protocolmap.DataPlane
			c.All[1].Plane = protocolmap.ControlPlane
		}, wantKey: "control.plane.listener.name", wantErr: listener.ErrSameListener},
		{name: "advertising 0.0.0.0", change: func(c *listener.Set) { c.All[0].Advertised.Host = "0.0.0.0" },
			wantKey: "advertised.listeners", wantErr: listener.ErrNonRoutable},
		{name: "an unadvertised inter-broker listener", change: func(c *listener.Set) { c.All[1].Advertised = listener.EndPoint{} },
			wantKey: "inter.broker.listener.name", wantErr: listener.ErrNotAdvertised},
		{name: "a bad port", change: func(c *listener.Set) { c.All[0].Bind.Port = 70000 }, wantKey: "listeners"},
		{name: "a protocol the map contradicts", change: func(c *listener.Set) {
			c.SecurityProtocolMap = protocolmap.Map{"CLIENT": protocolmap.SSL, "REPLICATION": protocolmap.Plaintext, "CONTROLLER": protocolmap.Plaintext}
		}, wantErr: listener.ErrInconsistent},
		{name: "a control-plane listener marked data", change: func(c *listener.Set) { c.All[2].Plane = protocolmap.DataPlane },
			wantErr: listener.ErrInconsistent},
		{name: "two inter-broker marks", change: func(c *listener.Set) { c.All[0].InterBroker = true },
			wantErr: listener.ErrInconsistent},
		{name: "an endpoint named after another listener", change: func(c *listener.Set) { c.All[0].Bind.Name = "OTHER" },
			wantErr: listener.ErrInconsistent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(c)
			err := c.Validate()
			if tc.wantKey == "" && tc.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			if tc.wantKey != "" {
				var ce *protocolmap.ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.wantKey, ce.Key)
			}
		})
	}
}

// Every Config that Resolve returns is valid, so Validate adds nothing for
// hosts that read properties.
func TestValidateAcceptsResolved(t *testing.T) {
	for _, props := range []listener.Properties{
		{},
		kip103(),
		{"listeners": "PLAINTEXT://:9092,SSL://[::1]:9093", "advertised.listeners": "SSL://[::1]:9093,PLAINTEXT://broker:9092"},
		{"listeners": "A://0.0.0.0:9092,B://[::]:9092", "advertised.listeners": "A://10.0.0.1:9092,B://[fe80::1]:9092",
			"listener.security.protocol.map": "A:PLAINTEXT,B:SSL", "inter.broker.listener.name": "A"},
	} {
		c, err := listener.Resolve(props)
		require.NoError(t, err, props)
		assert.NoError(t, c.Validate(), props)
	}
}
