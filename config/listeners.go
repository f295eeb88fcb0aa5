package config

import (
	"fmt"
	"slices"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// Listeners reads the listener keys of props over Kafka's defaults into a
// [listener.Set], and applies every rule Kafka enforces on them:
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
// The rules on the parsed values are [listener.Set.Validate]'s, which a Set
// built in code passes through too. Errors are [*Error]
// values that name the key, the value as written and the rule, in Kafka's
// words.
func Listeners(props Properties) (*listener.Set, error) {
	c := &listener.Set{SecurityProtocolMap: protocolmap.Default()}
	written := map[string]string{}
	if v, ok := props.Get(KeySecurityProtocolMap); ok {
		m, err := protocolmap.Parse(v)
		if err != nil {
			return nil, err
		}
		c.SecurityProtocolMap = m
		written[KeySecurityProtocolMap] = v
	}

	listenersValue, ok := props.Get(KeyListeners)
	if !ok {
		listenersValue = DefaultListeners
	}
	written[KeyListeners] = listenersValue
	bind, err := listener.ParseEndPoints(KeyListeners, listenersValue, c.SecurityProtocolMap)
	if err != nil {
		return nil, err
	}
	advertisedValue, ok := props.Get(KeyAdvertisedListeners)
	if !ok {
		advertisedValue = listenersValue
	}
	written[KeyAdvertisedListeners] = advertisedValue
	advertised, err := listener.ParseEndPoints(KeyAdvertisedListeners, advertisedValue, c.SecurityProtocolMap)
	if err != nil {
		return nil, err
	}

	if err := interBroker(c, props); err != nil {
		return nil, err
	}
	if v, ok := props.Get(KeyInterBrokerListenerName); ok {
		written[KeyInterBrokerListenerName] = v
	}
	if v, ok := props.Get(KeyControlPlaneListenerName); ok {
		name, err := protocolmap.ParseListenerName(v)
		if err != nil {
			return nil, &Error{Key: KeyControlPlaneListenerName, Value: v, Err: err, Rule: "The provided listener name is null or empty string"}
		}
		if _, ok := c.SecurityProtocolMap[name]; !ok {
			return nil, &Error{Key: KeyControlPlaneListenerName, Value: v, Err: listener.ErrNoSecurityProtocol,
				Rule: fmt.Sprintf("Listener with %s defined in %s not found in %s.", name, KeyControlPlaneListenerName, KeySecurityProtocolMap)}
		}
		c.ControlPlaneListener = name
		written[KeyControlPlaneListenerName] = v
	}

	// A Set holds an advertised endpoint only as a listener's, so that
	// one advertised under a name no listener has is refused here.
	if err := listener.CheckAdvertisedNames(bind, advertised, advertisedValue); err != nil {
		return nil, err
	}
	for _, b := range bind {
		l := listener.Listener{Name: b.Name, SecurityProtocol: b.SecurityProtocol, Bind: b,
			InterBroker: b.Name == c.InterBrokerListener}
		if i := slices.IndexFunc(advertised, func(ep listener.EndPoint) bool { return ep.Name == b.Name }); i >= 0 {
			l.Advertised = advertised[i]
		}
		if b.Name == c.ControlPlaneListener {
			l.Plane = protocolmap.ControlPlane
		}
		c.All = append(c.All, l)
	}
	if err := c.ValidateAsWritten(written); err != nil {
		return nil, err
	}
	return c, nil
}

// interBroker sets the inter-broker listener name and protocol of s.
func interBroker(s *listener.Set, props Properties) error {
	nameValue, nameSet := props.Get(KeyInterBrokerListenerName)
	protoValue, protoSet := props.Get(KeyInterBrokerSecurityProtocol)
	if nameSet && protoSet {
		return &Error{Key: KeyInterBrokerSecurityProtocol, Value: protoValue, Err: listener.ErrConflictingKeys,
			Rule: fmt.Sprintf("Only one of %s and %s should be set.", KeyInterBrokerListenerName, KeyInterBrokerSecurityProtocol)}
	}
	if nameSet {
		name, err := protocolmap.ParseListenerName(nameValue)
		if err != nil {
			return &Error{Key: KeyInterBrokerListenerName, Value: nameValue, Err: err, Rule: "The provided listener name is null or empty string"}
		}
		p, ok := s.SecurityProtocolMap[name]
		if !ok {
			return &Error{Key: KeyInterBrokerListenerName, Value: nameValue, Err: listener.ErrNoSecurityProtocol,
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
			return &Error{Key: KeyInterBrokerSecurityProtocol, Value: protoValue, Err: protocolmap.ErrUnknownSecurityProtocol,
				Rule: "String must be one of: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"}
		}
		p = parsed
	}
	s.InterBrokerListener, s.InterBrokerSecurityProtocol = protocolmap.ListenerName(p.String()), p
	return nil
}
