package config_test

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"net"
	"path/filepath"
	"strings"
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

// resolved is a listener set and the properties it was read from, which
// the readers of security settings take together.
type resolved struct {
	props config.Properties
	set   *listener.Set
}

// resolve reads the listeners of props.
func resolve(t testing.TB, props config.Properties) resolved {
	t.Helper()
	set, err := config.Listeners(props)
	require.NoError(t, err)
	return resolved{props, set}
}

func secResolve(t testing.TB, kv ...string) resolved {
	t.Helper()
	return resolve(t, testkit.SecurityListeners(kv...))
}

func tlsConfig(r resolved, name protocolmap.ListenerName) (*tls.Config, error) {
	return config.TLS(r.props, r.set, name)
}

func forListener(r resolved, name protocolmap.ListenerName) (security.Settings, error) {
	return config.Security(r.props, r.set, name)
}

func TestTLSConfig(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	chainEC := f.ServerEC.CertPEM() + f.CA.CertPEM()
	files := map[string]string{
		"pkcs8-ec":      testkit.WritePEMFile(t, dir, "pkcs8-ec.pem", f.ServerEC.PKCS8PEM(t)+chainEC),
		"pkcs8-rsa":     testkit.WritePEMFile(t, dir, "pkcs8-rsa.pem", f.ServerRSA.CertPEM()+f.ServerRSA.PKCS8PEM(t)),
		"pkcs1-rsa":     testkit.WritePEMFile(t, dir, "pkcs1-rsa.pem", "Bag Attributes: ignored text\n"+f.ServerRSA.LegacyPEM(t)+f.ServerRSA.CertPEM()),
		"sec1-ec":       testkit.WritePEMFile(t, dir, "sec1-ec.pem", f.ServerEC.LegacyPEM(t)+chainEC),
		"encrypted":     testkit.WritePEMFile(t, dir, "encrypted.pem", f.ServerEC.EncryptedPEM(t, "s3cret-pass")+chainEC),
		"encrypted-rsa": testkit.WritePEMFile(t, dir, "encrypted-rsa.pem", f.ServerRSA.EncryptedPEM(t, "s3cret-pass")+f.ServerRSA.CertPEM()),
		"mismatch":      testkit.WritePEMFile(t, dir, "mismatch.pem", f.ServerRSA.PKCS8PEM(t)+chainEC),
		"two-keys":      testkit.WritePEMFile(t, dir, "two-keys.pem", f.ServerEC.PKCS8PEM(t)+f.ServerRSA.PKCS8PEM(t)+chainEC),
		"no-key":        testkit.WritePEMFile(t, dir, "no-key.pem", chainEC),
		"no-cert":       testkit.WritePEMFile(t, dir, "no-cert.pem", f.ServerEC.PKCS8PEM(t)),
		"legacy-enc":    testkit.WritePEMFile(t, dir, "legacy-enc.pem", "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n"+chainEC),
		"unterminated":  testkit.WritePEMFile(t, dir, "unterminated.pem", strings.Replace(f.ServerEC.PKCS8PEM(t), "-----END PRIVATE KEY-----", "", 1)+chainEC),
		"bad-base64":    testkit.WritePEMFile(t, dir, "bad-base64.pem", "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n"+chainEC),
		"ca":            testkit.WritePEMFile(t, dir, "ca.pem", f.CA.CertPEM()),
		"empty":         testkit.WritePEMFile(t, dir, "empty.pem", "nothing here\n"),
	}
	const prefix = "listener.name.ssl."
	ssl := protocolmap.ListenerName("SSL")
	good := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}

	type check func(t *testing.T, cfg *tls.Config)
	leafIs := func(want testkit.TLSKeyPair) check {
		return func(t *testing.T, cfg *tls.Config) {
			require.Len(t, cfg.Certificates, 1)
			assert.Equal(t, want.Cert.Raw, cfg.Certificates[0].Certificate[0])
			assert.True(t, want.Key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(cfg.Certificates[0].PrivateKey.(crypto.Signer).Public()))
		}
	}
	authIs := func(want tls.ClientAuthType) check {
		return func(t *testing.T, cfg *tls.Config) { assert.Equal(t, want, cfg.ClientAuth) }
	}
	tests := []struct {
		name     string
		listener protocolmap.ListenerName
		kv       []string
		errKey   string // "" when the config must build
		errText  string // a part of the error message
		checks   []check
	}{
		{name: "PKCS#8 EC key and chain in one file", kv: good, checks: []check{leafIs(f.ServerEC), authIs(tls.NoClientCert), func(t *testing.T, cfg *tls.Config) {
			assert.Len(t, cfg.Certificates[0].Certificate, 2, "the chain includes the CA")
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			assert.Nil(t, cfg.ClientCAs)
		}}},
		{name: "PKCS#8 RSA key after the certificate", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-rsa"]}, checks: []check{leafIs(f.ServerRSA)}},
		{name: "PKCS#1 RSA key with text around it", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs1-rsa"]}, checks: []check{leafIs(f.ServerRSA)}},
		{name: "SEC1 EC key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["sec1-ec"]}, checks: []check{leafIs(f.ServerEC)}},
		{name: "encrypted PKCS#8, right password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "s3cret-pass"}, checks: []check{leafIs(f.ServerEC)}},
		{name: "encrypted PKCS#8 RSA, right password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted-rsa"], "ssl.key.password", "s3cret-pass"}, checks: []check{leafIs(f.ServerRSA)}},
		{name: "encrypted PKCS#8, wrong password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "wrong-pass"}, errKey: "ssl.key.password", errText: "could not be decrypted"},
		{name: "encrypted PKCS#8, listener-prefixed wrong password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "s3cret-pass", prefix + "ssl.key.password", "wrong-pass"}, errKey: prefix + "ssl.key.password"},
		{name: "encrypted PKCS#8, no password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"]}, errKey: "ssl.key.password", errText: "no key password"},
		{name: "encrypted PKCS#8, empty password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", ""}, errKey: "ssl.key.password"},
		{name: "key password for a key that is not encrypted", kv: append(good, "ssl.key.password", "s3cret-pass"), errKey: "ssl.key.password", errText: "not encrypted"},
		{name: "legacy OpenSSL encryption", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["legacy-enc"], "ssl.key.password", "x"}, errKey: "ssl.keystore.location", errText: "legacy"},
		{name: "listener prefix overrides the location", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", filepath.Join(dir, "missing.pem"), prefix + "ssl.keystore.location", files["pkcs1-rsa"]}, checks: []check{leafIs(f.ServerRSA)}},
		{name: "listener prefix overrides the type", kv: []string{"ssl.keystore.type", "JKS", prefix + "ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}, checks: []check{leafIs(f.ServerEC)}},
		{name: "a prefix for another listener does not apply", kv: []string{"listener.name.client.ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "JKS (Kafka's default)"},
		{name: "upper-case prefix does not apply", kv: []string{"listener.name.SSL.ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type"},
		{name: "prefixed missing file", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"], prefix + "ssl.keystore.location", filepath.Join(dir, "missing.pem")}, errKey: prefix + "ssl.keystore.location", errText: "Failed to load PEM SSL keystore"},
		{name: "JKS refused", kv: []string{"ssl.keystore.type", "JKS", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "PEM"},
		{name: "PKCS12 refused", kv: []string{prefix + "ssl.keystore.type", "PKCS12", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: prefix + "ssl.keystore.type", errText: "PKCS12"},
		{name: "type unset means JKS", kv: []string{"ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "set ssl.keystore.type=PEM"},
		{name: "type is case-sensitive", kv: []string{"ssl.keystore.type", "pem", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "case-sensitive"},
		{name: "key store password with PEM", kv: append(good, "ssl.keystore.password", "changeit"), errKey: "ssl.keystore.password", errText: "cannot be specified with PEM"},
		{name: "key does not match the certificate", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["mismatch"]}, errKey: "ssl.keystore.location", errText: "does not match"},
		{name: "two private keys", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["two-keys"]}, errKey: "ssl.keystore.location", errText: "Expected one private key, but found 2"},
		{name: "no private key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["no-key"]}, errKey: "ssl.keystore.location", errText: "PRIVATE KEY"},
		{name: "no certificate", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["no-cert"]}, errKey: "ssl.keystore.location", errText: "At least one certificate expected"},
		{name: "unterminated block", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["unterminated"]}, errKey: "ssl.keystore.location", errText: "no END line"},
		{name: "bad base64", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["bad-base64"]}, errKey: "ssl.keystore.location", errText: "base64"},
		{name: "no key store", kv: nil, errKey: "ssl.keystore.location", errText: "SSL key store is not specified"},
		{name: "PEM type alone is no key store", kv: []string{"ssl.keystore.type", "PEM"}, errKey: "ssl.keystore.location"},
		{name: "inline key and chain", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC}, checks: []check{leafIs(f.ServerEC)}},
		{name: "inline prefixed key and chain", kv: []string{prefix + "ssl.keystore.type", "PEM", prefix + "ssl.keystore.key", f.ServerRSA.LegacyPEM(t), prefix + "ssl.keystore.certificate.chain", f.ServerRSA.CertPEM()}, checks: []check{leafIs(f.ServerRSA)}},
		{name: "inline encrypted key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.EncryptedPEM(t, "pw"), "ssl.keystore.certificate.chain", chainEC, "ssl.key.password", "pw"}, checks: []check{leafIs(f.ServerEC)}},
		{name: "inline key with literal \\n escapes", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", strings.ReplaceAll(f.ServerEC.PKCS8PEM(t), "\n", `\n`), "ssl.keystore.certificate.chain", chainEC}, checks: []check{leafIs(f.ServerEC)}},
		{name: "inline key needs type PEM", kv: []string{"ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC}, errKey: "ssl.keystore.type", errText: "SSL private key can be specified only for PEM, but key store type is JKS."},
		{name: "inline key without chain", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t)}, errKey: "ssl.keystore.certificate.chain", errText: "certificate chain is not specified"},
		{name: "inline chain without key", kv: []string{"ssl.keystore.type", "PEM", prefix + "ssl.keystore.certificate.chain", chainEC}, errKey: prefix + "ssl.keystore.key", errText: "private key is not specified"},
		{name: "inline key and location", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC, "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.location", errText: "Both SSL key store location and separate private key"},
		{name: "inline mismatched key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerRSA.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC}, errKey: "ssl.keystore.certificate.chain", errText: "does not match"},
		{name: "inline garbage key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "ssl.keystore.certificate.chain", chainEC}, errKey: "ssl.keystore.key", errText: "Private key could not be loaded"},

		{name: "client auth requested", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "requested"), checks: []check{authIs(tls.VerifyClientCertIfGiven), func(t *testing.T, cfg *tls.Config) {
			assert.True(t, cfg.ClientCAs.Equal(f.CAPool()))
		}}},
		{name: "client auth required", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "required"), checks: []check{authIs(tls.RequireAndVerifyClientCert)}},
		{name: "client auth none with a trust store", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "none"), checks: []check{authIs(tls.NoClientCert)}},
		{name: "prefixed client auth overrides", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "required", prefix+"ssl.client.auth", "none"), checks: []check{authIs(tls.NoClientCert)}},
		{name: "inline trust store certificates", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.certificates", f.CA.CertPEM(), "ssl.client.auth", "required"), checks: []check{authIs(tls.RequireAndVerifyClientCert), func(t *testing.T, cfg *tls.Config) {
			assert.True(t, cfg.ClientCAs.Equal(f.CAPool()))
		}}},
		{name: "client auth is case-sensitive", kv: append(good, "ssl.client.auth", "REQUIRED"), errKey: "ssl.client.auth", errText: "String must be one of: required, requested, none"},
		{name: "bad client auth", kv: append(good, prefix+"ssl.client.auth", "always"), errKey: prefix + "ssl.client.auth", errText: "String must be one of"},
		{name: "required without trust store", kv: append(good, "ssl.client.auth", "required"), errKey: "ssl.truststore.location", errText: "needs a trust store"},
		{name: "requested without trust store", kv: append(good, prefix+"ssl.client.auth", "requested"), errKey: prefix + "ssl.truststore.location", errText: prefix + "ssl.client.auth=requested"},
		{name: "trust store JKS refused", kv: append(good, "ssl.truststore.type", "JKS", "ssl.truststore.location", files["ca"]), errKey: "ssl.truststore.type", errText: "PEM"},
		{name: "trust store type unset means JKS", kv: append(good, "ssl.truststore.location", files["ca"]), errKey: "ssl.truststore.type", errText: "Kafka's default"},
		{name: "trust store PKCS12 refused", kv: append(good, prefix+"ssl.truststore.type", "PKCS12", "ssl.truststore.location", files["ca"]), errKey: prefix + "ssl.truststore.type"},
		{name: "trust store password with PEM", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.truststore.password", "changeit"), errKey: "ssl.truststore.password"},
		{name: "trust store password alone", kv: append(good, "ssl.truststore.password", "changeit"), errKey: "ssl.truststore.location", errText: "trust store password is specified"},
		{name: "inline trust store needs PEM", kv: append(good, "ssl.truststore.certificates", f.CA.CertPEM()), errKey: "ssl.truststore.type", errText: "SSL trust store certs can be specified only for PEM, but trust store type is JKS."},
		{name: "inline trust store and location", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.certificates", f.CA.CertPEM(), "ssl.truststore.location", files["ca"]), errKey: "ssl.truststore.location"},
		{name: "trust store without certificates", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["empty"]), errKey: "ssl.truststore.location", errText: "At least one certificate expected"},
		{name: "missing trust store file", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", filepath.Join(dir, "none.pem")), errKey: "ssl.truststore.location", errText: "Failed to load PEM SSL truststore"},

		{name: "TLSv1.3 only", kv: append(good, "ssl.enabled.protocols", "TLSv1.3"), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MinVersion)
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)
		}}},
		{name: "TLSv1.2 only", kv: append(good, prefix+"ssl.enabled.protocols", "TLSv1.2"), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MaxVersion)
		}}},
		{name: "old versions in the list are ignored", kv: append(good, "ssl.enabled.protocols", "TLSv1, TLSv1.1 ,TLSv1.3"), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MinVersion)
		}}},
		{name: "empty protocol list means the default", kv: append(good, "ssl.enabled.protocols", ""), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)
		}}},
		{name: "only old versions", kv: append(good, "ssl.enabled.protocols", "TLSv1,TLSv1.1"), errKey: "ssl.enabled.protocols", errText: "before 1.2"},
		{name: "unknown protocol", kv: append(good, prefix+"ssl.enabled.protocols", "TLSv1.2,TLSv9"), errKey: prefix + "ssl.enabled.protocols", errText: "TLSv9"},

		{name: "SASL_SSL ignores un-prefixed client auth", listener: "SASL_SSL", kv: append(good, "ssl.client.auth", "required"), checks: []check{authIs(tls.NoClientCert)}},
		{name: "SASL_SSL still validates un-prefixed client auth", listener: "SASL_SSL", kv: append(good, "ssl.client.auth", "sometimes"), errKey: "ssl.client.auth"},
		{name: "SASL_SSL applies prefixed client auth", listener: "SASL_SSL", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "listener.name.sasl_ssl.ssl.client.auth", "required"), checks: []check{authIs(tls.RequireAndVerifyClientCert)}},
		{name: "SSL listener named CLIENT applies un-prefixed client auth", listener: "CLIENT", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "requested"), checks: []check{authIs(tls.VerifyClientCertIfGiven)}},
	}
	secrets := append(testkit.KeyMaterial(f.ServerEC.PKCS8PEM(t)), testkit.KeyMaterial(f.ServerRSA.PKCS8PEM(t))...)
	secrets = append(secrets, "s3cret-pass", "wrong-pass", "changeit")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.listener
			if name == "" {
				name = ssl
			}
			c := secResolve(t, tt.kv...)
			cfg, err := tlsConfig(c, name)
			if tt.errKey != "" {
				testkit.RequireConfigError(t, err, tt.errKey, security.ErrTLSConfig)
				assert.Nil(t, cfg)
				assert.Contains(t, err.Error(), tt.errText)
				for _, s := range secrets {
					assert.NotContains(t, err.Error(), s, "the error message leaks a secret")
				}
				return
			}
			require.NoError(t, err)
			require.NotNil(t, cfg)
			assert.GreaterOrEqual(t, cfg.MinVersion, uint16(tls.VersionTLS12))
			for _, ch := range tt.checks {
				ch(t, cfg)
			}
		})
	}
}

