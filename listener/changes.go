package listener

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// A broker changes its listeners while it runs as Kafka does when
// listeners, advertised.listeners or listener.security.protocol.map are
// updated dynamically (KIP-226, DynamicListenerConfig): listeners are added
// and removed by name, and the rules below hold for the configuration that
// results as for any other. What Kafka does not change at run time needs a
// restart: the inter-broker and control-plane listeners (their names are
// not dynamic configurations, and both must stay advertised, so neither is
// removed), and an existing listener's security protocol.

// Changes are what tells one Set from the next of the same broker, by
// listener name: [Set.Changes] computes them for a host that re-reads its
// configuration and applies them (socketserver's Server.SetListeners).
type Changes struct {
	// Added are the listeners of the next Set that the current one lacks,
	// in the order of the next Set's listeners.
	Added []Listener
	// Removed are the listeners of the current Set that the next one
	// lacks, in the current Set's order.
	Removed []Listener
	// Readvertised are listeners of both whose advertised endpoint
	// differs (a new host or port, or advertised in one Set only), as the
	// next Set gives them.
	Readvertised []Listener
}

// Empty reports whether c changes no listener. The next Set may still
// differ in listener.security.protocol.map entries no listener uses.
func (c Changes) Empty() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Readvertised) == 0
}

// Changes returns what next, a later configuration of the same broker (for
// example its properties re-read and resolved again), adds, removes and
// advertises anew, after checking that a running broker may make the
// change, as Kafka checks a dynamic update of listeners,
// advertised.listeners and listener.security.protocol.map:
//
//   - next is valid (a Set built in code is checked as [Set.Validate]
//     checks it);
//   - the inter-broker listener and the control-plane listener are the
//     same ones (inter.broker.listener.name and control.plane.listener.name
//     are not dynamic);
//   - a listener of both Sets keeps its security protocol ("Security
//     protocol cannot be updated for existing listener") and, a rule of
//     kafkanet's, its bind address: Kafka would keep serving the old
//     address until a restart without saying so, where this refuses the
//     change; give the listener a new name to move it.
//
// Errors are *config.Error values naming the key and the rule
// and wrapping [ErrNotDynamic], or the error of an invalid next. The
// settings of listeners both Sets have (listener.name.<l>.*) are not
// compared: a host applies those it can reload (the TLS stores, SASL users)
// and the others wait for a restart.
func (s *Set) Changes(next *Set) (Changes, error) {
	if s == nil || next == nil {
		return Changes{}, fmt.Errorf("%w: no listeners", ErrInconsistent)
	}
	if err := next.Validate(); err != nil {
		return Changes{}, err
	}
	props, err := next.keyValues()
	if err != nil {
		return Changes{}, err
	}
	notDynamic := func(key, rule string) error {
		return &configerr.Error{Key: key, Value: props[key], Err: ErrNotDynamic, Rule: rule}
	}
	if next.interBroker() != s.interBroker() {
		props[keyInterBrokerListenerName] = string(next.interBroker())
		return Changes{}, notDynamic(keyInterBrokerListenerName, fmt.Sprintf(
			"Cannot update %s dynamically: the inter-broker listener is %s until a restart", keyInterBrokerListenerName, s.interBroker()))
	}
	if next.ControlPlaneListener != s.ControlPlaneListener {
		props[keyControlPlaneListenerName] = string(next.ControlPlaneListener)
		return Changes{}, notDynamic(keyControlPlaneListenerName, fmt.Sprintf(
			"Cannot update %s dynamically: the control-plane listener is %q until a restart", keyControlPlaneListenerName, s.ControlPlaneListener))
	}
	var c Changes
	for _, n := range next.All {
		old, ok := s.Listener(n.Name)
		switch {
		case !ok:
			c.Added = append(c.Added, n)
		case n.SecurityProtocol != old.SecurityProtocol:
			return Changes{}, notDynamic(keySecurityProtocolMap, fmt.Sprintf(
				"Security protocol cannot be updated for existing listener %s (%s, not %s, until a restart)", n.Name, old.SecurityProtocol, n.SecurityProtocol))
		case n.Bind != old.Bind:
			return Changes{}, notDynamic(keyListeners, fmt.Sprintf(
				"Configs cannot be updated dynamically for existing listener %s, restart broker or create a new listener for update (it binds %s, not %s)",
				n.Name, old.Bind.Address(), n.Bind.Address()))
		case n.Advertised != old.Advertised:
			c.Readvertised = append(c.Readvertised, n)
		}
	}
	for _, o := range s.All {
		if _, ok := next.Listener(o.Name); !ok {
			c.Removed = append(c.Removed, o)
		}
	}
	return c, nil
}

