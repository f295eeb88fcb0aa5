package security_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// leafSpec is what a generated server certificate says about its subject.
type leafSpec struct {
	subject pkix.Name
	dns     []string
	ips     []net.IP
	uris    []string
	emails  []string
}

// issueLeaf signs a server certificate for spec with the fixture's CA, with
// a new key and serial number.
func issueLeaf(t testing.TB, f *tlsFixture, spec leafSpec) tlsKeyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: spec.subject, DNSNames: spec.dns, IPAddresses: spec.ips, EmailAddresses: spec.emails,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, u := range spec.uris {
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, f.ca.cert, key.Public(), f.ca.key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tlsKeyPair{key: key, cert: cert}
}

func TestCheckCertificateChange(t *testing.T) {
	f := testFixture(t)
	broker := pkix.Name{CommonName: "broker-1", Organization: []string{"Acme"}}
	base := leafSpec{subject: broker, dns: []string{"broker-1.example.com", "localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}
	with := func(change func(*leafSpec)) leafSpec {
		s := base
		change(&s)
		return s
	}
	config := func(p tlsKeyPair) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{p.tlsCertificate()}}
	}
	current := config(issueLeaf(t, f, base))
	tests := []struct {
		name     string
		settings security.Settings
		next     *tls.Config
		errKey   string // "" when the change is allowed
		errText  string
	}{
		{name: "the same certificate", next: current},
		{name: "renewed: same subject and names, new key", next: config(issueLeaf(t, f, base))},
		{name: "renewed, leaf not parsed", next: &tls.Config{Certificates: []tls.Certificate{{
			Certificate: [][]byte{issueLeaf(t, f, base).cert.Raw}, PrivateKey: issueLeaf(t, f, base).key}}}},
		{name: "the DN in another case", next: config(issueLeaf(t, f, with(func(s *leafSpec) {
			s.subject = pkix.Name{CommonName: "BROKER-1", Organization: []string{"acme"}}
		})))},
		{name: "names added", next: config(issueLeaf(t, f, with(func(s *leafSpec) {
			s.dns = append(s.dns, "broker-1.internal")
			s.ips = []net.IP{net.IPv4(127, 0, 0, 1).To16(), net.IPv6loopback}
		})))},
		{name: "another CN", next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.subject.CommonName = "broker-2" }))),
			errKey: "ssl.allow.dn.changes", errText: "the new certificate's subject DN CN=broker-2,O=Acme differs from the current one's, CN=broker-1,O=Acme"},
		{name: "another O", next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.subject.Organization = []string{"Acme2"} }))),
			errKey: "ssl.allow.dn.changes"},
		{name: "another CN, allowed", settings: security.Settings{AllowDNChanges: true},
			next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.subject.CommonName = "broker-2" })))},
		{name: "a DNS name dropped", next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.dns = []string{"localhost"} }))),
			errKey: "ssl.allow.san.changes", errText: "lacks the subject alternative names DNS:broker-1.example.com of the current one"},
		{name: "the IP address dropped", next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.ips = nil }))),
			errKey: "ssl.allow.san.changes", errText: "IP:127.0.0.1"},
		{name: "a DNS name in another case", next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.dns = []string{"Broker-1.example.com", "localhost"} }))),
			errKey: "ssl.allow.san.changes", errText: "DNS:broker-1.example.com"},
		{name: "names dropped, allowed", settings: security.Settings{AllowSANChanges: true},
			next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.dns, s.ips = nil, nil })))},
		{name: "names dropped, only DN changes allowed", settings: security.Settings{AllowDNChanges: true},
			next: config(issueLeaf(t, f, with(func(s *leafSpec) { s.dns = nil }))), errKey: "ssl.allow.san.changes"},
		{name: "both changed, both allowed", settings: security.Settings{AllowDNChanges: true, AllowSANChanges: true},
			next: config(issueLeaf(t, f, leafSpec{subject: pkix.Name{CommonName: "elsewhere"}}))},
		{name: "both changes allowed, a certificate that does not parse", settings: security.Settings{AllowDNChanges: true, AllowSANChanges: true},
			next: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{[]byte("not DER")}}}}, errText: "the TLS configuration's certificate does not parse"},
		{name: "through GetCertificate: not compared", next: &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }}},
		{name: "no certificate", next: &tls.Config{}, errText: "serves no certificate"},
		{name: "nil", next: nil, errText: "serves no certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.settings.CheckCertificateChange(current, tt.next)
			switch {
			case tt.errKey != "":
				requireConfigError(t, err, tt.errKey, security.ErrCertificateChange)
				assert.Contains(t, err.Error(), tt.errText)
				assert.Contains(t, err.Error(), tt.errKey+"=true", "the error says how to allow it")
			case tt.errText != "":
				require.ErrorIs(t, err, security.ErrTLSConfig)
				assert.Contains(t, err.Error(), tt.errText)
			default:
				require.NoError(t, err)
			}
		})
	}
	t.Run("URIs and e-mail addresses are names too", func(t *testing.T) {
		old := config(issueLeaf(t, f, leafSpec{subject: broker, uris: []string{"spiffe://example.org/broker"}, emails: []string{"ops@example.org"}}))
		err := security.Settings{}.CheckCertificateChange(old, config(issueLeaf(t, f, leafSpec{subject: broker, emails: []string{"ops@example.org"}})))
		requireConfigError(t, err, "ssl.allow.san.changes", security.ErrCertificateChange)
		assert.Contains(t, err.Error(), "URI:spiffe://example.org/broker")
		err = security.Settings{}.CheckCertificateChange(old, config(issueLeaf(t, f, leafSpec{subject: broker, uris: []string{"spiffe://example.org/broker"}})))
		assert.ErrorContains(t, err, "email:ops@example.org")
	})
	t.Run("no current configuration", func(t *testing.T) {
		require.NoError(t, security.Settings{}.CheckCertificateChange(nil, current))
	})
}

