package listener_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
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
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.wantKey, ce.Key)
			}
		})
	}
}

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

// Every Config that Resolve returns is valid, so Validate adds nothing for
// hosts that read properties.
func TestValidateAcceptsResolved(t *testing.T) {
	for _, props := range []config.Properties{
		{},
		kip103(),
		{"listeners": "PLAINTEXT://:9092,SSL://[::1]:9093", "advertised.listeners": "SSL://[::1]:9093,PLAINTEXT://broker:9092"},
		{"listeners": "A://0.0.0.0:9092,B://[::]:9092", "advertised.listeners": "A://10.0.0.1:9092,B://[fe80::1]:9092",
			"listener.security.protocol.map": "A:PLAINTEXT,B:SSL", "inter.broker.listener.name": "A"},
	} {
		c, err := config.Listeners(props)
		require.NoError(t, err, props)
		assert.NoError(t, c.Validate(), props)
	}
}

// A Set carries no parse state: built in code with the fields Resolve
// gives, it behaves as the Set Resolve returned, in Validate, Listener,
// AdvertisedEndPoints, Changes, WithListener and WithoutListener; and a
// Set built in code with a fault is refused by Validate naming the key,
// with the sentinel, that Resolve's error for the same values names.
func TestSetBuiltInCodeBehavesAsParsed(t *testing.T) {
	extra := codeListener("EXTRA", protocolmap.Plaintext, "127.0.0.1", 9099)
	for _, props := range []config.Properties{
		{},
		kip103(),
		{"listeners": "PLAINTEXT://:9092,SSL://[::1]:9093", "advertised.listeners": "SSL://[::1]:9093,PLAINTEXT://broker:9092"},
		{"listeners": "A://0.0.0.0:9092,B://[::]:9092,C://127.0.0.1:9094", "advertised.listeners": "A://10.0.0.1:9092,B://[fe80::1]:9092",
			"listener.security.protocol.map": "A:PLAINTEXT,B:SSL,C:PLAINTEXT,D:SASL_SSL", "inter.broker.listener.name": "A"},
	} {
		parsed, err := config.Listeners(props)
		require.NoError(t, err, props)
		code := &listener.Set{All: append([]listener.Listener(nil), parsed.All...), SecurityProtocolMap: parsed.SecurityProtocolMap,
			InterBrokerListener: parsed.InterBrokerListener, InterBrokerSecurityProtocol: parsed.InterBrokerSecurityProtocol,
			ControlPlaneListener: parsed.ControlPlaneListener}
		require.NoError(t, code.Validate(), props)
		assert.Equal(t, parsed, code, "a Set read from properties holds its fields and nothing else")
		assert.Equal(t, parsed.AdvertisedEndPoints(), code.AdvertisedEndPoints(), props)
		for _, l := range parsed.All {
			got, ok := code.Listener(l.Name)
			assert.True(t, ok)
			assert.Equal(t, l, got)
		}
		c, err := parsed.Changes(code)
		require.NoError(t, err)
		assert.True(t, c.Empty(), "%v: %+v", props, c)

		a, errA := parsed.WithListener(extra)
		b, errB := code.WithListener(extra)
		assert.Equal(t, errA == nil, errB == nil, props)
		if errA == nil {
			assert.Equal(t, a.All, b.All)
			assert.Equal(t, a.AdvertisedEndPoints(), b.AdvertisedEndPoints())
		}
		last := parsed.All[len(parsed.All)-1].Name
		a, errA = parsed.WithoutListener(last)
		b, errB = code.WithoutListener(last)
		assert.Equal(t, fmt.Sprint(errA), fmt.Sprint(errB), props)
		if errA == nil {
			assert.Equal(t, a.All, b.All)
		}
	}

	base := func() (config.Properties, *listener.Set) {
		props := config.Properties{"listeners": "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
			"listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT", "inter.broker.listener.name": "REPLICATION"}
		s, err := config.Listeners(props)
		require.NoError(t, err)
		return props, &listener.Set{All: s.All, SecurityProtocolMap: s.SecurityProtocolMap, InterBrokerListener: s.InterBrokerListener}
	}
	for _, tc := range []struct {
		name  string
		props func(config.Properties)
		set   func(*listener.Set)
	}{
		{"a shared port", func(p config.Properties) { p["listeners"] = "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9092" },
			func(s *listener.Set) { s.All[1].Bind.Port = 9092 }},
		{"a port out of range", func(p config.Properties) { p["listeners"] = "CLIENT://127.0.0.1:70000,REPLICATION://127.0.0.1:9093" },
			func(s *listener.Set) { s.All[0].Bind.Port = 70000 }},
		{"a host Kafka refuses", func(p config.Properties) { p["listeners"] = "CLIENT://bad/host:9092,REPLICATION://127.0.0.1:9093" },
			func(s *listener.Set) { s.All[0].Bind.Host = "bad/host" }},
		{"advertising 0.0.0.0", func(p config.Properties) {
			p["advertised.listeners"] = "CLIENT://0.0.0.0:9092,REPLICATION://127.0.0.1:9093"
		}, func(s *listener.Set) { s.All[0].Advertised.Host = "0.0.0.0" }},
		{"an inter-broker listener not in the map", func(p config.Properties) { p["inter.broker.listener.name"] = "OTHER" },
			func(s *listener.Set) { s.InterBrokerListener, s.All[1].InterBroker = "OTHER", false }},
		{"an unadvertised inter-broker listener", func(p config.Properties) { p["advertised.listeners"] = "CLIENT://127.0.0.1:9092" },
			func(s *listener.Set) { s.All[1].Advertised = listener.EndPoint{} }},
		{"the control plane is the inter-broker listener", func(p config.Properties) { p["control.plane.listener.name"] = "REPLICATION" },
			func(s *listener.Set) {
				s.ControlPlaneListener, s.All[1].Plane = "REPLICATION", protocolmap.ControlPlane
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props, set := base()
			tc.props(props)
			tc.set(set)
			_, parseErr := config.Listeners(props)
			codeErr := set.Validate()
			var pe, ce *config.Error
			require.ErrorAs(t, parseErr, &pe)
			require.ErrorAs(t, codeErr, &ce)
			assert.Equal(t, pe.Key, ce.Key)
			assert.Equal(t, errors.Unwrap(pe) == nil, errors.Unwrap(ce) == nil)
			for _, sentinel := range []error{listener.ErrDuplicatePort, listener.ErrInvalidEndPoint, listener.ErrNonRoutable,
				listener.ErrNoSecurityProtocol, listener.ErrNotAdvertised, listener.ErrSameListener} {
				assert.Equal(t, errors.Is(parseErr, sentinel), errors.Is(codeErr, sentinel), "%v: %v / %v", sentinel, parseErr, codeErr)
			}
		})
	}
}
