package security

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// The authentication keys that [ForListener] reads, with Kafka's names,
// and one key of this package's own.
const (
	KeySASLEnabledMechanisms  = "sasl.enabled.mechanisms"
	KeyConnectionsMaxReauthMs = "connections.max.reauth.ms"
	// KeyHandshakeTimeoutMs is not a Kafka key: Kafka bounds a connection
	// that never finishes authenticating only by connections.max.idle.ms.
	KeyHandshakeTimeoutMs = "kafkanet.handshake.timeout.ms"
)

// Defaults of the keys above.
const (
	// DefaultHandshakeTimeout is the default of kafkanet.handshake.timeout.ms.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultFailedAuthenticationDelay is Kafka's default of
	// connection.failed.authentication.delay.ms
	// (socketserver.Config.FailedAuthenticationDelay).
	DefaultFailedAuthenticationDelay = 100 * time.Millisecond
)

// ErrSASLMechanism is wrapped by the error of [ForListener] for a SASL
// listener whose sasl.enabled.mechanisms is empty, and by the socket
// server's error for a mechanism it has no implementation of.
var ErrSASLMechanism = errors.New("unsupported SASL mechanism configuration")

// DefaultSASLMechanism is Kafka's default of sasl.enabled.mechanisms:
// GSSAPI (Kerberos).
const DefaultSASLMechanism = "GSSAPI"

// Settings are what a listener needs to authenticate its connections, as
// gathered by [ForListener].
type Settings struct {
	// TLS is the listener's server TLS configuration ([TLSConfig]);
	// nil unless the listener speaks SSL or SASL_SSL.
	TLS *tls.Config
	// AllowDNChanges and AllowSANChanges are ssl.allow.dn.changes and
	// ssl.allow.san.changes (default false): whether a reload of the
	// listener's TLS configuration may bring a certificate with another
	// subject DN, or without some of the current subject alternative
	// names (see [Settings.CheckCertificateChange]). False unless the
	// listener speaks SSL or SASL_SSL.
	AllowDNChanges, AllowSANChanges bool
	// EnabledMechanisms are the SASL mechanisms the listener offers, as
	// sasl.enabled.mechanisms names them (case-sensitive, as in Kafka: a
	// client asking for PLAIN does not get a configured plain), in that
	// order without repeats; nil unless the listener speaks SASL_PLAINTEXT
	// or SASL_SSL. These are names; the implementations that serve them
	// are the listener's socketserver.ListenerConfig.Mechanisms.
	EnabledMechanisms []string
	// EnabledMechanismsKey is the key EnabledMechanisms was read from
	// (listener.name.<name>.sasl.enabled.mechanisms or
	// sasl.enabled.mechanisms), so that an error about them names it;
	// empty when they are Kafka's default or set in code.
	EnabledMechanismsKey string
	// PrincipalMapper turns client certificate DNs into principal names
	// (ssl.principal.mapping.rules, default DEFAULT); nil unless the
	// listener speaks SSL. (On SASL_SSL the principal comes from SASL, on
	// PLAINTEXT it is ANONYMOUS.)
	PrincipalMapper *PrincipalMapper
	// ReauthMax is connections.max.reauth.ms (KIP-368) for the listener:
	// the longest an authenticated SASL session lasts before the client
	// must re-authenticate; 0, the default, turns re-authentication off, as
	// does a negative value. Use [Settings.ReauthMaxFor] for the value of
	// one mechanism. 0 unless the listener speaks SASL.
	ReauthMax time.Duration
	// HandshakeTimeout bounds the time from accepting a connection to the
	// end of its TLS handshake and SASL authentication, its PROXY protocol
	// header included on a listener that requires one
	// (kafkanet.handshake.timeout.ms, default 10 s).
	HandshakeTimeout time.Duration
	// OAuthBearer holds the listener's SASL/OAUTHBEARER settings
	// ([OAuthBearer]) when EnabledMechanisms holds OAUTHBEARER and the
	// properties configure one of Kafka's token validators; nil otherwise
	// (see OAuthBearerNotConfigured). Nothing is built from
	// them here or in the socket server: a host that serves OAUTHBEARER
	// builds the mechanism with the oauthbearer package
	// (security/sasl/oauthbearer), which only such a host links.
	OAuthBearer *OAuthBearerSettings
	// ReauthMaxByMechanism holds, by mechanism name (as EnabledMechanisms
	// names it), the connections.max.reauth.ms of the mechanisms whose
	// listener.name.<listener>.<mechanism>.connections.max.reauth.ms is
	// set; a mechanism missing here takes ReauthMax (see
	// [Settings.ReauthMaxFor]). Nil unless the listener speaks SASL.
	ReauthMaxByMechanism map[string]time.Duration

	// AllowDNChangesKey and AllowSANChangesKey are the keys
	// AllowDNChanges and AllowSANChanges were read from (with the
	// listener's prefix when the value, or else the listener's key store,
	// came from a prefixed key), so that a refused certificate change
	// names the key to set ([Settings.CheckCertificateChange]); empty,
	// ssl.allow.dn.changes and ssl.allow.san.changes.
	AllowDNChangesKey, AllowSANChangesKey string

	// OAuthBearerNotConfigured is, for a listener that enables
	// OAUTHBEARER while its properties configure none of Kafka's token
	// validators (neither its OAUTHBEARER JAAS configuration nor its
	// server callback handler class is set, or the class is another than
	// Kafka's), why: the *config.Error of [OAuthBearer],
	// which names the key and wraps [ErrOAuthBearerNotConfigured]. The
	// listener's OAUTHBEARER is then the host's to give; the socket server
	// returns this error if the host gives none. Nil otherwise, and in
	// Settings built in code.
	OAuthBearerNotConfigured error
}

