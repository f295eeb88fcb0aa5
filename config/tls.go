package config

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/youmark/pkcs8"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// The TLS keys that [TLS] reads, with Kafka's names. Each may
// be set for one listener with the listener.name.<lower-case name>. prefix.
const (
	KeySSLKeystoreType             = "ssl.keystore.type"
	KeySSLKeystoreLocation         = "ssl.keystore.location"
	KeySSLKeystorePassword         = "ssl.keystore.password"
	KeySSLKeystoreKey              = "ssl.keystore.key"
	KeySSLKeystoreCertificateChain = "ssl.keystore.certificate.chain"
	KeySSLKeyPassword              = "ssl.key.password"
	KeySSLTruststoreType           = "ssl.truststore.type"
	KeySSLTruststoreLocation       = "ssl.truststore.location"
	KeySSLTruststorePassword       = "ssl.truststore.password"
	KeySSLTruststoreCertificates   = "ssl.truststore.certificates"
	KeySSLClientAuth               = "ssl.client.auth"
	KeySSLEnabledProtocols         = "ssl.enabled.protocols"
	KeySSLCipherSuites             = "ssl.cipher.suites"
)

// pemType is the only key and trust store type this package reads (KIP-651).
const pemType = "PEM"

// kafkaDefaultStoreType is Kafka's default ssl.keystore.type and
// ssl.truststore.type.
const kafkaDefaultStoreType = "JKS"

