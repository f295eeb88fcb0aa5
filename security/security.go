package security

import (
	"crypto/tls"
	"errors"
	"time"
)

// Defaults of the security settings, which a zero value in
// socketserver.Config and [Settings] stands for, and which the
// configuration layer (package config) reads an unset key as.
const (
	// DefaultHandshakeTimeout is the default of Settings.HandshakeTimeout
	// (kafkanet.handshake.timeout.ms).
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultFailedAuthenticationDelay is Kafka's default of
	// connection.failed.authentication.delay.ms
	// (socketserver.Config.FailedAuthenticationDelay).
	DefaultFailedAuthenticationDelay = 100 * time.Millisecond
)

// ErrSASLMechanism is wrapped by the error of config.Security for a SASL
// listener whose sasl.enabled.mechanisms is empty, and by the socket
// server's error for a mechanism it has no implementation of.
var ErrSASLMechanism = errors.New("unsupported SASL mechanism configuration")

// ErrTLSConfig is wrapped by the errors about a listener's TLS
// configuration: config.TLS's (its settings are missing, contradict each
// other, ask for something kafkanet does not do, such as a JKS key store,
// or name key material that does not load), and those of
// [WithServerNameCertificates] and [Settings.CheckCertificateChange] about
// a tls.Config that serves no usable certificate.
var ErrTLSConfig = errors.New("invalid TLS configuration")

// Settings are what a listener needs to authenticate its connections:
// plain values, which the configuration layer reads from Kafka's keys
// (config.Security) and a host may build in code; the same values behave
// the same either way.
type Settings struct {
	// TLS is the listener's server TLS configuration (config.TLS reads
	// it); nil unless the listener speaks SSL or SASL_SSL.
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
	// (config.OAuthBearer) when EnabledMechanisms holds OAUTHBEARER and the
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
	// Kafka's), why: the *config.Error of config.OAuthBearer,
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
