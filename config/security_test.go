package config_test

import (
	"crypto/tls"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

func TestSecurity(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	keystore := testkit.WritePEMFile(t, dir, "server.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
	tlsKeys := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", keystore}
	kv := func(extra ...string) []string { return append(append([]string{}, tlsKeys...), extra...) }

	tests := []struct {
		name     string
		listener protocolmap.ListenerName
		kv       []string
		errKey   string
		errText  string
		check    func(t *testing.T, s security.Settings)
	}{
		{name: "PLAINTEXT needs nothing", listener: "PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "GSSAPI", "ssl.principal.mapping.rules", "bogus"}, check: func(t *testing.T, s security.Settings) {
			assert.Nil(t, s.TLS)
			assert.Nil(t, s.EnabledMechanisms)
			assert.Nil(t, s.PrincipalMapper)
			assert.Zero(t, s.ReauthMax)
			assert.Equal(t, 10*time.Second, s.HandshakeTimeout)
		}},
		{name: "SSL defaults", listener: "SSL", kv: kv(), check: func(t *testing.T, s security.Settings) {
			require.NotNil(t, s.TLS)
			assert.Nil(t, s.EnabledMechanisms)
			require.NotNil(t, s.PrincipalMapper)
			assert.Equal(t, "[DEFAULT]", s.PrincipalMapper.String())
			name, err := s.PrincipalMapper.Name("CN=x,O=y")
			require.NoError(t, err)
			assert.Equal(t, "CN=x,O=y", name)
		}},
		{name: "SSL prefixed mapping rules", listener: "SSL", kv: kv("ssl.principal.mapping.rules", "DEFAULT", "listener.name.ssl.ssl.principal.mapping.rules", "RULE:^CN=([^,]*).*$/$1/U"), check: func(t *testing.T, s security.Settings) {
			name, err := s.PrincipalMapper.Name("CN=bob,O=y")
			require.NoError(t, err)
			assert.Equal(t, "BOB", name)
		}},
		{name: "SSL invalid mapping rules", listener: "SSL", kv: kv("ssl.principal.mapping.rules", "default"), errKey: "ssl.principal.mapping.rules", errText: "Invalid rule: `default`"},
		{name: "SSL invalid prefixed mapping rules", listener: "CLIENT", kv: kv("listener.name.client.ssl.principal.mapping.rules", "RULE:(?=x)/y/"), errKey: "listener.name.client.ssl.principal.mapping.rules", errText: "Invalid rule"},
		{name: "SSL errors from TLS", listener: "SSL", kv: nil, errKey: "ssl.keystore.location"},
		{name: "SASL_SSL ignores mapping rules", listener: "SASL_SSL", kv: kv("sasl.enabled.mechanisms", "PLAIN", "ssl.principal.mapping.rules", "default"), check: func(t *testing.T, s security.Settings) {
			assert.NotNil(t, s.TLS)
			assert.Nil(t, s.PrincipalMapper)
		}},

		// Kafka's default is GSSAPI; whether anything implements a mechanism
		// is the socket server's to check (socketserver.New).
		{name: "SASL without mechanisms: Kafka's GSSAPI default", listener: "SASL_PLAINTEXT", check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, []string{"GSSAPI"}, s.EnabledMechanisms)
		}},
		{name: "SASL_SSL without mechanisms", listener: "SASL_SSL", kv: kv(), check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, []string{"GSSAPI"}, s.EnabledMechanisms)
		}},
		{name: "any mechanism name", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN,GSSAPI,AWS_MSK_IAM,DIGEST-MD5"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, []string{"PLAIN", "GSSAPI", "AWS_MSK_IAM", "DIGEST-MD5"}, s.EnabledMechanisms)
		}},
		{name: "empty mechanism list", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", " , "}, errKey: "sasl.enabled.mechanisms", errText: "enables no SASL mechanism"},
		// sasl.enabled.mechanisms is case-sensitive in Kafka
		// (SaslServerAuthenticator compares with List.contains): plain
		// and PLAIN are two names.
		{name: "mechanisms trimmed, deduplicated, case kept", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", " plain, scram-sha-256 ,PLAIN,OAUTHBEARER,SCRAM-SHA-512,plain"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, []string{"plain", "scram-sha-256", "PLAIN", "OAUTHBEARER", "SCRAM-SHA-512"}, s.EnabledMechanisms)
			assert.Nil(t, s.TLS)
			assert.Nil(t, s.PrincipalMapper)
		}},
		{name: "prefixed mechanisms override", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "GSSAPI", "listener.name.sasl_plaintext.sasl.enabled.mechanisms", "SCRAM-SHA-512"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, []string{"SCRAM-SHA-512"}, s.EnabledMechanisms)
		}},

		{name: "reauth default off", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN"}, check: func(t *testing.T, s security.Settings) {
			assert.Zero(t, s.ReauthMax)
			assert.Zero(t, s.ReauthMaxFor("PLAIN"))
		}},
		{name: "reauth un-prefixed, prefixed and per mechanism", listener: "SASL_PLAINTEXT", kv: []string{
			"sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256",
			"connections.max.reauth.ms", "3600000",
			"listener.name.sasl_plaintext.connections.max.reauth.ms", "600000",
			"listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms", "60000",
			"listener.name.sasl_plaintext.oauthbearer.connections.max.reauth.ms", "1000",
		}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, 10*time.Minute, s.ReauthMax)
			assert.Equal(t, 10*time.Minute, s.ReauthMaxFor("PLAIN"))
			assert.Equal(t, time.Minute, s.ReauthMaxFor("SCRAM-SHA-256"))
			assert.Equal(t, 10*time.Minute, s.ReauthMaxFor("scram-sha-256"), "names are case-sensitive")
			assert.Equal(t, 10*time.Minute, s.ReauthMaxFor("OAUTHBEARER"), "a mechanism not enabled keeps the listener value")
		}},
		{name: "reauth un-prefixed", listener: "SASL_SSL", kv: kv("sasl.enabled.mechanisms", "PLAIN", "connections.max.reauth.ms", "3600000"), check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, time.Hour, s.ReauthMax)
		}},
		{name: "reauth per mechanism turned off", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN", "connections.max.reauth.ms", "3600000", "listener.name.sasl_plaintext.plain.connections.max.reauth.ms", "0"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, time.Hour, s.ReauthMax)
			assert.Zero(t, s.ReauthMaxFor("PLAIN"))
		}},
		{name: "reauth negative is off", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN", "connections.max.reauth.ms", "-5"}, check: func(t *testing.T, s security.Settings) {
			assert.Zero(t, s.ReauthMax)
		}},
		{name: "reauth huge saturates", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN", "connections.max.reauth.ms", "9223372036854775807"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, time.Duration(math.MaxInt64), s.ReauthMax)
		}},
		{name: "reauth not a number", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN", "connections.max.reauth.ms", "1h"}, errKey: "connections.max.reauth.ms", errText: "64-bit integer"},
		{name: "reauth per mechanism not a number", listener: "SASL_PLAINTEXT", kv: []string{"sasl.enabled.mechanisms", "PLAIN", "listener.name.sasl_plaintext.plain.connections.max.reauth.ms", "x"}, errKey: "listener.name.sasl_plaintext.plain.connections.max.reauth.ms"},
		{name: "reauth ignored off SASL", listener: "PLAINTEXT", kv: []string{"connections.max.reauth.ms", "x"}, check: func(t *testing.T, s security.Settings) {
			assert.Zero(t, s.ReauthMax)
		}},

		{name: "handshake timeout", listener: "PLAINTEXT", kv: []string{"kafkanet.handshake.timeout.ms", "2500"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, 2500*time.Millisecond, s.HandshakeTimeout)
		}},
		{name: "prefixed handshake timeout", listener: "PLAINTEXT", kv: []string{"kafkanet.handshake.timeout.ms", "2500", "listener.name.plaintext.kafkanet.handshake.timeout.ms", "1"}, check: func(t *testing.T, s security.Settings) {
			assert.Equal(t, time.Millisecond, s.HandshakeTimeout)
		}},
		{name: "zero handshake timeout", listener: "PLAINTEXT", kv: []string{"kafkanet.handshake.timeout.ms", "0"}, errKey: "kafkanet.handshake.timeout.ms", errText: "at least 1"},
		{name: "bad prefixed handshake timeout", listener: "SSL", kv: kv("listener.name.ssl.kafkanet.handshake.timeout.ms", "soon"), errKey: "listener.name.ssl.kafkanet.handshake.timeout.ms"},
		{name: "unknown listener", listener: "NOPE", errKey: "listener.security.protocol.map"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := secResolve(t, tt.kv...)
			s, err := forListener(c, tt.listener)
			if tt.errKey != "" {
				testkit.RequireConfigError(t, err, tt.errKey, nil)
				assert.Contains(t, err.Error(), tt.errText)
				assert.Zero(t, s.HandshakeTimeout, "no partial result")
				return
			}
			require.NoError(t, err)
			tt.check(t, s)
		})
	}
}

