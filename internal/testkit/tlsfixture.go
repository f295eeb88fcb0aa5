package testkit

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/youmark/pkcs8"

	"github.com/kafkanet/kafkanet/config"
)

// TLSKeyPair is a generated key and its certificate, signed by a
// [TLSFixture]'s CA.
type TLSKeyPair struct {
	Key  crypto.Signer
	Cert *x509.Certificate
}

func (p TLSKeyPair) CertPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Cert.Raw}))
}

func (p TLSKeyPair) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{p.Cert.Raw}, PrivateKey: p.Key, Leaf: p.Cert}
}

// PKCS8PEM writes the key as unencrypted PKCS#8.
func (p TLSKeyPair) PKCS8PEM(t testing.TB) string {
	der, err := x509.MarshalPKCS8PrivateKey(p.Key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// EncryptedPEM writes the key as PBES2-encrypted PKCS#8.
func (p TLSKeyPair) EncryptedPEM(t testing.TB, password string) string {
	der, err := pkcs8.MarshalPrivateKey(p.Key, []byte(password), nil)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}))
}

// LegacyPEM writes the key in its algorithm's own format: PKCS#1 for RSA,
// SEC1 for EC.
func (p TLSKeyPair) LegacyPEM(t testing.TB) string {
	switch k := p.Key.(type) {
	case *rsa.PrivateKey:
		return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	}
	t.Fatalf("unexpected key type %T", p.Key)
	return ""
}

// TLSFixture holds a throwaway CA and certificates it signed.
type TLSFixture struct {
	CA, ServerEC, ServerRSA, Client TLSKeyPair
	// OtherClient is signed by another CA, which the listeners do not trust.
	OtherClient TLSKeyPair
}

func (f *TLSFixture) CAPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(f.CA.Cert)
	return pool
}

var (
	fixtureOnce sync.Once
	fixture     *TLSFixture
	fixtureErr  error
)

// TLSTestFixture returns the fixture, generating its certificates once
// per test binary.
func TLSTestFixture(t testing.TB) *TLSFixture {
	fixtureOnce.Do(func() { fixture, fixtureErr = newTLSFixture() })
	require.NoError(t, fixtureErr)
	return fixture
}

func newTLSFixture() (*TLSFixture, error) {
	serial := int64(1)
	issue := func(tmpl *x509.Certificate, key crypto.Signer, parent *TLSKeyPair) (TLSKeyPair, error) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
		parentCert, parentKey := tmpl, key
		if parent != nil {
			parentCert, parentKey = parent.Cert, parent.Key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), parentKey)
		if err != nil {
			return TLSKeyPair{}, err
		}
		cert, err := x509.ParseCertificate(der)
		return TLSKeyPair{Key: key, Cert: cert}, err
	}
	ecKey := func() crypto.Signer {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	}
	caTemplate := func(cn string) *x509.Certificate {
		return &x509.Certificate{
			Subject:               pkix.Name{CommonName: cn},
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
	}
	leaf := func(name pkix.Name, usage x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{
			Subject:     name,
			DNSNames:    []string{"localhost"},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
	}
	f := &TLSFixture{}
	var err error
	if f.CA, err = issue(caTemplate("Test CA"), ecKey(), nil); err != nil {
		return nil, err
	}
	if f.ServerEC, err = issue(leaf(pkix.Name{CommonName: "broker-ec", Organization: []string{"Acme"}}, x509.ExtKeyUsageServerAuth), ecKey(), &f.CA); err != nil {
		return nil, err
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if f.ServerRSA, err = issue(leaf(pkix.Name{CommonName: "broker-rsa"}, x509.ExtKeyUsageServerAuth), rsaKey, &f.CA); err != nil {
		return nil, err
	}
	clientName := pkix.Name{
		CommonName: "alice", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Acme, Inc."},
		Locality: []string{"Fulton"}, Province: []string{"MD"}, Country: []string{"US"},
	}
	if f.Client, err = issue(leaf(clientName, x509.ExtKeyUsageClientAuth), ecKey(), &f.CA); err != nil {
		return nil, err
	}
	otherCA, err := issue(caTemplate("Other CA"), ecKey(), nil)
	if err != nil {
		return nil, err
	}
	if f.OtherClient, err = issue(leaf(pkix.Name{CommonName: "mallory"}, x509.ExtKeyUsageClientAuth), ecKey(), &otherCA); err != nil {
		return nil, err
	}
	return f, nil
}

// WritePEMFile writes text to a file in dir and returns its path.
func WritePEMFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// RequireConfigError asserts that err is a *config.Error for key
// wrapping sentinel, and returns it.
func RequireConfigError(t testing.TB, err error, key string, sentinel error) *config.Error {
	t.Helper()
	require.Error(t, err)
	var ce *config.Error
	require.True(t, errors.As(err, &ce), "error %v (%T) is not a config.Error", err, err)
	assert.Equal(t, key, ce.Key, "error: %v", err)
	if sentinel != nil {
		assert.ErrorIs(t, err, sentinel)
	}
	return ce
}

// KeyMaterial returns distinctive pieces of a PEM text's base64, to check
// that no error message carries them.
func KeyMaterial(pemText string) []string {
	var out []string
	for _, line := range strings.Split(pemText, "\n") {
		if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
			out = append(out, line[:40])
		}
	}
	return out
}

// IssueServer issues a server certificate for the DNS names dns, signed by
// ca.
func IssueServer(t testing.TB, ca TLSKeyPair, cn string, dns ...string) TLSKeyPair {
	t.Helper()
	return issue(t, ca, LeafSpec{Subject: pkix.Name{CommonName: cn}, DNS: dns})
}

// ServedLeaf handshakes over TCP on 127.0.0.1 with a server of cfg, as a
// Go client asking for serverName ("" sends none), and returns the leaf
// the server sent. With roots the client verifies the chain for that
// name, as Kafka's clients do; without, it takes what comes.
func ServedLeaf(t *testing.T, cfg *tls.Config, roots *x509.CertPool, serverName string) *x509.Certificate {
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

// LeafSpec is what a generated server certificate says about its subject.
type LeafSpec struct {
	Subject pkix.Name
	DNS     []string
	IPs     []net.IP
	URIs    []string
	Emails  []string
}

// IssueLeaf signs a server certificate for spec with the fixture's CA, with
// a new key and serial number.
func IssueLeaf(t testing.TB, f *TLSFixture, spec LeafSpec) TLSKeyPair {
	t.Helper()
	return issue(t, f.CA, spec)
}

// issue signs a server certificate for spec with ca, with a new key and
// serial number, valid from an hour ago for two days.
func issue(t testing.TB, ca TLSKeyPair, spec LeafSpec) TLSKeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: spec.Subject, DNSNames: spec.DNS, IPAddresses: spec.IPs, EmailAddresses: spec.Emails,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, u := range spec.URIs {
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return TLSKeyPair{Key: key, Cert: cert}
}

// SecurityListeners are the properties of a broker with one listener of
// each protocol, plus CLIENT (SSL) and SASL_CLIENT (SASL_SSL), laid under
// the given key, value pairs. Its ports are not for listening: the
// properties are for reading security settings.
func SecurityListeners(kv ...string) config.Properties {
	p := config.Properties{
		"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_PLAINTEXT://127.0.0.1:9094,SASL_SSL://127.0.0.1:9095," +
			"CLIENT://127.0.0.1:9096,SASL_CLIENT://127.0.0.1:9097",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CLIENT:SSL,SASL_CLIENT:SASL_SSL",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i]] = kv[i+1]
	}
	return p
}
