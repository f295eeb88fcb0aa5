package protocolmap

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
)

// Key is the configuration key this package parses.
const Key = "listener.security.protocol.map"

// Map maps listener names to their security protocols. Its keys are always
// upper case (see [ListenerName]).
type Map map[ListenerName]SecurityProtocol

// Default returns Kafka's default map, in which each protocol's name is a
// listener name mapped to that protocol: PLAINTEXT:PLAINTEXT, SSL:SSL,
// SASL_PLAINTEXT:SASL_PLAINTEXT, SASL_SSL:SASL_SSL.
func Default() Map {
	m := make(Map, len(protocolNames))
	for _, p := range SecurityProtocols() {
		m[ListenerName(p.String())] = p
	}
	return m
}

// Parse parses a listener.security.protocol.map value such as
// "CLIENT:SASL_SSL, REPLICATION:SSL". Listener names are normalised to upper
// case and protocols parsed without regard to case. An empty value gives an
// empty map (in which no listener has a protocol), as in Kafka; a key that is
// not set at all should use [Default] instead.
//
// Errors are *config.Error values naming listener.security.protocol.map and
// wrapping ErrMissingColon, ErrBlankKey,
// ErrDuplicateKey or ErrUnknownSecurityProtocol.
func Parse(value string) (Map, error) {
	entries, err := ParseCSVMap(Key, value)
	if err != nil {
		return nil, err
	}
	m := make(Map, len(entries))
	for _, e := range entries {
		// ParseCSVMap has trimmed the key and rejected a blank one.
		name := ListenerName(strings.ToUpper(e.Key))
		p, err := ParseSecurityProtocol(e.Value)
		if err != nil {
			return nil, &configerr.Error{Key: Key, Value: value, Err: errors.Unwrap(err),
				Rule: fmt.Sprintf("Invalid security protocol `%s` defined in %s", e.Value, Key)}
		}
		m[name] = p
	}
	return m, nil
}

// Lookup returns the protocol of the listener called name, compared without
// regard to case.
func (m Map) Lookup(name string) (SecurityProtocol, bool) {
	p, ok := m[ListenerName(strings.ToUpper(strings.TrimSpace(name)))]
	return p, ok
}

// Names returns the map's listener names in sorted order.
func (m Map) Names() []ListenerName {
	names := make([]ListenerName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// String returns the map in the form [Parse] reads, entries sorted by
// listener name: "CLIENT:SASL_SSL,REPLICATION:SSL".
func (m Map) String() string {
	var b strings.Builder
	for i, n := range m.Names() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(string(n))
		b.WriteByte(':')
		b.WriteString(m[n].String())
	}
	return b.String()
}
