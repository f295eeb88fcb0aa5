package security_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// issueServer issues a server certificate for the DNS names dns, signed by
// ca.
func issueServer(t testing.TB, ca tlsKeyPair, cn string, dns ...string) tlsKeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tlsKeyPair{key: key, cert: cert}
}

// servedLeaf handshakes over TCP on 127.0.0.1 with a server of cfg, as a
// Go client asking for serverName ("" sends none), and returns the leaf
// the server sent. With roots the client verifies the chain for that
// name, as Kafka's clients do; without, it takes what comes.
func servedLeaf(t *testing.T, cfg *tls.Config, roots *x509.CertPool, serverName string) *x509.Certificate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, cfg)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if got := tc.ConnectionState().ServerName; err == nil && got != serverName {
			err = fmt.Errorf("the server saw server name %q", got)
		}
		served <- err
	}()
	clientCfg := &tls.Config{ServerName: serverName, RootCAs: roots, InsecureSkipVerify: roots == nil, MinVersion: tls.VersionTLS12}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), clientCfg)
	require.NoError(t, err, "server name %q", serverName)
	leaf := c.ConnectionState().PeerCertificates[0]
	c.Close()
	require.NoError(t, <-served)
	return leaf
}

func TestServerNameCertificates(t *testing.T) {
	f := testFixture(t)
	dir := t.TempDir()
	a := issueServer(t, f.ca, "a", "a.example.com")
	b := issueServer(t, f.ca, "b", "*.b.example.com")
	c := issueServer(t, f.ca, "c", "c.example.com", "x.b.example.com")
	aFile := writePEMFile(t, dir, "a.pem", a.pkcs8PEM(t)+a.certPEM())
	cFile := writePEMFile(t, dir, "c.pem", c.encryptedPEM(t, "c-pass")+c.certPEM())
	const sni = "kafkanet.ssl.server.name."
	props := []string{
		"ssl.keystore.type", "PEM", "ssl.keystore.location", writePEMFile(t, dir, "default.pem", f.serverEC.pkcs8PEM(t)+f.serverEC.certPEM()),
		"listener.name.ssl.kafkanet.ssl.server.names", "a.example.com, *.b.example.com,c.example.com.,x.b.example.com",
		sni + "a.example.com.ssl.keystore.location", aFile,
		"listener.name.ssl." + sni + "*.b.example.com.ssl.keystore.key", b.pkcs8PEM(t),
		"listener.name.ssl." + sni + "*.b.example.com.ssl.keystore.certificate.chain", b.certPEM(),
		sni + "c.example.com..ssl.keystore.location", cFile,
		sni + "c.example.com..ssl.key.password", "c-pass",
		sni + "x.b.example.com.ssl.keystore.location", cFile,
		sni + "x.b.example.com.ssl.key.password", "c-pass",
	}
	cfg, err := security.TLSConfig(secResolve(t, props...), "SSL")
	require.NoError(t, err)
	// The default first, then each listed name's, in order.
	require.Len(t, cfg.Certificates, 5)
	assert.Equal(t, f.serverEC.cert.Raw, cfg.Certificates[0].Certificate[0])
	assert.Equal(t, a.cert.Raw, cfg.Certificates[1].Certificate[0])
	assert.NotNil(t, cfg.GetCertificate)

	for _, tt := range []struct {
		name   string
		want   tlsKeyPair
		verify bool // the certificate is valid for the name: the client checks it
	}{
		{"a.example.com", a, true},
		{"A.Example.COM", a, true},
		{"one.b.example.com", b, true},
		{"x.b.example.com", c, true}, // an exact name wins over the wildcard
		{"c.example.com", c, true},   // listed with a trailing dot
		{"two.one.b.example.com", f.serverEC, false},
		{"b.example.com", f.serverEC, false}, // the wildcard is for the names below
		{"localhost", f.serverEC, true},      // not listed: the default
		{"", f.serverEC, false},              // no server name: the default
	} {
		t.Run(tt.name, func(t *testing.T) {
			var roots *x509.CertPool
			if tt.verify {
				roots = f.caPool()
			}
			leaf := servedLeaf(t, cfg, roots, tt.name)
			assert.Equal(t, tt.want.cert.Raw, leaf.Raw, "served %s", leaf.Subject)
		})
	}

	// Building the configuration again, as a reload does, reads the name's
	// key store again.
	a2 := issueServer(t, f.ca, "a renewed", "a.example.com")
	writePEMFile(t, dir, "a.pem", a2.pkcs8PEM(t)+a2.certPEM())
	again, err := security.TLSConfig(secResolve(t, props...), "SSL")
	require.NoError(t, err)
	assert.Equal(t, a2.cert.Raw, servedLeaf(t, again, f.caPool(), "a.example.com").Raw)
	assert.Equal(t, a.cert.Raw, servedLeaf(t, cfg, f.caPool(), "a.example.com").Raw, "the first configuration keeps its certificate")

	// The names of one listener are not another's.
	other, err := security.TLSConfig(secResolve(t, props...), "CLIENT")
	require.NoError(t, err)
	assert.Equal(t, f.serverEC.cert.Raw, servedLeaf(t, other, nil, "one.b.example.com").Raw)
}

