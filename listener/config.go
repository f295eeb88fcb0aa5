package listener

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// The configuration keys that Resolve reads, with Kafka's names.
const (
	KeyListeners                   = "listeners"
	KeyAdvertisedListeners         = "advertised.listeners"
	KeySecurityProtocolMap         = protocolmap.Key
	KeyInterBrokerListenerName     = "inter.broker.listener.name"
	KeyInterBrokerSecurityProtocol = "security.inter.broker.protocol"
	KeyControlPlaneListenerName    = "control.plane.listener.name"
)

// DefaultListeners is Kafka's default value of listeners.
const DefaultListeners = "PLAINTEXT://:9092"

// KeyConnectionsMaxIdleMs is Kafka's connections.max.idle.ms, which the
// socket server applies to every connection, and DefaultConnectionsMaxIdle
// its default. Resolve does not read it; it is here because both the
// security settings and the socket server read it.
const (
	KeyConnectionsMaxIdleMs   = "connections.max.idle.ms"
	DefaultConnectionsMaxIdle = 10 * time.Minute
)

// Listener is one resolved listener of a broker.
type Listener struct {
	Name             protocolmap.ListenerName
	SecurityProtocol protocolmap.SecurityProtocol
	// Bind is the address to listen on, from listeners.
	Bind EndPoint
	// Advertised is the address given to clients and other brokers, from
	// advertised.listeners (which defaults to listeners). Its Name is empty
	// when the listener is not advertised.
	Advertised EndPoint
	// Plane is ControlPlane for the control.plane.listener.name listener and
	// DataPlane for every other.
	Plane protocolmap.Plane
	// InterBroker marks the listener other brokers connect to.
	InterBroker bool
}

// IsAdvertised reports whether the listener appears in advertised.listeners.
func (l Listener) IsAdvertised() bool { return l.Advertised.Name != "" }

// Set is a broker's resolved and validated listener configuration.
type Set struct {
	// All holds every listener, in the order of the listeners key.
	All []Listener
	// SecurityProtocolMap is the effective listener.security.protocol.map.
	SecurityProtocolMap protocolmap.Map
	// InterBrokerListener names the listener brokers use among themselves.
	InterBrokerListener protocolmap.ListenerName
	// InterBrokerSecurityProtocol is that listener's protocol.
	InterBrokerSecurityProtocol protocolmap.SecurityProtocol
	// ControlPlaneListener names the control-plane listener; it is empty
	// when control.plane.listener.name is not set.
	ControlPlaneListener protocolmap.ListenerName

	props Properties
}

// Listener returns the listener called name (compared without regard to
// case).
func (s *Set) Listener(name protocolmap.ListenerName) (Listener, bool) {
	n := protocolmap.ListenerName(strings.ToUpper(strings.TrimSpace(string(name))))
	for _, l := range s.All {
		if l.Name == n {
			return l, true
		}
	}
	return Listener{}, false
}

// AdvertisedEndPoints returns the advertised endpoints, in the order of
// the listeners (All), the order a broker registers them in; a Set read
// from properties and the same Set built in code give the same list.
func (s *Set) AdvertisedEndPoints() []EndPoint {
	var eps []EndPoint
	for _, l := range s.All {
		if l.IsAdvertised() {
			eps = append(eps, l.Advertised)
		}
	}
	return eps
}

// Properties returns the properties the configuration was resolved from.
// The map is shared; do not modify it.
func (s *Set) Properties() Properties { return s.props }

func parseInt(key, value string, min int) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil {
		return 0, &protocolmap.ConfigError{Key: key, Value: value, Err: ErrInvalidValue, Rule: "Expected value to be a 32-bit integer, but it was a String"}
	}
	if n < min {
		return 0, &protocolmap.ConfigError{Key: key, Value: value, Err: ErrInvalidValue, Rule: fmt.Sprintf("Value must be at least %d", min)}
	}
	return n, nil
}

