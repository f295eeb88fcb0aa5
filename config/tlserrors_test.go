package config_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// tlsKeyMention finds the TLS keys an error message names, each with the
// SSL listener's prefix when it has one (group 1) and the key (group 2).
var tlsKeyMention = regexp.MustCompile(`(listener\.name\.ssl\.)?((?:kafkanet\.)?ssl\.[a-z0-9_.*-]*[a-z0-9_*])`)

// checkTLSError asserts that err is the *config.Error of key
// holding value (as the message shows it) wrapping sentinel, that its
// message names the key, the value and rule, and that every TLS key the
// message names carries prefix: the listener prefix when the user wrote
// the settings with it, none when without.
func checkTLSError(t *testing.T, err error, key, value, rule, prefix string, sentinel error) {
	t.Helper()
	require.Error(t, err)
	var ce *config.Error
	require.True(t, errors.As(err, &ce), "error %v (%T) is not a config.Error", err, err)
	assert.Equal(t, key, ce.Key, "error: %v", err)
	assert.Equal(t, value, ce.Value, "error: %v", err)
	assert.ErrorIs(t, err, sentinel)
	msg := err.Error()
	assert.Contains(t, msg, fmt.Sprintf("invalid value %q for configuration %s: ", value, key))
	assert.Contains(t, msg, rule)
	for _, m := range tlsKeyMention.FindAllStringSubmatch(msg, -1) {
		assert.Equal(t, prefix, m[1], "the message names %s, where the settings were written %q: %s", m[0], prefix+m[2], msg)
	}
}

