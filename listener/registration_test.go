package listener_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// regEndPoint builds an endpoint without parsing, so that tests state exactly what
// they expect.
func regEndPoint(name, host string, port int, p protocolmap.SecurityProtocol) listener.EndPoint {
	return listener.EndPoint{Name: protocolmap.ListenerName(name), Host: host, Port: port, SecurityProtocol: p}
}

// regMillis is a UTC time at a whole number of milliseconds since the epoch, as
// DecodeBrokerRegistration returns it.
func regMillis(n int64) time.Time { return time.UnixMilli(n).UTC() }

// regLegacyAddress is the host and port a registration's legacy fields hold:
// those of the first PLAINTEXT endpoint, else none.
func regLegacyAddress(eps []listener.EndPoint) (string, int) {
	for _, e := range eps {
		if e.SecurityProtocol == protocolmap.Plaintext {
			return e.Host, e.Port
		}
	}
	return "", -1
}

// regThreeListeners has a SASL_SSL, a PLAINTEXT and an IPv6 SSL endpoint; the
// PLAINTEXT one, not named PLAINTEXT, gives the legacy host and port.
var regThreeListeners = []listener.EndPoint{
	regEndPoint("CLIENT", "kafka-1.example.com", 9092, protocolmap.SASLSSL),
	regEndPoint("REPLICATION", "10.0.0.1", 9093, protocolmap.Plaintext),
	regEndPoint("X", "::1", 9094, protocolmap.SSL),
}