// Resolve reads the listener keys of props over Kafka's defaults and applies
// every rule Kafka enforces on them:
//
//   - listener.security.protocol.map parses (see [protocolmap.Parse]);
//     unset, it is [protocolmap.Default];
//   - listeners (default PLAINTEXT://:9092) and advertised.listeners
//     (default: listeners) parse, every name is in the map, and names are
//     unique within each list;
//   - listeners bind distinct ports, except that exactly one IPv4 and one
//     IPv6 address may share a port (port 0 is exempt);
//   - advertised listener names are a subset of listener names, at least one
//     listener is advertised, and none advertises 0.0.0.0;
//   - inter.broker.listener.name and security.inter.broker.protocol are not
//     both set, even to the default; the inter-broker listener is in the map
//     and advertised (unset, it is the listener named after
//     security.inter.broker.protocol, default PLAINTEXT);
//   - control.plane.listener.name, if set, is in the map, advertised, and
//     not the inter-broker listener.
//
// Errors are [*protocolmap.ConfigError] values that name the key, the value
// and the rule, in Kafka's words.
func Resolve(props Properties) (*Set, error) {
	c := &Set{props: props}

	c.SecurityProtocolMap = protocolmap.Default()
	if v, ok := props.Get(KeySecurityProtocolMap); ok {
		m, err := protocolmap.Parse(v)
		if err != nil {
			return nil, err
		}
		c.SecurityProtocolMap = m
	}

	listenersValue, ok := props.Get(KeyListeners)
	if !ok {
		listenersValue = DefaultListeners
	}
	bind, err := ParseEndPoints(KeyListeners, listenersValue, c.SecurityProtocolMap)
	if err != nil {
		return nil, err
	}
	if err := checkDistinctPorts(listenersValue, bind); err != nil {
		return nil, err
	}
	advertisedValue, ok := props.Get(KeyAdvertisedListeners)
	if !ok {
		advertisedValue = listenersValue
	}
	advertised, err := ParseEndPoints(KeyAdvertisedListeners, advertisedValue, c.SecurityProtocolMap)
	if err != nil {
		return nil, err
	}

	if err := c.resolveInterBroker(props); err != nil {
		return nil, err
	}
	if v, ok := props.Get(KeyControlPlaneListenerName); ok {
		name, err := protocolmap.ParseListenerName(v)
		if err != nil {
			return nil, &protocolmap.ConfigError{Key: KeyControlPlaneListenerName, Value: v, Err: err, Rule: "The provided listener name is null or empty string"}
		}
		if _, ok := c.SecurityProtocolMap[name]; !ok {
			return nil, &protocolmap.ConfigError{Key: KeyControlPlaneListenerName, Value: v, Err: ErrNoSecurityProtocol,
				Rule: fmt.Sprintf("Listener with %s defined in %s not found in %s.", name, KeyControlPlaneListenerName, KeySecurityProtocolMap)}
		}
		c.ControlPlaneListener = name
	}

	ibKey, ibValue := KeyInterBrokerListenerName, string(c.InterBrokerListener)
	if v, ok := props.Get(KeyInterBrokerListenerName); ok {
		ibValue = v
	} else {
		ibKey = KeyInterBrokerSecurityProtocol
	}
	cpValue, _ := props.Get(KeyControlPlaneListenerName)
	if err := checkAdvertised(bind, advertised, advertisedValue, c.InterBrokerListener, ibKey, ibValue, c.ControlPlaneListener, cpValue); err != nil {
		return nil, err
	}
	advertisedNames := names(advertised)
	for _, b := range bind {
		l := Listener{Name: b.Name, SecurityProtocol: b.SecurityProtocol, Bind: b,
			InterBroker: b.Name == c.InterBrokerListener}
		if i := slices.Index(advertisedNames, b.Name); i >= 0 {
			l.Advertised = advertised[i]
		}
		if b.Name == c.ControlPlaneListener {
			l.Plane = protocolmap.ControlPlane
		}
		c.All = append(c.All, l)
	}
	return c, nil
}