// A server name's certificate is held to the same rules as the default,
// each compared with the one in its place, as Kafka compares a key store's
// entries; adding or removing a server name changes the number of
// certificates, which only both allow keys permit.
func TestCheckCertificateChangeServerNames(t *testing.T) {
	f := testFixture(t)
	def := leafSpec{subject: pkix.Name{CommonName: "broker-1"}, dns: []string{"broker-1.example.com"}}
	tenantA := leafSpec{subject: pkix.Name{CommonName: "a.example.com"}, dns: []string{"a.example.com", "*.a.example.com"}}
	tenantB := leafSpec{subject: pkix.Name{CommonName: "b.example.com"}, dns: []string{"b.example.com"}}
	config := func(a, b *leafSpec) *tls.Config {
		var named []security.ServerNameCertificate
		if a != nil {
			named = append(named, security.ServerNameCertificate{Names: []string{"a.example.com"}, Certificate: issueLeaf(t, f, *a).tlsCertificate()})
		}
		if b != nil {
			named = append(named, security.ServerNameCertificate{Names: []string{"b.example.com"}, Certificate: issueLeaf(t, f, *b).tlsCertificate()})
		}
		cfg, err := security.WithServerNameCertificates(&tls.Config{Certificates: []tls.Certificate{issueLeaf(t, f, def).tlsCertificate()}}, named...)
		require.NoError(t, err)
		return cfg
	}
	anotherDN := tenantB
	anotherDN.subject = pkix.Name{CommonName: "b.example.com", Organization: []string{"Other"}}
	fewerNames := tenantA
	fewerNames.dns = []string{"a.example.com"}
	current := config(&tenantA, &tenantB)
	tests := []struct {
		name     string
		settings security.Settings
		next     *tls.Config
		errKey   string // "" when the change is allowed
		errText  string
	}{
		{name: "every certificate renewed", next: config(&tenantA, &tenantB)},
		{name: "a name's certificate with another DN", next: config(&tenantA, &anotherDN),
			errKey: "ssl.allow.dn.changes", errText: "the new server-name certificate 2's subject DN CN=b.example.com,O=Other differs from the current one's, CN=b.example.com"},
		{name: "a name's certificate with another DN, allowed", settings: security.Settings{AllowDNChanges: true}, next: config(&tenantA, &anotherDN)},
		{name: "a name's certificate without a name", next: config(&fewerNames, &tenantB),
			errKey: "ssl.allow.san.changes", errText: "the new server-name certificate 1 (subject CN=a.example.com) lacks the subject alternative names DNS:*.a.example.com"},
		{name: "a name's certificate without a name, allowed", settings: security.Settings{AllowSANChanges: true}, next: config(&fewerNames, &tenantB)},
		{name: "a server name removed", next: config(&tenantA, nil),
			errKey: "ssl.allow.dn.changes", errText: "the new configuration has 2 certificates where the current one has 3"},
		{name: "a server name removed, only DN changes allowed", settings: security.Settings{AllowDNChanges: true}, next: config(&tenantA, nil),
			errKey: "ssl.allow.san.changes"},
		{name: "a server name removed, both allowed", settings: security.Settings{AllowDNChanges: true, AllowSANChanges: true}, next: config(&tenantA, nil)},
		{name: "no server name any more", next: config(nil, nil), errKey: "ssl.allow.dn.changes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.settings.CheckCertificateChange(current, tt.next)
			if tt.errKey == "" {
				require.NoError(t, err)
				return
			}
			requireConfigError(t, err, tt.errKey, security.ErrCertificateChange)
			assert.Contains(t, err.Error(), tt.errText)
			assert.Contains(t, err.Error(), tt.errKey+"=true", "the error says how to allow it")
		})
	}
	t.Run("a server name added", func(t *testing.T) {
		err := security.Settings{}.CheckCertificateChange(config(&tenantA, nil), current)
		requireConfigError(t, err, "ssl.allow.dn.changes", security.ErrCertificateChange)
	})
}