func TestTLSConfigNonTLSListeners(t *testing.T) {
	// Settings that would be errors on a TLS listener do not matter here.
	c := secResolve(t, "ssl.keystore.type", "JKS", "ssl.client.auth", "bogus")
	for _, name := range []protocolmap.ListenerName{"PLAINTEXT", "SASL_PLAINTEXT"} {
		cfg, err := tlsConfig(c, name)
		assert.NoError(t, err, name)
		assert.Nil(t, cfg, name)
	}
	_, err := tlsConfig(c, "NOPE")
	testkit.RequireConfigError(t, err, "listener.security.protocol.map", listener.ErrNoSecurityProtocol)
}

// TestTLSConfigFromPropertiesFile reads inline PEM the way a
// server.properties file holds it: folded onto one line with backslash
// continuations, each line's leading white space dropped.
func TestTLSConfigFromPropertiesFile(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	fold := func(pemText string) string {
		lines := strings.Split(strings.TrimSpace(pemText), "\n")
		return strings.Join(lines, " \\\n    ")
	}
	text := "listeners=SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\n" +
		"listener.name.ssl.ssl.keystore.type=PEM\n" +
		"listener.name.ssl.ssl.keystore.key=" + fold(f.ServerEC.EncryptedPEM(t, "pw")) + "\n" +
		"listener.name.ssl.ssl.keystore.certificate.chain=" + fold(f.ServerEC.CertPEM()+f.CA.CertPEM()) + "\n" +
		"listener.name.ssl.ssl.key.password=pw\n" +
		"ssl.truststore.type=PEM\n" +
		"ssl.truststore.certificates=" + fold(f.CA.CertPEM()) + "\n" +
		"ssl.client.auth=required\n"
	props, err := config.ParseProperties([]byte(text))
	require.NoError(t, err)
	require.NotContains(t, props["listener.name.ssl.ssl.keystore.key"], "\n", "the value is one line")
	cfg, err := tlsConfig(resolve(t, props), "SSL")
	require.NoError(t, err)
	assert.Equal(t, f.ServerEC.Cert.Raw, cfg.Certificates[0].Certificate[0])
	assert.Equal(t, tls.RequireAndVerifyClientCert, cfg.ClientAuth)
}

