// Package tlsname holds the rules of a TLS server name (SNI) that both the
// security package, which serves a certificate per server name, and the
// configuration layer (package config), which reads them from Kafka-style
// keys, apply: what a valid name is, and whether a certificate is valid
// for one.
package tlsname

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"strings"
)

// Normalize checks a server name and returns it as certificates are
// picked by it: in lower case, without a trailing dot. A name is a DNS
// name or a wildcard *.<DNS name>; an IP address is refused.
func Normalize(name string) (string, error) {
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

// Covers checks that leaf is valid for server name n (normalized): for a
// wildcard, for any name one label below its domain. Its error reads
// after the certificate's description ("the certificate ... is not valid
// for it ...").
func Covers(leaf *x509.Certificate, n string) error {
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