// resolveInterBroker sets the inter-broker listener name and protocol.
func (s *Set) resolveInterBroker(props Properties) error {
	nameValue, nameSet := props.Get(KeyInterBrokerListenerName)
	protoValue, protoSet := props.Get(KeyInterBrokerSecurityProtocol)
	if nameSet && protoSet {
		return &protocolmap.ConfigError{Key: KeyInterBrokerSecurityProtocol, Value: protoValue, Err: ErrConflictingKeys,
			Rule: fmt.Sprintf("Only one of %s and %s should be set.", KeyInterBrokerListenerName, KeyInterBrokerSecurityProtocol)}
	}
	if nameSet {
		name, err := protocolmap.ParseListenerName(nameValue)
		if err != nil {
			return &protocolmap.ConfigError{Key: KeyInterBrokerListenerName, Value: nameValue, Err: err, Rule: "The provided listener name is null or empty string"}
		}
		p, ok := s.SecurityProtocolMap[name]
		if !ok {
			return &protocolmap.ConfigError{Key: KeyInterBrokerListenerName, Value: nameValue, Err: ErrNoSecurityProtocol,
				Rule: fmt.Sprintf("Listener with name %s defined in %s not found in %s.", name, KeyInterBrokerListenerName, KeySecurityProtocolMap)}
		}
		s.InterBrokerListener, s.InterBrokerSecurityProtocol = name, p
		return nil
	}
	p := protocolmap.Plaintext
	if protoSet {
		// Kafka's validator compares this key case-sensitively.
		parsed, err := protocolmap.ParseSecurityProtocol(protoValue)
		if err != nil || parsed.String() != protoValue {
			return &protocolmap.ConfigError{Key: KeyInterBrokerSecurityProtocol, Value: protoValue, Err: protocolmap.ErrUnknownSecurityProtocol,
				Rule: "String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"}
		}
		p = parsed
	}
	s.InterBrokerListener, s.InterBrokerSecurityProtocol = protocolmap.ListenerName(p.String()), p
	return nil
}

// checkDistinctPorts applies Kafka's rule that listeners bind distinct ports,
// except for exactly one IPv4 and one IPv6 address on the same port. Port 0
// (ephemeral) is exempt.
func checkDistinctPorts(value string, eps []EndPoint) error {
	byPort := map[int][]EndPoint{}
	var ports []int
	for _, ep := range eps {
		if ep.Port == 0 {
			continue
		}
		if byPort[ep.Port] == nil {
			ports = append(ports, ep.Port)
		}
		byPort[ep.Port] = append(byPort[ep.Port], ep)
	}
	for _, port := range ports {
		group := byPort[port]
		if len(group) < 2 {
			continue
		}
		var v4, v6, other int
		for _, ep := range group {
			addr, err := netip.ParseAddr(ep.Host)
			switch {
			case err != nil:
				other++
			case addr.Is4():
				v4++
			default:
				v6++
			}
		}
		fail := func(rule string) error {
			return &protocolmap.ConfigError{Key: KeyListeners, Value: value, Err: ErrDuplicatePort, Rule: rule}
		}
		switch {
		case other > 1:
			return fail(fmt.Sprintf("Each listener must have a different port, listeners: %s", value))
		case v4+v6 == 2 && (v4 != 1 || other > 0):
			return fail(fmt.Sprintf("If you have two listeners on the same port then one needs to be IPv4 and the other IPv6, listeners: %s, port: %d", value, port))
		case v4+v6 != 2:
			return fail(fmt.Sprintf("Each listener must have a different port unless exactly one listener has an IPv4 address and the other IPv6 address, listeners: %s, port: %d", value, port))
		}
	}
	return nil
}

func names(eps []EndPoint) []protocolmap.ListenerName {
	out := make([]protocolmap.ListenerName, len(eps))
	for i, ep := range eps {
		out[i] = ep.Name
	}
	return out
}

func join(ns []protocolmap.ListenerName) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	return strings.Join(s, ",")
}

