package config_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// Security reads ssl.allow.dn.changes and ssl.allow.san.changes for TLS
// listeners, prefixed or not, as Kafka's BOOLEAN; the error of a refused
// change names the key in the form that set it.
func TestAllowChangesSettings(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	keystore := testkit.WritePEMFile(t, t.TempDir(), "server.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
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
			s, err := forListener(secResolve(t, append(append([]string{}, tlsKeys...), tt.kv...)...), protocolmap.ListenerName(name))
			if tt.errKey != "" {
				ce := testkit.RequireConfigError(t, err, tt.errKey, listener.ErrInvalidValue)
				assert.Equal(t, "Expected value to be either true or false", ce.Rule)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.dn, s.AllowDNChanges, "AllowDNChanges")
			assert.Equal(t, tt.san, s.AllowSANChanges, "AllowSANChanges")
			if s.TLS == nil {
				return
			}
			current := &tls.Config{Certificates: []tls.Certificate{testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "a"}, DNS: []string{"a"}}).TLSCertificate()}}
			if tt.dnKey != "" {
				next := &tls.Config{Certificates: []tls.Certificate{testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "b"}, DNS: []string{"a"}}).TLSCertificate()}}
				testkit.RequireConfigError(t, s.CheckCertificateChange(current, next), tt.dnKey, security.ErrCertificateChange)
			}
			if tt.sanKey != "" {
				next := &tls.Config{Certificates: []tls.Certificate{testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "a"}, DNS: []string{"b"}}).TLSCertificate()}}
				testkit.RequireConfigError(t, s.CheckCertificateChange(current, next), tt.sanKey, security.ErrCertificateChange)
			}
		})
	}
}
