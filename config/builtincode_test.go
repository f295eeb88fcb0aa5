package config_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// The security values config reads are plain: a listener's TLS
// configuration and Settings built in code with the same certificates and
// choices hold the same values, and a server of either serves the same
// certificate to each server name, asks for the same client certificates
// and speaks the same versions.
func TestTLSBuiltInCodeAsParsed(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	named := testkit.IssueServer(t, f.CA, "a", "a.example.com")
	r := secResolve(t, "ssl.keystore.type", "PEM",
		"ssl.keystore.location", testkit.WritePEMFile(t, dir, "server.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM()),
		"ssl.truststore.type", "PEM", "ssl.truststore.location", testkit.WritePEMFile(t, dir, "ca.pem", f.CA.CertPEM()),
		"ssl.client.auth", "required", "ssl.enabled.protocols", "TLSv1.3",
		"kafkanet.ssl.server.names", "a.example.com",
		"kafkanet.ssl.server.name.a.example.com.ssl.keystore.location", testkit.WritePEMFile(t, dir, "a.pem", named.PKCS8PEM(t)+named.CertPEM()),
		"listener.name.ssl.ssl.allow.san.changes", "true")
	parsed, err := forListener(r, "SSL")
	require.NoError(t, err)

	base := &tls.Config{Certificates: []tls.Certificate{f.ServerEC.TLSCertificate()}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: f.CAPool(), MinVersion: tls.VersionTLS13, MaxVersion: tls.VersionTLS13}
	codeTLS, err := security.WithServerNameCertificates(base, security.ServerNameCertificate{Names: []string{"a.example.com"}, Certificate: named.TLSCertificate()})
	require.NoError(t, err)
	mapper, err := security.ParsePrincipalMappingRules(security.DefaultPrincipalMappingRules)
	require.NoError(t, err)
	code := security.Settings{TLS: codeTLS, AllowSANChanges: true, AllowDNChangesKey: "ssl.allow.dn.changes",
		AllowSANChangesKey: "listener.name.ssl.ssl.allow.san.changes", PrincipalMapper: mapper, HandshakeTimeout: security.DefaultHandshakeTimeout}

	// Every field but the tls.Config, whose GetCertificate is a function,
	// is the same value.
	p, c := parsed, code
	p.TLS, c.TLS = nil, nil
	assert.Equal(t, c, p)
	assert.Equal(t, codeTLS.ClientAuth, parsed.TLS.ClientAuth)
	assert.True(t, codeTLS.ClientCAs.Equal(parsed.TLS.ClientCAs))
	assert.Equal(t, [2]uint16{codeTLS.MinVersion, codeTLS.MaxVersion}, [2]uint16{parsed.TLS.MinVersion, parsed.TLS.MaxVersion})
	assert.Equal(t, codeTLS.CipherSuites, parsed.TLS.CipherSuites)
	require.Len(t, parsed.TLS.Certificates, len(codeTLS.Certificates))
	for i := range codeTLS.Certificates {
		assert.Equal(t, codeTLS.Certificates[i].Certificate, parsed.TLS.Certificates[i].Certificate, "certificate %d", i)
	}

	client := &tls.Config{RootCAs: f.CAPool(), Certificates: []tls.Certificate{f.Client.TLSCertificate()}, MinVersion: tls.VersionTLS12}
	for _, serverName := range []string{"a.example.com", "localhost"} {
		served := func(cfg *tls.Config) []*x509.Certificate {
			cli := client.Clone()
			cli.ServerName = serverName
			serverErr, clientErr, peer := pipeHandshake(t, cfg, cli)
			require.NoError(t, serverErr, serverName)
			require.NoError(t, clientErr, serverName)
			return peer
		}
		assert.Equal(t, served(codeTLS)[0].Raw, served(parsed.TLS)[0].Raw, "the client certificate both see for %s", serverName)
		assert.Equal(t, testkit.ServedLeaf(t, withoutClientAuth(codeTLS), nil, serverName).Raw,
			testkit.ServedLeaf(t, withoutClientAuth(parsed.TLS), nil, serverName).Raw, "the certificate served to %s", serverName)
	}
	// Both refuse a client without a certificate, and a change of
	// subject, alike.
	for _, cfg := range []*tls.Config{codeTLS, parsed.TLS} {
		_, clientErr, _ := pipeHandshake(t, cfg, &tls.Config{RootCAs: f.CAPool(), ServerName: "localhost", MinVersion: tls.VersionTLS12})
		assert.Error(t, clientErr)
	}
	other := &tls.Config{Certificates: []tls.Certificate{f.ServerRSA.TLSCertificate(), named.TLSCertificate()}}
	assert.Equal(t, code.CheckCertificateChange(codeTLS, other).Error(), parsed.CheckCertificateChange(parsed.TLS, other).Error())
}

// withoutClientAuth is cfg asking for no client certificate, for a client
// that has none.
func withoutClientAuth(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	c.ClientAuth = tls.NoClientCert
	return c
}

// OAUTHBEARER settings read from Kafka's keys are the plain value a host
// would build with Kafka's defaults, for either validator.
func TestOAuthBearerBuiltInCodeAsParsed(t *testing.T) {
	url := writeJWKS(t)
	parsed, err := oauthSettings(t, config.Properties{oauthJAASKey: loginModule + ";", oauthClassKey: config.OAuthBearerValidatorCallbackHandler,
		"sasl.oauthbearer.jwks.endpoint.url": url, "sasl.oauthbearer.expected.audience": "kafka,admin"})
	require.NoError(t, err)
	assert.Equal(t, security.OAuthBearerSettings{Listener: "SASL_PLAINTEXT", JWKS: &security.OAuthBearerJWKS{
		URL: url, Refresh: time.Hour, RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 10 * time.Second,
		ExpectedAudience: []string{"kafka", "admin"}, ClockSkew: 30 * time.Second, ScopeClaimName: "scope", SubClaimName: "sub",
	}}, parsed)

	parsed, err = oauthSettings(t, config.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorRequiredScope="read write";`})
	require.NoError(t, err)
	assert.Equal(t, security.OAuthBearerSettings{Listener: "SASL_PLAINTEXT", Unsecured: &security.OAuthBearerUnsecured{
		PrincipalClaimName: "sub", ScopeClaimName: "scope", RequiredScope: []string{"read", "write"},
	}}, parsed)
}

// The users config.JAASUsers reads are plain values: the same lists built
// in code give stores that log in the same users with the same passwords,
// with every built-in mechanism, and reload alike.
func TestJAASUsersBuiltInCodeAsParsed(t *testing.T) {
	r := resolveJAAS(t, "listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret" user_bob="bob-secret"`),
		"listener.name.b.plain.sasl.jaas.config", jaas(`user_carol="carol-secret"`),
		"listener.name.b.scram-sha-256.sasl.jaas.config", scramJAAS(`user_dave="dave-secret"`))
	lists, warnings, err := config.JAASUsers(r.props, r.set)
	require.NoError(t, err)
	require.Empty(t, warnings)
	const plainA, plainB, scramB = "listener.name.a.plain.sasl.jaas.config", "listener.name.b.plain.sasl.jaas.config", "listener.name.b.scram-sha-256.sasl.jaas.config"
	code := map[protocolmap.ListenerName]security.ListenerUsers{
		"A": {Lists: map[string]map[string]string{plainA: {"alice": "alice-secret", "bob": "bob-secret"}}, Plain: plainA, SCRAMSHA256: plainA},
		"B": {Lists: map[string]map[string]string{plainB: {"carol": "carol-secret"}, scramB: {"dave": "dave-secret"}}, Plain: plainB, SCRAMSHA256: scramB},
	}
	assert.Equal(t, code, lists)

	fromProps, err := security.NewJAASUsers(lists)
	require.NoError(t, err)
	fromCode, err := security.NewJAASUsers(code)
	require.NoError(t, err)
	logsIn := func(u *security.JAASUsers) map[string]bool {
		out := map[string]bool{}
		for name, store := range u.Stores() {
			for _, user := range []string{"alice", "bob", "carol", "dave"} {
				out[string(name)+" PLAIN "+user] = store.CheckPlain(user, user+"-secret")
				for _, mech := range []string{sasl.SCRAMSHA256, sasl.SCRAMSHA512} {
					_, ok := store.SCRAM(mech, user)
					out[string(name)+" "+mech+" "+user] = ok
				}
			}
		}
		return out
	}
	want := logsIn(fromCode)
	assert.Equal(t, want, logsIn(fromProps))
	assert.True(t, want["B SCRAM-SHA-256 dave"])
	assert.False(t, want["B PLAIN dave"], "dave is SCRAM's alone")

	next := map[protocolmap.ListenerName]security.ListenerUsers{"A": code["A"]}
	a, err := fromProps.Reload(r.set, next)
	require.Error(t, err, "B, still a listener, loses its users: a restart's change")
	b, err2 := fromCode.Reload(r.set, next)
	assert.Equal(t, a, b)
	assert.Equal(t, err.Error(), err2.Error())

	_, err = security.NewJAASUsers(map[protocolmap.ListenerName]security.ListenerUsers{"A": {Plain: "missing"}})
	assert.ErrorContains(t, err, `PLAIN logs in the users of list "missing"`)
	assert.ErrorIs(t, err, security.ErrJAASConfig, "users missing where a built-in mechanism needs them")
}
