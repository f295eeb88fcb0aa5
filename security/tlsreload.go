package security

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
)

// The keys that allow a listener's reloaded certificate to name another
// subject, which a refused change names when the Settings do not say
// where AllowDNChanges and AllowSANChanges came from (the configuration
// layer, package config, exports them as constants).
const (
	keySSLAllowDNChanges  = "ssl.allow.dn.changes"
	keySSLAllowSANChanges = "ssl.allow.san.changes"
)

// ErrCertificateChange is wrapped by the error of
// [Settings.CheckCertificateChange]: a reloaded certificate names another
// subject than the one in force, and the listener's settings do not allow
// it.
var ErrCertificateChange = errors.New("certificate subject change not allowed")

// CheckCertificateChange applies Kafka's rules for reloading a listener's
// key store (SslFactory's reconfiguration) to a move from the TLS
// configuration current to next, under the listener's settings s:
//
//   - next must serve a certificate: Certificates, GetCertificate or
//     GetConfigForClient (a listener's key store cannot be removed);
//   - unless s.AllowDNChanges, each of next's certificates must have the
//     subject DN of current's in the same place, compared as Kafka
//     compares them (the same encoded name, or RFC 2253 forms equal
//     without regard to case);
//   - unless s.AllowSANChanges, each of next's certificates must hold
//     every subject alternative name of current's in the same place (DNS
//     names, IP addresses, URIs and e-mail addresses, the names Go's x509
//     package reads): names may be added, none dropped;
//   - unless both are allowed, next must have as many certificates as
//     current.
//
// The certificates compared are the configurations' Certificates, in
// order, as Kafka compares a key store's entries: the default first, then
// those of the server names (kafkanet.ssl.server.names, in its order, or
// [WithServerNameCertificates]'s), so that a name's certificate is held to
// the same rules as the default; adding or removing a server name changes
// the count. A configuration that serves its certificates only through
// GetCertificate or GetConfigForClient is not compared (its host checks
// what it serves). The error is a *config.Error for the
// allow key that would permit the change, in the form that set it
// (listener-prefixed or not; when unset, listener-prefixed if the
// listener's key store setting is), wrapping [ErrCertificateChange].
func (s Settings) CheckCertificateChange(current, next *tls.Config) error {
	if next == nil || len(next.Certificates) == 0 && next.GetCertificate == nil && next.GetConfigForClient == nil {
		return fmt.Errorf("%w: the new TLS configuration serves no certificate (Certificates, GetCertificate and GetConfigForClient are unset)", ErrTLSConfig)
	}
	for i := range next.Certificates { // one that is empty or does not parse is refused, whatever the allow keys say
		if _, err := leafAt(next, i); err != nil {
			return err
		}
	}
	if current == nil || len(current.Certificates) == 0 || len(next.Certificates) == 0 || s.AllowDNChanges && s.AllowSANChanges {
		return nil
	}
	dnKey, sanKey := keyOr(s.AllowDNChangesKey, keySSLAllowDNChanges), keyOr(s.AllowSANChangesKey, keySSLAllowSANChanges)
	if len(next.Certificates) != len(current.Certificates) {
		key := dnKey
		if s.AllowDNChanges {
			key = sanKey
		}
		return &configerr.Error{Key: key, Value: "false", Err: ErrCertificateChange, Rule: fmt.Sprintf(
			"the new configuration has %d certificates where the current one has %d: the change is refused, as Kafka refuses a key store with another number of entries; allow it with %s=true and %s=true",
			len(next.Certificates), len(current.Certificates), dnKey, sanKey)}
	}
	for i := range current.Certificates {
		old, err := leafAt(current, i)
		if err != nil {
			return err
		}
		cert, err := leafAt(next, i)
		if err != nil {
			return err
		}
		which := certificateName(i)
		if !s.AllowDNChanges && !sameSubject(old, cert) {
			return &configerr.Error{Key: dnKey, Value: "false", Err: ErrCertificateChange, Rule: fmt.Sprintf(
				"the new %s's subject DN %s differs from the current one's, %s: the change is refused, as Kafka refuses it; allow it with %s=true",
				which, SubjectDN(cert), SubjectDN(old), dnKey)}
		}
		if !s.AllowSANChanges {
			if dropped := droppedNames(old, cert); len(dropped) > 0 {
				return &configerr.Error{Key: sanKey, Value: "false", Err: ErrCertificateChange, Rule: fmt.Sprintf(
					"the new %s (subject %s) lacks the subject alternative names %s of the current one: the change is refused, as Kafka refuses it; allow it with %s=true",
					which, SubjectDN(cert), strings.Join(dropped, ", "), sanKey)}
			}
		}
	}
	return nil
}

func keyOr(key, def string) string {
	if key == "" {
		return def
	}
	return key
}

// leafAt returns the leaf of cfg's certificate i.
func leafAt(cfg *tls.Config, i int) (*x509.Certificate, error) {
	c := cfg.Certificates[i]
	if c.Leaf != nil {
		return c.Leaf, nil
	}
	if len(c.Certificate) == 0 {
		return nil, fmt.Errorf("%w: the TLS configuration's %s is empty", ErrTLSConfig, certificateName(i))
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%w: the TLS configuration's %s does not parse: %w", ErrTLSConfig, certificateName(i), err)
	}
	return leaf, nil
}

// certificateName names a configuration's certificate i in errors: the
// default one, or a server name's, counted from 1 (kafkanet.ssl.server.names'
// order).
func certificateName(i int) string {
	if i == 0 {
		return "certificate"
	}
	return fmt.Sprintf("server-name certificate %d", i)
}

// sameSubject compares subject DNs as Kafka does: the same principal, or
// the same RFC 2253 name without regard to case.
func sameSubject(a, b *x509.Certificate) bool {
	return bytes.Equal(a.RawSubject, b.RawSubject) || strings.EqualFold(SubjectDN(a), SubjectDN(b))
}

// subjectAltNames lists a certificate's subject alternative names, each
// with its type, as Java's getSubjectAlternativeNames pairs them.
func subjectAltNames(c *x509.Certificate) []string {
	var out []string
	for _, n := range c.DNSNames {
		out = append(out, "DNS:"+n)
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "IP:"+canonicalIP(ip))
	}
	for _, u := range c.URIs {
		out = append(out, "URI:"+u.String())
	}
	for _, e := range c.EmailAddresses {
		out = append(out, "email:"+e)
	}
	return out
}

// canonicalIP writes an IPv4 address in its 4-byte form, whichever form
// the certificate holds.
func canonicalIP(ip net.IP) string {
	if v4 := ip.To4(); v4 != nil {
		return v4.String()
	}
	return ip.String()
}

// droppedNames returns the subject alternative names of old that cert
// lacks (Kafka: the new set must contain the old).
func droppedNames(old, cert *x509.Certificate) []string {
	have := subjectAltNames(cert)
	var out []string
	for _, n := range subjectAltNames(old) {
		if !slices.Contains(have, n) {
			out = append(out, n)
		}
	}
	return out
}