// ReauthMaxFor returns connections.max.reauth.ms for one of the listener's
// SASL mechanisms (as EnabledMechanisms names it):
// listener.name.<listener>.<mechanism>.connections.max.reauth.ms (the
// mechanism in lower case, as in
// listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms) if set, else
// [Settings.ReauthMax].
func (s Settings) ReauthMaxFor(mechanism string) time.Duration {
	if d, ok := s.ReauthMaxByMechanism[mechanism]; ok {
		return d
	}
	return s.ReauthMax
}

// ForListener gathers the authentication settings of one listener, each
// looked up with [config.Properties.ListenerValue] (the listener prefix
// overrides the un-prefixed key):
//
//   - TLS from [TLSConfig], and for TLS listeners ssl.allow.dn.changes and
//     ssl.allow.san.changes (Kafka's BOOLEAN: true or false in any case,
//     default false), which govern reloads of it
//     ([Settings.CheckCertificateChange]);
//   - for SASL listeners, sasl.enabled.mechanisms: a comma-separated list
//     of mechanism names, trimmed and kept case-sensitive as Kafka keeps
//     them, default GSSAPI (Kerberos), Kafka's; an empty list is an error.
//     Whether each name has an implementation (a built-in one or the
//     host's) is the socket server's to check;
//   - for SSL listeners, ssl.principal.mapping.rules (default DEFAULT), see
//     [ParsePrincipalMappingRules];
//   - for SASL listeners, connections.max.reauth.ms (default 0, off), and
//     its per-mechanism overrides, see [Settings.ReauthMaxFor];
//   - kafkanet.handshake.timeout.ms, this package's own key (Kafka has no
//     such setting): at least 1, default 10000;
//   - for SASL listeners that enable OAUTHBEARER, its settings, see
//     [OAuthBearer] and [Settings.OAuthBearer]: an invalid one is
//     an error, while properties that leave OAUTHBEARER to the host are
//     not (see OAuthBearerNotConfigured).
//
// Errors are *config.Error values whose Key is the key at
// fault, in the form the value came from.
func ForListener(set *listener.Set, name protocolmap.ListenerName) (Settings, error) {
	c := view(set)
	proto, err := c.protocol(name)
	if err != nil {
		return Settings{}, err
	}
	var s Settings
	if s.TLS, err = TLSConfig(c.Set, name); err != nil {
		return Settings{}, err
	}
	if proto.UsesTLS() {
		if err := c.readAllowChanges(name, &s); err != nil {
			return Settings{}, err
		}
	}
	if proto.UsesSASL() {
		if s.EnabledMechanisms, err = c.saslMechanisms(name); err != nil {
			return Settings{}, err
		}
		if set := c.setting(name, KeySASLEnabledMechanisms); set.ok {
			s.EnabledMechanismsKey = set.from
		}
		if s.ReauthMax, err = c.reauthMax(c.setting(name, KeyConnectionsMaxReauthMs)); err != nil {
			return Settings{}, err
		}
		for _, mech := range s.EnabledMechanisms {
			key := mechanismKey(name, mech, KeyConnectionsMaxReauthMs)
			v, ok := c.props.Get(key)
			if !ok {
				continue
			}
			d, err := c.reauthMax(setting{value: v, from: key, ok: true})
			if err != nil {
				return Settings{}, err
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
			rules.value = DefaultPrincipalMappingRules
		}
		if s.PrincipalMapper, err = ParsePrincipalMappingRules(rules.value); err != nil {
			return Settings{}, &configerr.Error{Key: rules.from, Value: rules.value, Rule: err.Error(), Err: ErrInvalidPrincipalRule}
		}
	}
	timeout := c.setting(name, KeyHandshakeTimeoutMs)
	ms := int64(DefaultHandshakeTimeout / time.Millisecond)
	if timeout.ok {
		if ms, err = parseLong(timeout, 1); err != nil {
			return Settings{}, err
		}
	}
	s.HandshakeTimeout = millis(ms)
	if slices.Contains(s.EnabledMechanisms, oauthBearerMechanism) {
		o, err := OAuthBearer(c.Set, name)
		switch {
		case errors.Is(err, ErrOAuthBearerNotConfigured):
			s.OAuthBearerNotConfigured = err
		case err != nil:
			return Settings{}, err
		default:
			s.OAuthBearer = &o
		}
	}
	return s, nil
}

// saslMechanisms reads sasl.enabled.mechanisms for a SASL listener.
func (c config) saslMechanisms(name protocolmap.ListenerName) ([]string, error) {
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
		return nil, &configerr.Error{Key: s.from, Value: s.value, Err: ErrSASLMechanism, Rule: fmt.Sprintf(
			"SASL listener %s enables no SASL mechanism: No SASL mechanisms are enabled", name)}
	}
	return out, nil
}

// reauthMax reads a connections.max.reauth.ms setting; Kafka turns
// re-authentication off for any value not above 0.
func (c config) reauthMax(s setting) (time.Duration, error) {
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
		return 0, &configerr.Error{Key: s.from, Value: s.value, Err: listener.ErrInvalidValue, Rule: "Expected value to be a 64-bit integer, but it was a String"}
	}
	if n < min {
		return 0, &configerr.Error{Key: s.from, Value: s.value, Err: listener.ErrInvalidValue, Rule: fmt.Sprintf("Value must be at least %d", min)}
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