// Every error of TLSConfig names the key as the user would set it: for
// settings written with the listener prefix, the prefixed key, even where
// the key at fault is one the user left out (a key password, a trust
// store, the key store type), and the prefixed forms of the keys its rule
// tells the user to set; for settings written without, the bare keys.
// Each case runs both ways: its keys as written, then each after
// listener.name.ssl.
func TestTLSErrorsNameTheKeyAsWritten(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	chainEC := f.ServerEC.CertPEM() + f.CA.CertPEM()
	other := testkit.IssueServer(t, f.CA, "other", "other.example")
	files := map[string]string{
		"ec":           testkit.WritePEMFile(t, dir, "ec.pem", f.ServerEC.PKCS8PEM(t)+chainEC),
		"rsa":          testkit.WritePEMFile(t, dir, "rsa.pem", f.ServerRSA.PKCS8PEM(t)+f.ServerRSA.CertPEM()),
		"encrypted":    testkit.WritePEMFile(t, dir, "encrypted.pem", f.ServerEC.EncryptedPEM(t, "s3cret-pass")+chainEC),
		"mismatch":     testkit.WritePEMFile(t, dir, "mismatch.pem", f.ServerRSA.PKCS8PEM(t)+chainEC),
		"two-keys":     testkit.WritePEMFile(t, dir, "two-keys.pem", f.ServerEC.PKCS8PEM(t)+f.ServerRSA.PKCS8PEM(t)+chainEC),
		"no-key":       testkit.WritePEMFile(t, dir, "no-key.pem", chainEC),
		"no-cert":      testkit.WritePEMFile(t, dir, "no-cert.pem", f.ServerEC.PKCS8PEM(t)),
		"legacy-enc":   testkit.WritePEMFile(t, dir, "legacy-enc.pem", "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END EC PRIVATE KEY-----\n"+chainEC),
		"openssh":      testkit.WritePEMFile(t, dir, "openssh.pem", "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"+chainEC),
		"garbage-key":  testkit.WritePEMFile(t, dir, "garbage-key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"+chainEC),
		"unterminated": testkit.WritePEMFile(t, dir, "unterminated.pem", strings.Replace(f.ServerEC.PKCS8PEM(t), "-----END PRIVATE KEY-----", "", 1)+chainEC),
		"bad-base64":   testkit.WritePEMFile(t, dir, "bad-base64.pem", "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n"+chainEC),
		"other":        testkit.WritePEMFile(t, dir, "other.pem", other.PKCS8PEM(t)+other.CertPEM()),
		"ca":           testkit.WritePEMFile(t, dir, "ca.pem", f.CA.CertPEM()),
		"empty":        testkit.WritePEMFile(t, dir, "empty.pem", "nothing here\n"),
	}
	missing := filepath.Join(dir, "missing.pem")
	const hidden = "[hidden]"
	ks := []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["ec"]}
	ts := func(kv ...string) []string { return append(append([]string{}, ks...), kv...) }
	const (
		tls12RSA = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
		tls12EC  = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
		tls13    = "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256"
	)
	sn := "kafkanet.ssl.server.name.localhost."
	tests := []struct {
		name  string
		kv    []string // the settings, without the listener prefix
		key   string   // the key at fault, without the listener prefix
		value string   // as the error shows it
		rule  string   // a part of the rule, {p} standing for the listener prefix
	}{
		// The key store.
		{"inline key, type unset", []string{"ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC},
			"ssl.keystore.type", "", "SSL private key can be specified only for PEM, but key store type is JKS."},
		{"inline key, type JKS", []string{"ssl.keystore.type", "JKS", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC},
			"ssl.keystore.type", "JKS", "SSL private key can be specified only for PEM"},
		{"inline key without chain", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t)},
			"ssl.keystore.certificate.chain", "", "SSL private key is specified ({p}ssl.keystore.key), but certificate chain is not specified."},
		{"inline chain without key", []string{"ssl.keystore.type", "PEM", "ssl.keystore.certificate.chain", chainEC},
			"ssl.keystore.key", "", "SSL certificate chain is specified ({p}ssl.keystore.certificate.chain), but private key is not specified"},
		{"inline key and location", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC, "ssl.keystore.location", files["ec"]},
			"ssl.keystore.location", files["ec"], "Both SSL key store location and separate private key ({p}ssl.keystore.key) are specified."},
		{"inline key and key store password", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC, "ssl.keystore.password", "changeit"},
			"ssl.keystore.password", hidden, "SSL key store password cannot be specified with PEM format"},
		{"inline key, encrypted, no key password", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.EncryptedPEM(t, "pw"), "ssl.keystore.certificate.chain", chainEC},
			"ssl.key.password", "", "no key password is specified"},
		{"inline key that does not match", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerRSA.PKCS8PEM(t), "ssl.keystore.certificate.chain", chainEC},
			"ssl.keystore.certificate.chain", hidden, "the private key from {p}ssl.keystore.key does not match"},
		{"inline garbage key", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----", "ssl.keystore.certificate.chain", chainEC},
			"ssl.keystore.key", hidden, "Private key could not be loaded"},
		{"inline chain that is no certificate", []string{"ssl.keystore.type", "PEM", "ssl.keystore.key", f.ServerEC.PKCS8PEM(t), "ssl.keystore.certificate.chain", "none"},
			"ssl.keystore.certificate.chain", hidden, "At least one certificate expected"},
		{"location, type unset", []string{"ssl.keystore.location", files["ec"]},
			"ssl.keystore.type", "", "the type is JKS (Kafka's default); convert the store to PEM and set {p}ssl.keystore.type=PEM for {p}ssl.keystore.location"},
		{"location, type PKCS12", []string{"ssl.keystore.type", "PKCS12", "ssl.keystore.location", files["ec"]},
			"ssl.keystore.type", "PKCS12", "set {p}ssl.keystore.type=PEM"},
		{"location, type in lower case", []string{"ssl.keystore.type", "pem", "ssl.keystore.location", files["ec"]},
			"ssl.keystore.type", "pem", "the type is case-sensitive: set {p}ssl.keystore.type=PEM"},
		{"location and key store password", ts("ssl.keystore.password", "changeit"),
			"ssl.keystore.password", hidden, "SSL key store password cannot be specified with PEM format"},
		{"location that does not exist", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", missing},
			"ssl.keystore.location", missing, "Failed to load PEM SSL keystore " + missing},
		{"no key store, type PEM", []string{"ssl.keystore.type", "PEM"},
			"ssl.keystore.location", "", "SSL key store is not specified: listener SSL uses TLS and needs {p}ssl.keystore.location (a PEM file holding the private key and the certificate chain) or {p}ssl.keystore.key and {p}ssl.keystore.certificate.chain, with {p}ssl.keystore.type=PEM"},
		{"no key store, a key password", []string{"ssl.key.password", "pw"},
			"ssl.keystore.location", "", "needs {p}ssl.keystore.location"},
		{"unterminated PEM block", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["unterminated"]},
			"ssl.keystore.location", files["unterminated"], "no END line"},
		{"PEM that is not base64", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["bad-base64"]},
			"ssl.keystore.location", files["bad-base64"], "not valid base64"},
		{"no private key", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["no-key"]},
			"ssl.keystore.location", files["no-key"], "No matching PRIVATE KEY entries in PEM"},
		{"two private keys", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["two-keys"]},
			"ssl.keystore.location", files["two-keys"], "Expected one private key, but found 2"},
		{"legacy encryption", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["legacy-enc"], "ssl.key.password", "pw"},
			"ssl.keystore.location", files["legacy-enc"], "OpenSSL's legacy format"},
		{"a private key of another kind", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["openssh"]},
			"ssl.keystore.location", files["openssh"], "the OPENSSH PRIVATE KEY block is not a private key this package reads"},
		{"a private key that does not parse", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["garbage-key"]},
			"ssl.keystore.location", files["garbage-key"], "Private key could not be loaded from the PRIVATE KEY block"},
		{"encrypted key, no key password", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"]},
			"ssl.key.password", "", "the private key is encrypted (ENCRYPTED PRIVATE KEY), but no key password is specified"},
		{"encrypted key, empty key password", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", ""},
			"ssl.key.password", hidden, "the key password is empty"},
		{"encrypted key, wrong key password", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["encrypted"], "ssl.key.password", "wrong-pass"},
			"ssl.key.password", hidden, "could not be decrypted with the key password"},
		{"key password for a plain key", ts("ssl.key.password", "s3cret-pass"),
			"ssl.key.password", hidden, "a key password is specified, but the private key is not encrypted (PRIVATE KEY)"},
		{"no certificate", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["no-cert"]},
			"ssl.keystore.location", files["no-cert"], "At least one certificate expected, but none found"},
		{"key and certificate do not match", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", files["mismatch"]},
			"ssl.keystore.location", files["mismatch"], "the private key from {p}ssl.keystore.location does not match the public key of the first certificate"},

		// The trust store.
		{"inline trust store, type unset", ts("ssl.truststore.certificates", f.CA.CertPEM()),
			"ssl.truststore.type", "", "SSL trust store certs can be specified only for PEM, but trust store type is JKS."},
		{"inline trust store and location", ts("ssl.truststore.type", "PEM", "ssl.truststore.certificates", f.CA.CertPEM(), "ssl.truststore.location", files["ca"]),
			"ssl.truststore.location", files["ca"], "Both SSL trust store location and separate trust certificates ({p}ssl.truststore.certificates) are specified."},
		{"inline trust store and password", ts("ssl.truststore.type", "PEM", "ssl.truststore.certificates", f.CA.CertPEM(), "ssl.truststore.password", "changeit"),
			"ssl.truststore.password", hidden, "SSL trust store password cannot be specified for PEM format."},
		{"inline trust store that is no certificate", ts("ssl.truststore.type", "PEM", "ssl.truststore.certificates", "none"),
			"ssl.truststore.certificates", hidden, "Invalid PEM truststore configs: At least one certificate expected"},
		{"trust store location, type unset", ts("ssl.truststore.location", files["ca"]),
			"ssl.truststore.type", "", "convert the store to PEM and set {p}ssl.truststore.type=PEM for {p}ssl.truststore.location"},
		{"trust store location and password", ts("ssl.truststore.type", "PEM", "ssl.truststore.location", files["ca"], "ssl.truststore.password", "changeit"),
			"ssl.truststore.password", hidden, "SSL trust store password cannot be specified for PEM format."},
		{"trust store location that does not exist", ts("ssl.truststore.type", "PEM", "ssl.truststore.location", missing),
			"ssl.truststore.location", missing, "Failed to load PEM SSL truststore " + missing},
		{"trust store without certificates", ts("ssl.truststore.type", "PEM", "ssl.truststore.location", files["empty"]),
			"ssl.truststore.location", files["empty"], "At least one certificate expected"},
		{"trust store password alone", ts("ssl.truststore.password", "changeit"),
			"ssl.truststore.location", "", "SSL trust store is not specified, but trust store password is specified ({p}ssl.truststore.password)."},

		// Client authentication.
		{"client auth not one of the three", ts("ssl.client.auth", "always"),
			"ssl.client.auth", "always", "String must be one of: required, requested, none"},
		{"client auth required without a trust store", ts("ssl.client.auth", "required"),
			"ssl.truststore.location", "", "{p}ssl.client.auth=required needs a trust store to verify client certificates: set {p}ssl.truststore.location or {p}ssl.truststore.certificates (with {p}ssl.truststore.type=PEM)"},

		// Protocols and cipher suites.
		{"an unknown protocol", ts("ssl.enabled.protocols", "TLSv1.2,TLSv9"),
			"ssl.enabled.protocols", "TLSv1.2,TLSv9", "unsupported protocol TLSv9"},
		{"only protocols before TLS 1.2", ts("ssl.enabled.protocols", "TLSv1,TLSv1.1"),
			"ssl.enabled.protocols", "TLSv1,TLSv1.1", "TLS versions before 1.2 are not supported"},
		{"an unknown cipher suite", ts("ssl.cipher.suites", "TLS_NOPE"),
			"ssl.cipher.suites", "TLS_NOPE", "TLS_NOPE is not a cipher suite of Go's TLS"},
		{"an RC4 cipher suite", ts("ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA"),
			"ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "it is not enabled; remove it from the list"},
		{"no cipher suite", ts("ssl.cipher.suites", "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"),
			"ssl.cipher.suites", "TLS_EMPTY_RENEGOTIATION_INFO_SCSV", "it names no cipher suite"},
		{"some of TLS 1.3's suites", ts("ssl.cipher.suites", tls12EC+",TLS_AES_128_GCM_SHA256"),
			"ssl.cipher.suites", tls12EC + ",TLS_AES_128_GCM_SHA256", "Go cannot restrict TLS 1.3's cipher suites"},
		{"no TLS 1.3 suite for TLS 1.3 alone", ts("ssl.cipher.suites", tls12EC, "ssl.enabled.protocols", "TLSv1.3"),
			"ssl.cipher.suites", tls12EC, "it names no TLS 1.3 cipher suite, but {p}ssl.enabled.protocols enables only TLSv1.3"},
		{"no TLS 1.2 suite for TLS 1.2 alone", ts("ssl.cipher.suites", tls13, "ssl.enabled.protocols", "TLSv1.2"),
			"ssl.cipher.suites", tls13, "it names no TLS 1.2 cipher suite, but {p}ssl.enabled.protocols enables only TLSv1.2"},
		{"TLS 1.2 suites for another kind of key", ts("ssl.cipher.suites", tls12RSA),
			"ssl.cipher.suites", tls12RSA, "its TLS 1.2 suites all need an RSA key, but the key store's key is ECDSA or Ed25519"},

		// Certificates per server name.
		{"a server name that is an IP address", ts("kafkanet.ssl.server.names", "127.0.0.1"),
			"kafkanet.ssl.server.names", "127.0.0.1", "is an IP address"},
		{"a server name listed twice", ts("kafkanet.ssl.server.names", "localhost,LOCALHOST", sn+"ssl.keystore.location", files["ec"]),
			"kafkanet.ssl.server.names", "localhost,LOCALHOST", "server name LOCALHOST is listed twice"},
		{"a server name without a key store", ts("kafkanet.ssl.server.names", "localhost"),
			sn + "ssl.keystore.location", "", "server name localhost is listed in {p}kafkanet.ssl.server.names but has no key store: set {p}" + sn + "ssl.keystore.location (a PEM file holding the private key and the certificate chain) or {p}" + sn + "ssl.keystore.key and {p}" + sn + "ssl.keystore.certificate.chain"},
		{"a server name's encrypted key without a password", ts("kafkanet.ssl.server.names", "localhost", sn+"ssl.keystore.location", files["encrypted"]),
			sn + "ssl.key.password", "", "no key password is specified"},
		{"a server name's inline key without a chain", ts("kafkanet.ssl.server.names", "localhost", sn+"ssl.keystore.key", f.ServerEC.PKCS8PEM(t)),
			sn + "ssl.keystore.certificate.chain", "", "SSL private key is specified ({p}" + sn + "ssl.keystore.key), but certificate chain is not specified."},
		{"a server name's JKS key store", ts("kafkanet.ssl.server.names", "localhost", sn+"ssl.keystore.type", "JKS", sn+"ssl.keystore.location", files["ec"]),
			sn + "ssl.keystore.type", "JKS", "set {p}" + sn + "ssl.keystore.type=PEM for {p}" + sn + "ssl.keystore.location"},
		{"a server name's certificate for another name", ts("kafkanet.ssl.server.names", "localhost", sn+"ssl.keystore.location", files["other"]),
			sn + "ssl.keystore.location", files["other"], "the certificate for server name localhost (subject CN=other) is not valid for it"},
	}
	secrets := append(testkit.KeyMaterial(f.ServerEC.PKCS8PEM(t)), testkit.KeyMaterial(f.ServerRSA.PKCS8PEM(t))...)
	secrets = append(secrets, "s3cret-pass", "wrong-pass", "changeit")
	for _, tt := range tests {
		for _, prefix := range []string{"", "listener.name.ssl."} {
			form := "un-prefixed"
			if prefix != "" {
				form = "prefixed"
			}
			t.Run(tt.name+"/"+form, func(t *testing.T) {
				kv := append([]string{}, tt.kv...)
				for i := 0; i < len(kv); i += 2 {
					kv[i] = prefix + kv[i]
				}
				cfg, err := tlsConfig(secResolve(t, kv...), "SSL")
				assert.Nil(t, cfg)
				checkTLSError(t, err, prefix+tt.key, tt.value, strings.ReplaceAll(tt.rule, "{p}", prefix), prefix, security.ErrTLSConfig)
				for _, s := range secrets {
					assert.NotContains(t, err.Error(), s, "the error message leaks a secret")
				}
			})
		}
	}
}