// ForListener reads ssl.allow.dn.changes and ssl.allow.san.changes for TLS
// listeners, prefixed or not, as Kafka's BOOLEAN; the error of a refused
// change names the key in the form that set it.
func TestAllowChangesSettings(t *testing.T) {
	f := testFixture(t)
	keystore := writePEMFile(t, t.TempDir(), "server.pem", f.serverEC.pkcs8PEM(t)+f.serverEC.certPEM())
	tlsKeys := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", keystore, "sasl.enabled.mechanisms", "PLAIN"}
	const prefix = "listener.name.ssl."
	tests := []struct {
		name          string
		listener      string
		kv            []string
		dn, san       bool
		errKey        string
		dnKey, sanKey string // the keys a refused change names
	}{
		{name: "defaults", kv: nil, dnKey: "ssl.allow.dn.changes", sanKey: "ssl.allow.san.changes"},
		{name: "true in any case", kv: []string{"ssl.allow.dn.changes", " TRUE ", "ssl.allow.san.changes", "True"}, dn: true, san: true},
		{name: "false", kv: []string{"ssl.allow.dn.changes", "false"}, dnKey: "ssl.allow.dn.changes"},
		{name: "prefix overrides", kv: []string{"ssl.allow.dn.changes", "true", prefix + "ssl.allow.dn.changes", "false", prefix + "ssl.allow.san.changes", "false"},
			dnKey: prefix + "ssl.allow.dn.changes", sanKey: prefix + "ssl.allow.san.changes"},
		{name: "another listener's prefix", kv: []string{"listener.name.client.ssl.allow.dn.changes", "true"}, dnKey: "ssl.allow.dn.changes"},
		{name: "unset beside a prefixed key store", kv: []string{prefix + "ssl.keystore.location", keystore},
			dnKey: prefix + "ssl.allow.dn.changes", sanKey: prefix + "ssl.allow.san.changes"},
		{name: "one set, the other unset beside a prefixed key store", kv: []string{prefix + "ssl.keystore.location", keystore, "ssl.allow.dn.changes", "false"},
			dnKey: "ssl.allow.dn.changes", sanKey: prefix + "ssl.allow.san.changes"},
		{name: "SASL_SSL reads them", listener: "SASL_SSL", kv: []string{"listener.name.sasl_ssl.ssl.allow.san.changes", "true"}, san: true},
		{name: "not a boolean", kv: []string{"ssl.allow.dn.changes", "yes"}, errKey: "ssl.allow.dn.changes"},
		{name: "prefixed, not a boolean", kv: []string{prefix + "ssl.allow.san.changes", "1"}, errKey: prefix + "ssl.allow.san.changes"},
		{name: "a PLAINTEXT listener does not read them", listener: "PLAINTEXT", kv: []string{"ssl.allow.dn.changes", "yes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.listener
			if name == "" {
				name = "SSL"
			}
			s, err := security.ForListener(secResolve(t, append(append([]string{}, tlsKeys...), tt.kv...)...), protocolmap.ListenerName(name))
			if tt.errKey != "" {
				ce := requireConfigError(t, err, tt.errKey, listener.ErrInvalidValue)
				assert.Equal(t, "Expected value to be either true or false", ce.Rule)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.dn, s.AllowDNChanges, "AllowDNChanges")
			assert.Equal(t, tt.san, s.AllowSANChanges, "AllowSANChanges")
			if s.TLS == nil {
				return
			}
			current := &tls.Config{Certificates: []tls.Certificate{issueLeaf(t, f, leafSpec{subject: pkix.Name{CommonName: "a"}, dns: []string{"a"}}).tlsCertificate()}}
			if tt.dnKey != "" {
				next := &tls.Config{Certificates: []tls.Certificate{issueLeaf(t, f, leafSpec{subject: pkix.Name{CommonName: "b"}, dns: []string{"a"}}).tlsCertificate()}}
				requireConfigError(t, s.CheckCertificateChange(current, next), tt.dnKey, security.ErrCertificateChange)
			}
			if tt.sanKey != "" {
				next := &tls.Config{Certificates: []tls.Certificate{issueLeaf(t, f, leafSpec{subject: pkix.Name{CommonName: "a"}, dns: []string{"b"}}).tlsCertificate()}}
				requireConfigError(t, s.CheckCertificateChange(current, next), tt.sanKey, security.ErrCertificateChange)
			}
		})
	}
}
