package socketservertest

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority for a test or a demo, with a server
// certificate for localhost, 127.0.0.1 and ::1 and a client certificate
// (CN=client, O=kafkanet), written as the PEM files Kafka's keys read
// (ssl.keystore.type=PEM): a listener takes ServerFile as
// ssl.keystore.location and CAFile as ssl.truststore.location.
type PKI struct {
	CAFile     string // the CA certificate, PEM: the trust store
	ServerFile string // the server's PKCS#8 key, its certificate and the CA's, PEM
	// ClientCertFile and ClientKeyFile hold the client's certificate and
	// key, PEM, for clients that read files (kcat, librdkafka); ClientFile
	// holds both, as a client's PEM key store.
	ClientCertFile, ClientKeyFile, ClientFile string
	Roots                                     *x509.CertPool
	Client                                    tls.Certificate

	ca *authority
}

// NewPKI makes a PKI valid for a day, its files in a temporary directory
// removed when the test ends. It is [NewPKIDir] for a test.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	p, err := NewPKIDir(t.TempDir(), 24*time.Hour)
	if err != nil {
		t.Fatalf("socketservertest: %v", err)
	}
	return p
}

// NewPKIDir makes a PKI valid from an hour ago for validFor, outside a
// test: a program that needs a throwaway certificate (an example, a demo,
// a harness) gives it the directory to write its files in, which it
// creates if missing (mode 0700; the files are 0600) and which the caller
// removes when done. Existing files of the same names are overwritten.
func NewPKIDir(dir string, validFor time.Duration) (*PKI, error) {
	p, err := newPKI(dir, validFor)
	if err != nil {
		return nil, fmt.Errorf("socketservertest: PKI: %w", err)
	}
	return p, nil
}

func newPKI(dir string, validFor time.Duration) (*PKI, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("validity %v is not positive", validFor)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	notBefore, notAfter := now.Add(-time.Hour), now.Add(validFor)
	ca, err := newAuthority("kafkanet test CA", notBefore, notAfter)
	if err != nil {
		return nil, err
	}
	issue := func(serial int64, template *x509.Certificate) (keyPEM, certPEM []byte, err error) {
		template.SerialNumber = big.NewInt(serial)
		template.NotBefore, template.NotAfter = notBefore, notAfter
		keyPEM, certPEM, _, err = ca.issue(template)
		return keyPEM, certPEM, err
	}
	serverKey, serverCert, err := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	clientKey, clientCert, err := issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "client", Organization: []string{"kafkanet"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, err
	}

	p := &PKI{
		CAFile: filepath.Join(dir, "ca.pem"), ServerFile: filepath.Join(dir, "server.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client.key"),
		ClientFile: filepath.Join(dir, "client-keystore.pem"), Roots: x509.NewCertPool(),
		ca: ca,
	}
	p.Roots.AddCert(ca.cert)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{p.CAFile, ca.pem},
		{p.ServerFile, slices.Concat(serverKey, serverCert, ca.pem)},
		{p.ClientCertFile, clientCert},
		{p.ClientKeyFile, clientKey},
		{p.ClientFile, slices.Concat(clientKey, clientCert, ca.pem)},
	} {
		if err := os.WriteFile(f.name, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	if p.Client, err = tls.X509KeyPair(clientCert, clientKey); err != nil {
		return nil, err
	}
	return p, nil
}

// ClientTLS returns a client TLS configuration that trusts the CA, with
// the client certificate if withCert.
func (p *PKI) ClientTLS(withCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: p.Roots, MinVersion: tls.VersionTLS12}
	if withCert {
		cfg.Certificates = []tls.Certificate{p.Client}
	}
	return cfg
}

// RotateServer replaces ServerFile as a certificate manager renews a
// certificate: a new key, and a certificate from the CA with a new random
// serial number, valid from now for validFor, for the same names
// (localhost, 127.0.0.1, ::1) and the subject CN=commonName ("" keeps
// localhost; another name is a change of subject, which a reload refuses
// unless ssl.allow.dn.changes allows it). The file is written whole under
// another name and renamed over ServerFile, so a reader sees the old
// content or the new. It returns the new certificate.
func (p *PKI) RotateServer(commonName string, validFor time.Duration) (*x509.Certificate, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("socketservertest: validity %v is not positive", validFor)
	}
	if commonName == "" {
		commonName = "localhost"
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	keyPEM, certPEM, cert, err := p.ca.issue(&x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: commonName},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validFor),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	data := slices.Concat(keyPEM, certPEM, p.ca.pem)
	tmp := p.ServerFile + ".rotating"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, p.ServerFile); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return cert, nil
}
