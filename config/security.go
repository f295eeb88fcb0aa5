package config

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// The authentication keys that [Security] reads, with Kafka's names,
// and one key of kafkanet's own. Each may be set for one listener with
// the listener.name.<lower-case name>. prefix.
const (
	// KeySASLEnabledMechanisms is sasl.enabled.mechanisms
	// (security.Settings.EnabledMechanisms); default
	// [DefaultSASLMechanism].
	KeySASLEnabledMechanisms = "sasl.enabled.mechanisms"
	// KeyConnectionsMaxReauthMs is connections.max.reauth.ms (KIP-368;
	// security.Settings.ReauthMax and ReauthMaxByMechanism); 0, the
	// default, turns re-authentication off.
	KeyConnectionsMaxReauthMs = "connections.max.reauth.ms"
	// KeyHandshakeTimeoutMs is not a Kafka key: Kafka bounds a connection
	// that never finishes authenticating only by connections.max.idle.ms
	// (security.Settings.HandshakeTimeout; default
	// security.DefaultHandshakeTimeout).
	KeyHandshakeTimeoutMs = "kafkanet.handshake.timeout.ms"
	// KeySSLPrincipalMappingRules is ssl.principal.mapping.rules, the
	// rules that turn a client certificate's distinguished name into a
	// principal name on SSL listeners (security.Settings.PrincipalMapper;
	// default security.DefaultPrincipalMappingRules).
	KeySSLPrincipalMappingRules = "ssl.principal.mapping.rules"
	// KeySSLAllowDNChanges and KeySSLAllowSANChanges allow a listener's
	// reloaded certificate to name another subject
	// (security.Settings.AllowDNChanges, AllowSANChanges).
	KeySSLAllowDNChanges  = "ssl.allow.dn.changes"
	KeySSLAllowSANChanges = "ssl.allow.san.changes"
)

// DefaultSASLMechanism is Kafka's default of sasl.enabled.mechanisms:
// GSSAPI (Kerberos).
const DefaultSASLMechanism = "GSSAPI"

