package security_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
)

func TestCheckCertificateChange(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	broker := pkix.Name{CommonName: "broker-1", Organization: []string{"Acme"}}
	base := testkit.LeafSpec{Subject: broker, DNS: []string{"broker-1.example.com", "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	with := func(change func(*testkit.LeafSpec)) testkit.LeafSpec {
		s := base
		change(&s)
		return s
	}
	config := func(p testkit.TLSKeyPair) *tls.Config {
		return &tls.Config{Certificates: []tls.Certificate{p.TLSCertificate()}}
	}
	current := config(testkit.IssueLeaf(t, f, base))
	tests := []struct {
		name     string
		settings security.Settings
		next     *tls.Config
		errKey   string // "" when the change is allowed
		errText  string
	}{
		{name: "the same certificate", next: current},
		{name: "renewed: same subject and names, new key", next: config(testkit.IssueLeaf(t, f, base))},
		{name: "renewed, leaf not parsed", next: &tls.Config{Certificates: []tls.Certificate{{
			Certificate: [][]byte{testkit.IssueLeaf(t, f, base).Cert.Raw}, PrivateKey: testkit.IssueLeaf(t, f, base).Key}}}},
		{name: "the DN in another case", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) {
			s.Subject = pkix.Name{CommonName: "BROKER-1", Organization: []string{"acme"}}
		})))},
		{name: "names added", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) {
			s.DNS = append(s.DNS, "broker-1.internal")
			s.IPs = []net.IP{net.IPv4(127, 0, 0, 1).To16(), net.IPv6loopback}
		})))},
		{name: "another CN", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.Subject.CommonName = "broker-2" }))),
			errKey: "ssl.allow.dn.changes", errText: "the new certificate's subject DN CN=broker-2,O=Acme differs from the current one's, CN=broker-1,O=Acme"},
		{name: "another O", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.Subject.Organization = []string{"Acme2"} }))),
			errKey: "ssl.allow.dn.changes"},
		{name: "another CN, allowed", settings: security.Settings{AllowDNChanges: true},
			next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.Subject.CommonName = "broker-2" })))},
		{name: "a DNS name dropped", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.DNS = []string{"localhost"} }))),
			errKey: "ssl.allow.san.changes", errText: "lacks the subject alternative names DNS:broker-1.example.com of the current one"},
		{name: "the IP address dropped", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.IPs = nil }))),
			errKey: "ssl.allow.san.changes", errText: "IP:127.0.0.1"},
		{name: "a DNS name in another case", next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.DNS = []string{"Broker-1.example.com", "localhost"} }))),
			errKey: "ssl.allow.san.changes", errText: "DNS:broker-1.example.com"},
		{name: "names dropped, allowed", settings: security.Settings{AllowSANChanges: true},
			next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.DNS, s.IPs = nil, nil })))},
		{name: "names dropped, only DN changes allowed", settings: security.Settings{AllowDNChanges: true},
			next: config(testkit.IssueLeaf(t, f, with(func(s *testkit.LeafSpec) { s.DNS = nil }))), errKey: "ssl.allow.san.changes"},
		{name: "both changed, both allowed", settings: security.Settings{AllowDNChanges: true, AllowSANChanges: true},
			next: config(testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "elsewhere"}}))},
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
				testkit.RequireConfigError(t, err, tt.errKey, security.ErrCertificateChange)
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
		old := config(testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: broker, URIs: []string{"spiffe://example.org/broker"}, Emails: []string{"ops@example.org"}}))
		err := security.Settings{}.CheckCertificateChange(old, config(testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: broker, Emails: []string{"ops@example.org"}})))
		testkit.RequireConfigError(t, err, "ssl.allow.san.changes", security.ErrCertificateChange)
		assert.Contains(t, err.Error(), "URI:spiffe://example.org/broker")
		err = security.Settings{}.CheckCertificateChange(old, config(testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: broker, URIs: []string{"spiffe://example.org/broker"}})))
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
	f := testkit.TLSTestFixture(t)
	def := testkit.LeafSpec{Subject: pkix.Name{CommonName: "broker-1"}, DNS: []string{"broker-1.example.com"}}
	tenantA := testkit.LeafSpec{Subject: pkix.Name{CommonName: "a.example.com"}, DNS: []string{"a.example.com", "*.a.example.com"}}
	tenantB := testkit.LeafSpec{Subject: pkix.Name{CommonName: "b.example.com"}, DNS: []string{"b.example.com"}}
	config := func(a, b *testkit.LeafSpec) *tls.Config {
		var named []security.ServerNameCertificate
		if a != nil {
			named = append(named, security.ServerNameCertificate{Names: []string{"a.example.com"}, Certificate: testkit.IssueLeaf(t, f, *a).TLSCertificate()})
		}
		if b != nil {
			named = append(named, security.ServerNameCertificate{Names: []string{"b.example.com"}, Certificate: testkit.IssueLeaf(t, f, *b).TLSCertificate()})
		}
		cfg, err := security.WithServerNameCertificates(&tls.Config{Certificates: []tls.Certificate{testkit.IssueLeaf(t, f, def).TLSCertificate()}}, named...)
		require.NoError(t, err)
		return cfg
	}
	anotherDN := tenantB
	anotherDN.Subject = pkix.Name{CommonName: "b.example.com", Organization: []string{"Other"}}
	fewerNames := tenantA
	fewerNames.DNS = []string{"a.example.com"}
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
			testkit.RequireConfigError(t, err, tt.errKey, security.ErrCertificateChange)
			assert.Contains(t, err.Error(), tt.errText)
			assert.Contains(t, err.Error(), tt.errKey+"=true", "the error says how to allow it")
		})
	}
	t.Run("a server name added", func(t *testing.T) {
		err := security.Settings{}.CheckCertificateChange(config(&tenantA, nil), current)
		testkit.RequireConfigError(t, err, "ssl.allow.dn.changes", security.ErrCertificateChange)
	})
}
