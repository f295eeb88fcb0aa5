package listener

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// The keys whose rules Validate applies, which its errors name (the
// configuration layer, package config, exports them as constants).
const (
	keyListeners                   = "listeners"
	keyAdvertisedListeners         = "advertised.listeners"
	keySecurityProtocolMap         = protocolmap.Key
	keyInterBrokerListenerName     = "inter.broker.listener.name"
	keyInterBrokerSecurityProtocol = "security.inter.broker.protocol"
	keyControlPlaneListenerName    = "control.plane.listener.name"
)

// DefaultConnectionsMaxIdle is the default of connections.max.idle.ms,
// which the socket server applies to every connection (a zero
// socketserver.Config.ConnectionsMaxIdle) and the configuration layer
// (package config) reads an unset key as.
const DefaultConnectionsMaxIdle = 10 * time.Minute

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
			return &configerr.Error{Key: keyListeners, Value: value, Err: ErrDuplicatePort, Rule: rule}
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
// the configuration layer (config.Listeners) applies to properties, over the typed values: every
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
// whose rule failed, as config.Listeners' do (its value shown as the Set would
// write it), and wrap [ErrInconsistent] for contradictions. A Set that
// config.Listeners returned is valid. socketserver.New calls Validate, so that
// configuring in code skips none of Kafka's checks.
func (s *Set) Validate() error {
	if s == nil || len(s.All) == 0 {
		return fmt.Errorf("%w: no listeners", ErrInconsistent)
	}
	if err := s.check(nil); err != nil {
		return fmt.Errorf("listener configuration built in code: %w", err)
	}
	return nil
}

// ValidateAsWritten is [Set.Validate] for a Set read from properties, as
// the configuration layer (package config) reads one: its errors show the
// value of each key as written holds it (listeners, advertised.listeners,
// listener.security.protocol.map, inter.broker.listener.name,
// security.inter.broker.protocol, control.plane.listener.name; a key
// missing from written shows as the Set writes it), name
// security.inter.broker.protocol for the inter-broker listener when
// written has no inter.broker.listener.name, and have no prefix.
func (s *Set) ValidateAsWritten(written map[string]string) error {
	if s == nil {
		return fmt.Errorf("%w: no listeners", ErrInconsistent)
	}
	return s.check(written) // no listeners: none is advertised, an error naming advertised.listeners
}

// check is Validate's rules, its errors unprefixed and showing the values
// of written where it has them (nil: the Set's own, for a Set built in
// code).
func (s *Set) check(written map[string]string) error {
	values, err := s.keyValues()
	if err != nil {
		return err
	}
	for k, v := range written {
		values[k] = v
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
		if err := checkEndPoint(keyListeners, values[keyListeners], l.Bind, m); err != nil {
			return err
		}
		bind = append(bind, l.Bind)
		if l.IsAdvertised() {
			if err := checkEndPoint(keyAdvertisedListeners, values[keyAdvertisedListeners], l.Advertised, m); err != nil {
				return err
			}
			advertised = append(advertised, l.Advertised)
		}
	}
	for _, key := range []string{keyListeners, keyAdvertisedListeners} {
		eps := bind
		if key == keyAdvertisedListeners {
			eps = advertised
		}
		seen := map[protocolmap.ListenerName]bool{}
		for _, ep := range eps {
			if seen[ep.Name] {
				return &configerr.Error{Key: key, Value: values[key], Err: ErrDuplicateName,
					Rule: fmt.Sprintf("Each listener must have a different name, listeners: %s (%s appears twice)", values[key], ep.Name)}
			}
			seen[ep.Name] = true
		}
	}
	if err := checkDistinctPorts(values[keyListeners], bind); err != nil {
		return err
	}
	ib := s.interBroker()
	ibKey, ibValue := keyInterBrokerListenerName, string(ib)
	if v, ok := written[keyInterBrokerListenerName]; ok {
		ibValue = v
	} else if written != nil || s.InterBrokerListener == "" {
		ibKey = keyInterBrokerSecurityProtocol
	}
	if _, ok := m[ib]; !ok && s.InterBrokerListener != "" { // Kafka's default name is not looked up: it must be advertised, below
		return &configerr.Error{Key: ibKey, Value: ibValue, Err: ErrNoSecurityProtocol,
			Rule: fmt.Sprintf("Listener with name %s defined in %s not found in %s.", ib, keyInterBrokerListenerName, keySecurityProtocolMap)}
	}
	if cp := s.ControlPlaneListener; cp != "" {
		if _, ok := m[cp]; !ok {
			return &configerr.Error{Key: keyControlPlaneListenerName, Value: string(cp), Err: ErrNoSecurityProtocol,
				Rule: fmt.Sprintf("Listener with %s defined in %s not found in %s.", cp, keyControlPlaneListenerName, keySecurityProtocolMap)}
		}
	}
	if err := checkAdvertised(bind, advertised, values[keyAdvertisedListeners], ib, ibKey, ibValue, s.ControlPlaneListener, values[keyControlPlaneListenerName]); err != nil {
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
			return bad("listener %s speaks %s, but %s maps it to %s", l.Name, l.SecurityProtocol, keySecurityProtocolMap, want)
		case l.Plane != plane:
			return bad("listener %s is on the %s plane, but %s is %q", l.Name, l.Plane, keyControlPlaneListenerName, s.ControlPlaneListener)
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
		err = configerr.Rule(fmt.Sprintf("Unable to parse %s to a broker endpoint: port %d is out of range; a port must be between 0 and 65535", ep, ep.Port), ErrInvalidEndPoint)
	case !ValidHost(ep.Host):
		err = configerr.Rule(fmt.Sprintf("Unable to parse %s to a broker endpoint: host %q holds a character other than letters, digits and - %% . _ :", ep, ep.Host), ErrInvalidEndPoint)
	case strings.Contains(ep.Host, ":") && !isIPv6(ep.Host):
		err = configerr.Rule(fmt.Sprintf("Unable to parse %s to a broker endpoint: host %q holds a colon but is not an IPv6 address", ep, ep.Host), ErrInvalidEndPoint)
	case !ok:
		err = configerr.Rule("No security protocol defined for listener "+string(ep.Name), ErrNoSecurityProtocol)
	case ep.SecurityProtocol != p:
		return fmt.Errorf("%w: listener %s: its endpoints' protocols must be %s", ErrInconsistent, ep.Name, p)
	default:
		return nil
	}
	return &configerr.Error{Key: key, Value: value, Err: err,
		Rule: fmt.Sprintf("Error creating broker listeners from '%s': %v", value, err)}
}

