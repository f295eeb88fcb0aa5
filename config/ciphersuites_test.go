package config_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
)

// The TLS 1.3 suites, which Go always offers together.
const all13 = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256"

func TestTLSConfigCipherSuites(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	keystore := testkit.WritePEMFile(t, dir, "server.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
	rsaKeystore := testkit.WritePEMFile(t, dir, "rsa.pem", f.ServerRSA.PKCS8PEM(t)+f.ServerRSA.CertPEM())
	good := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", keystore}
	withRSA := func(kv ...string) []string {
		return append([]string{"listener.name.ssl.ssl.keystore.location", rsaKeystore}, kv...)
	}
	const prefixed = "listener.name.ssl.ssl.cipher.suites"
	tests := []struct {
		name       string
		kv         []string
		suites     []uint16 // CipherSuites
		minV, maxV uint16
		errKey     string // "" when the configuration must build
		errText    string
	}{
		{name: "unset: Go's suites", kv: nil, minV: tls.VersionTLS12, maxV: tls.VersionTLS13},
		{name: "empty: Go's suites", kv: []string{"ssl.cipher.suites", " "}, minV: tls.VersionTLS12, maxV: tls.VersionTLS13},
		{name: "one TLS 1.2 suite turns TLS 1.3 off", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"},
			suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}, minV: tls.VersionTLS12, maxV: tls.VersionTLS12},
		{name: "TLS 1.2 suites and all of TLS 1.3's", kv: []string{"ssl.cipher.suites", " TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 , TLS_CHACHA20_POLY1305_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256," +
			"TLS_AES_256_GCM_SHA384,TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"},
			suites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, minV: tls.VersionTLS12, maxV: tls.VersionTLS13},
		{name: "TLS 1.3's alone turn TLS 1.2 off", kv: []string{"ssl.cipher.suites", all13}, minV: tls.VersionTLS13, maxV: tls.VersionTLS13},
		{name: "Java's renegotiation signal is accepted", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_EMPTY_RENEGOTIATION_INFO_SCSV"},
			suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, minV: tls.VersionTLS12, maxV: tls.VersionTLS12},
		{name: "a suite Go calls insecure but implements", kv: withRSA("ssl.cipher.suites", "TLS_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"),
			suites: []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256}, minV: tls.VersionTLS12, maxV: tls.VersionTLS12},
		{name: "listener prefix overrides", kv: []string{"ssl.cipher.suites", "bogus", prefixed, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"},
			suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, minV: tls.VersionTLS12, maxV: tls.VersionTLS12},
		{name: "TLSv1.2 only, with TLS 1.3's listed too", kv: []string{"ssl.enabled.protocols", "TLSv1.2", "ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256," + all13},
			suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}, minV: tls.VersionTLS12, maxV: tls.VersionTLS12},

		{name: "unknown name", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA385"}, errKey: "ssl.cipher.suites",
			errText: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA385 is not a cipher suite of Go's TLS"},
		{name: "OpenSSL's name", kv: []string{prefixed, "ECDHE-RSA-AES256-GCM-SHA384"}, errKey: prefixed, errText: "the names are IANA's"},
		{name: "a suite Java has and Go lacks", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_DHE_RSA_WITH_AES_256_GCM_SHA384"},
			errKey: "ssl.cipher.suites", errText: "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384 is not a cipher suite of Go's TLS"},
		{name: "a TLS 1.3 suite Go lacks", kv: []string{"ssl.cipher.suites", all13 + ",TLS_AES_128_CCM_SHA256"}, errKey: "ssl.cipher.suites", errText: "TLS_AES_128_CCM_SHA256 is not a cipher suite"},
		{name: "RC4", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_RC4_128_SHA"}, errKey: "ssl.cipher.suites", errText: "uses RC4"},
		{name: "3DES in Java's old name", kv: []string{"ssl.cipher.suites", "SSL_RSA_WITH_3DES_EDE_CBC_SHA"}, errKey: "ssl.cipher.suites", errText: "uses 3DES"},
		{name: "some of TLS 1.3's", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_AES_256_GCM_SHA384"}, errKey: "ssl.cipher.suites",
			errText: "names the TLS 1.3 suites TLS_AES_256_GCM_SHA384 but not TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256: Go cannot restrict TLS 1.3's cipher suites"},
		{name: "TLSv1.3 only, no TLS 1.3 suite", kv: []string{"ssl.enabled.protocols", "TLSv1.3", prefixed, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, errKey: prefixed,
			errText: "enables only TLSv1.3"},
		{name: "TLSv1.2 only, no TLS 1.2 suite", kv: []string{"ssl.enabled.protocols", "TLSv1.2", "ssl.cipher.suites", all13}, errKey: "ssl.cipher.suites",
			errText: "enables only TLSv1.2"},
		{name: "only RSA suites for an ECDSA key", kv: []string{"ssl.cipher.suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384," + all13}, errKey: "ssl.cipher.suites",
			errText: "its TLS 1.2 suites all need an RSA key, but the key store's key is ECDSA or Ed25519"},
		{name: "only ECDSA suites for an RSA key", kv: withRSA(prefixed, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"), errKey: prefixed,
			errText: "its TLS 1.2 suites all need an ECDSA key, but the key store's key is RSA"},
		{name: "RSA and ECDSA suites for an RSA key", kv: withRSA("ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
			suites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}, minV: tls.VersionTLS12, maxV: tls.VersionTLS12},
		{name: "the signal alone", kv: []string{"ssl.cipher.suites", "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"}, errKey: "ssl.cipher.suites", errText: "names no cipher suite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tlsConfig(secResolve(t, append(append([]string{}, good...), tt.kv...)...), "SSL")
			if tt.errKey != "" {
				testkit.RequireConfigError(t, err, tt.errKey, security.ErrTLSConfig)
				assert.Contains(t, err.Error(), tt.errText)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.suites, cfg.CipherSuites)
			assert.Equal(t, tt.minV, cfg.MinVersion, "MinVersion %s", tls.VersionName(cfg.MinVersion))
			assert.Equal(t, tt.maxV, cfg.MaxVersion, "MaxVersion %s", tls.VersionName(cfg.MaxVersion))
		})
	}
}

// The error for an unknown name lists every name that works, and none that
// is refused.
func TestTLSConfigCipherSuitesErrorListsGoSuites(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	keystore := testkit.WritePEMFile(t, t.TempDir(), "server.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
	_, err := tlsConfig(secResolve(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", keystore, "ssl.cipher.suites", "nope"), "SSL")
	require.Error(t, err)
	for _, cs := range tls.CipherSuites() {
		assert.Contains(t, err.Error(), cs.Name)
	}
	for _, cs := range tls.InsecureCipherSuites() {
		if strings.Contains(cs.Name, "RC4") || strings.Contains(cs.Name, "3DES") {
			assert.NotContains(t, err.Error(), cs.Name)
		} else {
			assert.Contains(t, err.Error(), cs.Name)
		}
	}
}

// A client that offers only suites the list leaves out fails the
// handshake; one that offers a listed suite gets it; a TLS 1.3 client
// gets TLS 1.2 from a list without TLS 1.3 suites.
func TestTLSCipherSuitesHandshake(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	keystore := testkit.WritePEMFile(t, t.TempDir(), "server.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
	cfg, err := tlsConfig(secResolve(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", keystore,
		"ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"), "SSL")
	require.NoError(t, err)
	client := func(maxV uint16, suites ...uint16) *tls.Config {
		return &tls.Config{RootCAs: f.CAPool(), ServerName: "localhost", MaxVersion: maxV, CipherSuites: suites}
	}
	serverErr, clientErr, _ := pipeHandshake(t, cfg, client(tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256))
	assert.ErrorContains(t, serverErr, "no cipher suite supported by both client and server")
	assert.Error(t, clientErr)

	sc, cc := handshakeStates(t, cfg, client(tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384))
	assert.Equal(t, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, sc.CipherSuite)
	assert.Equal(t, sc.CipherSuite, cc.CipherSuite)

	sc, _ = handshakeStates(t, cfg, client(0))
	assert.Equal(t, uint16(tls.VersionTLS12), sc.Version, "TLS 1.3 is off without TLS 1.3 suites")
	assert.Equal(t, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, sc.CipherSuite)
}

// handshakeStates runs a handshake that must succeed and returns the server's and the
// client's connection states.
func handshakeStates(t *testing.T, server, client *tls.Config) (tls.ConnectionState, tls.ConnectionState) {
	t.Helper()
	var ss, cs tls.ConnectionState
	srv := server.Clone()
	srv.VerifyConnection = func(s tls.ConnectionState) error { ss = s; return nil }
	cli := client.Clone()
	cli.VerifyConnection = func(s tls.ConnectionState) error { cs = s; return nil }
	serverErr, clientErr, _ := pipeHandshake(t, srv, cli)
	require.NoError(t, serverErr)
	require.NoError(t, clientErr)
	return ss, cs
}