func TestServerNameCertificateErrors(t *testing.T) {
	f := testFixture(t)
	dir := t.TempDir()
	a := issueServer(t, f.ca, "a", "a.example.com")
	aFile := writePEMFile(t, dir, "a.pem", a.pkcs8PEM(t)+a.certPEM())
	const sni = "kafkanet.ssl.server.name."
	base := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", writePEMFile(t, dir, "default.pem", f.serverEC.pkcs8PEM(t)+f.serverEC.certPEM())}
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
			"ssl.keystore.location", writePEMFile(t, dir, "default-enc.pem", f.serverEC.encryptedPEM(t, "pw")+f.serverEC.certPEM()), "ssl.key.password", "pw",
			"kafkanet.ssl.server.names", "a.example.com",
			sni + "a.example.com.ssl.keystore.location", writePEMFile(t, dir, "enc.pem", a.encryptedPEM(t, "pw")+a.certPEM())},
			sni + "a.example.com.ssl.key.password", "no key password"},
		{"inline key without chain", []string{"kafkanet.ssl.server.names", "a.example.com", sni + "a.example.com.ssl.keystore.key", a.pkcs8PEM(t)},
			sni + "a.example.com.ssl.keystore.certificate.chain", "certificate chain is not specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := security.TLSConfig(secResolve(t, append(append([]string(nil), base...), tt.kv...)...), "SSL")
			requireConfigError(t, err, tt.errKey, security.ErrTLSConfig)
			assert.Contains(t, err.Error(), tt.errText)
			for _, m := range keyMaterial(a.pkcs8PEM(t)) {
				assert.NotContains(t, err.Error(), m, "no key material in errors")
			}
		})
	}
	// Not a TLS listener: the names are not read.
	cfg, err := security.TLSConfig(secResolve(t, "kafkanet.ssl.server.names", "a.example.com"), "PLAINTEXT")
	require.NoError(t, err)
	assert.Nil(t, cfg)
	// An empty list is no list.
	cfg, err = security.TLSConfig(secResolve(t, append(base, "kafkanet.ssl.server.names", " ")...), protocolmap.ListenerName("SSL"))
	require.NoError(t, err)
	assert.Len(t, cfg.Certificates, 1)
	assert.Nil(t, cfg.GetCertificate)
}

// WithServerNameCertificates is the same for a tls.Config built in code.
func TestWithServerNameCertificates(t *testing.T) {
	f := testFixture(t)
	a := issueServer(t, f.ca, "a", "a.example.com", "a2.example.com")
	b := issueServer(t, f.ca, "b", "*.b.example.com")
	base := &tls.Config{Certificates: []tls.Certificate{f.serverEC.tlsCertificate()}, MinVersion: tls.VersionTLS13}
	cfg, err := security.WithServerNameCertificates(base,
		security.ServerNameCertificate{Names: []string{"a.example.com", "A2.example.com"}, Certificate: a.tlsCertificate()},
		security.ServerNameCertificate{Names: []string{"*.b.example.com"}, Certificate: tls.Certificate{Certificate: [][]byte{b.cert.Raw}, PrivateKey: b.key}},
	)
	require.NoError(t, err)
	assert.Len(t, base.Certificates, 1, "cfg is not changed")
	assert.Nil(t, base.GetCertificate)
	assert.Equal(t, uint16(tls.VersionTLS13), cfg.MinVersion, "the rest of cfg is kept")
	for name, want := range map[string]tlsKeyPair{"a.example.com": a, "a2.example.com": a, "z.b.example.com": b} {
		assert.Equal(t, want.cert.Raw, servedLeaf(t, cfg, f.caPool(), name).Raw, name)
	}
	assert.Equal(t, f.serverEC.cert.Raw, servedLeaf(t, cfg, nil, "").Raw)
	assert.Equal(t, f.serverEC.cert.Raw, servedLeaf(t, cfg, nil, "c.example.com").Raw)

	// A server's per-handshake clone keeps the choice.
	assert.Equal(t, a.cert.Raw, servedLeaf(t, cfg.Clone(), f.caPool(), "a.example.com").Raw)

	withGet := base.Clone()
	withGet.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }
	for name, tt := range map[string]struct {
		cfg   *tls.Config
		certs []security.ServerNameCertificate
		text  string
	}{
		"nil config":         {nil, nil, "default certificate"},
		"no default":         {&tls.Config{}, nil, "default certificate"},
		"own GetCertificate": {withGet, nil, "GetCertificate"},
		"no names":           {base, []security.ServerNameCertificate{{Certificate: a.tlsCertificate()}}, "has no server name"},
		"not covered":        {base, []security.ServerNameCertificate{{Names: []string{"b.example.com"}, Certificate: a.tlsCertificate()}}, "is not valid for it"},
		"twice": {base, []security.ServerNameCertificate{{Names: []string{"a.example.com"}, Certificate: a.tlsCertificate()},
			{Names: []string{"A.example.com."}, Certificate: a.tlsCertificate()}}, "more than one certificate"},
		"invalid name":  {base, []security.ServerNameCertificate{{Names: []string{"a_b c"}, Certificate: a.tlsCertificate()}}, "not a DNS name"},
		"no key pair":   {base, []security.ServerNameCertificate{{Names: []string{"a.example.com"}}}, "has no certificate"},
		"an IP address": {base, []security.ServerNameCertificate{{Names: []string{"::1"}, Certificate: a.tlsCertificate()}}, "IP address"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := security.WithServerNameCertificates(tt.cfg, tt.certs...)
			require.ErrorIs(t, err, security.ErrTLSConfig)
			assert.True(t, strings.Contains(err.Error(), tt.text), "%v", err)
		})
	}
}