// Security reads the authentication settings of listener name of set
// from props, each key looked up with [Properties.ListenerValue] (the
// listener prefix overrides the un-prefixed key):
//
//   - TLS from [TLS], and for TLS listeners ssl.allow.dn.changes and
//     ssl.allow.san.changes (Kafka's BOOLEAN: true or false in any case,
//     default false), which govern reloads of it
//     (security.Settings.CheckCertificateChange);
//   - for SASL listeners, sasl.enabled.mechanisms: a comma-separated list
//     of mechanism names, trimmed and kept case-sensitive as Kafka keeps
//     them, default GSSAPI (Kerberos), Kafka's; an empty list is an error.
//     Whether each name has an implementation (a built-in one or the
//     host's) is the socket server's to check;
//   - for SSL listeners, ssl.principal.mapping.rules (default DEFAULT), see
//     security.ParsePrincipalMappingRules;
//   - for SASL listeners, connections.max.reauth.ms (default 0, off), and
//     its per-mechanism overrides, see security.Settings.ReauthMaxFor;
//   - kafkanet.handshake.timeout.ms, kafkanet's own key (Kafka has no
//     such setting): at least 1, default 10000;
//   - for SASL listeners that enable OAUTHBEARER, its settings, see
//     [OAuthBearer] and security.Settings.OAuthBearer: an invalid one is
//     an error, while properties that leave OAUTHBEARER to the host are
//     not (see security.Settings.OAuthBearerNotConfigured).
//
// [Server] calls it for every listener. The Settings are plain values: the
// same Settings built in code behave the same. Errors are [*Error] values
// whose Key is the key at fault, in the form the value came from.
func Security(props Properties, set *listener.Set, name protocolmap.ListenerName) (security.Settings, error) {
	c := reader{props, set}
	proto, err := c.protocol(name)
	if err != nil {
		return security.Settings{}, err
	}
	var s security.Settings
	if s.TLS, err = TLS(props, set, name); err != nil {
		return security.Settings{}, err
	}
	if proto.UsesTLS() {
		if err := c.readAllowChanges(name, &s); err != nil {
			return security.Settings{}, err
		}
	}
	if proto.UsesSASL() {
		if s.EnabledMechanisms, err = c.saslMechanisms(name); err != nil {
			return security.Settings{}, err
		}
		if set := c.setting(name, KeySASLEnabledMechanisms); set.ok {
			s.EnabledMechanismsKey = set.from
		}
		if s.ReauthMax, err = reauthMax(c.setting(name, KeyConnectionsMaxReauthMs)); err != nil {
			return security.Settings{}, err
		}
		for _, mech := range s.EnabledMechanisms {
			key := MechanismKey(name, mech, KeyConnectionsMaxReauthMs)
			v, ok := props.Get(key)
			if !ok {
				continue
			}
			d, err := reauthMax(setting{value: v, from: key, ok: true})
			if err != nil {
				return security.Settings{}, err
			}
			if s.ReauthMaxByMechanism == nil {
				s.ReauthMaxByMechanism = map[string]time.Duration{}
			}
			s.ReauthMaxByMechanism[mech] = d
		}
	}
	if proto == protocolmap.SSL {
		rules := c.setting(name, KeySSLPrincipalMappingRules)
		if !rules.ok {
			rules.value = security.DefaultPrincipalMappingRules
		}
		if s.PrincipalMapper, err = security.ParsePrincipalMappingRules(rules.value); err != nil {
			return security.Settings{}, &Error{Key: rules.from, Value: rules.value, Rule: err.Error(), Err: security.ErrInvalidPrincipalRule}
		}
	}
	timeout := c.setting(name, KeyHandshakeTimeoutMs)
	ms := int64(security.DefaultHandshakeTimeout / time.Millisecond)
	if timeout.ok {
		if ms, err = parseLong(timeout, 1); err != nil {
			return security.Settings{}, err
		}
	}
	s.HandshakeTimeout = millis(ms)
	if slices.Contains(s.EnabledMechanisms, oauthBearerMechanism) {
		o, err := OAuthBearer(props, set, name)
		switch {
		case errors.Is(err, security.ErrOAuthBearerNotConfigured):
			s.OAuthBearerNotConfigured = err
		case err != nil:
			return security.Settings{}, err
		default:
			s.OAuthBearer = &o
		}
	}
	return s, nil
}

// reader looks a listener set's security keys up in its properties.
type reader struct {
	props Properties
	set   *listener.Set
}

// protocol returns the security protocol of a listener.
func (c reader) protocol(name protocolmap.ListenerName) (protocolmap.SecurityProtocol, error) {
	if l, ok := c.set.Listener(name); ok {
		return l.SecurityProtocol, nil
	}
	if p, ok := c.set.SecurityProtocolMap[name]; ok {
		return p, nil
	}
	v, _ := c.props.Get(KeySecurityProtocolMap)
	return 0, &Error{Key: KeySecurityProtocolMap, Value: v, Err: listener.ErrNoSecurityProtocol,
		Rule: fmt.Sprintf("Listener with name %s not found in %s.", name, KeySecurityProtocolMap)}
}

// setting is one looked-up key.
type setting struct {
	value string
	// from is the key the value came from: key itself, or key after the
	// listener prefix (listener.name.<name>.); key itself when unset.
	from string
	ok   bool
	// key is the key looked up, without the listener prefix; empty for a
	// setting that has no un-prefixed form.
	key string
}

func (c reader) setting(name protocolmap.ListenerName, key string) setting {
	v, from, ok := c.props.ListenerValue(name, key)
	return setting{value: v, from: from, ok: ok, key: key}
}

// prefix is the prefix before key in the form s came from: the listener
// prefix for a listener-prefixed setting, "" for an un-prefixed or unset
// one.
func (s setting) prefix() string {
	if s.key == "" {
		return ""
	}
	p, ok := strings.CutSuffix(s.from, s.key)
	if !ok {
		return ""
	}
	return p
}