// TLS builds the server side TLS configuration of listener name of set
// from Kafka's PEM settings in props (KIP-651). For a listener whose
// security protocol is not SSL or SASL_SSL it returns nil, nil. Every key
// is looked up with [Properties.ListenerValue], so listener.name.<name>.ssl.*
// overrides ssl.*.
//
// The listener's certificate and private key come from one of:
//
//   - ssl.keystore.location, a PEM file holding the private key and the
//     certificate chain, with ssl.keystore.type=PEM;
//   - ssl.keystore.key and ssl.keystore.certificate.chain, the same PEM
//     text inline, with ssl.keystore.type=PEM.
//
// Kafka's default key store type is JKS, so ssl.keystore.type must be set
// to PEM (case-sensitive, as in Kafka); JKS and PKCS12 stores are refused
// with an error that says so. The key may be PKCS#8 ("PRIVATE KEY"), PKCS#8
// encrypted with PBES2 ("ENCRYPTED PRIVATE KEY", decrypted with
// ssl.key.password, which is required for it and refused for any other
// key), PKCS#1 ("RSA PRIVATE KEY") or SEC1 ("EC PRIVATE KEY"); Kafka itself
// reads only the two PKCS#8 forms. The key must belong to the first
// certificate of the chain. ssl.keystore.password is refused, as Kafka
// refuses it for PEM.
//
// PEM text is read leniently, like Kafka's parser: text around the blocks is
// ignored and the base64 may be broken anywhere by white space, so a PEM
// value folded onto one line in a properties file (with \ continuations)
// reads, as do literal \n sequences.
//
// Client certificates are verified against ssl.truststore.location (a PEM
// file of certificates) or the inline ssl.truststore.certificates, with
// ssl.truststore.type=PEM. ssl.client.auth is none (the default), requested
// (tls.VerifyClientCertIfGiven) or required
// (tls.RequireAndVerifyClientCert); requested and required need a trust
// store, since kafkanet has no default one. As in Kafka, on a SASL_SSL
// listener ssl.client.auth applies only when set with the listener prefix:
// the un-prefixed value is ignored there (none).
//
// A listener may serve other certificates to clients that ask for other
// TLS server names (SNI), with keys of kafkanet's own:
// kafkanet.ssl.server.names ([KeySSLServerNames]) lists the names, each a
// DNS name or a wildcard *.<DNS name>, and each name's certificate and key
// come from the same keys as the listener's, after the prefix
// kafkanet.ssl.server.name.<name>. ([KeySSLServerNamePrefix]):
// kafkanet.ssl.server.name.<name>.ssl.keystore.location, or
// ...ssl.keystore.key and ...ssl.keystore.certificate.chain, with
// ...ssl.key.password for an encrypted key (ssl.keystore.type is the
// listener's unless set after the prefix). Each certificate must be valid
// for its name. A client that asks for a listed name gets its certificate
// (an exact name wins over a wildcard); one that asks for another name,
// or for none (it dialed an IP address), gets the listener's (ssl.keystore.*)
// certificate, the default. Certificates holds the default first, then
// the listed names' in order, and GetCertificate picks among them
// (security.WithServerNameCertificates does the same for a tls.Config
// built in code). Building the configuration
// again, as a reload does, reads every name's key store again.
//
// TLS 1.2 is the minimum. ssl.enabled.protocols (default TLSv1.2,TLSv1.3)
// can narrow the versions, for example to TLSv1.3 alone; TLSv1 and TLSv1.1
// in it are ignored, and a list of nothing newer is an error.
//
// ssl.cipher.suites (default: Go's) is a comma-separated list of cipher
// suite names as Kafka and Java write them, IANA's
// (TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384). Its TLS 1.2 suites become the
// configuration's CipherSuites: a client that offers none of them fails
// the handshake. Go chooses among them by its own preference, not by the
// order of the list. Go cannot restrict TLS 1.3's suites (it always offers
// TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384 and
// TLS_CHACHA20_POLY1305_SHA256), so the list names all three or none:
// naming none turns TLS 1.3 off, as Java does when no TLS 1.3 suite is
// enabled, and naming no TLS 1.2 suite turns TLS 1.2 off; some but not all
// three is an error. A name Go does not implement is an error, as are the
// RC4 and 3DES suites, which Go calls insecure and the JDK disables by
// default, a list that leaves no version of ssl.enabled.protocols usable,
// and TLS 1.2 suites of which none suits the key store's key (the ECDSA
// suites need an ECDSA or Ed25519 key, the others an RSA key).
// TLS_EMPTY_RENEGOTIATION_INFO_SCSV, which Java lists among its suites, is
// a signal, not a suite: Go always supports what it signals (RFC 5746),
// and it is accepted. Kafka's ssl.protocol and the key and trust manager
// settings are not read.
//
// Errors are [*Error] values wrapping security.ErrTLSConfig whose
// Key is the exact key at fault, as the user wrote it or would write it:
// the listener-prefixed form if that is where the value came from, and for
// a key the settings lack (the key password of an encrypted key, the trust
// store that ssl.client.auth needs, the store type) the form of the
// setting that needs it, listener-prefixed when that one is; the keys the
// rule tells the user to set are named the same way. The value of a
// secret setting (the inline PEM texts and the passwords) is shown as
// [hidden], and no error includes key material. A listener name that is neither a listener nor in
// listener.security.protocol.map gives an error for that key wrapping
// [listener.ErrNoSecurityProtocol].
func TLS(props Properties, set *listener.Set, name protocolmap.ListenerName) (*tls.Config, error) {
	c := reader{props, set}
	proto, err := c.protocol(name)
	if err != nil {
		return nil, err
	}
	if !proto.UsesTLS() {
		return nil, nil
	}
	cert, err := c.keystore(name)
	if err != nil {
		return nil, err
	}
	pool, err := c.truststore(name)
	if err != nil {
		return nil, err
	}
	auth, err := c.clientAuth(name, proto, pool != nil)
	if err != nil {
		return nil, err
	}
	minV, maxV, err := c.tlsVersions(name)
	if err != nil {
		return nil, err
	}
	suites, minV, maxV, err := c.cipherSuites(name, minV, maxV)
	if err != nil {
		return nil, err
	}
	if err := c.checkSuitesForKey(name, suites, minV, cert.PrivateKey); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   auth,
		ClientCAs:    pool,
		MinVersion:   minV,
		MaxVersion:   maxV,
		CipherSuites: suites,
	}
	return c.withServerNames(name, cfg)
}

