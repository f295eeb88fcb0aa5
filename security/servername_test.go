package security_test

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
)

// WithServerNameCertificates is the same for a tls.Config built in code.
func TestWithServerNameCertificates(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	a := testkit.IssueServer(t, f.CA, "a", "a.example.com", "a2.example.com")
	b := testkit.IssueServer(t, f.CA, "b", "*.b.example.com")
	base := &tls.Config{Certificates: []tls.Certificate{f.ServerEC.TLSCertificate()}, MinVersion: tls.VersionTLS13}
	cfg, err := security.WithServerNameCertificates(base,
		security.ServerNameCertificate{Names: []string{"a.example.com", "A2.example.com"}, Certificate: a.TLSCertificate()},
		security.ServerNameCertificate{Names: []string{"*.b.example.com"}, Certificate: tls.Certificate{Certificate: [][]byte{b.Cert.Raw}, PrivateKey: b.Key}},
	)
	require.NoError(t, err)
	assert.Len(t, base.Certificates, 1, "cfg is not changed")
	assert.Nil(t, base.GetCertificate)
	assert.Equal(t, uint16(tls.VersionTLS13), cfg.MinVersion, "the rest of cfg is kept")
	for name, want := range map[string]testkit.TLSKeyPair{"a.example.com": a, "a2.example.com": a, "z.b.example.com": b} {
		assert.Equal(t, want.Cert.Raw, testkit.ServedLeaf(t, cfg, f.CAPool(), name).Raw, name)
	}
	assert.Equal(t, f.ServerEC.Cert.Raw, testkit.ServedLeaf(t, cfg, nil, "").Raw)
	assert.Equal(t, f.ServerEC.Cert.Raw, testkit.ServedLeaf(t, cfg, nil, "c.example.com").Raw)

	// A server's per-handshake clone keeps the choice.
	assert.Equal(t, a.Cert.Raw, testkit.ServedLeaf(t, cfg.Clone(), f.CAPool(), "a.example.com").Raw)

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
		"no names":           {base, []security.ServerNameCertificate{{Certificate: a.TLSCertificate()}}, "has no server name"},
		"not covered":        {base, []security.ServerNameCertificate{{Names: []string{"b.example.com"}, Certificate: a.TLSCertificate()}}, "is not valid for it"},
		"twice": {base, []security.ServerNameCertificate{{Names: []string{"a.example.com"}, Certificate: a.TLSCertificate()},
			{Names: []string{"A.example.com."}, Certificate: a.TLSCertificate()}}, "more than one certificate"},
		"invalid name":  {base, []security.ServerNameCertificate{{Names: []string{"a_b c"}, Certificate: a.TLSCertificate()}}, "not a DNS name"},
		"no key pair":   {base, []security.ServerNameCertificate{{Names: []string{"a.example.com"}}}, "has no certificate"},
		"an IP address": {base, []security.ServerNameCertificate{{Names: []string{"::1"}, Certificate: a.TLSCertificate()}}, "IP address"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := security.WithServerNameCertificates(tt.cfg, tt.certs...)
			require.ErrorIs(t, err, security.ErrTLSConfig)
			assert.True(t, strings.Contains(err.Error(), tt.text), "%v", err)
		})
	}
}
