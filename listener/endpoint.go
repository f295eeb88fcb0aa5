package listener

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// EndPoint is one entry of listeners or advertised.listeners: a named listener
// at a host and port, with the security protocol that the listener name maps
// to.
type EndPoint struct {
	Name             protocolmap.ListenerName
	Host             string // "" means every interface (wildcard bind)
	Port             int    // 0 means an ephemeral port chosen at bind time
	SecurityProtocol protocolmap.SecurityProtocol
}

// ParseEndPoint parses one listener entry, NAME://host:port, and looks its
// name up in protocols. The rules are Kafka's: the listener name is
// case-insensitive and held in upper case; an IPv6 host may be written with
// or without brackets ([::1]:9092 or ::1:9092, the last colon separating the
// port); an empty host binds every interface; port 0 asks for an ephemeral
// port; the host may hold only letters, digits and - % . _ :.
//
// Three checks are stricter than Kafka's parser, which defers them to bind
// time: the port must lie in 0..65535, brackets must be balanced, and a host
// containing a colon must be an IPv6 address.
//
// The error wraps [ErrInvalidEndPoint] or [ErrNoSecurityProtocol].
func ParseEndPoint(entry string, protocols protocolmap.Map) (EndPoint, error) {
	entry = strings.TrimSpace(entry)
	bad := func(why string) (EndPoint, error) {
		return EndPoint{}, configerr.Rule(fmt.Sprintf("Unable to parse %s to a broker endpoint: %s", entry, why), ErrInvalidEndPoint)
	}
	sep := strings.LastIndex(entry, "://")
	if sep < 0 {
		return bad("want NAME://host:port")
	}
	name, err := protocolmap.ParseListenerName(entry[:sep])
	if err != nil {
		return bad("the listener name is blank")
	}
	hostPort := entry[sep+3:]
	colon := strings.LastIndexByte(hostPort, ':')
	if colon < 0 {
		return bad("no port")
	}
	host, portText := hostPort[:colon], hostPort[colon+1:]
	port, err := parsePort(portText)
	if err != nil {
		return bad(err.Error())
	}
	openBracket, closeBracket := strings.HasPrefix(host, "["), strings.HasSuffix(host, "]")
	if openBracket != closeBracket {
		return bad(fmt.Sprintf("unbalanced brackets in host %q", host))
	}
	if openBracket {
		host = host[1 : len(host)-1]
	}
	if i := strings.IndexFunc(host, func(r rune) bool { return !validHostChar(r) }); i >= 0 {
		return bad(fmt.Sprintf("host %q holds %q; a host may hold only letters, digits and - %% . _ :", host, host[i:i+1]))
	}
	if strings.Contains(host, ":") {
		if addr, err := netip.ParseAddr(host); err != nil || !addr.Is6() {
			return bad(fmt.Sprintf("host %q holds a colon but is not an IPv6 address", host))
		}
	}
	protocol, ok := protocols[name]
	if !ok {
		return EndPoint{}, configerr.Rule("No security protocol defined for listener "+string(name), ErrNoSecurityProtocol)
	}
	return EndPoint{Name: name, Host: host, Port: port, SecurityProtocol: protocol}, nil
}

func parsePort(s string) (int, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, fmt.Errorf("port %q is not a number", s)
	}
	port, err := strconv.Atoi(s)
	if err != nil || port < 0 || port > 65535 {
		return 0, fmt.Errorf("port %s is out of range; a port must be between 0 and 65535", s)
	}
	return port, nil
}

// ValidHost reports whether host holds only the characters Kafka allows in
// a host (Utils.validHostPattern: letters, digits and - % . _ :), the rule
// for listeners and for max.connections.per.ip.overrides alike.
func ValidHost(host string) bool {
	return strings.IndexFunc(host, func(r rune) bool { return !validHostChar(r) }) < 0
}

func validHostChar(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' ||
		r == '-' || r == '%' || r == '.' || r == '_' || r == ':'
}

// String returns the entry in the form ParseEndPoint reads: NAME://host:port,
// with an IPv6 host in brackets and nothing before the port when the host is
// empty.
func (e EndPoint) String() string {
	return string(e.Name) + "://" + e.Address()
}

// Address returns host:port, bracketing an IPv6 host, or ":port" when the
// host is empty; it suits net.Listen and net.Dial.
func (e EndPoint) Address() string {
	return net.JoinHostPort(e.Host, strconv.Itoa(e.Port))
}

// ParseEndPoints parses the value of key (listeners or advertised.listeners):
// a comma-separated list of endpoints, white space around the commas ignored
// and empty entries dropped. Each listener name may appear once. The error is
// a *config.Error naming key.
func ParseEndPoints(key, value string, protocols protocolmap.Map) ([]EndPoint, error) {
	var eps []EndPoint
	seen := map[protocolmap.ListenerName]bool{}
	for _, entry := range protocolmap.SplitList(value) {
		ep, err := ParseEndPoint(entry, protocols)
		if err != nil {
			return nil, &configerr.Error{Key: key, Value: value, Err: err,
				Rule: fmt.Sprintf("Error creating broker listeners from '%s': %v", value, err)}
		}
		if seen[ep.Name] {
			return nil, &configerr.Error{Key: key, Value: value, Err: ErrDuplicateName,
				Rule: fmt.Sprintf("Each listener must have a different name, listeners: %s (%s appears twice)", value, ep.Name)}
		}
		seen[ep.Name] = true
		eps = append(eps, ep)
	}
	return eps, nil
}
