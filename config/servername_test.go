package config_test

import (
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

func TestServerNameCertificates(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	a := testkit.IssueServer(t, f.CA, "a", "a.example.com")
	b := testkit.IssueServer(t, f.CA, "b", "*.b.example.com")
	c := testkit.IssueServer(t, f.CA, "c", "c.example.com", "x.b.example.com")
	aFile := testkit.WritePEMFile(t, dir, "a.pem", a.PKCS8PEM(t)+a.CertPEM())
	cFile := testkit.WritePEMFile(t, dir, "c.pem", c.EncryptedPEM(t, "c-pass")+c.CertPEM())
	const sni = "kafkanet.ssl.server.name."
	props := []string{
		"ssl.keystore.type", "PEM", "ssl.keystore.location", testkit.WritePEMFile(t, dir, "default.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM()),
		"listener.name.ssl.kafkanet.ssl.server.names", "a.example.com, *.b.example.com,c.example.com.,x.b.example.com",
		sni + "a.example.com.ssl.keystore.location", aFile,
		"listener.name.ssl." + sni + "*.b.example.com.ssl.keystore.key", b.PKCS8PEM(t),
		"listener.name.ssl." + sni + "*.b.example.com.ssl.keystore.certificate.chain", b.CertPEM(),
		sni + "c.example.com..ssl.keystore.location", cFile,
		sni + "c.example.com..ssl.key.password", "c-pass",
		sni + "x.b.example.com.ssl.keystore.location", cFile,
		sni + "x.b.example.com.ssl.key.password", "c-pass",
	}
	cfg, err := tlsConfig(secResolve(t, props...), "SSL")
	require.NoError(t, err)
	// The default first, then each listed name's, in order.
	require.Len(t, cfg.Certificates, 5)
	assert.Equal(t, f.ServerEC.Cert.Raw, cfg.Certificates[0].Certificate[0])
	assert.Equal(t, a.Cert.Raw, cfg.Certificates[1].Certificate[0])
	assert.NotNil(t, cfg.GetCertificate)

	for _, tt := range []struct {
		name   string
		want   testkit.TLSKeyPair
		verify bool // the certificate is valid for the name: the client checks it
	}{
		{"a.example.com", a, true},
		{"A.Example.COM", a, true},
		{"one.b.example.com", b, true},
		{"x.b.example.com", c, true}, // an exact name wins over the wildcard
		{"c.example.com", c, true},   // listed with a trailing dot
		{"two.one.b.example.com", f.ServerEC, false},
		{"b.example.com", f.ServerEC, false}, // the wildcard is for the names below
		{"localhost", f.ServerEC, true},      // not listed: the default
		{"", f.ServerEC, false},              // no server name: the default
	} {
		t.Run(tt.name, func(t *testing.T) {
			var roots *x509.CertPool
			if tt.verify {
				roots = f.CAPool()
			}
			leaf := testkit.ServedLeaf(t, cfg, roots, tt.name)
			assert.Equal(t, tt.want.Cert.Raw, leaf.Raw, "served %s", leaf.Subject)
		})
	}

	// Building the configuration again, as a reload does, reads the name's
	// key store again.
	a2 := testkit.IssueServer(t, f.CA, "a renewed", "a.example.com")
	testkit.WritePEMFile(t, dir, "a.pem", a2.PKCS8PEM(t)+a2.CertPEM())
	again, err := tlsConfig(secResolve(t, props...), "SSL")
	require.NoError(t, err)
	assert.Equal(t, a2.Cert.Raw, testkit.ServedLeaf(t, again, f.CAPool(), "a.example.com").Raw)
	assert.Equal(t, a.Cert.Raw, testkit.ServedLeaf(t, cfg, f.CAPool(), "a.example.com").Raw, "the first configuration keeps its certificate")

	// The names of one listener are not another's.
	other, err := tlsConfig(secResolve(t, props...), "CLIENT")
	require.NoError(t, err)
	assert.Equal(t, f.ServerEC.Cert.Raw, testkit.ServedLeaf(t, other, nil, "one.b.example.com").Raw)
}

func TestServerNameCertificateErrors(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	a := testkit.IssueServer(t, f.CA, "a", "a.example.com")
	aFile := testkit.WritePEMFile(t, dir, "a.pem", a.PKCS8PEM(t)+a.CertPEM())
	const sni = "kafkanet.ssl.server.name."
	base := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", testkit.WritePEMFile(t, dir, "default.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())}
	tests := []struct {
		name    string
		kv      []string
		errKey  string
		errText string
	}{
		{"listed without a key store", []string{"kafkanet.ssl.server.names", "a.example.com"},
			sni + "a.example.com.ssl.keystore.location", "has no key store"},
		{"a certificate for another name", []string{"kafkanet.ssl.server.names", "b.example.com", sni + "b.example.com.ssl.keystore.location", aFile},
			sni + "b.example.com.ssl.keystore.location", "is not valid for it (its DNS names: a.example.com)"},
		{"a wildcard the certificate does not cover", []string{"kafkanet.ssl.server.names", "*.example.com", sni + "*.example.com.ssl.keystore.location", aFile},
			sni + "*.example.com.ssl.keystore.location", "is not valid for it"},
		{"an IP address", []string{"listener.name.ssl.kafkanet.ssl.server.names", "127.0.0.1"},
			"listener.name.ssl.kafkanet.ssl.server.names", "is an IP address"},
		{"not a DNS name", []string{"kafkanet.ssl.server.names", "a example.com"}, "kafkanet.ssl.server.names", "is not a DNS name"},
		{"a wildcard inside", []string{"kafkanet.ssl.server.names", "a.*.example.com"}, "kafkanet.ssl.server.names", "is not a DNS name"},
		{"listed twice", []string{"kafkanet.ssl.server.names", "a.example.com,A.example.com", sni + "a.example.com.ssl.keystore.location", aFile},
			"kafkanet.ssl.server.names", "listed twice"},
		{"a missing file", []string{"kafkanet.ssl.server.names", "a.example.com", sni + "a.example.com.ssl.keystore.location", filepath.Join(dir, "missing.pem")},
			sni + "a.example.com.ssl.keystore.location", "Failed to load PEM SSL keystore"},
		{"its own key store type, JKS", []string{"kafkanet.ssl.server.names", "a.example.com", sni + "a.example.com.ssl.keystore.location", aFile,
			sni + "a.example.com.ssl.keystore.type", "JKS"}, sni + "a.example.com.ssl.keystore.type", "PEM"},
		{"the listener's key password is not the name's", []string{
			"ssl.keystore.location", testkit.WritePEMFile(t, dir, "default-enc.pem", f.ServerEC.EncryptedPEM(t, "pw")+f.ServerEC.CertPEM()), "ssl.key.password", "pw",
			"kafkanet.ssl.server.names", "a.example.com",
			sni + "a.example.com.ssl.keystore.location", testkit.WritePEMFile(t, dir, "enc.pem", a.EncryptedPEM(t, "pw")+a.CertPEM())},
			sni + "a.example.com.ssl.key.password", "no key password"},
		{"inline key without chain", []string{"kafkanet.ssl.server.names", "a.example.com", sni + "a.example.com.ssl.keystore.key", a.PKCS8PEM(t)},
			sni + "a.example.com.ssl.keystore.certificate.chain", "certificate chain is not specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tlsConfig(secResolve(t, append(append([]string(nil), base...), tt.kv...)...), "SSL")
			testkit.RequireConfigError(t, err, tt.errKey, security.ErrTLSConfig)
			assert.Contains(t, err.Error(), tt.errText)
			for _, m := range testkit.KeyMaterial(a.PKCS8PEM(t)) {
				assert.NotContains(t, err.Error(), m, "no key material in errors")
			}
		})
	}
	// Not a TLS listener: the names are not read.
	cfg, err := tlsConfig(secResolve(t, "kafkanet.ssl.server.names", "a.example.com"), "PLAINTEXT")
	require.NoError(t, err)
	assert.Nil(t, cfg)
	// An empty list is no list.
	cfg, err = tlsConfig(secResolve(t, append(base, "kafkanet.ssl.server.names", " ")...), protocolmap.ListenerName("SSL"))
	require.NoError(t, err)
	assert.Len(t, cfg.Certificates, 1)
	assert.Nil(t, cfg.GetCertificate)
}