func tlsError(s setting, secret bool, rule string) error {
	v := s.value
	if secret && s.ok {
		v = hiddenValue
	}
	return &Error{Key: s.from, Value: v, Rule: rule, Err: security.ErrTLSConfig}
}

// storeType returns a store type setting's value, Kafka's default JKS when
// it is not set.
func (s setting) storeType() string {
	if !s.ok {
		return kafkaDefaultStoreType
	}
	return s.value
}

// refuseStoreType explains why a key or trust store type other than PEM
// cannot be used.
func refuseStoreType(typ setting, location string) error {
	t := typ.storeType()
	rule := fmt.Sprintf("this package reads only PEM stores (KIP-651), but the type is %s", t)
	if !typ.ok {
		rule += " (Kafka's default)"
	}
	switch strings.ToUpper(t) {
	case "JKS", "PKCS12", "JCEKS", "BCFKS":
		rule += fmt.Sprintf("; convert the store to PEM and set %s=PEM", typ.from)
	case pemType:
		rule += fmt.Sprintf("; the type is case-sensitive: set %s=PEM", typ.from)
	default:
		rule += fmt.Sprintf("; set %s=PEM", typ.from)
	}
	if location != "" {
		rule += " for " + location
	}
	return tlsError(typ, false, rule)
}

// keystore loads the listener's certificate chain and private key, in the
// order of Kafka's checks.
func (c reader) keystore(name protocolmap.ListenerName) (tls.Certificate, error) {
	return keystoreFrom(func(key string) setting { return c.setting(name, key) }, "listener "+string(name))
}

// keystoreFrom loads the certificate chain and private key of the
// ssl.keystore.* and ssl.key.password settings get returns, in the order
// of Kafka's checks; whose says in errors whose key store it is. A setting
// the user left out is named in the form of the one that needs it (see
// setting.like).
func keystoreFrom(get func(key string) setting, whose string) (tls.Certificate, error) {
	typ := get(KeySSLKeystoreType)
	loc := get(KeySSLKeystoreLocation)
	storePass := get(KeySSLKeystorePassword)
	key := get(KeySSLKeystoreKey)
	chain := get(KeySSLKeystoreCertificateChain)
	keyPass := get(KeySSLKeyPassword)

	var keyPEM, chainPEM, source string
	switch {
	case key.ok:
		switch {
		case typ.storeType() != pemType:
			return tls.Certificate{}, tlsError(typ.like(key), false, fmt.Sprintf("SSL private key can be specified only for PEM, but key store type is %s.", typ.storeType()))
		case !chain.ok:
			return tls.Certificate{}, tlsError(chain.like(key), true, fmt.Sprintf("SSL private key is specified (%s), but certificate chain is not specified.", key.from))
		case loc.ok:
			return tls.Certificate{}, tlsError(loc, false, fmt.Sprintf("Both SSL key store location and separate private key (%s) are specified.", key.from))
		case storePass.ok:
			return tls.Certificate{}, tlsError(storePass, true, "SSL key store password cannot be specified with PEM format, only key password may be specified.")
		}
		keyPEM, chainPEM, source = key.value, chain.value, key.from
	case chain.ok:
		return tls.Certificate{}, tlsError(key.like(chain), true, fmt.Sprintf("SSL certificate chain is specified (%s), but private key is not specified", chain.from))
	case loc.ok:
		if typ.storeType() != pemType {
			return tls.Certificate{}, refuseStoreType(typ.like(loc), loc.from)
		}
		if storePass.ok {
			return tls.Certificate{}, tlsError(storePass, true, "SSL key store password cannot be specified with PEM format, only key password may be specified")
		}
		data, err := os.ReadFile(loc.value)
		if err != nil {
			return tls.Certificate{}, tlsError(loc, false, fmt.Sprintf("Failed to load PEM SSL keystore %s: %v", loc.value, fileError(err)))
		}
		keyPEM, chainPEM, source = string(data), string(data), loc.from
	default:
		// Named beside the key store settings the user did write, if any.
		at := firstSet(typ, keyPass, storePass)
		return tls.Certificate{}, tlsError(loc.like(at), false, fmt.Sprintf(
			"SSL key store is not specified: %s uses TLS and needs %s (a PEM file holding the private key and the certificate chain) or %s and %s, with %s=PEM",
			whose, loc.like(at).from, key.like(at).from, chain.like(at).from, typ.like(at).from))
	}

	// Whichever setting held the text is the one a PEM fault is blamed on.
	at := loc
	secret := false
	if key.ok {
		at, secret = key, true
	}
	keyBlocks, err := pemBlocks(keyPEM)
	if err != nil {
		return tls.Certificate{}, tlsError(at, secret, "Invalid PEM keystore configs: "+err.Error())
	}
	var keys []pemBlock
	for _, b := range keyBlocks {
		if strings.HasSuffix(b.label, "PRIVATE KEY") {
			keys = append(keys, b)
		}
	}
	switch len(keys) {
	case 0:
		return tls.Certificate{}, tlsError(at, secret, "Invalid PEM keystore configs: No matching PRIVATE KEY entries in PEM")
	case 1:
	default:
		return tls.Certificate{}, tlsError(at, secret, fmt.Sprintf("Invalid PEM keystore configs: Expected one private key, but found %d", len(keys)))
	}
	priv, err := parsePrivateKey(keys[0], keyPass.like(at))
	if err != nil {
		var ce *configerr.Error
		if errors.As(err, &ce) {
			return tls.Certificate{}, err
		}
		return tls.Certificate{}, tlsError(at, secret, "Invalid PEM keystore configs: "+err.Error())
	}

	if key.ok {
		at, secret = chain, true
	}
	certs, err := pemCertificates(chainPEM)
	if err != nil {
		return tls.Certificate{}, tlsError(at, secret, "Invalid PEM keystore configs: "+err.Error())
	}
	leaf := certs[0]
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(priv.Public()) {
		return tls.Certificate{}, tlsError(at, secret, fmt.Sprintf(
			"Invalid PEM keystore configs: the private key from %s does not match the public key of the first certificate of the chain (subject %s)", source, security.SubjectDN(leaf)))
	}
	out := tls.Certificate{PrivateKey: priv, Leaf: leaf}
	for _, cert := range certs {
		out.Certificate = append(out.Certificate, cert.Raw)
	}
	return out, nil
}