func TestSecuritySentinels(t *testing.T) {
	c := secResolve(t, "sasl.enabled.mechanisms", ",", "ssl.principal.mapping.rules", "x", "connections.max.reauth.ms", "x")
	_, err := forListener(c, "SASL_PLAINTEXT")
	assert.ErrorIs(t, err, security.ErrSASLMechanism)
	_, err = forListener(c, "SSL")
	assert.ErrorIs(t, err, security.ErrTLSConfig)

	dir := t.TempDir()
	f := testkit.TLSTestFixture(t)
	keystore := testkit.WritePEMFile(t, dir, "k.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
	c = secResolve(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", keystore, "ssl.principal.mapping.rules", "x")
	_, err = forListener(c, "SSL")
	assert.ErrorIs(t, err, security.ErrInvalidPrincipalRule)

	c = secResolve(t, "sasl.enabled.mechanisms", "PLAIN", "connections.max.reauth.ms", "x")
	_, err = forListener(c, "SASL_PLAINTEXT")
	assert.ErrorIs(t, err, listener.ErrInvalidValue)
}

func TestSecurityTLSIsTheListeners(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	c := secResolve(t, "ssl.keystore.type", "PEM",
		"ssl.keystore.location", testkit.WritePEMFile(t, dir, "a.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM()),
		"listener.name.client.ssl.keystore.location", testkit.WritePEMFile(t, dir, "b.pem", f.ServerRSA.PKCS8PEM(t)+f.ServerRSA.CertPEM()),
		"listener.name.client.ssl.enabled.protocols", "TLSv1.3")
	ssl, err := forListener(c, "SSL")
	require.NoError(t, err)
	client, err := forListener(c, "CLIENT")
	require.NoError(t, err)
	assert.Equal(t, f.ServerEC.Cert.Raw, ssl.TLS.Certificates[0].Certificate[0])
	assert.Equal(t, f.ServerRSA.Cert.Raw, client.TLS.Certificates[0].Certificate[0])
	assert.Equal(t, uint16(tls.VersionTLS12), ssl.TLS.MinVersion)
	assert.Equal(t, uint16(tls.VersionTLS13), client.TLS.MinVersion)
}

// Settings built in code with the values Security reads from
// properties are the same value, and behave the same (ReauthMaxFor): the
// per-mechanism re-authentication limits are a field, not state hidden
// in a parsed value.
func TestSettingsBuiltInCodeAsParsed(t *testing.T) {
	set := resolve(t, config.Properties{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.connections.max.reauth.ms":               "600000",
		"listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "60000",
		"kafkanet.handshake.timeout.ms":                                        "5000",
		"security.inter.broker.protocol":                                       "SASL_PLAINTEXT",
	})
	parsed, err := forListener(set, "SASL_PLAINTEXT")
	require.NoError(t, err)
	code := security.Settings{
		EnabledMechanisms:    []string{"PLAIN", "SCRAM-SHA-256"},
		EnabledMechanismsKey: "sasl.enabled.mechanisms",
		ReauthMax:            10 * time.Minute,
		ReauthMaxByMechanism: map[string]time.Duration{"SCRAM-SHA-256": time.Minute},
		HandshakeTimeout:     5 * time.Second,
	}
	assert.Equal(t, code, parsed)
	for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"} {
		assert.Equal(t, parsed.ReauthMaxFor(m), code.ReauthMaxFor(m), m)
	}
	assert.Equal(t, time.Minute, code.ReauthMaxFor("SCRAM-SHA-256"))

	// A listener that enables OAUTHBEARER and leaves it to the host: why
	// is a field too, so Settings built in code carry it the same way.
	set = resolve(t, config.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":        "OAUTHBEARER",
		"security.inter.broker.protocol": "SASL_PLAINTEXT",
	})
	parsed, err = forListener(set, "SASL_PLAINTEXT")
	require.NoError(t, err)
	require.ErrorIs(t, parsed.OAuthBearerNotConfigured, security.ErrOAuthBearerNotConfigured)
	var ce *config.Error
	require.ErrorAs(t, parsed.OAuthBearerNotConfigured, &ce)
	assert.Equal(t, "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config", ce.Key)
	code = security.Settings{
		EnabledMechanisms:        []string{"OAUTHBEARER"},
		EnabledMechanismsKey:     "sasl.enabled.mechanisms",
		HandshakeTimeout:         security.DefaultHandshakeTimeout,
		OAuthBearerNotConfigured: &config.Error{Key: ce.Key, Value: ce.Value, Rule: ce.Rule, Err: security.ErrOAuthBearerNotConfigured},
	}
	assert.Equal(t, code, parsed)
}
