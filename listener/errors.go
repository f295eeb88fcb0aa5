package listener

import "errors"

// Sentinel errors wrapped by the *config.Error values this
// package returns; test for them with errors.Is.
var (
	// ErrInvalidEndPoint: a listeners entry is not NAME://host:port, or its
	// host or port is not allowed.
	ErrInvalidEndPoint = errors.New("invalid endpoint")
	// ErrNoSecurityProtocol: a listener name is missing from
	// listener.security.protocol.map.
	ErrNoSecurityProtocol = errors.New("no security protocol for listener")
	// ErrDuplicateName: two endpoints of one list share a listener name.
	ErrDuplicateName = errors.New("duplicate listener name")
	// ErrDuplicatePort: two listeners bind one port, other than one IPv4 and
	// one IPv6 address.
	ErrDuplicatePort = errors.New("duplicate listener port")
	// ErrNotAdvertised: a listener that must be advertised is not, or an
	// advertised listener is not in listeners.
	ErrNotAdvertised = errors.New("listener not advertised")
	// ErrNonRoutable: an advertised listener uses 0.0.0.0.
	ErrNonRoutable = errors.New("non-routable advertised address")
	// ErrConflictingKeys: inter.broker.listener.name and
	// security.inter.broker.protocol are both set.
	ErrConflictingKeys = errors.New("conflicting configuration keys")
	// ErrSameListener: the control-plane listener is the inter-broker
	// listener.
	ErrSameListener = errors.New("control-plane listener is the inter-broker listener")
	// ErrInvalidValue: a value is not of the type or range its key takes.
	ErrInvalidValue = errors.New("invalid value")
	// ErrNotDynamic: a change of listeners that a running broker does not
	// make (KIP-226): removing the inter-broker or control-plane listener,
	// renaming either, or changing an existing listener's security
	// protocol or bind address. It needs a restart.
	ErrNotDynamic = errors.New("listener change needs a restart")
	// ErrUnknownListener: no listener has the name given.
	ErrUnknownListener = errors.New("unknown listener")
)