// parsePrivateKey reads one private key block, decrypting an encrypted
// PKCS#8 key with ssl.key.password.
func parsePrivateKey(b pemBlock, keyPass setting) (crypto.Signer, error) {
	if b.legacyEncrypted {
		return nil, fmt.Errorf("the %s is encrypted in OpenSSL's legacy format (Proc-Type header), which is not supported: convert it to PKCS#8 (ENCRYPTED PRIVATE KEY)", b.label)
	}
	encrypted := b.label == "ENCRYPTED PRIVATE KEY"
	switch {
	case encrypted && !keyPass.ok:
		return nil, tlsError(keyPass, true, "the private key is encrypted (ENCRYPTED PRIVATE KEY), but no key password is specified")
	case encrypted && keyPass.value == "":
		return nil, tlsError(keyPass, true, "the private key is encrypted (ENCRYPTED PRIVATE KEY), but the key password is empty")
	case !encrypted && keyPass.ok:
		return nil, tlsError(keyPass, true, fmt.Sprintf("a key password is specified, but the private key is not encrypted (%s); as in Kafka, remove the password or encrypt the key as PKCS#8", b.label))
	}
	var key any
	var err error
	switch b.label {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(b.der)
	case "ENCRYPTED PRIVATE KEY":
		key, err = decryptPKCS8(b.der, []byte(keyPass.value))
		if err != nil {
			return nil, tlsError(keyPass, true, "Invalid PEM keystore configs: the private key could not be decrypted with the key password (wrong password, or an unsupported encryption scheme): "+err.Error())
		}
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.der)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.der)
	default:
		return nil, fmt.Errorf("the %s block is not a private key this package reads (PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)", b.label)
	}
	if err != nil {
		return nil, fmt.Errorf("Private key could not be loaded from the %s block: %v", b.label, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("Private key could not be loaded: keys of type %T cannot sign", key)
	}
	return signer, nil
}