// ErrInconsistent is wrapped by [Set.Validate]'s error for a Set
// whose fields contradict each other: a listener's protocol, plane or
// inter-broker mark that is not what its name and the map give it.
var ErrInconsistent = errors.New("inconsistent listener configuration")

// Validate checks a Set built in code, field by field, with the rules
// [Resolve] applies to properties, over the typed values: every
// listener's endpoints are well formed (a port from 0 to 65535, a host of
// the characters Kafka allows, a host with a colon an IPv6 address) and
// named after it, names are unique and in the map, listeners bind distinct
// ports (one IPv4 and one IPv6 address may share one; port 0 is exempt),
// at least one listener is advertised and none at 0.0.0.0, the
// inter-broker listener is in the map and advertised, the control-plane
// listener (if any) too and is not the inter-broker listener; and every
// listener's protocol, plane and inter-broker mark is what its name, the
// map and those two names give it. A nil SecurityProtocolMap stands for
// the map of the listeners' own protocols; an empty InterBrokerListener
// for Kafka's default, the listener named PLAINTEXT. Errors name the key
// whose rule failed, as Resolve's do (its value shown as the Set would
// write it), and wrap [ErrInconsistent] for contradictions. A Set that
// Resolve returned is valid. socketserver.New calls Validate, so that
// configuring in code skips none of Kafka's checks.
func (s *Set) Validate() error {
	if s == nil || len(s.All) == 0 {
		return fmt.Errorf("%w: no listeners", ErrInconsistent)
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("listener configuration built in code: %w", err)
	}
	return nil
}

// check is Validate's rules, its errors unprefixed.
func (s *Set) check() error {
	values, err := s.keyValues()
	if err != nil {
		return err
	}
	m := s.protocols()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInconsistent}, args...)...)
	}
	var bind, advertised []EndPoint
	for _, l := range s.All {
		if n, err := protocolmap.ParseListenerName(string(l.Name)); err != nil || n != l.Name {
			return bad("listener %q: the name must be given as protocolmap.ParseListenerName gives it (upper case, trimmed)", l.Name)
		}
		if err := checkEndPoint(KeyListeners, values[KeyListeners], l.Bind, m); err != nil {
			return err
		}
		bind = append(bind, l.Bind)
		if l.IsAdvertised() {
			if err := checkEndPoint(KeyAdvertisedListeners, values[KeyAdvertisedListeners], l.Advertised, m); err != nil {
				return err
			}
			advertised = append(advertised, l.Advertised)
		}
	}
	for _, key := range []string{KeyListeners, KeyAdvertisedListeners} {
		eps := bind
		if key == KeyAdvertisedListeners {
			eps = advertised
		}
		seen := map[protocolmap.ListenerName]bool{}
		for _, ep := range eps {
			if seen[ep.Name] {
				return &protocolmap.ConfigError{Key: key, Value: values[key], Err: ErrDuplicateName,
					Rule: fmt.Sprintf("Each listener must have a different name, listeners: %s (%s appears twice)", values[key], ep.Name)}
			}
			seen[ep.Name] = true
		}
	}
	if err := checkDistinctPorts(values[KeyListeners], bind); err != nil {
		return err
	}
	ib := s.interBroker()
	ibKey, ibValue := KeyInterBrokerListenerName, string(ib)
	if s.InterBrokerListener == "" {
		ibKey = KeyInterBrokerSecurityProtocol
	}
	if _, ok := m[ib]; !ok && s.InterBrokerListener != "" { // Kafka's default name is not looked up: it must be advertised, below
		return &protocolmap.ConfigError{Key: ibKey, Value: ibValue, Err: ErrNoSecurityProtocol,
			Rule: fmt.Sprintf("Listener with name %s defined in %s not found in %s.", ib, KeyInterBrokerListenerName, KeySecurityProtocolMap)}
	}
	if cp := s.ControlPlaneListener; cp != "" {
		if _, ok := m[cp]; !ok {
			return &protocolmap.ConfigError{Key: KeyControlPlaneListenerName, Value: string(cp), Err: ErrNoSecurityProtocol,
				Rule: fmt.Sprintf("Listener with %s defined in %s not found in %s.", cp, KeyControlPlaneListenerName, KeySecurityProtocolMap)}
		}
	}
	if err := checkAdvertised(bind, advertised, values[KeyAdvertisedListeners], ib, ibKey, ibValue, s.ControlPlaneListener, string(s.ControlPlaneListener)); err != nil {
		return err
	}
	// InterBrokerSecurityProtocol is derived; its zero value (PLAINTEXT)
	// counts as not set.
	if p := s.InterBrokerSecurityProtocol; p != protocolmap.Plaintext && p != m[ib] {
		return bad("the inter-broker listener %s speaks %s, not %s", ib, m[ib], p)
	}
	for _, l := range s.All {
		want := m[l.Name]
		plane := protocolmap.DataPlane
		if l.Name == s.ControlPlaneListener {
			plane = protocolmap.ControlPlane
		}
		switch {
		case l.SecurityProtocol != want:
			return bad("listener %s speaks %s, but %s maps it to %s", l.Name, l.SecurityProtocol, KeySecurityProtocolMap, want)
		case l.Plane != plane:
			return bad("listener %s is on the %s plane, but %s is %q", l.Name, l.Plane, KeyControlPlaneListenerName, s.ControlPlaneListener)
		case l.InterBroker != (l.Name == ib):
			return bad("listener %s: InterBroker is %t, but the inter-broker listener is %s", l.Name, l.InterBroker, ib)
		}
	}
	return nil
}