// pipeHandshake runs a TLS handshake between a server with cfg and a client
// with clientCfg over an in-memory connection, returning both results and
// the client certificates the server saw.
func pipeHandshake(t *testing.T, cfg, clientCfg *tls.Config) (serverErr, clientErr error, peer []*x509.Certificate) {
	t.Helper()
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv := tls.Server(sc, cfg)
		serverErr = srv.HandshakeContext(ctx)
		if serverErr == nil {
			peer = srv.ConnectionState().PeerCertificates
			// Let the client read the server's last flight (and, in TLS
			// 1.3, learn of a refused certificate).
			_, _ = srv.Write([]byte("ok"))
		}
		sc.Close()
	}()
	cli := tls.Client(cc, clientCfg)
	clientErr = cli.HandshakeContext(ctx)
	if clientErr == nil {
		buf := make([]byte, 2)
		_, clientErr = cli.Read(buf)
	}
	cc.Close()
	<-done
	return serverErr, clientErr, peer
}

func TestTLSHandshake(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	keystore := testkit.WritePEMFile(t, dir, "server.pem", f.ServerEC.EncryptedPEM(t, "pw")+f.ServerEC.CertPEM()+f.CA.CertPEM())
	ca := testkit.WritePEMFile(t, dir, "ca.pem", f.CA.CertPEM())
	base := []string{
		"ssl.keystore.type", "PEM", "ssl.keystore.location", keystore, "ssl.key.password", "pw",
		"ssl.truststore.type", "PEM", "ssl.truststore.location", ca,
		"ssl.principal.mapping.rules", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT",
	}
	client := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: f.CAPool(), ServerName: "localhost", Certificates: certs}
	}

	t.Run("required, with a client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required")...)
		sec, err := forListener(c, "SSL")
		require.NoError(t, err)
		serverErr, clientErr, peer := pipeHandshake(t, sec.TLS, client(f.Client.TLSCertificate()))
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
		require.NotEmpty(t, peer)
		dn := security.SubjectDN(peer[0])
		assert.Equal(t, `CN=alice,OU=ServiceUsers,O=Acme\, Inc.,L=Fulton,ST=MD,C=US`, dn)
		name, err := sec.PrincipalMapper.Name(dn)
		require.NoError(t, err)
		assert.Equal(t, "alice", name)
	})
	t.Run("required, without a client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required")...)
		cfg, err := tlsConfig(c, "SSL")
		require.NoError(t, err)
		serverErr, clientErr, _ := pipeHandshake(t, cfg, client())
		assert.Error(t, serverErr)
		assert.Error(t, clientErr)
	})
	t.Run("required, with an untrusted client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required")...)
		cfg, err := tlsConfig(c, "SSL")
		require.NoError(t, err)
		serverErr, _, _ := pipeHandshake(t, cfg, client(f.OtherClient.TLSCertificate()))
		assert.Error(t, serverErr)
	})
	t.Run("requested, without a client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "requested")...)
		cfg, err := tlsConfig(c, "SSL")
		require.NoError(t, err)
		serverErr, clientErr, peer := pipeHandshake(t, cfg, client())
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
		assert.Empty(t, peer)
	})
	t.Run("SASL_SSL ignores un-prefixed required", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required", "sasl.enabled.mechanisms", "PLAIN")...)
		sec, err := forListener(c, "SASL_SSL")
		require.NoError(t, err)
		serverErr, clientErr, _ := pipeHandshake(t, sec.TLS, client())
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
	})
	t.Run("TLS 1.1 client refused", func(t *testing.T) {
		c := secResolve(t, base...)
		cfg, err := tlsConfig(c, "SSL")
		require.NoError(t, err)
		old := client()
		old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
		serverErr, clientErr, _ := pipeHandshake(t, cfg, old)
		assert.Error(t, serverErr)
		assert.Error(t, clientErr)
	})
	t.Run("TLS 1.2 client refused by a TLSv1.3 listener", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.enabled.protocols", "TLSv1.3")...)
		cfg, err := tlsConfig(c, "SSL")
		require.NoError(t, err)
		old := client()
		old.MaxVersion = tls.VersionTLS12
		serverErr, _, _ := pipeHandshake(t, cfg, old)
		assert.Error(t, serverErr)
		modern := client()
		serverErr, clientErr, _ := pipeHandshake(t, cfg, modern)
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
	})
	t.Run("RSA key with TLS 1.2", func(t *testing.T) {
		rsaStore := testkit.WritePEMFile(t, dir, "rsa.pem", f.ServerRSA.LegacyPEM(t)+f.ServerRSA.CertPEM())
		c := secResolve(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", rsaStore)
		cfg, err := tlsConfig(c, "SSL")
		require.NoError(t, err)
		cl := client()
		cl.MaxVersion = tls.VersionTLS12
		serverErr, clientErr, _ := pipeHandshake(t, cfg, cl)
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
	})
}
