package config_test

import (
	"flag"
	"io"
	"testing"

	"github.com/kafkanet/kafkanet/config"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseProperties holds ParseProperties to java.util.Properties.load's
// reading of each text.
func TestParseProperties(t *testing.T) {
	for _, tt := range []struct {
		name string
		text string
		want config.Properties
	}{
		{"separators", "a=1\nb:2\nc 3\nd\t4\ne\f5", config.Properties{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}},
		{"white space around the separator", "a  =  1 \nb \t: 2", config.Properties{"a": "1 ", "b": "2"}},
		{"white space then a second separator is value", "a = =1\nb  :: 2", config.Properties{"a": "=1", "b": ": 2"}},
		{"key alone", "lonely\n  spaced  ", config.Properties{"lonely": "", "spaced": ""}},
		{"comments and blank lines", "# c\n  ! c\n\n \t \na=1\n#b=2", config.Properties{"a": "1"}},
		{"comment inside a value is value", "a=1 # not a comment", config.Properties{"a": "1 # not a comment"}},
		{"line endings", "a=1\r\nb=2\rc=3\n", config.Properties{"a": "1", "b": "2", "c": "3"}},
		{"continuation skips the next line's leading white space", "a=1,\\\n    2,\\\r\n\t3", config.Properties{"a": "1,2,3"}},
		{"an even count of backslashes does not continue", "a=x\\\\\nb=y", config.Properties{"a": `x\`, "b": "y"}},
		{"a comment line does not continue", "# c \\\na=1", config.Properties{"a": "1"}},
		{"continued key", "ke\\\n  y=v", config.Properties{"key": "v"}},
		{"escaped separators in the key", `a\=b\:c\ d=e`, config.Properties{"a=b:c d": "e"}},
		{"escapes", `k=\t\n\r\f\\\u0041\u00e9\q`, config.Properties{"k": "\t\n\r\f\\Aéq"}},
		{"ISO-8859-1 bytes", "k=\xe9\xff", config.Properties{"k": "éÿ"}},
		{"later key wins", "a=1\na=2", config.Properties{"a": "2"}},
		{"no expansion", "a=${b}", config.Properties{"a": "${b}"}},
		{"backslash at the end of the text", "a=1\\", config.Properties{"a": "1"}},
		{"empty key", "=v", config.Properties{"": "v"}},
		{"Kafka's JAAS value", "listener.name.client.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n    user_alice=\"alice-secret\";",
			config.Properties{"listener.name.client.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.ParseProperties([]byte(tt.text))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{`a=\u12`, `a=\u12G4`, `\uZZZZ=1`, "a=1\nb=\\u"} {
		_, err := config.ParseProperties([]byte(bad))
		assert.ErrorContains(t, err, `malformed \uxxxx encoding`, "%q", bad)
	}
	_, err := config.ParseProperties([]byte("a=1\nb=2\nc=\\u00"))
	assert.ErrorContains(t, err, "line 3")
}

// Overrides is the flag.Value of a repeatable -set key=value flag, whose
// settings Properties.With lays over a file's.
func TestOverrides(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var sets config.Overrides
	fs.Var(&sets, "set", "")
	require.NoError(t, fs.Parse([]string{"-set", "a=1", "-set", "b = x=y", "-set", "c="}))
	assert.Equal(t, config.Overrides{"a=1", "b = x=y", "c="}, sets)
	assert.Equal(t, "a=1 b = x=y c=", sets.String())
	props, err := config.Properties{"a": "0", "d": "4"}.With(sets...)
	require.NoError(t, err)
	assert.Equal(t, config.Properties{"a": "1", "b": " x=y", "c": "", "d": "4"}, props)
	for _, bad := range []string{"novalue", "=x", " =x"} {
		assert.Error(t, fs.Parse([]string{"-set", bad}), bad)
	}
}
