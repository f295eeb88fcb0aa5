package socketservertest

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// ServerCert is a throwaway server certificate for some names, signed by
// a certificate authority of its own, so that a client trusting only its
// CA accepts this certificate and no other: the test of a listener that
// serves a certificate per TLS server name (kafkanet.ssl.server.names)
// tells by the CA which certificate it was given. The files are PEM, as
// Kafka's keys read them.
type ServerCert struct {
	// CAFile holds the CA's certificate: a client's trust store
	// (ssl.truststore.location, kcat's ssl.ca.location).
	CAFile string
	// KeyStoreFile holds the server's PKCS#8 key, its certificate and the
	// CA's: ssl.keystore.location, or
	// kafkanet.ssl.server.name.<name>.ssl.keystore.location.
	KeyStoreFile string
	Roots        *x509.CertPool
	Leaf         *x509.Certificate
}

// NewServerCert makes a ServerCert valid for a day for names: DNS names
// (wildcards such as *.example.com included) and IP addresses, the first
// name being the subject's common name. Its files are in a temporary
// directory removed when the test ends.
func NewServerCert(t testing.TB, names ...string) *ServerCert {
	t.Helper()
	c, err := newServerCert(t.TempDir(), names)
	if err != nil {
		t.Fatalf("socketservertest: server certificate for %s: %v", strings.Join(names, ","), err)
	}
	return c
}

func newServerCert(dir string, names []string) (*ServerCert, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("no name")
	}
	now := time.Now()
	ca, err := newAuthority("kafkanet test CA for "+names[0], now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, n)
		}
	}
	keyPEM, certPEM, leaf, err := ca.issue(template)
	if err != nil {
		return nil, err
	}
	c := &ServerCert{
		CAFile: filepath.Join(dir, "ca.pem"), KeyStoreFile: filepath.Join(dir, "keystore.pem"),
		Roots: x509.NewCertPool(), Leaf: leaf,
	}
	c.Roots.AddCert(ca.cert)
	if err := os.WriteFile(c.CAFile, ca.pem, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.KeyStoreFile, slices.Concat(keyPEM, certPEM, ca.pem), 0o600); err != nil {
		return nil, err
	}
	return c, nil
}
