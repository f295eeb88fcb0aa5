package security_test

import (
	"context"
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
	"math/big"
	"net"
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
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// tlsKeyPair is a generated key and its certificate, signed by the
// fixture's CA.
type tlsKeyPair struct {
	key  crypto.Signer
	cert *x509.Certificate
}

func (p tlsKeyPair) certPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.cert.Raw}))
}

func (p tlsKeyPair) tlsCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{p.cert.Raw}, PrivateKey: p.key, Leaf: p.cert}
}

// pkcs8PEM writes the key as unencrypted PKCS#8.
func (p tlsKeyPair) pkcs8PEM(t testing.TB) string {
	der, err := x509.MarshalPKCS8PrivateKey(p.key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// encryptedPEM writes the key as PBES2-encrypted PKCS#8.
func (p tlsKeyPair) encryptedPEM(t testing.TB, password string) string {
	der, err := pkcs8.MarshalPrivateKey(p.key, []byte(password), nil)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: der}))
}

// legacyPEM writes the key in its algorithm's own format: PKCS#1 for RSA,
// SEC1 for EC.
func (p tlsKeyPair) legacyPEM(t testing.TB) string {
	switch k := p.key.(type) {
	case *rsa.PrivateKey:
		return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(k)
		require.NoError(t, err)
		return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	}
	t.Fatalf("unexpected key type %T", p.key)
	return ""
}

// tlsFixture holds a throwaway CA and certificates it signed.
type tlsFixture struct {
	ca, serverEC, serverRSA, client tlsKeyPair
	// otherCA signed otherClient; the listeners do not trust it.
	otherClient tlsKeyPair
}

func (f *tlsFixture) caPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(f.ca.cert)
	return pool
}

var (
	fixtureOnce sync.Once
	fixture     *tlsFixture
	fixtureErr  error
)

// testFixture generates the certificates once for the package's tests.
func testFixture(t testing.TB) *tlsFixture {
	fixtureOnce.Do(func() { fixture, fixtureErr = newTLSFixture() })
	require.NoError(t, fixtureErr)
	return fixture
}

func newTLSFixture() (*tlsFixture, error) {
	serial := int64(1)
	issue := func(tmpl *x509.Certificate, key crypto.Signer, parent *tlsKeyPair) (tlsKeyPair, error) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = time.Now().Add(-time.Hour)
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
		parentCert, parentKey := tmpl, key
		if parent != nil {
			parentCert, parentKey = parent.cert, parent.key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), parentKey)
		if err != nil {
			return tlsKeyPair{}, err
		}
		cert, err := x509.ParseCertificate(der)
		return tlsKeyPair{key: key, cert: cert}, err
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
	f := &tlsFixture{}
	var err error
	if f.ca, err = issue(caTemplate("Test CA"), ecKey(), nil); err != nil {
		return nil, err
	}
	if f.serverEC, err = issue(leaf(pkix.Name{CommonName: "broker-ec", Organization: []string{"Acme"}}, x509.ExtKeyUsageServerAuth), ecKey(), &f.ca); err != nil {
		return nil, err
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if f.serverRSA, err = issue(leaf(pkix.Name{CommonName: "broker-rsa"}, x509.ExtKeyUsageServerAuth), rsaKey, &f.ca); err != nil {
		return nil, err
	}
	clientName := pkix.Name{
		CommonName: "alice", OrganizationalUnit: []string{"ServiceUsers"}, Organization: []string{"Acme, Inc."},
		Locality: []string{"Fulton"}, Province: []string{"MD"}, Country: []string{"US"},
	}
	if f.client, err = issue(leaf(clientName, x509.ExtKeyUsageClientAuth), ecKey(), &f.ca); err != nil {
		return nil, err
	}
	otherCA, err := issue(caTemplate("Other CA"), ecKey(), nil)
	if err != nil {
		return nil, err
	}
	if f.otherClient, err = issue(leaf(pkix.Name{CommonName: "mallory"}, x509.ExtKeyUsageClientAuth), ecKey(), &otherCA); err != nil {
		return nil, err
	}
	return f, nil
}

