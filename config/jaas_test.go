package config_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

const plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

func TestParsePlainJAAS(t *testing.T) {
	tests := []struct {
		name, value string
		want        map[string]string
	}{
		{"Kafka's example", plainModule + ` required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
			map[string]string{"admin": "admin-secret", "alice": "alice-secret"}},
		{"flag in any case", plainModule + ` REQUIRED user_a="x";`, map[string]string{"a": "x"}},
		{"other flags", plainModule + ` sufficient user_a="x";`, map[string]string{"a": "x"}},
		{"no options", plainModule + ` optional;`, map[string]string{}},
		{"white space and line breaks", "\n\t" + plainModule + "\n  requisite\n  user_a = \"x\"\r\n  user_b=\"y\"\n  ;\n", map[string]string{"a": "x", "b": "y"}},
		{"single quotes", plainModule + ` required user_a='x"y';`, map[string]string{"a": `x"y`}},
		{"escapes", plainModule + ` required user_a="q\"b\\s\tn\nz\101\7";`, map[string]string{"a": "q\"b\\s\tn\nzA\a"}},
		{"bare values", plainModule + ` required user_a=pass-word.1 user_b=x;`, map[string]string{"a": "pass-word.1", "b": "x"}},
		{"non-ASCII", plainModule + ` required user_zoë="pässwörd";`, map[string]string{"zoë": "pässwörd"}},
		{"comments", "/* users */ " + plainModule + " required // the flag\n user_a=\"x\" /* b */ user_b=\"y\";", map[string]string{"a": "x", "b": "y"}},
		{"a slash in a bare value starts a comment", plainModule + " required user_a=x/y\n user_b=\"z\";", map[string]string{"a": "x", "b": "z"}},
		{"the last of two options counts", plainModule + ` required user_a="x" user_a="y";`, map[string]string{"a": "y"}},
		{"quoted option names", plainModule + ` required "user_a"="x";`, map[string]string{"a": "x"}},
		{"quoted module name", `"` + plainModule + `" required user_a="x";`, map[string]string{"a": "x"}},
		{"unterminated quote ends at the line end", plainModule + " required user_a=\"x\n;", map[string]string{"a": "x"}},
		{"nothing after the semicolon", plainModule + ` required user_a="x";   `, map[string]string{"a": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			users, err := config.ParsePlainJAAS(tt.value)
			require.NoError(t, err)
			assert.Equal(t, tt.want, users)
		})
	}
}

func TestParsePlainJAASErrors(t *testing.T) {
	tests := []struct{ name, value, msg string }{
		{"empty", "", "Login module not specified in JAAS config"},
		{"only a comment", "// nothing", "Login module not specified in JAAS config"},
		{"no flag", plainModule, "Login module control flag not specified in JAAS config"},
		{"flag is an option", plainModule + ` user_a="alice-secret";`, "Invalid login module control flag 'user_a' in JAAS config"},
		{"quoted flag is not shown", plainModule + ` "alice-secret" user_a="x";`, "Invalid login module control flag (a token not shown)"},
		{"flag is a symbol", plainModule + ` ;`, "Login module control flag is not available in the JAAS config"},
		{"unknown flag", plainModule + ` mandatory user_a="x";`, "Invalid login module control flag 'mandatory'"},
		{"no semicolon", plainModule + ` required user_a="alice-secret"`, "JAAS config entry not terminated by semi-colon"},
		{"no value", plainModule + ` required user_a=;`, "Value not specified for key 'user_a' in JAAS config"},
		{"no equals", plainModule + ` required user_a "alice-secret";`, "Value not specified for key 'user_a'"},
		{"a value as key is not shown", plainModule + ` required user_a="x" "alice-secret";`, "Value not specified for key (a token not shown)"},
		{"two modules", plainModule + ` required user_a="x"; ` + plainModule + ` required user_b="y";`, "JAAS config property contains 2 login modules, should be 1 module"},
		{"another module", `org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="alice-secret";`, "login module 'org.apache.kafka.common.security.scram.ScramLoginModule' is not " + plainModule},
		{"empty module name", `"" required;`, "Login module name not specified"},
		{"empty password", plainModule + ` required user_a="";`, `user "a" has an empty password`},
		{"empty user name", plainModule + ` required user_="alice-secret";`, "names no user"},
		{"unterminated comment", plainModule + ` required /* user_a="x";`, "JAAS config entry not terminated by semi-colon"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			users, err := config.ParsePlainJAAS(tt.value)
			require.Error(t, err)
			assert.Nil(t, users)
			assert.ErrorIs(t, err, security.ErrJAASConfig)
			assert.Contains(t, err.Error(), tt.msg)
			assert.NotContains(t, err.Error(), "alice-secret")
		})
	}
}

