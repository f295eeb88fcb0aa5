package config

import (
	"crypto/tls"
	"fmt"
	"strings"

	"github.com/kafkanet/kafkanet/internal/tlsname"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// The keys of kafkanet's own that give a listener a certificate per TLS
// server name (SNI); Kafka has none. [TLS] reads them, each settable
// per listener with the listener.name.<lower-case name>. prefix.
const (
	// KeySSLServerNames lists the server names (comma-separated) that get
	// a certificate of their own. Each name is a DNS name, or a wildcard
	// "*.example.com" for the names one label below example.com.
	KeySSLServerNames = "kafkanet.ssl.server.names"
	// KeySSLServerNamePrefix begins the keys of one listed name's key
	// store: kafkanet.ssl.server.name.<name>. followed by Kafka's key
	// store keys, ssl.keystore.location, or ssl.keystore.key and
	// ssl.keystore.certificate.chain, with ssl.key.password for an
	// encrypted key, and optionally ssl.keystore.type (else the
	// listener's, which must be PEM). <name> is written as in
	// kafkanet.ssl.server.names.
	KeySSLServerNamePrefix = "kafkanet.ssl.server.name."
)

// withServerNames gives cfg, listener name's TLS configuration, the
// certificates of the server names its kafkanet.ssl.server.names lists
// (see [TLS]); cfg is returned as it is when it lists none.
func (c reader) withServerNames(name protocolmap.ListenerName, cfg *tls.Config) (*tls.Config, error) {
	list := c.setting(name, KeySSLServerNames)
	if !list.ok || strings.TrimSpace(list.value) == "" {
		return cfg, nil
	}
	var certs []security.ServerNameCertificate
	seen := map[string]bool{}
	for _, sn := range protocolmap.SplitList(list.value) {
		if sn == "" {
			continue
		}
		n, err := tlsname.Normalize(sn)
		if err != nil {
			return nil, tlsError(list, false, err.Error())
		}
		if seen[n] {
			return nil, tlsError(list, false, fmt.Sprintf("server name %s is listed twice", sn))
		}
		seen[n] = true
		prefix := KeySSLServerNamePrefix + sn + "."
		get := func(key string) setting {
			s := c.setting(name, prefix+key)
			if !s.ok && key == KeySSLKeystoreType {
				return c.setting(name, KeySSLKeystoreType) // the listener's
			}
			return s
		}
		loc, key, chain := get(KeySSLKeystoreLocation), get(KeySSLKeystoreKey), get(KeySSLKeystoreCertificateChain)
		if !loc.ok && !key.ok && !chain.ok {
			// Named with the listener prefix the list was given with.
			return nil, tlsError(loc.like(list), false, fmt.Sprintf(
				"server name %s is listed in %s but has no key store: set %s (a PEM file holding the private key and the certificate chain) or %s and %s",
				sn, list.from, loc.like(list).from, key.like(list).from, chain.like(list).from))
		}
		cert, err := keystoreFrom(get, fmt.Sprintf("server name %s of listener %s", sn, name))
		if err != nil {
			return nil, err
		}
		if err := tlsname.Covers(cert.Leaf, n); err != nil {
			at, secret := loc, false
			if !loc.ok {
				at, secret = chain, true
			}
			return nil, tlsError(at, secret, fmt.Sprintf("the certificate for server name %s (subject %s) %v", sn, security.SubjectDN(cert.Leaf), err))
		}
		certs = append(certs, security.ServerNameCertificate{Names: []string{sn}, Certificate: cert})
	}
	out, err := security.WithServerNameCertificates(cfg, certs...)
	if err != nil { // the checks above leave nothing for it to refuse
		return nil, tlsError(list, false, err.Error())
	}
	return out, nil
}
