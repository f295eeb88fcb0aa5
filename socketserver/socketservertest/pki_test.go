package socketservertest_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// NewPKIDir makes a PKI without a testing.TB, in a directory the caller
// gives (made if missing), valid for what the caller asks; its errors are
// returned, not reported to a test.
func TestNewPKIDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, tc := range []struct {
		name     string
		dir      string
		validFor time.Duration
		err      string
	}{
		{name: "an existing directory", dir: t.TempDir(), validFor: time.Hour},
		{name: "a directory to make", dir: filepath.Join(t.TempDir(), "a", "b"), validFor: 90 * 24 * time.Hour},
		{name: "under a file", dir: filepath.Join(file, "pki"), validFor: time.Hour, err: "socketservertest: PKI: "},
		{name: "no validity", dir: t.TempDir(), validFor: 0, err: "validity 0s is not positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p, err := socketservertest.NewPKIDir(tc.dir, tc.validFor)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			for _, f := range []string{p.CAFile, p.ServerFile, p.ClientCertFile, p.ClientKeyFile, p.ClientFile} {
				assert.Equal(t, tc.dir, filepath.Dir(f))
				st, err := os.Stat(f)
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
			}
			// The server's key store is its key, its certificate and the
			// CA's; the certificate is valid for 127.0.0.1 under Roots for
			// validFor.
			pemBytes, err := os.ReadFile(p.ServerFile)
			require.NoError(t, err)
			server, err := tls.X509KeyPair(pemBytes, pemBytes)
			require.NoError(t, err)
			leaf, err := x509.ParseCertificate(server.Certificate[0])
			require.NoError(t, err)
			_, err = leaf.Verify(x509.VerifyOptions{Roots: p.Roots, DNSName: "127.0.0.1"})
			require.NoError(t, err)
			assert.WithinDuration(t, start.Add(tc.validFor), leaf.NotAfter, time.Minute)
			block, _ := pem.Decode(pemBytes)
			assert.Equal(t, "PRIVATE KEY", block.Type, "PKCS#8, as Kafka's PEM key store reads")
			// The client's certificate is issued by the same CA.
			client, err := x509.ParseCertificate(p.Client.Certificate[0])
			require.NoError(t, err)
			_, err = client.Verify(x509.VerifyOptions{Roots: p.Roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			require.NoError(t, err)
		})
	}
}

// RotateServer writes a new key and certificate into ServerFile: the same
// names, a new serial number and expiry, and the subject asked for.
func TestPKIRotateServer(t *testing.T) {
	p := socketservertest.NewPKI(t)
	read := func() (tls.Certificate, *x509.Certificate) {
		t.Helper()
		pemBytes, err := os.ReadFile(p.ServerFile)
		require.NoError(t, err)
		c, err := tls.X509KeyPair(pemBytes, pemBytes)
		require.NoError(t, err)
		require.Len(t, c.Certificate, 2, "the chain holds the CA")
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		require.NoError(t, err)
		return c, leaf
	}
	before, old := read()
	cert, err := p.RotateServer("", time.Hour)
	require.NoError(t, err)
	after, leaf := read()
	assert.Equal(t, cert.Raw, leaf.Raw, "the file holds the certificate returned")
	assert.NotEqual(t, old.SerialNumber, leaf.SerialNumber)
	assert.NotEqual(t, before.PrivateKey, after.PrivateKey, "a new key")
	assert.Equal(t, old.Subject.CommonName, leaf.Subject.CommonName)
	assert.Equal(t, old.DNSNames, leaf.DNSNames)
	assert.WithinDuration(t, time.Now().Add(time.Hour), leaf.NotAfter, time.Minute)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: p.Roots, DNSName: "localhost"})
	require.NoError(t, err)

	other, err := p.RotateServer("elsewhere", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "elsewhere", other.Subject.CommonName)
	_, leaf = read()
	assert.Equal(t, other.Raw, leaf.Raw)
	entries, err := os.ReadDir(filepath.Dir(p.ServerFile))
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "rotating", "a temporary file is left")
	}
	_, err = p.RotateServer("", 0)
	require.Error(t, err)
}