// protocols returns the SecurityProtocolMap, or for a nil one the map of
// the listeners' own protocols.
func (s *Set) protocols() protocolmap.Map {
	if s.SecurityProtocolMap != nil {
		return s.SecurityProtocolMap
	}
	m := protocolmap.Map{}
	for _, l := range s.All {
		m[l.Name] = l.SecurityProtocol
	}
	return m
}

// checkEndPoint applies ParseEndPoint's rules to an endpoint built in
// code, as an entry of key (whose value is shown as value): a port from 0
// to 65535, a host of the characters Kafka allows, a host with a colon an
// IPv6 address, a name in protocols, and the protocol protocols gives it.
func checkEndPoint(key, value string, ep EndPoint, protocols protocolmap.Map) error {
	var err error
	switch p, ok := protocols[ep.Name]; {
	case ep.Port < 0 || ep.Port > 65535:
		err = &ruleError{fmt.Sprintf("Unable to parse %s to a broker endpoint: port %d is out of range; a port must be between 0 and 65535", ep, ep.Port), ErrInvalidEndPoint}
	case !ValidHost(ep.Host):
		err = &ruleError{fmt.Sprintf("Unable to parse %s to a broker endpoint: host %q holds a character other than letters, digits and - %% . _ :", ep, ep.Host), ErrInvalidEndPoint}
	case strings.Contains(ep.Host, ":") && !isIPv6(ep.Host):
		err = &ruleError{fmt.Sprintf("Unable to parse %s to a broker endpoint: host %q holds a colon but is not an IPv6 address", ep, ep.Host), ErrInvalidEndPoint}
	case !ok:
		err = &ruleError{"No security protocol defined for listener " + string(ep.Name), ErrNoSecurityProtocol}
	case ep.SecurityProtocol != p:
		return fmt.Errorf("%w: listener %s: its endpoints' protocols must be %s", ErrInconsistent, ep.Name, p)
	default:
		return nil
	}
	return &protocolmap.ConfigError{Key: key, Value: value, Err: err,
		Rule: fmt.Sprintf("Error creating broker listeners from '%s': %v", value, err)}
}

func isIPv6(host string) bool {
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Is6()
}