func TestBrokerRegistrationEncode(t *testing.T) {
	tests := []struct {
		name string
		reg  listener.BrokerRegistration
		want string
	}{
		{
			name: "v5 with rack and features",
			reg: listener.BrokerRegistration{
				Version: 5, JMXPort: 9999, Timestamp: regMillis(1700000000123), EndPoints: regThreeListeners, Rack: "rack-a",
				Features: map[string]listener.VersionRange{"metadata.version": {Min: 1, Max: 20}},
			},
			want: `{
				"version": 5, "host": "10.0.0.1", "port": 9093, "jmx_port": 9999, "timestamp": "1700000000123",
				"endpoints": ["CLIENT://kafka-1.example.com:9092", "REPLICATION://10.0.0.1:9093", "X://[::1]:9094"],
				"rack": "rack-a",
				"listener_security_protocol_map": {"CLIENT": "SASL_SSL", "REPLICATION": "PLAINTEXT", "X": "SSL"},
				"features": {"metadata.version": {"min_version": 1, "max_version": 20}}
			}`,
		},
		{
			name: "v4 leaves features out",
			reg: listener.BrokerRegistration{
				Version: 4, JMXPort: -1, Timestamp: regMillis(1700000000123), EndPoints: regThreeListeners, Rack: "rack-a",
				Features: map[string]listener.VersionRange{"metadata.version": {Min: 1, Max: 20}},
			},
			want: `{
				"version": 4, "host": "10.0.0.1", "port": 9093, "jmx_port": -1, "timestamp": "1700000000123",
				"endpoints": ["CLIENT://kafka-1.example.com:9092", "REPLICATION://10.0.0.1:9093", "X://[::1]:9094"],
				"rack": "rack-a",
				"listener_security_protocol_map": {"CLIENT": "SASL_SSL", "REPLICATION": "PLAINTEXT", "X": "SSL"}
			}`,
		},
		{
			name: "no PLAINTEXT endpoint, no rack, no features",
			reg: listener.BrokerRegistration{
				Version: 5, JMXPort: -1, Timestamp: regMillis(42),
				EndPoints: []listener.EndPoint{regEndPoint("PLAINTEXT", "h", 9092, protocolmap.SSL)},
			},
			want: `{
				"version": 5, "host": null, "port": -1, "jmx_port": -1, "timestamp": "42",
				"endpoints": ["PLAINTEXT://h:9092"],
				"listener_security_protocol_map": {"PLAINTEXT": "SSL"},
				"features": {}
			}`,
		},
		{
			name: "first PLAINTEXT endpoint wins; an empty host is null",
			reg: listener.BrokerRegistration{
				Version: 4, JMXPort: 7071, Timestamp: regMillis(0),
				EndPoints: []listener.EndPoint{
					regEndPoint("INTERNAL", "", 9092, protocolmap.Plaintext),
					regEndPoint("EXTERNAL", "broker.example.com", 9093, protocolmap.Plaintext),
				},
			},
			want: `{
				"version": 4, "host": null, "port": 9092, "jmx_port": 7071, "timestamp": "0",
				"endpoints": ["INTERNAL://:9092", "EXTERNAL://broker.example.com:9093"],
				"listener_security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"}
			}`,
		},
		{
			name: "no endpoints at all",
			reg:  listener.BrokerRegistration{Version: 4, JMXPort: -1, Timestamp: regMillis(1)},
			want: `{
				"version": 4, "host": null, "port": -1, "jmx_port": -1, "timestamp": "1",
				"endpoints": [], "listener_security_protocol_map": {}
			}`,
		},
		{
			name: "Host and Port given by the caller are ignored",
			reg: listener.BrokerRegistration{
				Version: 4, Host: "stale", Port: 1, JMXPort: -1, Timestamp: regMillis(1),
				EndPoints: []listener.EndPoint{regEndPoint("PLAINTEXT", "fresh", 9092, protocolmap.Plaintext)},
			},
			want: `{
				"version": 4, "host": "fresh", "port": 9092, "jmx_port": -1, "timestamp": "1",
				"endpoints": ["PLAINTEXT://fresh:9092"], "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}
			}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.reg.Encode()
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(got))
		})
	}
}

func TestBrokerRegistrationEncodeErrors(t *testing.T) {
	valid := func(edit func(*listener.BrokerRegistration)) listener.BrokerRegistration {
		r := listener.BrokerRegistration{Version: 5, JMXPort: -1, Timestamp: regMillis(1), EndPoints: regThreeListeners}
		r.EndPoints = append([]listener.EndPoint(nil), r.EndPoints...)
		edit(&r)
		return r
	}
	tests := []struct {
		name string
		reg  listener.BrokerRegistration
		want error
	}{
		{"version 0", valid(func(r *listener.BrokerRegistration) { r.Version = 0 }), listener.ErrUnsupportedVersion},
		{"version 1", valid(func(r *listener.BrokerRegistration) { r.Version = 1 }), listener.ErrUnsupportedVersion},
		{"version 2", valid(func(r *listener.BrokerRegistration) { r.Version = 2 }), listener.ErrUnsupportedVersion},
		{"version 3", valid(func(r *listener.BrokerRegistration) { r.Version = 3 }), listener.ErrUnsupportedVersion},
		{"version 6", valid(func(r *listener.BrokerRegistration) { r.Version = 6 }), listener.ErrUnsupportedVersion},
		{"duplicate name", valid(func(r *listener.BrokerRegistration) {
			r.EndPoints = append(r.EndPoints, regEndPoint("CLIENT", "other", 1, protocolmap.SSL))
		}), listener.ErrDuplicateName},
		{"lower-case name", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Name = "client" }), listener.ErrInvalidEndPoint},
		{"blank name", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Name = "" }), listener.ErrInvalidEndPoint},
		{"padded name", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Name = " CLIENT" }), listener.ErrInvalidEndPoint},
		{"unknown protocol", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].SecurityProtocol = 9 }), listener.ErrInvalidEndPoint},
		{"port out of range", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Port = 70000 }), listener.ErrInvalidEndPoint},
		{"negative port", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Port = -1 }), listener.ErrInvalidEndPoint},
		{"bad host character", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Host = "a/b" }), listener.ErrInvalidEndPoint},
		{"host with a scheme", valid(func(r *listener.BrokerRegistration) { r.EndPoints[0].Host = "a://b" }), listener.ErrInvalidEndPoint},
		{"JMX port too big", valid(func(r *listener.BrokerRegistration) { r.JMXPort = math.MaxInt32 + 1 }), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.reg.Encode()
			require.Error(t, err)
			assert.Nil(t, got)
			if tt.want != nil {
				assert.ErrorIs(t, err, tt.want)
			}
		})
	}
}

// Documents in the shape Kafka brokers of each era write them.
const (
	regDocV1 = `{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}`
	regDocV2 = `{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",
		"endpoints":["PLAINTEXT://localhost:9092","SSL://[::1]:9093"]}`
	regDocV3 = `{"version":3,"host":null,"port":-1,"jmx_port":-1,"timestamp":"1466985523123",
		"endpoints":["SASL_SSL://host1:9094"],"rack":"dc1"}`
	regDocV4 = `{"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"PLAINTEXT","X":"SSL"},
		"endpoints":["CLIENT://host1:9092","REPLICATION://10.0.0.1:9093","X://[::1]:9092"],
		"rack":"dc1","jmx_port":-1,"port":9093,"host":"10.0.0.1","version":4,"timestamp":"1583345655000"}`
	regDocV5 = `{"features":{"metadata.version":{"min_version":1,"first_active_version":2,"max_version":20},"kraft.version":{"min_version":0,"max_version":1}},
		"listener_security_protocol_map":{"client":"sasl_ssl","Internal":"Plaintext"},
		"endpoints":["client://kafka-1.example.com:9092","INTERNAL://:9093"],
		"jmx_port":9999,"port":9093,"host":null,"version":5,"timestamp":"1700000000123"}`
)

func TestDecodeBrokerRegistration(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want listener.BrokerRegistration
	}{
		{
			name: "v1: one PLAINTEXT endpoint from host and port",
			doc:  regDocV1,
			want: listener.BrokerRegistration{
				Version: 1, Host: "localhost", Port: 9092, JMXPort: 9999, Timestamp: regMillis(2233345666),
				EndPoints: []listener.EndPoint{regEndPoint("PLAINTEXT", "localhost", 9092, protocolmap.Plaintext)},
			},
		},
		{
			name: "v2: endpoints under the default map, IPv6 in brackets",
			doc:  regDocV2,
			want: listener.BrokerRegistration{
				Version: 2, Host: "localhost", Port: 9092, JMXPort: 9999, Timestamp: regMillis(2233345666),
				EndPoints: []listener.EndPoint{
					regEndPoint("PLAINTEXT", "localhost", 9092, protocolmap.Plaintext),
					regEndPoint("SSL", "::1", 9093, protocolmap.SSL),
				},
			},
		},
		{
			name: "v3: rack, no PLAINTEXT endpoint",
			doc:  regDocV3,
			want: listener.BrokerRegistration{
				Version: 3, Port: -1, JMXPort: -1, Timestamp: regMillis(1466985523123), Rack: "dc1",
				EndPoints: []listener.EndPoint{regEndPoint("SASL_SSL", "host1", 9094, protocolmap.SASLSSL)},
			},
		},
		{
			name: "v4: custom names mapped by listener_security_protocol_map",
			doc:  regDocV4,
			want: listener.BrokerRegistration{
				Version: 4, Host: "10.0.0.1", Port: 9093, JMXPort: -1, Timestamp: regMillis(1583345655000), Rack: "dc1",
				EndPoints: []listener.EndPoint{
					regEndPoint("CLIENT", "host1", 9092, protocolmap.SASLSSL),
					regEndPoint("REPLICATION", "10.0.0.1", 9093, protocolmap.Plaintext),
					regEndPoint("X", "::1", 9092, protocolmap.SSL),
				},
			},
		},
		{
			name: "v5: features, extra feature keys ignored, names and protocols normalised",
			doc:  regDocV5,
			want: listener.BrokerRegistration{
				Version: 5, Port: 9093, JMXPort: 9999, Timestamp: regMillis(1700000000123),
				EndPoints: []listener.EndPoint{
					regEndPoint("CLIENT", "kafka-1.example.com", 9092, protocolmap.SASLSSL),
					regEndPoint("INTERNAL", "", 9093, protocolmap.Plaintext),
				},
				Features: map[string]listener.VersionRange{
					"metadata.version": {Min: 1, Max: 20},
					"kraft.version":    {Min: 0, Max: 1},
				},
			},
		},
		{
			name: "v4 with the rack, features and timestamp left out, empty features",
			doc: `{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],"features":{},
				"host":"h","port":1,"rack":null,"timestamp":null}`,
			want: listener.BrokerRegistration{
				Version: 4, Host: "h", Port: 1, JMXPort: -1,
				EndPoints: []listener.EndPoint{regEndPoint("PLAINTEXT", "h", 1, protocolmap.Plaintext)},
			},
		},
		{
			name: "v2 with no host, port or endpoints",
			doc:  `{"version":2,"jmx_port":1,"endpoints":[]}`,
			want: listener.BrokerRegistration{Version: 2, Port: -1, JMXPort: 1},
		},
		{
			name: "v5 read whatever the document's key order and white space",
			doc:  " \n{ \"timestamp\" : \"-1\" , \"endpoints\" : [ \"SSL://[fe80::1%eth0]:0\" ] , \"jmx_port\" : 0, \"version\" : 5 }\n",
			want: listener.BrokerRegistration{
				Version: 5, Port: -1, Timestamp: regMillis(-1),
				EndPoints: []listener.EndPoint{regEndPoint("SSL", "fe80::1%eth0", 0, protocolmap.SSL)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listener.DecodeBrokerRegistration([]byte(tt.doc))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestDecodeBrokerRegistrationErrors(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		field string // the field the message must name, if any
		want  error  // the sentinel the error must wrap, if any
	}{
		{"version 0", `{"version":0,"jmx_port":-1,"host":"h","port":1}`, "", listener.ErrUnsupportedVersion},
		{"version 6", `{"version":6,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"]}`, "", listener.ErrUnsupportedVersion},
		{"version -1", `{"version":-1}`, "", listener.ErrUnsupportedVersion},
		{"huge version", `{"version":99999999999999999999}`, `"version"`, nil},

		{"empty input", ``, "", nil},
		{"not JSON", `version=5`, "", nil},
		{"null", `null`, "", nil},
		{"array", `[]`, "", nil},
		{"string", `"{}"`, "", nil},
		{"truncated", regDocV5[:len(regDocV5)-1], "", nil},
		{"trailing data", regDocV1 + `{}`, "", nil},
		{"empty object", `{}`, `"version"`, nil},
		{"version as string", `{"version":"5","jmx_port":-1,"endpoints":[]}`, `"version"`, nil},
		{"fractional version", `{"version":4.5,"jmx_port":-1,"endpoints":[]}`, `"version"`, nil},
		{"version key in other case", `{"Version":4,"jmx_port":-1,"endpoints":[]}`, `"version"`, nil},
		{"missing jmx_port", `{"version":4,"endpoints":[]}`, `"jmx_port"`, nil},
		{"null jmx_port", `{"version":4,"jmx_port":null,"endpoints":[]}`, `"jmx_port"`, nil},
		{"jmx_port beyond 32 bits", `{"version":4,"jmx_port":2147483648,"endpoints":[]}`, `"jmx_port"`, nil},

		{"v1 missing host", `{"version":1,"port":9092,"jmx_port":-1}`, `"host"`, nil},
		{"v1 null host", `{"version":1,"host":null,"port":9092,"jmx_port":-1}`, `"host"`, nil},
		{"v1 missing port", `{"version":1,"host":"h","jmx_port":-1}`, `"port"`, nil},
		{"v1 port out of range", `{"version":1,"host":"h","port":70000,"jmx_port":-1}`, `"port"`, listener.ErrInvalidEndPoint},
		{"v1 bad host", `{"version":1,"host":"h/1","port":1,"jmx_port":-1}`, `"host"`, listener.ErrInvalidEndPoint},
		{"v1 host holding a listener", `{"version":1,"host":"a://b","port":1,"jmx_port":-1}`, `"host"`, listener.ErrInvalidEndPoint},
		{"v1 bracketed host", `{"version":1,"host":"[::1]","port":1,"jmx_port":-1}`, `"host"`, listener.ErrInvalidEndPoint},

		{"v2 missing endpoints", `{"version":2,"jmx_port":-1,"host":"h","port":1}`, `"endpoints"`, nil},
		{"null endpoints", `{"version":4,"jmx_port":-1,"endpoints":null}`, `"endpoints"`, nil},
		{"endpoints not an array", `{"version":4,"jmx_port":-1,"endpoints":"PLAINTEXT://h:1"}`, `"endpoints"`, nil},
		{"endpoint not a string", `{"version":4,"jmx_port":-1,"endpoints":[9092]}`, `"endpoints"`, nil},
		{"empty endpoint", `{"version":4,"jmx_port":-1,"endpoints":[""]}`, `"endpoints"`, listener.ErrInvalidEndPoint},
		{"endpoint without port", `{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h"]}`, `"endpoints"`, listener.ErrInvalidEndPoint},
		{"two endpoints in one string", `{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://a:1,SSL://b:2"]}`, `"endpoints"`, nil},
		{"custom name without map", `{"version":4,"jmx_port":-1,"endpoints":["CLIENT://h:1"]}`, `"endpoints"`, listener.ErrNoSecurityProtocol},
		{"name missing from map", `{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],
			"listener_security_protocol_map":{"CLIENT":"SSL"}}`, `"endpoints"`, listener.ErrNoSecurityProtocol},
		{"duplicate endpoint names", `{"version":4,"jmx_port":-1,"endpoints":["SSL://a:1","ssl://b:2"]}`, `"endpoints"`, listener.ErrDuplicateName},
		{"unknown protocol in map", `{"version":4,"jmx_port":-1,"endpoints":[],
			"listener_security_protocol_map":{"CLIENT":"TLS"}}`, `"listener_security_protocol_map"`, protocolmap.ErrUnknownSecurityProtocol},
		{"blank name in map", `{"version":4,"jmx_port":-1,"endpoints":[],
			"listener_security_protocol_map":{" ":"SSL"}}`, `"listener_security_protocol_map"`, protocolmap.ErrBlankListenerName},
		{"names in map differing only in case", `{"version":4,"jmx_port":-1,"endpoints":[],
			"listener_security_protocol_map":{"client":"SSL","CLIENT":"SSL"}}`, `"listener_security_protocol_map"`, protocolmap.ErrDuplicateKey},
		{"map not an object", `{"version":4,"jmx_port":-1,"endpoints":[],
			"listener_security_protocol_map":["CLIENT:SSL"]}`, `"listener_security_protocol_map"`, nil},

		{"timestamp as number", `{"version":4,"jmx_port":-1,"endpoints":[],"timestamp":1700000000000}`, `"timestamp"`, nil},
		{"timestamp not a number", `{"version":4,"jmx_port":-1,"endpoints":[],"timestamp":"yesterday"}`, `"timestamp"`, nil},
		{"timestamp beyond 64 bits", `{"version":4,"jmx_port":-1,"endpoints":[],"timestamp":"9223372036854775808"}`, `"timestamp"`, nil},
		{"rack as number", `{"version":4,"jmx_port":-1,"endpoints":[],"rack":1}`, `"rack"`, nil},
		{"host as number", `{"version":4,"jmx_port":-1,"endpoints":[],"host":1}`, `"host"`, nil},
		{"port as string", `{"version":4,"jmx_port":-1,"endpoints":[],"port":"9092"}`, `"port"`, nil},

		{"features not an object", `{"version":5,"jmx_port":-1,"endpoints":[],"features":[]}`, `"features"`, nil},
		{"null feature", `{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":null}}`, `"features"`, nil},
		{"feature missing max_version", `{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"min_version":1}}}`, `"features"`, nil},
		{"feature missing min_version", `{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"max_version":1}}}`, `"features"`, nil},
		{"feature version beyond 16 bits", `{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"min_version":1,"max_version":40000}}}`, `"features"`, nil},
		{"feature version as string", `{"version":5,"jmx_port":-1,"endpoints":[],"features":{"f":{"min_version":"1","max_version":2}}}`, `"features"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := listener.DecodeBrokerRegistration([]byte(tt.doc))
			require.Error(t, err)
			assert.Zero(t, got)
			if tt.field != "" {
				assert.Contains(t, err.Error(), tt.field)
			}
			if tt.want != nil {
				assert.ErrorIs(t, err, tt.want)
			} else {
				assert.False(t, errors.Is(err, listener.ErrUnsupportedVersion), "only a bad version is unsupported: %v", err)
			}
		})
	}
}

func TestBrokerRegistrationRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		reg  listener.BrokerRegistration
	}{
		{"v5 full", listener.BrokerRegistration{
			Version: 5, JMXPort: 9999, Timestamp: regMillis(1700000000123), EndPoints: regThreeListeners, Rack: "rack-a",
			Features: map[string]listener.VersionRange{"metadata.version": {Min: 1, Max: 20}, "neg": {Min: -3, Max: -1}},
		}},
		{"v4 full", listener.BrokerRegistration{Version: 4, JMXPort: -1, Timestamp: regMillis(1700000000123), EndPoints: regThreeListeners, Rack: "rack-a"}},
		{"v5 bare", listener.BrokerRegistration{Version: 5, Port: -1, JMXPort: -1}},
		{"v4 wildcard PLAINTEXT", listener.BrokerRegistration{
			Version: 4, Port: 0, JMXPort: math.MinInt32, Timestamp: regMillis(-5),
			EndPoints: []listener.EndPoint{regEndPoint("A", "", 0, protocolmap.Plaintext), regEndPoint("B", "fe80::1%eth0", 65535, protocolmap.Plaintext)},
		}},
		{"extreme timestamps", listener.BrokerRegistration{Version: 5, Port: -1, JMXPort: math.MaxInt32, Timestamp: regMillis(math.MaxInt64)}},
		{"minimum timestamp", listener.BrokerRegistration{Version: 5, Port: -1, Timestamp: regMillis(math.MinInt64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.reg.Host, tt.reg.Port = regLegacyAddress(tt.reg.EndPoints)
			doc, err := tt.reg.Encode()
			require.NoError(t, err)
			got, err := listener.DecodeBrokerRegistration(doc)
			require.NoError(t, err)
			assert.Equal(t, tt.reg, got)
		})
	}

	t.Run("timestamp kept to the millisecond, in UTC", func(t *testing.T) {
		at := time.Date(2024, 10, 25, 12, 30, 45, 123456789, time.FixedZone("CEST", 2*60*60))
		doc, err := listener.BrokerRegistration{Version: 5, Timestamp: at}.Encode()
		require.NoError(t, err)
		got, err := listener.DecodeBrokerRegistration(doc)
		require.NoError(t, err)
		assert.Equal(t, at.Truncate(time.Millisecond).UTC(), got.Timestamp)
		assert.True(t, at.Truncate(time.Millisecond).Equal(got.Timestamp))
	})

	t.Run("decoded Kafka documents re-encode to themselves", func(t *testing.T) {
		for _, doc := range []string{regDocV4, regDocV5} {
			r, err := listener.DecodeBrokerRegistration([]byte(doc))
			require.NoError(t, err)
			again, err := r.Encode()
			require.NoError(t, err)
			r2, err := listener.DecodeBrokerRegistration(again)
			require.NoError(t, err)
			assert.Equal(t, r, r2)
		}
	})
}

// FuzzDecodeBrokerRegistration checks that DecodeBrokerRegistration never
// panics, and that whatever it accepts Encode writes back so that it decodes
// to the same registration. Versions that Encode does not write are raised
// to 5, as is a version 4 registration carrying features (which only
// version 5 holds); the legacy host and port are set to those Encode writes.
func FuzzDecodeBrokerRegistration(f *testing.F) {
	for _, doc := range []string{
		regDocV1, regDocV2, regDocV3, regDocV4, regDocV5,
		`{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://[::1]:9092"],"features":{"f":{"min_version":1,"max_version":2}}}`,
		`{"version":5,"jmx_port":0,"endpoints":["SSL://:0","PLAINTEXT://h.example.com:65535"],"rack":"r","timestamp":"-62135596800000"}`,
		`{"version":2,"jmx_port":1,"endpoints":[]}`,
		`{"version":6,"jmx_port":1,"endpoints":[]}`,
		`{"version":1,"host":"a://b","port":1,"jmx_port":-1}`,
		`null`, `{}`, ``,
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := listener.DecodeBrokerRegistration(data)
		if err != nil {
			require.Zero(t, r)
			return
		}
		require.GreaterOrEqual(t, r.Version, 1)
		require.LessOrEqual(t, r.Version, 5)
		if r.Version == 1 {
			require.Len(t, r.EndPoints, 1, "a version 1 document has one endpoint")
		}
		want := r
		if want.Version < 4 || want.Version == 4 && len(want.Features) > 0 {
			want.Version = 5
		}
		want.Host, want.Port = regLegacyAddress(want.EndPoints)
		doc, err := want.Encode()
		require.NoError(t, err, "a decoded registration must encode: %+v", want)
		got, err := listener.DecodeBrokerRegistration(doc)
		require.NoError(t, err, "an encoded registration must decode: %s", doc)
		require.Equal(t, want, got, "encoded as %s", doc)
	})
}
