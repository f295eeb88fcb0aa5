package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"strings"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// The keys of kafkanet's own that give a listener a certificate per TLS
// server name (SNI); Kafka has none. [TLSConfig] reads them, each settable
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

// ServerNameCertificate is a certificate a listener serves to the clients
// that ask for one of Names with TLS's server name indication (SNI). A
// name is a DNS name, compared without regard to case, or a wildcard
// "*.example.com", which stands for every name one label below
// example.com; an exact name wins over a wildcard.
type ServerNameCertificate struct {
	Names       []string
	Certificate tls.Certificate
}

// WithServerNameCertificates returns a copy of cfg that serves each of
// certs to the clients asking for one of its names, and cfg's first
// certificate, the default, to the others: clients that send no server
// name (they dialed an IP address) or a name none of certs has. It is how
// a host that builds its listener's tls.Config in code gets what
// kafkanet.ssl.server.names gives a listener configured with properties
// (see [TLSConfig]).
//
// The copy's Certificates are cfg's followed by those of certs, in order,
// and its GetCertificate picks among them by the client's server name.
// cfg must have a certificate and no GetCertificate of its own (the host
// then picks certificates itself). Each name must be a valid DNS name or
// wildcard, given once across certs, and the certificate's leaf must be
// valid for it ([x509.Certificate.VerifyHostname]): a client that checks
// the name it dialed, as Kafka's clients do by default, would refuse it
// otherwise. Errors wrap [ErrTLSConfig].
func WithServerNameCertificates(cfg *tls.Config, certs ...ServerNameCertificate) (*tls.Config, error) {
	if cfg == nil || len(cfg.Certificates) == 0 {
		return nil, fmt.Errorf("%w: per-server-name certificates need a default certificate (tls.Config.Certificates[0]) for the clients that ask for another name or none", ErrTLSConfig)
	}
	if cfg.GetCertificate != nil {
		return nil, fmt.Errorf("%w: the tls.Config has a GetCertificate of its own, which would pick the certificates instead", ErrTLSConfig)
	}
	out := cfg.Clone()
	if len(certs) == 0 {
		return out, nil
	}
	byName := map[string]int{} // normalized name -> index in out.Certificates
	for _, sc := range certs {
		leaf, err := leafOf(sc.Certificate)
		if err != nil {
			return nil, fmt.Errorf("%w: the certificate for server names %s: %v", ErrTLSConfig, strings.Join(sc.Names, ","), err)
		}
		if len(sc.Names) == 0 {
			return nil, fmt.Errorf("%w: a per-server-name certificate (subject %s) has no server name", ErrTLSConfig, SubjectDN(leaf))
		}
		i := len(out.Certificates)
		out.Certificates = append(out.Certificates, sc.Certificate)
		for _, name := range sc.Names {
			n, err := serverNameOf(name)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrTLSConfig, err)
			}
			if _, dup := byName[n]; dup {
				return nil, fmt.Errorf("%w: server name %q is given more than one certificate", ErrTLSConfig, name)
			}
			if err := covers(leaf, n); err != nil {
				return nil, fmt.Errorf("%w: the certificate for server name %q (subject %s) %v", ErrTLSConfig, name, SubjectDN(leaf), err)
			}
			byName[n] = i
		}
	}
	all := out.Certificates
	out.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return &all[pickCertificate(byName, hello.ServerName)], nil
	}
	return out, nil
}

// pickCertificate returns the index of the certificate for server name
// sent: its own, else its wildcard's, else the default's, 0.
func pickCertificate(byName map[string]int, sent string) int {
	if sent == "" {
		return 0
	}
	n := strings.ToLower(strings.TrimSuffix(sent, "."))
	if i, ok := byName[n]; ok {
		return i
	}
	if _, parent, ok := strings.Cut(n, "."); ok && parent != "" {
		if i, ok := byName["*."+parent]; ok {
			return i
		}
	}
	return 0
}

// serverNameOf checks a server name and returns it as certificates are
// picked by it: in lower case, without a trailing dot.
func serverNameOf(name string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
	if _, err := netip.ParseAddr(n); err == nil {
		return "", fmt.Errorf("server name %q is an IP address, which clients never send as a server name (they send none): such clients get the default certificate", name)
	}
	host := strings.TrimPrefix(n, "*.")
	valid := host != "" && len(n) <= 253
	for _, label := range strings.Split(host, ".") {
		valid = valid && label != "" && len(label) <= 63
		for _, r := range label {
			valid = valid && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}
	}
	if !valid {
		return "", fmt.Errorf("server name %q is not a DNS name (letters, digits, '-' and '_' in dot-separated labels) or a wildcard *.<DNS name>", name)
	}
	return n, nil
}

// leafOf returns a certificate's leaf, parsing it when it is not set.
func leafOf(c tls.Certificate) (*x509.Certificate, error) {
	if c.Leaf != nil {
		return c.Leaf, nil
	}
	if len(c.Certificate) == 0 {
		return nil, fmt.Errorf("it has no certificate")
	}
	return x509.ParseCertificate(c.Certificate[0])
}

// covers checks that leaf is valid for server name n (normalized): for a
// wildcard, for any name one label below its domain.
func covers(leaf *x509.Certificate, n string) error {
	probe := n
	if rest, ok := strings.CutPrefix(n, "*."); ok {
		probe = "kafkanet-server-name-check." + rest
	}
	if err := leaf.VerifyHostname(probe); err != nil {
		names := append([]string(nil), leaf.DNSNames...)
		if len(names) == 0 {
			names = []string{"none"}
		}
		return fmt.Errorf("is not valid for it (its DNS names: %s)", strings.Join(names, ", "))
	}
	return nil
}

// withServerNames gives cfg, listener name's TLS configuration, the
// certificates of the server names its kafkanet.ssl.server.names lists
// (see [TLSConfig]); cfg is returned as it is when it lists none.
func (c config) withServerNames(name protocolmap.ListenerName, cfg *tls.Config) (*tls.Config, error) {
	list := c.setting(name, KeySSLServerNames)
	if !list.ok || strings.TrimSpace(list.value) == "" {
		return cfg, nil
	}
	var certs []ServerNameCertificate
	seen := map[string]bool{}
	for _, sn := range protocolmap.SplitList(list.value) {
		if sn == "" {
			continue
		}
		n, err := serverNameOf(sn)
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
		if err := covers(cert.Leaf, n); err != nil {
			at, secret := loc, false
			if !loc.ok {
				at, secret = chain, true
			}
			return nil, tlsError(at, secret, fmt.Sprintf("the certificate for server name %s (subject %s) %v", sn, SubjectDN(cert.Leaf), err))
		}
		certs = append(certs, ServerNameCertificate{Names: []string{sn}, Certificate: cert})
	}
	out, err := WithServerNameCertificates(cfg, certs...)
	if err != nil { // the checks above leave nothing for it to refuse
		return nil, tlsError(list, false, err.Error())
	}
	return out, nil
}