func TestPlainUsers(t *testing.T) {
	jaas := plainModule + ` required username="broker" password="broker-secret" user_alice="alice-secret";`
	t.Run("listener and mechanism prefix", func(t *testing.T) {
		c := secResolve(t, "listener.name.sasl_ssl.plain.sasl.jaas.config", jaas)
		users, ignored, err := config.PlainUsers(c.props, "SASL_SSL")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"alice": "alice-secret"}, users)
		assert.Empty(t, ignored)
		assert.Equal(t, "listener.name.sasl_ssl.plain.sasl.jaas.config", config.MechanismKey("SASL_SSL", "PLAIN", config.KeySASLJAASConfig))
	})
	t.Run("un-prefixed key reported as ignored", func(t *testing.T) {
		c := secResolve(t, "listener.name.sasl_ssl.plain.sasl.jaas.config", jaas, "sasl.jaas.config", jaas)
		users, ignored, err := config.PlainUsers(c.props, "SASL_SSL")
		require.NoError(t, err)
		assert.Len(t, users, 1)
		assert.Equal(t, "sasl.jaas.config", ignored)
	})
	t.Run("only un-prefixed keys", func(t *testing.T) {
		c := secResolve(t, "sasl.jaas.config", jaas, "listener.name.sasl_ssl.sasl.jaas.config", jaas, "plain.sasl.jaas.config", jaas)
		users, ignored, err := config.PlainUsers(c.props, "SASL_SSL")
		ce := testkit.RequireConfigError(t, err, "listener.name.sasl_ssl.plain.sasl.jaas.config", security.ErrJAASConfig)
		assert.Contains(t, ce.Rule, "listener.name.sasl_ssl.sasl.jaas.config is set but a broker ignores it")
		assert.Nil(t, users)
		assert.Equal(t, "listener.name.sasl_ssl.sasl.jaas.config", ignored)
	})
	t.Run("another listener's key", func(t *testing.T) {
		c := secResolve(t, "listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas)
		_, ignored, err := config.PlainUsers(c.props, "SASL_SSL")
		testkit.RequireConfigError(t, err, "listener.name.sasl_ssl.plain.sasl.jaas.config", security.ErrJAASConfig)
		assert.Empty(t, ignored)
	})
	t.Run("invalid value is hidden", func(t *testing.T) {
		c := secResolve(t, "listener.name.sasl_ssl.plain.sasl.jaas.config", plainModule+` required user_alice="alice-secret"`)
		_, _, err := config.PlainUsers(c.props, "SASL_SSL")
		ce := testkit.RequireConfigError(t, err, "listener.name.sasl_ssl.plain.sasl.jaas.config", security.ErrJAASConfig)
		assert.Equal(t, "[hidden]", ce.Value)
		assert.Contains(t, err.Error(), "not terminated by semi-colon")
		assert.NotContains(t, err.Error(), "alice-secret")
	})
	t.Run("properties file", func(t *testing.T) {
		props, err := config.ParseProperties([]byte("listeners=SASL_PLAINTEXT://:9094\n" +
			"listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT\n" +
			"inter.broker.listener.name=SASL_PLAINTEXT\n" +
			"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + plainModule + " required \\\n" +
			"    username=\"admin\" \\\n" +
			"    password=\"admin-secret\" \\\n" +
			"    user_admin=\"admin-secret\" \\\n" +
			"    user_alice=\"alice-secret\";\n"))
		require.NoError(t, err)
		_, err = config.Listeners(props)
		require.NoError(t, err)
		users, _, err := config.PlainUsers(props, protocolmap.ListenerName("SASL_PLAINTEXT"))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"admin": "admin-secret", "alice": "alice-secret"}, users)
	})
}

// quoteJAAS writes s as a double-quoted JAAS string that reads back as s.
func quoteJAAS(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// FuzzParsePlainJAAS checks that parsing never panics, that no error
// message shows a value the input gave as a quoted option value, and that
// the users of an accepted value, written back canonically, read back the
// same.
func FuzzParsePlainJAAS(f *testing.F) {
	for _, s := range []string{
		plainModule + ` required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`,
		"", ";", "a b;", plainModule + ` required user_a='x\'y' /* c */ // d`, plainModule + " REQUIRED user_a=\"\\377\\0\\\" user_b=x/y\n;",
		"/", "/*", "\"", "x required == y;", plainModule + " required user_a=\"\u0085\u00a0\";",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		users, err := config.ParsePlainJAAS(value)
		if err != nil {
			if users != nil {
				t.Fatalf("users and an error: %v", err)
			}
			return
		}
		var b strings.Builder
		b.WriteString(plainModule + " required")
		for _, name := range slices.Sorted(maps.Keys(users)) {
			b.WriteString(" " + quoteJAAS("user_"+name) + "=" + quoteJAAS(users[name]))
		}
		b.WriteString(";")
		again, err := config.ParsePlainJAAS(b.String())
		if err != nil {
			t.Fatalf("%q gave %v, whose canonical form %q does not parse: %v", value, users, b.String(), err)
		}
		if !maps.Equal(users, again) {
			t.Fatalf("%q gave %v, but its canonical form %q gives %v", value, users, b.String(), again)
		}
	})
}