// interBroker is the inter-broker listener's name, Kafka's default PLAINTEXT
// when a Set built in code leaves it empty (see Validate).
func (s *Set) interBroker() protocolmap.ListenerName {
	if s.InterBrokerListener == "" {
		return protocolmap.ListenerName(protocolmap.Plaintext.String())
	}
	return s.InterBrokerListener
}

// WithListener returns a copy of s with l added, last in listeners and, if
// l is advertised, last in advertised.listeners, as a broker adds a
// listener while it runs. The result must be valid by the rules
// config.Listeners applies: l's name is not in use ([ErrDuplicateName]), nor its
// port ([ErrDuplicatePort]; port 0 is exempt), and, unless s's
// SecurityProtocolMap is nil (a Set built in code whose listeners' own
// protocols make the map), the map gives l's name l's protocol
// ([ErrNoSecurityProtocol] when it has no entry for it). l's name is
// normalised (upper case, as [protocolmap.ParseListenerName] gives it),
// and l is a data-plane listener that other brokers do not use: the
// control-plane and inter-broker listeners are there from the start.
// Errors are those of [Set.Validate], naming the key and the rule; s does
// not change.
func (s *Set) WithListener(l Listener) (*Set, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no listeners", ErrInconsistent)
	}
	if n, err := protocolmap.ParseListenerName(string(l.Name)); err != nil || n != l.Name {
		return nil, fmt.Errorf("adding listener %q: %w: the name must be given as protocolmap.ParseListenerName gives it (upper case, trimmed)", l.Name, ErrInconsistent)
	}
	next := s.clone()
	next.All = append(next.All, l)
	if err := next.finish(); err != nil {
		return nil, fmt.Errorf("adding listener %s: %w", l.Name, err)
	}
	return next, nil
}

// WithoutListener returns a copy of s without the listener called name
// (compared without regard to case), as a broker removes a listener while
// it runs. It refuses a name s lacks ([ErrUnknownListener]) and the
// inter-broker and control-plane listeners ([ErrNotDynamic]): Kafka
// requires the inter-broker listener to stay advertised ("Advertised
// listener must be specified for inter-broker listener") and the
// control-plane listener to be one of advertised.listeners, and neither
// name changes at run time. Errors are *config.Error values naming the
// key and the rule; s does not change.
func (s *Set) WithoutListener(name protocolmap.ListenerName) (*Set, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no listeners", ErrInconsistent)
	}
	props, err := s.keyValues()
	if err != nil {
		return nil, err
	}
	l, ok := s.Listener(name)
	if !ok {
		return nil, fmt.Errorf("removing listener %s: %w", name, &configerr.Error{Key: keyListeners, Value: props[keyListeners], Err: ErrUnknownListener,
			Rule: fmt.Sprintf("no listener %s to remove", name)})
	}
	var rest []string // listeners as it would be
	for _, x := range s.All {
		if x.Name != l.Name {
			rest = append(rest, x.Bind.String())
		}
	}
	switch {
	case l.Name == s.interBroker():
		return nil, fmt.Errorf("removing listener %s: %w", l.Name, &configerr.Error{Key: keyListeners, Value: strings.Join(rest, ","), Err: ErrNotDynamic,
			Rule: fmt.Sprintf("Advertised listener must be specified for inter-broker listener %s: the inter-broker listener cannot be removed while the broker runs", l.Name)})
	case l.Name == s.ControlPlaneListener:
		return nil, fmt.Errorf("removing listener %s: %w", l.Name, &configerr.Error{Key: keyListeners, Value: strings.Join(rest, ","), Err: ErrNotDynamic,
			Rule: fmt.Sprintf("%s must be a listener name defined in %s: the control-plane listener %s cannot be removed while the broker runs",
				keyControlPlaneListenerName, keyAdvertisedListeners, l.Name)})
	}
	next := s.clone()
	next.All = slices.DeleteFunc(next.All, func(x Listener) bool { return x.Name == l.Name })
	if err := next.finish(); err != nil {
		return nil, fmt.Errorf("removing listener %s: %w", l.Name, err)
	}
	return next, nil
}

// clone copies s deeply enough that changing the copy's lists leaves s as
// it was.
func (s *Set) clone() *Set {
	c := *s
	c.All = slices.Clone(s.All)
	return &c
}

// finish checks a Set derived from a valid one.
func (s *Set) finish() error { return s.check(nil) }
