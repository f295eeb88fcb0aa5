package socketservertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority for a test, with a server
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
}

// NewPKI makes a PKI valid for a day, its files in a temporary directory
// removed when the test ends.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	fail := func(err error) {
		if err != nil {
			t.Fatalf("socketservertest: PKI: %v", err)
		}
	}
	dir := t.TempDir()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	caTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kafkanet test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	fail(err)
	ca, err := x509.ParseCertificate(caDER)
	fail(err)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})

	issue := func(serial int64, template *x509.Certificate) (keyPEM, certPEM []byte) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		fail(err)
		template.SerialNumber = big.NewInt(serial)
		template.NotBefore, template.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
		template.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
		fail(err)
		pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
		fail(err)
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
			pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	serverKey, serverCert := issue(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	clientKey, clientCert := issue(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "client", Organization: []string{"kafkanet"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})

	p := &PKI{
		CAFile: filepath.Join(dir, "ca.pem"), ServerFile: filepath.Join(dir, "server.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"), ClientKeyFile: filepath.Join(dir, "client.key"),
		ClientFile: filepath.Join(dir, "client-keystore.pem"), Roots: x509.NewCertPool(),
	}
	p.Roots.AddCert(ca)
	fail(os.WriteFile(p.CAFile, caPEM, 0o600))
	fail(os.WriteFile(p.ServerFile, append(append(serverKey, serverCert...), caPEM...), 0o600))
	fail(os.WriteFile(p.ClientCertFile, clientCert, 0o600))
	fail(os.WriteFile(p.ClientKeyFile, clientKey, 0o600))
	fail(os.WriteFile(p.ClientFile, append(append(clientKey, clientCert...), caPEM...), 0o600))
	p.Client, err = tls.X509KeyPair(clientCert, clientKey)
	fail(err)
	return p
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
