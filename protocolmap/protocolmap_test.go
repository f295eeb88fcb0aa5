package protocolmap_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func TestParseSecurityProtocol(t *testing.T) {
	tests := []struct {
		in      string
		want    protocolmap.SecurityProtocol
		wantErr bool
	}{
		{"PLAINTEXT", protocolmap.Plaintext, false},
		{"plaintext", protocolmap.Plaintext, false},
		{"Ssl", protocolmap.SSL, false},
		{"sasl_plaintext", protocolmap.SASLPlaintext, false},
		{"SASL_SSL", protocolmap.SASLSSL, false},
		{"TLS", 0, true},
		{"", 0, true},
		{" SSL", 0, true}, // callers trim; the parser does not guess
		{"SASL-SSL", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := protocolmap.ParseSecurityProtocol(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, protocolmap.ErrUnknownSecurityProtocol)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSecurityProtocolString(t *testing.T) {
	// Kafka's wire ids and upper-case names.
	want := map[protocolmap.SecurityProtocol]struct {
		name string
		id   int16
	}{
		protocolmap.Plaintext:     {"PLAINTEXT", 0},
		protocolmap.SSL:           {"SSL", 1},
		protocolmap.SASLPlaintext: {"SASL_PLAINTEXT", 2},
		protocolmap.SASLSSL:       {"SASL_SSL", 3},
	}
	for p, w := range want {
		assert.Equal(t, w.name, p.String())
		assert.Equal(t, w.id, int16(p))
		text, err := p.MarshalText()
		require.NoError(t, err)
		var back protocolmap.SecurityProtocol
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, p, back)
	}
	assert.Equal(t, "SecurityProtocol(9)", protocolmap.SecurityProtocol(9).String())
	_, err := protocolmap.SecurityProtocol(9).MarshalText()
	assert.Error(t, err)
	assert.True(t, protocolmap.SASLSSL.UsesTLS() && protocolmap.SASLSSL.UsesSASL())
	assert.False(t, protocolmap.Plaintext.UsesTLS() || protocolmap.Plaintext.UsesSASL())
}

func TestParseListenerName(t *testing.T) {
	for in, want := range map[string]protocolmap.ListenerName{
		"client": "CLIENT", " Replication ": "REPLICATION", "INTERNAL": "INTERNAL",
	} {
		got, err := protocolmap.ParseListenerName(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
	}
	for _, in := range []string{"", "  ", "\t"} {
		_, err := protocolmap.ParseListenerName(in)
		assert.ErrorIs(t, err, protocolmap.ErrBlankListenerName, "%q", in)
	}
	assert.Equal(t, "listener.name.client.", protocolmap.ListenerName("CLIENT").ConfigPrefix())
}

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  protocolmap.Map
	}{
		{"empty", "", protocolmap.Map{}},
		{"blank", "   ", protocolmap.Map{}},
		{"single", "CLIENT:SASL_SSL", protocolmap.Map{"CLIENT": protocolmap.SASLSSL}},
		{"shared protocol", "CLIENT:SSL,REPLICATION:SSL,INTERNAL:PLAINTEXT",
			protocolmap.Map{"CLIENT": protocolmap.SSL, "REPLICATION": protocolmap.SSL, "INTERNAL": protocolmap.Plaintext}},
		{"white space around commas and colons", "  client : ssl ,\treplication:Sasl_Plaintext  ",
			protocolmap.Map{"CLIENT": protocolmap.SSL, "REPLICATION": protocolmap.SASLPlaintext}},
		{"trailing empty entries dropped", "A:SSL,,", protocolmap.Map{"A": protocolmap.SSL}},
		{"last colon splits", "A:B:SSL", protocolmap.Map{"A:B": protocolmap.SSL}},
		{"default text", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", protocolmap.Default()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocolmap.Parse(tt.value)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		value    string
		sentinel error
		rule     string
	}{
		{"unknown protocol", "CLIENT:TLS", protocolmap.ErrUnknownSecurityProtocol,
			"Invalid security protocol `TLS` defined in listener.security.protocol.map"},
		{"empty protocol", "CLIENT:", protocolmap.ErrUnknownSecurityProtocol,
			"Invalid security protocol `` defined in listener.security.protocol.map"},
		{"missing colon", "CLIENT:SSL,REPLICATION", protocolmap.ErrMissingColon, `entry "REPLICATION" has no colon`},
		{"leading empty entry", ",CLIENT:SSL", protocolmap.ErrMissingColon, `entry "" has no colon`},
		{"inner empty entry", "A:SSL,,B:SSL", protocolmap.ErrMissingColon, `entry "" has no colon`},
		{"blank key", " :SSL", protocolmap.ErrBlankKey, "empty key"},
		{"duplicate key", "CLIENT:SSL,CLIENT:SSL", protocolmap.ErrDuplicateKey, `key "CLIENT" appears more than once`},
		{"duplicate key in other case", "client:SSL,Client:PLAINTEXT", protocolmap.ErrDuplicateKey, `as "client" and "Client"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := protocolmap.Parse(tt.value)
			require.ErrorIs(t, err, tt.sentinel)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "listener.security.protocol.map", ce.Key)
			assert.Equal(t, tt.value, ce.Value)
			assert.Contains(t, ce.Rule, tt.rule)
			assert.Contains(t, err.Error(), "listener.security.protocol.map")
		})
	}
}

func TestConfigErrorFormat(t *testing.T) {
	err := error(&config.Error{Key: "k", Value: "v", Rule: "r", Err: protocolmap.ErrBlankKey})
	assert.Equal(t, `invalid value "v" for configuration k: r`, err.Error())
	assert.True(t, errors.Is(err, protocolmap.ErrBlankKey))
}

func TestMapStringRoundTrip(t *testing.T) {
	m := protocolmap.Map{"CLIENT": protocolmap.SASLSSL, "REPLICATION": protocolmap.SSL, "A": protocolmap.Plaintext}
	assert.Equal(t, "A:PLAINTEXT,CLIENT:SASL_SSL,REPLICATION:SSL", m.String())
	back, err := protocolmap.Parse(m.String())
	require.NoError(t, err)
	assert.Equal(t, m, back)
	p, ok := m.Lookup(" client ")
	assert.True(t, ok)
	assert.Equal(t, protocolmap.SASLSSL, p)
	_, ok = m.Lookup("missing")
	assert.False(t, ok)
}

// The CSV-map parser also serves max.connections.per.ip.overrides, whose keys
// are hosts: IPv6 hosts work because entries split at their last colon.
func TestParseCSVMapPerIPOverrides(t *testing.T) {
	const key = "max.connections.per.ip.overrides"
	got, err := protocolmap.ParseCSVMap(key, "127.0.0.1:200, ::1:100 ,fe80::1%eth0:5, broker-1.example:7")
	require.NoError(t, err)
	assert.Equal(t, []protocolmap.Entry{
		{Key: "127.0.0.1", Value: "200"},
		{Key: "::1", Value: "100"},
		{Key: "fe80::1%eth0", Value: "5"},
		{Key: "broker-1.example", Value: "7"},
	}, got)

	_, err = protocolmap.ParseCSVMap(key, "::1:1,::1:2")
	require.ErrorIs(t, err, protocolmap.ErrDuplicateKey)
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, key, ce.Key)
}

func TestSplitList(t *testing.T) {
	assert.Equal(t, []string{"a", "b", "c"}, protocolmap.SplitList(" a , b,,c, "))
	assert.Nil(t, protocolmap.SplitList("  "))
}