// Where the user wrote some of a listener's TLS settings with its prefix
// and some without, a key left out is named beside the setting that
// needs it; the issue's case is the first.
func TestTLSErrorsNameAMissingKeyBesideTheSettingThatNeedsIt(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	encrypted := testkit.WritePEMFile(t, dir, "encrypted.pem", f.ServerEC.EncryptedPEM(t, "pw")+f.ServerEC.CertPEM())
	plain := testkit.WritePEMFile(t, dir, "plain.pem", f.ServerEC.PKCS8PEM(t)+f.ServerEC.CertPEM())
	tests := []struct {
		name     string
		listener protocolmap.ListenerName
		kv       []string
		key      string
	}{
		{"prefixed encrypted key store, bare type", "CLIENT", []string{"ssl.keystore.type", "PEM", "listener.name.client.ssl.keystore.location", encrypted},
			"listener.name.client.ssl.key.password"},
		{"bare encrypted key store, prefixed type", "CLIENT", []string{"listener.name.client.ssl.keystore.type", "PEM", "ssl.keystore.location", encrypted},
			"ssl.key.password"},
		{"prefixed key store, no type", "CLIENT", []string{"listener.name.client.ssl.keystore.location", plain},
			"listener.name.client.ssl.keystore.type"},
		{"prefixed client auth, bare key store", "CLIENT", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", plain, "listener.name.client.ssl.client.auth", "required"},
			"listener.name.client.ssl.truststore.location"},
		{"bare client auth, prefixed key store", "CLIENT", []string{"listener.name.client.ssl.keystore.type", "PEM", "listener.name.client.ssl.keystore.location", plain, "ssl.client.auth", "required"},
			"ssl.truststore.location"},
		{"prefixed server names, bare key store", "SSL", []string{"ssl.keystore.type", "PEM", "ssl.keystore.location", plain, "listener.name.ssl.kafkanet.ssl.server.names", "localhost"},
			"listener.name.ssl.kafkanet.ssl.server.name.localhost.ssl.keystore.location"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tlsConfig(secResolve(t, tt.kv...), tt.listener)
			testkit.RequireConfigError(t, err, tt.key, security.ErrTLSConfig)
			assert.Contains(t, err.Error(), "configuration "+tt.key+": ")
		})
	}
}