// decryptPKCS8 decrypts an encrypted PKCS#8 key. The library panics on some
// malformed inputs (a ciphertext that is not whole blocks, a bad IV
// length); that is an error here, not a crash.
func decryptPKCS8(der, password []byte) (key any, err error) {
	defer func() {
		if recover() != nil {
			key, err = nil, errors.New("malformed encrypted key")
		}
	}()
	return pkcs8.ParsePKCS8PrivateKey(der, password)
}

// truststore loads the listener's trusted certificates, or returns nil when
// none are configured.
func (c reader) truststore(name protocolmap.ListenerName) (*x509.CertPool, error) {
	return truststoreFrom(func(key string) setting { return c.setting(name, key) })
}

// truststoreFrom loads the trusted certificates of the ssl.truststore.*
// settings get returns, or returns nil when none are configured.
func truststoreFrom(get func(key string) setting) (*x509.CertPool, error) {
	typ := get(KeySSLTruststoreType)
	loc := get(KeySSLTruststoreLocation)
	pass := get(KeySSLTruststorePassword)
	certsSetting := get(KeySSLTruststoreCertificates)

	var text string
	at, secret := loc, false
	switch {
	case certsSetting.ok:
		switch {
		case typ.storeType() != pemType:
			return nil, tlsError(typ.like(certsSetting), false, fmt.Sprintf("SSL trust store certs can be specified only for PEM, but trust store type is %s.", typ.storeType()))
		case loc.ok:
			return nil, tlsError(loc, false, fmt.Sprintf("Both SSL trust store location and separate trust certificates (%s) are specified.", certsSetting.from))
		case pass.ok:
			return nil, tlsError(pass, true, "SSL trust store password cannot be specified for PEM format.")
		}
		text, at, secret = certsSetting.value, certsSetting, true
	case loc.ok:
		if typ.storeType() != pemType {
			return nil, refuseStoreType(typ.like(loc), loc.from)
		}
		if pass.ok {
			return nil, tlsError(pass, true, "SSL trust store password cannot be specified for PEM format.")
		}
		data, err := os.ReadFile(loc.value)
		if err != nil {
			return nil, tlsError(loc, false, fmt.Sprintf("Failed to load PEM SSL truststore %s: %v", loc.value, fileError(err)))
		}
		text = string(data)
	case pass.ok:
		return nil, tlsError(loc.like(pass), false, fmt.Sprintf("SSL trust store is not specified, but trust store password is specified (%s).", pass.from))
	default:
		return nil, nil
	}
	certs, err := pemCertificates(text)
	if err != nil {
		return nil, tlsError(at, secret, "Invalid PEM truststore configs: "+err.Error())
	}
	pool := x509.NewCertPool()
	for _, cert := range certs {
		pool.AddCert(cert)
	}
	return pool, nil
}

// clientAuth reads ssl.client.auth, with Kafka's SASL_SSL rule.
func (c reader) clientAuth(name protocolmap.ListenerName, proto protocolmap.SecurityProtocol, havePool bool) (tls.ClientAuthType, error) {
	s := c.setting(name, KeySSLClientAuth)
	if !s.ok {
		return tls.NoClientCert, nil
	}
	var auth tls.ClientAuthType
	switch s.value {
	case "required":
		auth = tls.RequireAndVerifyClientCert
	case "requested":
		auth = tls.VerifyClientCertIfGiven
	case "none":
		auth = tls.NoClientCert
	default:
		return 0, tlsError(s, false, "String must be one of: required, requested, none")
	}
	if proto == protocolmap.SASLSSL && s.from == KeySSLClientAuth {
		// Kafka applies only the listener-prefixed setting to SASL_SSL.
		return tls.NoClientCert, nil
	}
	if auth != tls.NoClientCert && !havePool {
		loc := c.setting(name, KeySSLTruststoreLocation).like(s)
		return 0, tlsError(loc, false, fmt.Sprintf(
			"%s=%s needs a trust store to verify client certificates: set %s or %s (with %s=PEM)",
			s.from, s.value, loc.from, c.setting(name, KeySSLTruststoreCertificates).like(s).from, c.setting(name, KeySSLTruststoreType).like(s).from))
	}
	return auth, nil
}

