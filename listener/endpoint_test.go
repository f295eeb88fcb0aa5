package listener_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func TestParseEndPoint(t *testing.T) {
	m := protocolmap.Map{"CLIENT": protocolmap.SASLSSL, "PLAINTEXT": protocolmap.Plaintext, "SSL": protocolmap.SSL}
	tests := []struct {
		in     string
		want   listener.EndPoint
		string string // String() when it differs from in
	}{
		{in: "CLIENT://broker1:9092", want: listener.EndPoint{Name: "CLIENT", Host: "broker1", Port: 9092, SecurityProtocol: protocolmap.SASLSSL}},
		{in: "client://broker1:9092", want: listener.EndPoint{Name: "CLIENT", Host: "broker1", Port: 9092, SecurityProtocol: protocolmap.SASLSSL}, string: "CLIENT://broker1:9092"},
		{in: "PLAINTEXT://:9092", want: listener.EndPoint{Name: "PLAINTEXT", Port: 9092}},
		{in: "PLAINTEXT://127.0.0.1:0", want: listener.EndPoint{Name: "PLAINTEXT", Host: "127.0.0.1"}},
		{in: "SSL://[::1]:9093", want: listener.EndPoint{Name: "SSL", Host: "::1", Port: 9093, SecurityProtocol: protocolmap.SSL}},
		{in: "SSL://::1:9093", want: listener.EndPoint{Name: "SSL", Host: "::1", Port: 9093, SecurityProtocol: protocolmap.SSL}, string: "SSL://[::1]:9093"},
		{in: "SSL://[fe80::1%eth0]:9093", want: listener.EndPoint{Name: "SSL", Host: "fe80::1%eth0", Port: 9093, SecurityProtocol: protocolmap.SSL}},
		{in: "SSL://[::]:65535", want: listener.EndPoint{Name: "SSL", Host: "::", Port: 65535, SecurityProtocol: protocolmap.SSL}},
		{in: "  PLAINTEXT://my_host-1.example.com:1  ", want: listener.EndPoint{Name: "PLAINTEXT", Host: "my_host-1.example.com", Port: 1}, string: "PLAINTEXT://my_host-1.example.com:1"},
		{in: "PLAINTEXT://0.0.0.0:9092", want: listener.EndPoint{Name: "PLAINTEXT", Host: "0.0.0.0", Port: 9092}},
		{in: "PLAINTEXT://[localhost]:9092", want: listener.EndPoint{Name: "PLAINTEXT", Host: "localhost", Port: 9092}, string: "PLAINTEXT://localhost:9092"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := listener.ParseEndPoint(tt.in, m)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			wantString := tt.string
			if wantString == "" {
				wantString = tt.in
			}
			assert.Equal(t, wantString, got.String())
			again, err := listener.ParseEndPoint(got.String(), m)
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

func TestParseEndPointErrors(t *testing.T) {
	m := protocolmap.Default()
	tests := []struct {
		in       string
		sentinel error
		contains string
	}{
		{"PLAINTEXT:9092", listener.ErrInvalidEndPoint, "want NAME://host:port"},
		{"PLAINTEXT://localhost", listener.ErrInvalidEndPoint, "no port"},
		{"PLAINTEXT://localhost:", listener.ErrInvalidEndPoint, "is not a number"},
		{"PLAINTEXT://localhost:90a", listener.ErrInvalidEndPoint, "is not a number"},
		{"PLAINTEXT://localhost:-1", listener.ErrInvalidEndPoint, "out of range"},
		{"PLAINTEXT://localhost:65536", listener.ErrInvalidEndPoint, "out of range"},
		{"PLAINTEXT://localhost:99999999999999999999", listener.ErrInvalidEndPoint, "out of range"},
		{"://localhost:9092", listener.ErrInvalidEndPoint, "listener name is blank"},
		{"PLAINTEXT://local/host:9092", listener.ErrInvalidEndPoint, "may hold only"},
		{"PLAINTEXT://local host:9092", listener.ErrInvalidEndPoint, "may hold only"},
		{"PLAINTEXT://h\u00e9te:9092", listener.ErrInvalidEndPoint, "may hold only"},
		{"PLAINTEXT://[::1:9092", listener.ErrInvalidEndPoint, "unbalanced brackets"},
		{"PLAINTEXT://::9092", listener.ErrInvalidEndPoint, "not an IPv6 address"},
		{"PLAINTEXT://1.2.3.4:5:9092", listener.ErrInvalidEndPoint, "not an IPv6 address"},
		{"CLIENT://localhost:9092", listener.ErrNoSecurityProtocol, "No security protocol defined for listener CLIENT"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := listener.ParseEndPoint(tt.in, m)
			require.ErrorIs(t, err, tt.sentinel)
			assert.Contains(t, err.Error(), tt.contains)
		})
	}
}

func TestParseEndPoints(t *testing.T) {
	eps, err := listener.ParseEndPoints("listeners", " plaintext://localhost:9091 , SsL://localhost:9092,, ", protocolmap.Default())
	require.NoError(t, err)
	require.Len(t, eps, 2)
	assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), eps[0].Name)
	assert.Equal(t, protocolmap.ListenerName("SSL"), eps[1].Name)

	eps, err = listener.ParseEndPoints("listeners", "", protocolmap.Default())
	require.NoError(t, err)
	assert.Empty(t, eps)

	tests := []struct {
		value, contains string
		sentinel        error
	}{
		{"PLAINTEXT://a:1,plaintext://b:2", "Each listener must have a different name", listener.ErrDuplicateName},
		{"CONTROLLER://localhost:9092", "Error creating broker listeners from 'CONTROLLER://localhost:9092': No security protocol defined for listener CONTROLLER", listener.ErrNoSecurityProtocol},
		{"PLAINTEXT://a:1,SSL//b:2", "Unable to parse SSL//b:2 to a broker endpoint", listener.ErrInvalidEndPoint},
	}
	for _, tt := range tests {
		_, err := listener.ParseEndPoints("advertised.listeners", tt.value, protocolmap.Default())
		require.ErrorIs(t, err, tt.sentinel, tt.value)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "advertised.listeners", ce.Key)
		assert.Equal(t, tt.value, ce.Value)
		assert.Contains(t, ce.Rule, tt.contains)
	}
}

