package connregistry

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// ErrInvalidFilter: a filter value cannot be parsed.
var ErrInvalidFilter = errors.New("connregistry: invalid filter")

// Filter selects connections: every filter set must match; the zero Filter
// matches every connection. It is the one shape of a filter: the fields of
// ListClientConnections' and CloseClientConnections' requests (each
// request's Filter method returns them), of connadmin's List and
// CloseConnections and of the CLI's flags, as text, a nil field being no
// filter.
type Filter struct {
	// Principal is Type:name (User:alice), matched exactly.
	Principal *string
	// ClientAddress is an IP address, compared after parsing (so ::1 and
	// 0:0:0:0:0:0:0:1 agree), or a CIDR prefix such as 10.0.0.0/8.
	ClientAddress *string
	// Listener is a listener's name, compared without regard to case.
	Listener *string
	// ServerName is the TLS server name the client asked for
	// ([Info.ServerName], from SNI), compared without regard to case and
	// to a trailing dot. A name starting with "*." matches every name
	// below the rest, at any depth: "*.a.example.com" matches
	// broker-0.a.example.com but not a.example.com. "" matches the
	// connections without a server name (no TLS, or a client that sent
	// none).
	ServerName *string
	// ConnectionIDs are Kafka's connection ids, as a listing shows them,
	// for closing one connection or a few that a listing found: nil is no
	// filter, an empty list matches no connection. ListClientConnections'
	// request has no such field.
	ConnectionIDs []string
}

// Validate returns an error wrapping [ErrInvalidFilter], naming the filter
// and its value, when one does not parse: a principal that is not
// Type:name, a client address that is neither an IP address nor a CIDR
// prefix, a blank listener name. A Filter that does not validate matches
// no connection.
func (f Filter) Validate() error {
	_, err := f.compile()
	return err
}

// matcher is a Filter parsed.
type matcher struct {
	f         Filter
	principal *Principal
	prefix    *netip.Prefix // an address is a /32 or /128 prefix
	listener  string        // trimmed; "" matches all
	// serverName is a lower-case name, or a suffix (".example.com") when
	// wildcard is set.
	serverName *string
	wildcard   bool
}

func (f Filter) compile() (matcher, error) {
	m := matcher{f: f}
	if f.Principal != nil {
		typ, name, ok := strings.Cut(*f.Principal, ":")
		if !ok {
			return matcher{}, fmt.Errorf("%w: principal %q: expected a string in format principalType:principalName", ErrInvalidFilter, *f.Principal)
		}
		m.principal = &Principal{Type: typ, Name: name}
	}
	if f.ClientAddress != nil {
		s := strings.TrimSpace(*f.ClientAddress)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			if p, err = netip.ParsePrefix(s); err != nil {
				return matcher{}, fmt.Errorf("%w: client address %q: %v", ErrInvalidFilter, *f.ClientAddress, err)
			}
			p = p.Masked()
		} else {
			a, err := netip.ParseAddr(strings.Trim(s, "[]"))
			if err != nil {
				return matcher{}, fmt.Errorf("%w: client address %q: %v", ErrInvalidFilter, *f.ClientAddress, err)
			}
			a = a.Unmap().WithZone("")
			p = netip.PrefixFrom(a, a.BitLen())
		}
		m.prefix = &p
	}
	if f.Listener != nil {
		m.listener = strings.TrimSpace(*f.Listener)
		if m.listener == "" {
			return matcher{}, fmt.Errorf("%w: listener name is blank", ErrInvalidFilter)
		}
	}
	if f.ServerName != nil {
		n := normalServerName(*f.ServerName)
		m.wildcard = strings.HasPrefix(n, "*.")
		if m.wildcard {
			n = n[1:] // ".a.example.com"
		}
		m.serverName = &n
	}
	return m, nil
}

// normalServerName is name as filters and certificates compare it: trimmed,
// in lower case, without a trailing dot.
func normalServerName(name string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
}

// Match reports whether c passes every filter; false when f does not
// validate. A Registry matches each connection against its filter: a host
// matches connections of its own.
func (f Filter) Match(c Conn) bool {
	m, err := f.compile()
	return err == nil && m.match(c)
}

// Matcher returns the function that reports whether a connection passes
// every filter of f, parsed once, or f's error (see [Filter.Validate]):
// for matching many connections, as a [Registry] does.
func (f Filter) Matcher() (func(Conn) bool, error) {
	m, err := f.compile()
	if err != nil {
		return nil, err
	}
	return m.match, nil
}

func (m *matcher) match(c Conn) bool {
	if m.f.ConnectionIDs != nil && !slices.Contains(m.f.ConnectionIDs, c.ID) {
		return false
	}
	if m.principal != nil && c.Principal != *m.principal {
		return false
	}
	if m.prefix != nil {
		a := c.ClientAddr.Addr().Unmap().WithZone("")
		if a.Is4() != m.prefix.Addr().Is4() || !m.prefix.Contains(a) {
			return false
		}
	}
	if m.listener != "" && !strings.EqualFold(string(c.Listener), m.listener) {
		return false
	}
	if m.serverName == nil {
		return true
	}
	n := normalServerName(c.ServerName)
	if m.wildcard {
		return len(n) > len(*m.serverName) && strings.HasSuffix(n, *m.serverName)
	}
	return n == *m.serverName
}