func isIPv6(host string) bool {
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Is6()
}

// checkAdvertised applies Kafka's rules on the advertised listeners, to
// config.Listeners' parsed values and Validate's typed ones alike: at least one
// is advertised; the inter-broker listener ib (named by ibKey, as
// ibValue) is; every advertised name is a listener's; none advertises
// 0.0.0.0; and the control-plane listener cp (as cpValue), if any, is
// advertised and not the inter-broker listener.
func checkAdvertised(bind, advertised []EndPoint, advertisedValue string, ib protocolmap.ListenerName, ibKey, ibValue string,
	cp protocolmap.ListenerName, cpValue string) error {
	advertisedNames := names(advertised)
	if len(advertised) == 0 {
		return &configerr.Error{Key: keyAdvertisedListeners, Value: advertisedValue, Err: ErrNotAdvertised,
			Rule: "There must be at least one broker advertised listener."}
	}
	if !slices.Contains(advertisedNames, ib) {
		return &configerr.Error{Key: ibKey, Value: ibValue, Err: ErrNotAdvertised,
			Rule: fmt.Sprintf("%s must be a listener name defined in %s. The valid options based on currently configured listeners are %s",
				keyInterBrokerListenerName, keyAdvertisedListeners, join(advertisedNames))}
	}
	if err := CheckAdvertisedNames(bind, advertised, advertisedValue); err != nil {
		return err
	}
	for _, ep := range advertised {
		if ep.Host == "0.0.0.0" {
			return &configerr.Error{Key: keyAdvertisedListeners, Value: advertisedValue, Err: ErrNonRoutable,
				Rule: fmt.Sprintf("%s cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.", keyAdvertisedListeners)}
		}
	}
	if cp != "" {
		if !slices.Contains(advertisedNames, cp) {
			return &configerr.Error{Key: keyControlPlaneListenerName, Value: cpValue, Err: ErrNotAdvertised,
				Rule: fmt.Sprintf("%s must be a listener name defined in %s. The valid options based on currently configured listeners are %s",
					keyControlPlaneListenerName, keyAdvertisedListeners, join(advertisedNames))}
		}
		if cp == ib {
			return &configerr.Error{Key: keyControlPlaneListenerName, Value: cpValue, Err: ErrSameListener,
				Rule: fmt.Sprintf("%s, when defined, should have a different value from the inter broker listener name. Currently they both have the value %s",
					keyControlPlaneListenerName, cp)}
		}
	}
	return nil
}

// CheckAdvertisedNames applies Kafka's rule that the names of
// advertised.listeners are a subset of those of listeners to their
// endpoints, bind and advertised (as [ParseEndPoints] gives them), before
// they become the listeners of a Set, which holds an advertised endpoint
// only as a listener's; [Set.Validate] applies it to a Set's own. The
// error, an *config.Error wrapping [ErrNotAdvertised], shows
// advertisedValue, advertised.listeners as written.
func CheckAdvertisedNames(bind, advertised []EndPoint, advertisedValue string) error {
	bindNames := names(bind)
	for _, ep := range advertised {
		if !slices.Contains(bindNames, ep.Name) {
			return &configerr.Error{Key: keyAdvertisedListeners, Value: advertisedValue, Err: ErrNotAdvertised,
				Rule: fmt.Sprintf("%s listener names must be equal to or a subset of the ones defined in %s. Found %s. The valid options based on the current configuration are %s",
					keyAdvertisedListeners, keyListeners, join(names(advertised)), join(bindNames))}
		}
	}
	return nil
}

// keyValues returns s as the values of the keys it is read from, for
// errors to show.
func (s *Set) keyValues() (map[string]string, error) {
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
	props := map[string]string{
		keyListeners:           strings.Join(bind, ","),
		keyAdvertisedListeners: strings.Join(advertised, ","),
		keySecurityProtocolMap: m.String(),
	}
	if s.InterBrokerListener != "" {
		props[keyInterBrokerListenerName] = string(s.InterBrokerListener)
	}
	if s.ControlPlaneListener != "" {
		props[keyControlPlaneListenerName] = string(s.ControlPlaneListener)
	}
	return props, nil
}
