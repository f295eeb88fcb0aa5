package socketserver_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// testPKI is a throwaway certificate authority, generated for one test: a
// server certificate for 127.0.0.1 and client certificates, all signed by
// the CA, with the server's key store and the trust store written as PEM
// files under the test's temporary directory. Nothing here is committed.
type testPKI struct {
	t          testing.TB
	dir        string
	ca         *x509.Certificate
	caKey      *ecdsa.PrivateKey
	pool       *x509.CertPool
	keystore   string // path of the server's PEM key store (key and chain)
	truststore string // path of the PEM trust store (the CA)
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{t: t, dir: t.TempDir()}
	p.caKey = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kafkanet test CA", Organization: []string{"Kafkanet Test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	require.NoError(t, err)
	p.ca, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.ca)

	server := p.issue(pkix.Name{CommonName: "localhost", Organization: []string{"Kafkanet Test"}}, x509.ExtKeyUsageServerAuth)
	keyDER, err := x509.MarshalPKCS8PrivateKey(server.PrivateKey)
	require.NoError(t, err)
	keystore := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for _, c := range server.Certificate {
		keystore = append(keystore, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	keystore = append(keystore, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw})...)
	p.keystore = filepath.Join(p.dir, "server.keystore.pem")
	require.NoError(t, os.WriteFile(p.keystore, keystore, 0o600))
	p.truststore = filepath.Join(p.dir, "truststore.pem")
	require.NoError(t, os.WriteFile(p.truststore, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw}), 0o600))
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

