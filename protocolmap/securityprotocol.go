package protocolmap

import (
	"errors"
	"fmt"
	"strings"
)

// SecurityProtocol is one of Kafka's four security protocols. Its numeric
// value is Kafka's protocol id, the one carried on the wire (for example in
// UpdateMetadata endpoints).
type SecurityProtocol int16

// The security protocols, with Kafka's ids.
const (
	Plaintext     SecurityProtocol = 0 // PLAINTEXT: no TLS, no authentication
	SSL           SecurityProtocol = 1 // SSL: TLS, optionally with client certificates
	SASLPlaintext SecurityProtocol = 2 // SASL_PLAINTEXT: SASL authentication, no TLS
	SASLSSL       SecurityProtocol = 3 // SASL_SSL: SASL authentication over TLS
)

var protocolNames = [...]string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// SecurityProtocols lists the four protocols in id order.
func SecurityProtocols() []SecurityProtocol {
	return []SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL}
}

// ParseSecurityProtocol parses a protocol name without regard to case
// ("sasl_ssl" and "SASL_SSL" are the same protocol). It does not trim white
// space. An unknown name gives an error wrapping [ErrUnknownSecurityProtocol].
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	for i, name := range protocolNames {
		if strings.EqualFold(s, name) {
			return SecurityProtocol(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want one of %s)", ErrUnknownSecurityProtocol, s, strings.Join(protocolNames[:], ", "))
}

// String returns the protocol's upper-case name, such as SASL_SSL.
func (p SecurityProtocol) String() string {
	if p.Valid() {
		return protocolNames[p]
	}
	return fmt.Sprintf("SecurityProtocol(%d)", int16(p))
}

// Valid reports whether p is one of the four protocols.
func (p SecurityProtocol) Valid() bool { return p >= 0 && int(p) < len(protocolNames) }

// UsesTLS reports whether connections speak TLS (SSL and SASL_SSL).
func (p SecurityProtocol) UsesTLS() bool { return p == SSL || p == SASLSSL }

// UsesSASL reports whether connections authenticate with SASL
// (SASL_PLAINTEXT and SASL_SSL).
func (p SecurityProtocol) UsesSASL() bool { return p == SASLPlaintext || p == SASLSSL }

// MarshalText implements encoding.TextMarshaler.
func (p SecurityProtocol) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, errors.New("protocolmap: cannot marshal " + p.String())
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, without regard to case.
func (p *SecurityProtocol) UnmarshalText(b []byte) error {
	v, err := ParseSecurityProtocol(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}