// checkAdvertised applies Kafka's rules on the advertised listeners, to
// Resolve's parsed values and Validate's typed ones alike: at least one
// is advertised; the inter-broker listener ib (named by ibKey, as
// ibValue) is; every advertised name is a listener's; none advertises
// 0.0.0.0; and the control-plane listener cp (as cpValue), if any, is
// advertised and not the inter-broker listener.
func checkAdvertised(bind, advertised []EndPoint, advertisedValue string, ib protocolmap.ListenerName, ibKey, ibValue string,
	cp protocolmap.ListenerName, cpValue string) error {
	bindNames := names(bind)
	advertisedNames := names(advertised)
	if len(advertised) == 0 {
		return &protocolmap.ConfigError{Key: KeyAdvertisedListeners, Value: advertisedValue, Err: ErrNotAdvertised,
			Rule: "There must be at least one broker advertised listener."}
	}
	if !slices.Contains(advertisedNames, ib) {
		return &protocolmap.ConfigError{Key: ibKey, Value: ibValue, Err: ErrNotAdvertised,
			Rule: fmt.Sprintf("%s must be a listener name defined in %s. The valid options based on currently configured listeners are %s",
				KeyInterBrokerListenerName, KeyAdvertisedListeners, join(advertisedNames))}
	}
	for _, n := range advertisedNames {
		if !slices.Contains(bindNames, n) {
			return &protocolmap.ConfigError{Key: KeyAdvertisedListeners, Value: advertisedValue, Err: ErrNotAdvertised,
				Rule: fmt.Sprintf("%s listener names must be equal to or a subset of the ones defined in %s. Found %s. The valid options based on the current configuration are %s",
					KeyAdvertisedListeners, KeyListeners, join(advertisedNames), join(bindNames))}
		}
	}
	for _, ep := range advertised {
		if ep.Host == "0.0.0.0" {
			return &protocolmap.ConfigError{Key: KeyAdvertisedListeners, Value: advertisedValue, Err: ErrNonRoutable,
				Rule: fmt.Sprintf("%s cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.", KeyAdvertisedListeners)}
		}
	}
	if cp != "" {
		if !slices.Contains(advertisedNames, cp) {
			return &protocolmap.ConfigError{Key: KeyControlPlaneListenerName, Value: cpValue, Err: ErrNotAdvertised,
				Rule: fmt.Sprintf("%s must be a listener name defined in %s. The valid options based on currently configured listeners are %s",
					KeyControlPlaneListenerName, KeyAdvertisedListeners, join(advertisedNames))}
		}
		if cp == ib {
			return &protocolmap.ConfigError{Key: KeyControlPlaneListenerName, Value: cpValue, Err: ErrSameListener,
				Rule: fmt.Sprintf("%s, when defined, should have a different value from the inter broker listener name. Currently they both have the value %s",
					KeyControlPlaneListenerName, cp)}
		}
	}
	return nil
}

// keyValues returns s as the values of the keys Resolve reads, for errors
// to show and for the properties a changed Set keeps (see finish).
func (s *Set) keyValues() (Properties, error) {
	m := s.protocols()
	var bind, advertised []string
	for _, l := range s.All {
		if l.Bind.Name != l.Name || l.IsAdvertised() && l.Advertised.Name != l.Name {
			return nil, fmt.Errorf("%w: listener %s has endpoints named %q and %q",
				ErrInconsistent, l.Name, l.Bind.Name, l.Advertised.Name)
		}
		bind = append(bind, l.Bind.String())
		if l.IsAdvertised() {
			advertised = append(advertised, l.Advertised.String())
		}
	}
	props := Properties{
		KeyListeners:           strings.Join(bind, ","),
		KeyAdvertisedListeners: strings.Join(advertised, ","),
		KeySecurityProtocolMap: m.String(),
	}
	if s.InterBrokerListener != "" {
		props[KeyInterBrokerListenerName] = string(s.InterBrokerListener)
	}
	if s.ControlPlaneListener != "" {
		props[KeyControlPlaneListenerName] = string(s.ControlPlaneListener)
	}
	return props, nil
}
