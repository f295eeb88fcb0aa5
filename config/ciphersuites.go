package config

import (
	"crypto"
	"crypto/rsa"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// renegotiationSCSV is the signalling value of RFC 5746, which Java lists
// among its cipher suites; Go always supports secure renegotiation
// indication, so naming it changes nothing.
const renegotiationSCSV = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"

// goSuites are the cipher suites of Go's TLS that ssl.cipher.suites may
// name, by IANA name: tls.CipherSuites and tls.InsecureCipherSuites but RC4
// and 3DES (see refusedSuite).
func goSuites() map[string]*tls.CipherSuite {
	out := map[string]*tls.CipherSuite{}
	for _, cs := range slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()) {
		if refusedSuite(cs.Name) == "" {
			out[cs.Name] = cs
		}
	}
	return out
}

// refusedSuite says why a suite Go implements is not enabled even when
// named: RC4 and 3DES, which the JDK disables by default
// (jdk.tls.disabledAlgorithms), so that a Kafka broker does not use them
// either. It returns "" for the others.
func refusedSuite(name string) string {
	for _, c := range []string{"_RC4_", "_3DES_"} {
		if strings.Contains(name, c) {
			return fmt.Sprintf("%s uses %s, which Go lists as insecure and the JDK under Kafka disables by default (jdk.tls.disabledAlgorithms)",
				name, strings.Trim(c, "_"))
		}
	}
	return ""
}

// onlyTLS13 reports whether a suite is for TLS 1.3 alone.
func onlyTLS13(cs *tls.CipherSuite) bool {
	return len(cs.SupportedVersions) == 1 && cs.SupportedVersions[0] == tls.VersionTLS13
}

// tls13Suites are the names of Go's TLS 1.3 suites, which Go always
// offers together.
func tls13Suites() []string {
	var out []string
	for _, cs := range tls.CipherSuites() {
		if onlyTLS13(cs) {
			out = append(out, cs.Name)
		}
	}
	return out
}

// cipherSuites reads ssl.cipher.suites, as TLS's doc describes, and
// returns the TLS 1.2 suites to enable (nil: Go's defaults) and the
// versions left usable: a list without TLS 1.3 suites turns TLS 1.3 off,
// one without TLS 1.2 suites TLS 1.2.
func (c reader) cipherSuites(name protocolmap.ListenerName, minV, maxV uint16) (suites []uint16, minOut, maxOut uint16, err error) {
	s := c.setting(name, KeySSLCipherSuites)
	items := protocolmap.SplitList(s.value)
	if !s.ok || len(items) == 0 {
		return nil, minV, maxV, nil // Kafka's default: the provider's suites
	}
	known := goSuites()
	var tls13 []string
	for _, n := range items {
		if n == renegotiationSCSV {
			continue
		}
		cs, ok := known[n]
		switch {
		case !ok && refusedSuite(n) != "":
			return nil, 0, 0, tlsError(s, false, refusedSuite(n)+": it is not enabled; remove it from the list")
		case !ok:
			return nil, 0, 0, tlsError(s, false, fmt.Sprintf("%s is not a cipher suite of Go's TLS; the names are IANA's, as Java writes them, and Go implements %s",
				n, strings.Join(suiteNames(known), ", ")))
		case onlyTLS13(cs):
			if !slices.Contains(tls13, n) {
				tls13 = append(tls13, n)
			}
		case !slices.Contains(suites, cs.ID):
			suites = append(suites, cs.ID)
		}
	}
	if len(tls13) == 0 && len(suites) == 0 {
		return nil, 0, 0, tlsError(s, false, "it names no cipher suite")
	}
	all13 := tls13Suites()
	if len(tls13) > 0 && len(tls13) < len(all13) {
		var missing []string
		for _, n := range all13 {
			if !slices.Contains(tls13, n) {
				missing = append(missing, n)
			}
		}
		return nil, 0, 0, tlsError(s, false, fmt.Sprintf(
			"it names the TLS 1.3 suites %s but not %s: Go cannot restrict TLS 1.3's cipher suites, it offers all of %s; name them all, or none to turn TLS 1.3 off",
			strings.Join(tls13, ", "), strings.Join(missing, ", "), strings.Join(all13, ", ")))
	}
	if len(tls13) == 0 {
		if minV == tls.VersionTLS13 {
			return nil, 0, 0, tlsError(s, false, fmt.Sprintf(
				"it names no TLS 1.3 cipher suite, but %s enables only TLSv1.3: no connection could be made", c.setting(name, KeySSLEnabledProtocols).from))
		}
		maxV = tls.VersionTLS12 // as Java: no TLS 1.3 suite enabled, no TLS 1.3
	}
	if len(suites) == 0 {
		if maxV == tls.VersionTLS12 {
			return nil, 0, 0, tlsError(s, false, fmt.Sprintf(
				"it names no TLS 1.2 cipher suite, but %s enables only TLSv1.2: no connection could be made", c.setting(name, KeySSLEnabledProtocols).from))
		}
		minV = tls.VersionTLS13
	}
	return suites, minV, maxV, nil
}

// suiteNames lists the names of suites, TLS 1.2's first, each group in
// Go's order of preference.
func suiteNames(suites map[string]*tls.CipherSuite) []string {
	var v12, v13 []string
	for _, cs := range slices.Concat(tls.CipherSuites(), tls.InsecureCipherSuites()) {
		if _, ok := suites[cs.Name]; !ok {
			continue
		}
		if onlyTLS13(cs) {
			v13 = append(v13, cs.Name)
		} else {
			v12 = append(v12, cs.Name)
		}
	}
	return append(v12, v13...)
}

// checkSuitesForKey refuses TLS 1.2 suites that the listener's key cannot
// serve when TLS 1.2 is enabled: the ECDSA suites need an ECDSA or Ed25519
// key, the others an RSA key, and a list with none for the key fails
// every TLS 1.2 handshake.
func (c reader) checkSuitesForKey(name protocolmap.ListenerName, suites []uint16, minV uint16, key crypto.PrivateKey) error {
	if len(suites) == 0 || minV > tls.VersionTLS12 {
		return nil
	}
	_, isRSA := key.(*rsa.PrivateKey)
	for _, id := range suites {
		if strings.Contains(tls.CipherSuiteName(id), "_ECDSA_") != isRSA {
			return nil
		}
	}
	kind, want, example := "ECDSA or Ed25519", "RSA", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
	if isRSA {
		kind, want, example = "RSA", "ECDSA", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
	}
	return tlsError(c.setting(name, KeySSLCipherSuites), false, fmt.Sprintf(
		"its TLS 1.2 suites all need an %s key, but the key store's key is %s: no TLS 1.2 handshake could succeed; add suites for %s keys, such as %s",
		want, kind, kind, example))
}