// FuzzParseEndPoint checks that ParseEndPoint never panics, that what it
// accepts is within the documented limits, and that String round-trips.
func FuzzParseEndPoint(f *testing.F) {
	for _, s := range []string{
		"PLAINTEXT://:9092", "CLIENT://[::1]:9092", "client://::1:0", "SSL://host_1.example:65535",
		"X://[fe80::1%eth0]:1", "PLAINTEXT://a:-1", "a://b://c:1", "PLAINTEXT://[x]:1", "PLAINTEXT://1.2.3.4:5:6",
	} {
		f.Add(s)
	}
	m := protocolmap.Map{"CLIENT": protocolmap.SASLSSL, "X": protocolmap.SSL}
	for n, p := range protocolmap.Default() {
		m[n] = p
	}
	f.Fuzz(func(t *testing.T, entry string) {
		ep, err := listener.ParseEndPoint(entry, m)
		if err != nil {
			return
		}
		if ep.Port < 0 || ep.Port > 65535 {
			t.Fatalf("port %d accepted from %q", ep.Port, entry)
		}
		if _, ok := m[ep.Name]; !ok {
			t.Fatalf("name %q not in map, from %q", ep.Name, entry)
		}
		again, err := listener.ParseEndPoint(ep.String(), m)
		if err != nil {
			t.Fatalf("%q parsed to %+v whose String %q does not parse: %v", entry, ep, ep.String(), err)
		}
		if again != ep {
			t.Fatalf("round trip of %q: %+v != %+v", entry, again, ep)
		}
	})
}