// secProps is a broker with one listener of each protocol, plus CLIENT (SSL)
// and SASL_CLIENT (SASL_SSL), laid under the given key, value pairs.
func secProps(kv ...string) config.Properties {
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

func secResolve(t testing.TB, kv ...string) *listener.Set {
	t.Helper()
	c, err := config.Listeners(secProps(kv...))
	require.NoError(t, err)
	return c
}

// writePEMFile writes text to a file in dir and returns its path.
func writePEMFile(t testing.TB, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// requireConfigError asserts that err is a *config.Error for key
// wrapping sentinel, and returns it.
func requireConfigError(t testing.TB, err error, key string, sentinel error) *config.Error {
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

// keyMaterial returns distinctive pieces of a PEM text's base64, to check
// that no error message carries them.
func keyMaterial(pemText string) []string {
	var out []string
	for _, line := range strings.Split(pemText, "\n") {
		if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
			out = append(out, line[:40])
		}
	}
	return out
}

func TestTLSConfig(t *testing.T) {
	f := testFixture(t)
	dir := t.TempDir()
	chainEC := f.serverEC.certPEM() + f.ca.certPEM()
	files := map[string]string{
		"pkcs8-ec":      writePEMFile(t, dir, "pkcs8-ec.pem", f.serverEC.pkcs8PEM(t)+chainEC),
		"pkcs8-rsa":     writePEMFile(t, dir, "pkcs8-rsa.pem", f.serverRSA.certPEM()+f.serverRSA.pkcs8PEM(t)),
		"pkcs1-rsa":     writePEMFile(t, dir, "pkcs1-rsa.pem", "Bag Attributes: ignored text\n"+f.serverRSA.legacyPEM(t)+f.serverRSA.certPEM()),
		"sec1-ec":       writePEMFile(t, dir, "sec1-ec.pem", f.serverEC.legacyPEM(t)+chainEC),
		"encrypted":     writePEMFile(t, dir, "encrypted.pem", f.serverEC.encryptedPEM(t, "s3cret-pass")+chainEC),
		"encrypted-rsa": writePEMFile(t, dir, "encrypted-rsa.pem", f.serverRSA.encryptedPEM(t, "s3cret-pass")+f.serverRSA.certPEM()),
		"mismatch":      writePEMFile(t, dir, "mismatch.pem", f.serverRSA.pkcs8PEM(t)+chainEC),
		"two-keys":      writePEMFile(t, dir, "two-keys.pem", f.serverEC.pkcs8PEM(t)+f.serverRSA.pkcs8PEM(t)+chainEC),
		"no-key":        writePEMFile(t, dir, "no-key.pem", chainEC),
		"no-cert":       writePEMFile(t, dir, "no-cert.pem", f.serverEC.pkcs8PEM(t)),
		"legacy-enc":    writePEMFile(t, dir, "legacy-enc.pem", "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n"+chainEC),
		"unterminated":  writePEMFile(t, dir, "unterminated.pem", strings.Replace(f.serverEC.pkcs8PEM(t), "-----END PRIVATE KEY-----", "", 1)+chainEC),
		"bad-base64":    writePEMFile(t, dir, "bad-base64.pem", "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n"+chainEC),
		"ca":            writePEMFile(t, dir, "ca.pem", f.ca.certPEM()),
		"empty":         writePEMFile(t, dir, "empty.pem", "nothing here\n"),
	}
	const prefix = "listener.name.ssl."
	ssl := protocolmap.ListenerName("SSL")
	good := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}

	type check func(t *testing.T, cfg *tls.Config)
	leafIs := func(want tlsKeyPair) check {
		return func(t *testing.T, cfg *tls.Config) {
			require.Len(t, cfg.Certificates, 1)
			assert.Equal(t, want.cert.Raw, cfg.Certificates[0].Certificate[0])
			assert.True(t, want.key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(cfg.Certificates[0].PrivateKey.(crypto.Signer).Public()))
		}
	}
	authIs := func(want tls.ClientAuthType) check {
		return func(t *testing.T, cfg *tls.Config) { assert.Equal(t, want, cfg.ClientAuth) }
	}
	tests := []struct {
		name     string
		listener protocolmap.ListenerName
		kv       []string
		errKey   string // "" when the config must build
		errText  string // a part of the error message
		checks   []check
	}{
		{name: "PKCS#8 EC key and chain in one file", kv: good, checks: []check{leafIs(f.serverEC), authIs(tls.NoClientCert), func(t *testing.T, cfg *tls.Config) {
			assert.Len(t, cfg.Certificates[0].Certificate, 2, "the chain includes the CA")
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			assert.Nil(t, cfg.ClientCAs)
		}}},
		{name: "PKCS#8 RSA key after the certificate", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-rsa"]}, checks: []check{leafIs(f.serverRSA)}},
		{name: "PKCS#1 RSA key with text around it", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs1-rsa"]}, checks: []check{leafIs(f.serverRSA)}},
		{name: "SEC1 EC key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["sec1-ec"]}, checks: []check{leafIs(f.serverEC)}},
		{name: "encrypted PKCS#8, right password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "s3cret-pass"}, checks: []check{leafIs(f.serverEC)}},
		{name: "encrypted PKCS#8 RSA, right password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted-rsa"], "ssl.key.password", "s3cret-pass"}, checks: []check{leafIs(f.serverRSA)}},
		{name: "encrypted PKCS#8, wrong password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "wrong-pass"}, errKey: "ssl.key.password", errText: "could not be decrypted"},
		{name: "encrypted PKCS#8, listener-prefixed wrong password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "s3cret-pass", prefix + "ssl.key.password", "wrong-pass"}, errKey: prefix + "ssl.key.password"},
		{name: "encrypted PKCS#8, no password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"]}, errKey: "ssl.key.password", errText: "no key password"},
		{name: "encrypted PKCS#8, empty password", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", ""}, errKey: "ssl.key.password"},
		{name: "key password for a key that is not encrypted", kv: append(good, "ssl.key.password", "s3cret-pass"), errKey: "ssl.key.password", errText: "not encrypted"},
		{name: "legacy OpenSSL encryption", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["legacy-enc"], "ssl.key.password", "x"}, errKey: "ssl.keystore.location", errText: "legacy"},
		{name: "listener prefix overrides the location", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", filepath.Join(dir, "missing.pem"), prefix + "ssl.keystore.location", files["pkcs1-rsa"]}, checks: []check{leafIs(f.serverRSA)}},
		{name: "listener prefix overrides the type", kv: []string{"ssl.keystore.type", "JKS", prefix + "ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}, checks: []check{leafIs(f.serverEC)}},
		{name: "a prefix for another listener does not apply", kv: []string{"listener.name.client.ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "JKS (Kafka's default)"},
		{name: "upper-case prefix does not apply", kv: []string{"listener.name.SSL.ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type"},
		{name: "prefixed missing file", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["pkcs8-ec"], prefix + "ssl.keystore.location", filepath.Join(dir, "missing.pem")}, errKey: prefix + "ssl.keystore.location", errText: "Failed to load PEM SSL keystore"},
		{name: "JKS refused", kv: []string{"ssl.keystore.type", "JKS", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "PEM"},
		{name: "PKCS12 refused", kv: []string{prefix + "ssl.keystore.type", "PKCS12", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: prefix + "ssl.keystore.type", errText: "PKCS12"},
		{name: "type unset means JKS", kv: []string{"ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "set ssl.keystore.type=PEM"},
		{name: "type is case-sensitive", kv: []string{"ssl.keystore.type", "pem", "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.type", errText: "case-sensitive"},
		{name: "key store password with PEM", kv: append(good, "ssl.keystore.password", "changeit"), errKey: "ssl.keystore.password", errText: "cannot be specified with PEM"},
		{name: "key does not match the certificate", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["mismatch"]}, errKey: "ssl.keystore.location", errText: "does not match"},
		{name: "two private keys", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["two-keys"]}, errKey: "ssl.keystore.location", errText: "Expected one private key, but found 2"},
		{name: "no private key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["no-key"]}, errKey: "ssl.keystore.location", errText: "PRIVATE KEY"},
		{name: "no certificate", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["no-cert"]}, errKey: "ssl.keystore.location", errText: "At least one certificate expected"},
		{name: "unterminated block", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["unterminated"]}, errKey: "ssl.keystore.location", errText: "no END line"},
		{name: "bad base64", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["bad-base64"]}, errKey: "ssl.keystore.location", errText: "base64"},
		{name: "no key store", kv: nil, errKey: "ssl.keystore.location", errText: "SSL key store is not specified"},
		{name: "PEM type alone is no key store", kv: []string{"ssl.keystore.type", "PEM"}, errKey: "ssl.keystore.location"},
		{name: "inline key and chain", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.serverEC.pkcs8PEM(t), "ssl.keystore.certificate.chain", chainEC}, checks: []check{leafIs(f.serverEC)}},
		{name: "inline prefixed key and chain", kv: []string{prefix + "ssl.keystore.type", "PEM", prefix + "ssl.keystore.key", f.serverRSA.legacyPEM(t), prefix + "ssl.keystore.certificate.chain", f.serverRSA.certPEM()}, checks: []check{leafIs(f.serverRSA)}},
		{name: "inline encrypted key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.serverEC.encryptedPEM(t, "pw"), "ssl.keystore.certificate.chain", chainEC, "ssl.key.password", "pw"}, checks: []check{leafIs(f.serverEC)}},
		{name: "inline key with literal \\n escapes", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", strings.ReplaceAll(f.serverEC.pkcs8PEM(t), "\n", `\n`), "ssl.keystore.certificate.chain", chainEC}, checks: []check{leafIs(f.serverEC)}},
		{name: "inline key needs type PEM", kv: []string{"ssl.keystore.key", f.serverEC.pkcs8PEM(t), "ssl.keystore.certificate.chain", chainEC}, errKey: "ssl.keystore.type", errText: "SSL private key can be specified only for PEM, but key store type is JKS."},
		{name: "inline key without chain", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.serverEC.pkcs8PEM(t)}, errKey: "ssl.keystore.certificate.chain", errText: "certificate chain is not specified"},
		{name: "inline chain without key", kv: []string{"ssl.keystore.type", "PEM", prefix + "ssl.keystore.certificate.chain", chainEC}, errKey: prefix + "ssl.keystore.key", errText: "private key is not specified"},
		{name: "inline key and location", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.serverEC.pkcs8PEM(t), "ssl.keystore.certificate.chain", chainEC, "ssl.keystore.location", files["pkcs8-ec"]}, errKey: "ssl.keystore.location", errText: "Both SSL key store location and separate private key"},
		{name: "inline mismatched key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.serverRSA.pkcs8PEM(t), "ssl.keystore.certificate.chain", chainEC}, errKey: "ssl.keystore.certificate.chain", errText: "does not match"},
		{name: "inline garbage key", kv: []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "ssl.keystore.certificate.chain", chainEC}, errKey: "ssl.keystore.key", errText: "Private key could not be loaded"},

		{name: "client auth requested", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "requested"), checks: []check{authIs(tls.VerifyClientCertIfGiven), func(t *testing.T, cfg *tls.Config) {
			assert.True(t, cfg.ClientCAs.Equal(f.caPool()))
		}}},
		{name: "client auth required", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "required"), checks: []check{authIs(tls.RequireAndVerifyClientCert)}},
		{name: "client auth none with a trust store", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "none"), checks: []check{authIs(tls.NoClientCert)}},
		{name: "prefixed client auth overrides", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "required", prefix+"ssl.client.auth", "none"), checks: []check{authIs(tls.NoClientCert)}},
		{name: "inline trust store certificates", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.certificates", f.ca.certPEM(), "ssl.client.auth", "required"), checks: []check{authIs(tls.RequireAndVerifyClientCert), func(t *testing.T, cfg *tls.Config) {
			assert.True(t, cfg.ClientCAs.Equal(f.caPool()))
		}}},
		{name: "client auth is case-sensitive", kv: append(good, "ssl.client.auth", "REQUIRED"), errKey: "ssl.client.auth", errText: "String must be one of: required, requested, none"},
		{name: "bad client auth", kv: append(good, prefix+"ssl.client.auth", "always"), errKey: prefix + "ssl.client.auth", errText: "String must be one of"},
		{name: "required without trust store", kv: append(good, "ssl.client.auth", "required"), errKey: "ssl.truststore.location", errText: "needs a trust store"},
		{name: "requested without trust store", kv: append(good, prefix+"ssl.client.auth", "requested"), errKey: prefix + "ssl.truststore.location", errText: prefix + "ssl.client.auth=requested"},
		{name: "trust store JKS refused", kv: append(good, "ssl.truststore.type", "JKS", "ssl.truststore.location", files["ca"]), errKey: "ssl.truststore.type", errText: "PEM"},
		{name: "trust store type unset means JKS", kv: append(good, "ssl.truststore.location", files["ca"]), errKey: "ssl.truststore.type", errText: "Kafka's default"},
		{name: "trust store PKCS12 refused", kv: append(good, prefix+"ssl.truststore.type", "PKCS12", "ssl.truststore.location", files["ca"]), errKey: prefix + "ssl.truststore.type"},
		{name: "trust store password with PEM", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.truststore.password", "changeit"), errKey: "ssl.truststore.password"},
		{name: "trust store password alone", kv: append(good, "ssl.truststore.password", "changeit"), errKey: "ssl.truststore.location", errText: "trust store password is specified"},
		{name: "inline trust store needs PEM", kv: append(good, "ssl.truststore.certificates", f.ca.certPEM()), errKey: "ssl.truststore.type", errText: "SSL trust store certs can be specified only for PEM, but trust store type is JKS."},
		{name: "inline trust store and location", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.certificates", f.ca.certPEM(), "ssl.truststore.location", files["ca"]), errKey: "ssl.truststore.location"},
		{name: "trust store without certificates", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["empty"]), errKey: "ssl.truststore.location", errText: "At least one certificate expected"},
		{name: "missing trust store file", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", filepath.Join(dir, "none.pem")), errKey: "ssl.truststore.location", errText: "Failed to load PEM SSL truststore"},

		{name: "TLSv1.3 only", kv: append(good, "ssl.enabled.protocols", "TLSv1.3"), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MinVersion)
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)
		}}},
		{name: "TLSv1.2 only", kv: append(good, prefix+"ssl.enabled.protocols", "TLSv1.2"), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MaxVersion)
		}}},
		{name: "old versions in the list are ignored", kv: append(good, "ssl.enabled.protocols", "TLSv1, TLSv1.1 ,TLSv1.3"), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MinVersion)
		}}},
		{name: "empty protocol list means the default", kv: append(good, "ssl.enabled.protocols", ""), checks: []check{func(t *testing.T, cfg *tls.Config) {
			assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
			assert.Equal(t, uint16(tls.VersionTLS13), cfg.MaxVersion)
		}}},
		{name: "only old versions", kv: append(good, "ssl.enabled.protocols", "TLSv1,TLSv1.1"), errKey: "ssl.enabled.protocols", errText: "before 1.2"},
		{name: "unknown protocol", kv: append(good, prefix+"ssl.enabled.protocols", "TLSv1.2,TLSv9"), errKey: prefix + "ssl.enabled.protocols", errText: "TLSv9"},

		{name: "SASL_SSL ignores un-prefixed client auth", listener: "SASL_SSL", kv: append(good, "ssl.client.auth", "required"), checks: []check{authIs(tls.NoClientCert)}},
		{name: "SASL_SSL still validates un-prefixed client auth", listener: "SASL_SSL", kv: append(good, "ssl.client.auth", "sometimes"), errKey: "ssl.client.auth"},
		{name: "SASL_SSL applies prefixed client auth", listener: "SASL_SSL", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "listener.name.sasl_ssl.ssl.client.auth", "required"), checks: []check{authIs(tls.RequireAndVerifyClientCert)}},
		{name: "SSL listener named CLIENT applies un-prefixed client auth", listener: "CLIENT", kv: append(good, "ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.client.auth", "requested"), checks: []check{authIs(tls.VerifyClientCertIfGiven)}},
	}
	secrets := append(keyMaterial(f.serverEC.pkcs8PEM(t)), keyMaterial(f.serverRSA.pkcs8PEM(t))...)
	secrets = append(secrets, "s3cret-pass", "wrong-pass", "changeit")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.listener
			if name == "" {
				name = ssl
			}
			c := secResolve(t, tt.kv...)
			cfg, err := security.TLSConfig(c, name)
			if tt.errKey != "" {
				requireConfigError(t, err, tt.errKey, security.ErrTLSConfig)
				assert.Nil(t, cfg)
				assert.Contains(t, err.Error(), tt.errText)
				for _, s := range secrets {
					assert.NotContains(t, err.Error(), s, "the error message leaks a secret")
				}
				return
			}
			require.NoError(t, err)
			require.NotNil(t, cfg)
			assert.GreaterOrEqual(t, cfg.MinVersion, uint16(tls.VersionTLS12))
			for _, ch := range tt.checks {
				ch(t, cfg)
			}
		})
	}
}