// tlsVersions reads ssl.enabled.protocols.
func (c reader) tlsVersions(name protocolmap.ListenerName) (minV, maxV uint16, err error) {
	s := c.setting(name, KeySSLEnabledProtocols)
	items := protocolmap.SplitList(s.value)
	if !s.ok || len(items) == 0 {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	for _, p := range items {
		var v uint16
		switch p {
		case "TLSv1.3":
			v = tls.VersionTLS13
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.1", "TLSv1", "SSLv3", "SSLv2Hello":
			continue // never enabled here
		default:
			return 0, 0, tlsError(s, false, fmt.Sprintf("unsupported protocol %s: the protocols are TLSv1.2 and TLSv1.3", p))
		}
		if minV == 0 || v < minV {
			minV = v
		}
		if v > maxV {
			maxV = v
		}
	}
	if minV == 0 {
		return 0, 0, tlsError(s, false, "TLS versions before 1.2 are not supported: enable TLSv1.2 or TLSv1.3")
	}
	return minV, maxV, nil
}

// fileError is the cause of a failed file read, without the path that the
// message already names.
func fileError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// pemBlock is one BEGIN/END block of PEM text.
type pemBlock struct {
	label           string // upper-case words separated by one space
	der             []byte
	legacyEncrypted bool // OpenSSL's Proc-Type: 4,ENCRYPTED header
}

var (
	pemBegin = regexp.MustCompile(`-{5}\s*BEGIN\s+([A-Z0-9]+(?:\s+[A-Z0-9]+)*)\s*-{5}`)
	// pemEscapedSpace is a backslash escape of white space left in text
	// that did not pass through a properties parser.
	pemEscapedSpace = strings.NewReplacer(`\n`, " ", `\r`, " ", `\t`, " ")
)

// pemBlocks finds the PEM blocks of text, ignoring anything around them.
// Unlike encoding/pem it needs no line breaks: white space anywhere in the
// base64 is dropped, and the markers may have any white space inside.
func pemBlocks(text string) ([]pemBlock, error) {
	var blocks []pemBlock
	for {
		m := pemBegin.FindStringSubmatchIndex(text)
		if m == nil {
			return blocks, nil
		}
		words := strings.Fields(text[m[2]:m[3]])
		label := strings.Join(words, " ")
		end := regexp.MustCompile(`-{5}\s*END\s+` + strings.Join(words, `\s+`) + `\s*-{5}`)
		body := text[m[1]:]
		e := end.FindStringIndex(body)
		if e == nil {
			return nil, fmt.Errorf("the PEM %s block has no END line", label)
		}
		b := pemBlock{label: label}
		content := body[:e[0]]
		if strings.Contains(content, ":") {
			if !strings.Contains(content, "Proc-Type") {
				return nil, fmt.Errorf("the PEM %s block has headers, which are not supported", label)
			}
			b.legacyEncrypted = true
		} else {
			enc := strings.Join(strings.Fields(pemEscapedSpace.Replace(content)), "")
			der, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(enc, "="))
			if err != nil {
				return nil, fmt.Errorf("the PEM %s block is not valid base64", label)
			}
			b.der = der
		}
		blocks = append(blocks, b)
		text = body[e[1]:]
	}
}

// pemCertificates reads the CERTIFICATE blocks of text, in order.
func pemCertificates(text string) ([]*x509.Certificate, error) {
	blocks, err := pemBlocks(text)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.label != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(b.der)
		if err != nil {
			return nil, fmt.Errorf("certificate %d could not be parsed: %v", len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("At least one certificate expected, but none found")
	}
	return certs, nil
}