// issue signs a certificate for subject with the CA; server certificates
// are for 127.0.0.1 and localhost.
func (p *testPKI) issue(subject pkix.Name, usage x509.ExtKeyUsage) tls.Certificate {
	p.t.Helper()
	key := newKey(p.t)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(p.t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	require.NoError(p.t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// clientCert issues a client certificate for subject, signed by the CA.
func (p *testPKI) clientCert(subject pkix.Name) tls.Certificate {
	return p.issue(subject, x509.ExtKeyUsageClientAuth)
}

// props returns the TLS settings of every listener: the PEM key and trust
// stores and ssl.client.auth (un-prefixed, so SASL_SSL listeners ignore it,
// as Kafka does).
func (p *testPKI) props(clientAuth string) config.Properties {
	props := config.Properties{
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   p.keystore,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": p.truststore,
	}
	if clientAuth != "" {
		props["ssl.client.auth"] = clientAuth
	}
	return props
}

// clientConfig returns a client TLS configuration trusting the CA, with the
// given client certificates.
func (p *testPKI) clientConfig(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1", Certificates: certs}
}

// aliceDN is the subject of the usual client certificate: its DN, as Kafka
// writes it (RFC 2253), is CN=Alice,OU=Clients,O=Kafkanet Test.
var aliceDN = pkix.Name{CommonName: "Alice", OrganizationalUnit: []string{"Clients"}, Organization: []string{"Kafkanet Test"}}

// cnRule maps a DN to its lower-cased common name.
const cnRule = "RULE:^CN=(.*?),.*$/$1/L"

func merge(ps ...config.Properties) config.Properties {
	out := config.Properties{}
	for _, p := range ps {
		for k, v := range p {
			out[k] = v
		}
	}
	return out
}

// readUntilClosed reads from c until the server closes it, and reports
// how long that took; it fails the test if the server keeps c open for
// limit. Anything the server writes first (a TLS alert) is ignored.
func readUntilClosed(t testing.TB, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(start.Add(limit)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v", limit)
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("want the connection closed by the server, got %v", err)
	}
	return time.Since(start)
}

// The SSL listener's handshake: TLS 1.2 and 1.3 are accepted, older
// versions refused; a client certificate, with ssl.client.auth=requested or
// required, gives the principal User:<DN mapped by the rules>, none
// User:ANONYMOUS; ssl.client.auth=required refuses a client without one;
// an untrusted certificate or one no mapping rule applies to is refused.
// Every refusal closes at once: the KIP-306 delay (set to a second here)
// is for SASL failures only.
func TestTLSHandshakeAndPrincipal(t *testing.T) {
	pki := newTestPKI(t)
	other := newTestPKI(t) // a CA the server does not trust
	const delay = time.Second
	cases := []struct {
		name       string
		clientAuth string
		rules      string
		client     *tls.Config
		wantOK     bool
		principal  connregistry.Principal
		version    uint16
	}{
		{name: "requested, certificate, TLS 1.3", clientAuth: "requested", rules: cnRule,
			client: pki.clientConfig(pki.clientCert(aliceDN)), wantOK: true,
			principal: connregistry.Principal{Type: "User", Name: "alice"}, version: tls.VersionTLS13},
		{name: "requested, certificate, TLS 1.2", clientAuth: "requested", rules: cnRule,
			client: withVersions(pki.clientConfig(pki.clientCert(aliceDN)), tls.VersionTLS12, tls.VersionTLS12), wantOK: true,
			principal: connregistry.Principal{Type: "User", Name: "alice"}, version: tls.VersionTLS12},
		{name: "requested, certificate, default rules", clientAuth: "requested",
			client: pki.clientConfig(pki.clientCert(aliceDN)), wantOK: true,
			principal: connregistry.Principal{Type: "User", Name: "CN=Alice,OU=Clients,O=Kafkanet Test"}, version: tls.VersionTLS13},
		{name: "requested, no certificate", clientAuth: "requested", rules: cnRule,
			client: pki.clientConfig(), wantOK: true, principal: connregistry.Anonymous(), version: tls.VersionTLS13},
		{name: "none, certificate not asked for", clientAuth: "none", rules: cnRule,
			client: pki.clientConfig(pki.clientCert(aliceDN)), wantOK: true, principal: connregistry.Anonymous(), version: tls.VersionTLS13},
		{name: "required, certificate", clientAuth: "required", rules: cnRule,
			client: pki.clientConfig(pki.clientCert(aliceDN)), wantOK: true,
			principal: connregistry.Principal{Type: "User", Name: "alice"}, version: tls.VersionTLS13},
		{name: "required, no certificate, TLS 1.3", clientAuth: "required", client: pki.clientConfig()},
		{name: "required, no certificate, TLS 1.2", clientAuth: "required",
			client: withVersions(pki.clientConfig(), tls.VersionTLS12, tls.VersionTLS12)},
		{name: "requested, untrusted certificate", clientAuth: "requested", client: pki.clientConfig(other.clientCert(aliceDN))},
		{name: "no mapping rule applies", clientAuth: "required", rules: "RULE:^CN=(.*?),OU=ServiceUsers,.*$/$1/",
			client: pki.clientConfig(pki.clientCert(aliceDN))},
		{name: "client at most TLS 1.1", client: withVersions(pki.clientConfig(), tls.VersionTLS10, tls.VersionTLS11)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			props := merge(pki.props(tc.clientAuth), config.Properties{
				"listeners":                                 "SSL://127.0.0.1:0",
				"security.inter.broker.protocol":            "SSL",
				"connection.failed.authentication.delay.ms": "1000",
			})
			if tc.rules != "" {
				props["ssl.principal.mapping.rules"] = tc.rules
			}
			seen := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, props, withAPIs, queueHandler(seen))

			start := time.Now()
			raw := socketservertest.Dial(t, srv, "SSL")
			c := tls.Client(raw, tc.client)
			hsErr := c.Handshake()
			if !tc.wantOK {
				if hsErr == nil {
					// TLS 1.3: the client's handshake ends before the server
					// has checked its certificate; the refusal comes next.
					_, err := c.Write(requestFrame(metadataReq(9), 1, strp("t")))
					if err == nil {
						_, err = c.Read(make([]byte, 1))
					}
					require.Error(t, err, "the server accepted the connection")
				}
				readUntilClosed(t, raw, 5*time.Second)
				assert.Less(t, time.Since(start), delay/2, "a TLS failure waited for the authentication delay")
				requireConnCount(t, srv, "SSL", 0)
				assert.Empty(t, seen, "the handler received a request")
				return
			}
			require.NoError(t, hsErr)
			send(t, c, metadataReq(9), 1)
			r := recv(t, seen)
			require.NoError(t, respondEmpty(r))
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 9
			readResponse(t, c, resp, 1)

			assert.Equal(t, tc.principal, r.Conn.Principal)
			assert.Equal(t, "SSL", r.Conn.SecurityProtocol.String())
			assert.Equal(t, tc.version, r.Conn.TLSVersion, "TLS version %s", tls.VersionName(r.Conn.TLSVersion))
			assert.Equal(t, c.ConnectionState().CipherSuite, r.Conn.CipherSuite)
			assert.NotZero(t, r.Conn.CipherSuite)
			assert.Empty(t, r.Conn.SASLMechanism)
			assert.True(t, r.Conn.AuthenticatedAt.IsZero(), "AuthenticatedAt is for SASL")
			assert.True(t, r.Conn.SessionExpiry.IsZero())
		})
	}
}

func withVersions(c *tls.Config, minV, maxV uint16) *tls.Config {
	c.MinVersion, c.MaxVersion = minV, maxV
	return c
}

// Bytes that are not a TLS ClientHello close the connection at once: a
// Kafka client speaking plaintext to an SSL listener, and random garbage.
func TestTLSGarbageInsteadOfClientHello(t *testing.T) {
	pki := newTestPKI(t)
	srv := socketservertest.NewServer(t, merge(pki.props(""), config.Properties{
		"listeners":                                 "SSL://127.0.0.1:0",
		"security.inter.broker.protocol":            "SSL",
		"connection.failed.authentication.delay.ms": "1000",
	}), withAPIs, echoMetadata)
	for name, b := range map[string][]byte{
		"plaintext ApiVersions": requestFrame(apiVersionsReq(3, "kafkanet-test", "1"), 1, strp("t")),
		"HTTP":                  []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"handshake record, bad": {22, 3, 1, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			c := socketservertest.Dial(t, srv, "SSL")
			write(t, c, b)
			took := readUntilClosed(t, c, 5*time.Second)
			assert.Less(t, took, 500*time.Millisecond)
		})
	}
	requireConnCount(t, srv, "SSL", 0)
}