func TestTLSConfigNonTLSListeners(t *testing.T) {
	// Settings that would be errors on a TLS listener do not matter here.
	c := secResolve(t, "ssl.keystore.type", "JKS", "ssl.client.auth", "bogus")
	for _, name := range []protocolmap.ListenerName{"PLAINTEXT", "SASL_PLAINTEXT"} {
		cfg, err := security.TLSConfig(c, name)
		assert.NoError(t, err, name)
		assert.Nil(t, cfg, name)
	}
	_, err := security.TLSConfig(c, "NOPE")
	requireConfigError(t, err, "listener.security.protocol.map", listener.ErrNoSecurityProtocol)
}

// TestTLSConfigFromPropertiesFile reads inline PEM the way a
// server.properties file holds it: folded onto one line with backslash
// continuations, each line's leading white space dropped.
func TestTLSConfigFromPropertiesFile(t *testing.T) {
	f := testFixture(t)
	fold := func(pemText string) string {
		lines := strings.Split(strings.TrimSpace(pemText), "\n")
		return strings.Join(lines, " \\\n    ")
	}
	text := "listeners=SSL://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\n" +
		"listener.name.ssl.ssl.keystore.type=PEM\n" +
		"listener.name.ssl.ssl.keystore.key=" + fold(f.serverEC.encryptedPEM(t, "pw")) + "\n" +
		"listener.name.ssl.ssl.keystore.certificate.chain=" + fold(f.serverEC.certPEM()+f.ca.certPEM()) + "\n" +
		"listener.name.ssl.ssl.key.password=pw\n" +
		"ssl.truststore.type=PEM\n" +
		"ssl.truststore.certificates=" + fold(f.ca.certPEM()) + "\n" +
		"ssl.client.auth=required\n"
	props, err := config.ParseProperties([]byte(text))
	require.NoError(t, err)
	require.NotContains(t, props["listener.name.ssl.ssl.keystore.key"], "\n", "the value is one line")
	c, err := config.Listeners(props)
	require.NoError(t, err)
	cfg, err := security.TLSConfig(c, "SSL")
	require.NoError(t, err)
	assert.Equal(t, f.serverEC.cert.Raw, cfg.Certificates[0].Certificate[0])
	assert.Equal(t, tls.RequireAndVerifyClientCert, cfg.ClientAuth)
}

