package security

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/kafkanet/kafkanet/internal/tlsname"
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
// (see config.TLS).
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
			n, err := tlsname.Normalize(name)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrTLSConfig, err)
			}
			if _, dup := byName[n]; dup {
				return nil, fmt.Errorf("%w: server name %q is given more than one certificate", ErrTLSConfig, name)
			}
			if err := tlsname.Covers(leaf, n); err != nil {
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
