package connregistry

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalidFilter: a filter value cannot be parsed.
var ErrInvalidFilter = errors.New("connregistry: invalid filter")

// Filter selects connections. Every set field must match; the zero Filter
// matches every connection. Build one with [NewFilter].
type Filter struct {
	principal *Principal
	prefix    *netip.Prefix       // an address is a /32 or /128 prefix
	listener  string              // upper case; "" matches all
	ids       map[string]struct{} // nil matches all
	// serverName is set by WithServerName: a lower-case name, or a
	// suffix (".example.com") when wildcard is set.
	serverName *string
	wildcard   bool
}

// NewFilter parses the three KIP-1329 filters; nil means no filter.
// principal must be Type:name and matches exactly. clientAddress is an IP
// address, compared after parsing (so ::1 and 0:0:0:0:0:0:0:1 agree), or a
// CIDR prefix such as 10.0.0.0/8. listener is compared without regard to
// case.
func NewFilter(principal, clientAddress, listener *string) (Filter, error) {
	var f Filter
	if principal != nil {
		typ, name, ok := strings.Cut(*principal, ":")
		if !ok {
			return Filter{}, fmt.Errorf("%w: principal %q: expected a string in format principalType:principalName", ErrInvalidFilter, *principal)
		}
		f.principal = &Principal{Type: typ, Name: name}
	}
	if clientAddress != nil {
		s := strings.TrimSpace(*clientAddress)
		var p netip.Prefix
		if strings.Contains(s, "/") {
			var err error
			if p, err = netip.ParsePrefix(s); err != nil {
				return Filter{}, fmt.Errorf("%w: client address %q: %v", ErrInvalidFilter, *clientAddress, err)
			}
			p = p.Masked()
		} else {
			a, err := netip.ParseAddr(strings.Trim(s, "[]"))
			if err != nil {
				return Filter{}, fmt.Errorf("%w: client address %q: %v", ErrInvalidFilter, *clientAddress, err)
			}
			a = a.Unmap().WithZone("")
			p = netip.PrefixFrom(a, a.BitLen())
		}
		f.prefix = &p
	}
	if listener != nil {
		f.listener = strings.ToUpper(strings.TrimSpace(*listener))
		if f.listener == "" {
			return Filter{}, fmt.Errorf("%w: listener name is blank", ErrInvalidFilter)
		}
	}
	return f, nil
}

// WithConnectionIDs returns f narrowed to the connections with the given
// ids (Kafka's connection ids, as a listing shows them), for closing one
// connection or a few that a listing found. It adds to f's other filters;
// no ids matches no connection.
func (f Filter) WithConnectionIDs(ids ...string) Filter {
	f.ids = make(map[string]struct{}, len(ids))
	for _, id := range ids {
		f.ids[id] = struct{}{}
	}
	return f
}

// WithServerName returns f narrowed to the connections whose TLS server
// name ([Info.ServerName], the name the client asked for with SNI) is
// name, compared without regard to case and to a trailing dot. A name
// starting with "*." matches every name below the rest, at any depth:
// "*.a.example.com" matches broker-0.a.example.com but not a.example.com.
// "" matches the connections without a server name (no TLS, or a client
// that sent none). It adds to f's other filters.
func (f Filter) WithServerName(name string) Filter {
	n := normalServerName(name)
	f.wildcard = strings.HasPrefix(n, "*.")
	if f.wildcard {
		n = n[1:] // ".a.example.com"
	}
	f.serverName = &n
	return f
}

// normalServerName is name as filters and certificates compare it: trimmed,
// in lower case, without a trailing dot.
func normalServerName(name string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), "."))
}

// matchServerName reports whether a connection's server name passes the
// server-name filter.
func (f Filter) matchServerName(name string) bool {
	if f.serverName == nil {
		return true
	}
	n := normalServerName(name)
	if f.wildcard {
		return len(n) > len(*f.serverName) && strings.HasSuffix(n, *f.serverName)
	}
	return n == *f.serverName
}

// Match reports whether c passes every filter.
func (f Filter) Match(c Conn) bool {
	if f.ids != nil {
		if _, ok := f.ids[c.ID]; !ok {
			return false
		}
	}
	if f.principal != nil && c.Principal != *f.principal {
		return false
	}
	if f.prefix != nil {
		a := c.ClientAddr.Addr().Unmap().WithZone("")
		if a.Is4() != f.prefix.Addr().Is4() || !f.prefix.Contains(a) {
			return false
		}
	}
	if f.listener != "" && !strings.EqualFold(string(c.Listener), f.listener) {
		return false
	}
	return f.matchServerName(c.ServerName)
}