// pipeHandshake runs a TLS handshake between a server with cfg and a client
// with clientCfg over an in-memory connection, returning both results and
// the client certificates the server saw.
func pipeHandshake(t *testing.T, cfg, clientCfg *tls.Config) (serverErr, clientErr error, peer []*x509.Certificate) {
	t.Helper()
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv := tls.Server(sc, cfg)
		serverErr = srv.HandshakeContext(ctx)
		if serverErr == nil {
			peer = srv.ConnectionState().PeerCertificates
			// Let the client read the server's last flight (and, in TLS
			// 1.3, learn of a refused certificate).
			_, _ = srv.Write([]byte("ok"))
		}
		sc.Close()
	}()
	cli := tls.Client(cc, clientCfg)
	clientErr = cli.HandshakeContext(ctx)
	if clientErr == nil {
		buf := make([]byte, 2)
		_, clientErr = cli.Read(buf)
	}
	cc.Close()
	<-done
	return serverErr, clientErr, peer
}

func TestTLSHandshake(t *testing.T) {
	f := testFixture(t)
	dir := t.TempDir()
	keystore := writePEMFile(t, dir, "server.pem", f.serverEC.encryptedPEM(t, "pw")+f.serverEC.certPEM()+f.ca.certPEM())
	ca := writePEMFile(t, dir, "ca.pem", f.ca.certPEM())
	base := []string{
		"ssl.keystore.type", "PEM", "ssl.keystore.location", keystore, "ssl.key.password", "pw",
		"ssl.truststore.type", "PEM", "ssl.truststore.location", ca,
		"ssl.principal.mapping.rules", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT",
	}
	client := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: f.caPool(), ServerName: "localhost", Certificates: certs}
	}

	t.Run("required, with a client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required")...)
		sec, err := security.ForListener(c, "SSL")
		require.NoError(t, err)
		serverErr, clientErr, peer := pipeHandshake(t, sec.TLS, client(f.client.tlsCertificate()))
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
		require.NotEmpty(t, peer)
		dn := security.SubjectDN(peer[0])
		assert.Equal(t, `CN=alice,OU=ServiceUsers,O=Acme\, Inc.,L=Fulton,ST=MD,C=US`, dn)
		name, err := sec.PrincipalMapper.Name(dn)
		require.NoError(t, err)
		assert.Equal(t, "alice", name)
	})
	t.Run("required, without a client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required")...)
		cfg, err := security.TLSConfig(c, "SSL")
		require.NoError(t, err)
		serverErr, clientErr, _ := pipeHandshake(t, cfg, client())
		assert.Error(t, serverErr)
		assert.Error(t, clientErr)
	})
	t.Run("required, with an untrusted client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required")...)
		cfg, err := security.TLSConfig(c, "SSL")
		require.NoError(t, err)
		serverErr, _, _ := pipeHandshake(t, cfg, client(f.otherClient.tlsCertificate()))
		assert.Error(t, serverErr)
	})
	t.Run("requested, without a client certificate", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "requested")...)
		cfg, err := security.TLSConfig(c, "SSL")
		require.NoError(t, err)
		serverErr, clientErr, peer := pipeHandshake(t, cfg, client())
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
		assert.Empty(t, peer)
	})
	t.Run("SASL_SSL ignores un-prefixed required", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.client.auth", "required", "sasl.enabled.mechanisms", "PLAIN")...)
		sec, err := security.ForListener(c, "SASL_SSL")
		require.NoError(t, err)
		serverErr, clientErr, _ := pipeHandshake(t, sec.TLS, client())
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
	})
	t.Run("TLS 1.1 client refused", func(t *testing.T) {
		c := secResolve(t, base...)
		cfg, err := security.TLSConfig(c, "SSL")
		require.NoError(t, err)
		old := client()
		old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
		serverErr, clientErr, _ := pipeHandshake(t, cfg, old)
		assert.Error(t, serverErr)
		assert.Error(t, clientErr)
	})
	t.Run("TLS 1.2 client refused by a TLSv1.3 listener", func(t *testing.T) {
		c := secResolve(t, append(base, "ssl.enabled.protocols", "TLSv1.3")...)
		cfg, err := security.TLSConfig(c, "SSL")
		require.NoError(t, err)
		old := client()
		old.MaxVersion = tls.VersionTLS12
		serverErr, _, _ := pipeHandshake(t, cfg, old)
		assert.Error(t, serverErr)
		modern := client()
		serverErr, clientErr, _ := pipeHandshake(t, cfg, modern)
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
	})
	t.Run("RSA key with TLS 1.2", func(t *testing.T) {
		rsaStore := writePEMFile(t, dir, "rsa.pem", f.serverRSA.legacyPEM(t)+f.serverRSA.certPEM())
		c := secResolve(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", rsaStore)
		cfg, err := security.TLSConfig(c, "SSL")
		require.NoError(t, err)
		cl := client()
		cl.MaxVersion = tls.VersionTLS12
		serverErr, clientErr, _ := pipeHandshake(t, cfg, cl)
		require.NoError(t, serverErr)
		require.NoError(t, clientErr)
	})
}