// like names an unset setting as the user would set it beside o, the
// setting that needs it: with o's listener prefix when o came from a
// listener-prefixed key, so that an error about a key the user left out
// names the key for the listener the user configured. A set setting is
// named as it was set.
func (s setting) like(o setting) setting {
	if !s.ok && s.key != "" {
		s.from = o.prefix() + s.key
	}
	return s
}

// firstSet returns the first of settings that is set, or the last.
func firstSet(settings ...setting) setting {
	for _, s := range settings {
		if s.ok {
			return s
		}
	}
	return settings[len(settings)-1]
}

// saslMechanisms reads sasl.enabled.mechanisms for a SASL listener.
func (c reader) saslMechanisms(name protocolmap.ListenerName) ([]string, error) {
	s := c.setting(name, KeySASLEnabledMechanisms)
	if !s.ok {
		return []string{DefaultSASLMechanism}, nil
	}
	var out []string
	for _, m := range protocolmap.SplitList(s.value) {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, &Error{Key: s.from, Value: s.value, Err: security.ErrSASLMechanism, Rule: fmt.Sprintf(
			"SASL listener %s enables no SASL mechanism: No SASL mechanisms are enabled", name)}
	}
	return out, nil
}

// reauthMax reads a connections.max.reauth.ms setting; Kafka turns
// re-authentication off for any value not above 0.
func reauthMax(s setting) (time.Duration, error) {
	if !s.ok {
		return 0, nil
	}
	ms, err := parseLong(s, math.MinInt64)
	if err != nil || ms <= 0 {
		return 0, err
	}
	return millis(ms), nil
}

// parseLong reads a Kafka LONG setting of at least min.
func parseLong(s setting, min int64) (int64, error) {
	n, err := strconv.ParseInt(s.value, 10, 64)
	if err != nil {
		return 0, &Error{Key: s.from, Value: s.value, Err: listener.ErrInvalidValue, Rule: "Expected value to be a 64-bit integer, but it was a String"}
	}
	if n < min {
		return 0, &Error{Key: s.from, Value: s.value, Err: listener.ErrInvalidValue, Rule: fmt.Sprintf("Value must be at least %d", min)}
	}
	return n, nil
}

// millis converts milliseconds to a Duration, saturating rather than
// overflowing.
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// readAllowChanges reads ssl.allow.dn.changes and ssl.allow.san.changes
// for a TLS listener. An unset key is kept, for errors, in the form of
// the listener's key store setting: listener-prefixed when the key store
// is.
func (c reader) readAllowChanges(name protocolmap.ListenerName, s *security.Settings) error {
	store := firstSet(c.setting(name, KeySSLKeystoreLocation), c.setting(name, KeySSLKeystoreKey))
	var err error
	if s.AllowDNChanges, s.AllowDNChangesKey, err = c.boolean(name, KeySSLAllowDNChanges, store); err != nil {
		return err
	}
	s.AllowSANChanges, s.AllowSANChangesKey, err = c.boolean(name, KeySSLAllowSANChanges, store)
	return err
}

// boolean reads a Kafka BOOLEAN setting (default false): true or false,
// in any case, around white space. It returns the key in the form that
// holds the value, or when none does in the form of beside (see
// setting.like).
func (c reader) boolean(name protocolmap.ListenerName, key string, beside setting) (bool, string, error) {
	s := c.setting(name, key)
	if !s.ok {
		return false, s.like(beside).from, nil
	}
	switch v := strings.TrimSpace(s.value); {
	case strings.EqualFold(v, "true"):
		return true, s.from, nil
	case strings.EqualFold(v, "false"):
		return false, s.from, nil
	}
	return false, "", &Error{Key: s.from, Value: s.value, Err: listener.ErrInvalidValue, Rule: "Expected value to be either true or false"}
}
