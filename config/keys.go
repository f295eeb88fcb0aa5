package config

import (
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// The socket server's keys, with Kafka's names, and kafkanet's own (the
// kafkanet. prefix). [Server] reads them; the keys of the listeners and of
// authentication are beside their readers ([Listeners], [Security],
// [TLS], [OAuthBearer], [JAASUsers]: [KeyListeners],
// [KeySASLEnabledMechanisms], [KeySSLKeystoreLocation], ...), which Server
// calls.
const (
	// KeySocketRequestMaxBytes is socket.request.max.bytes
	// (socketserver.Config.RequestMaxBytes).
	KeySocketRequestMaxBytes = "socket.request.max.bytes"
	// KeyRequestMinByteRate is kafkanet.request.min.byte.rate
	// (socketserver.Config.RequestMinByteRate), in bytes a second.
	KeyRequestMinByteRate = "kafkanet.request.min.byte.rate"
	// KeyQueuedMaxRequests is queued.max.requests
	// (socketserver.Config.QueuedMaxRequests).
	KeyQueuedMaxRequests = "queued.max.requests"
	// KeyQueuedMaxRequestBytes is queued.max.request.bytes
	// (socketserver.Config.QueuedMaxRequestBytes); -1, Kafka's default,
	// sets no limit.
	KeyQueuedMaxRequestBytes = "queued.max.request.bytes"
	// KeyRequestStallMs is kafkanet.request.stall.ms
	// (socketserver.Config.RequestStallTimeout), in milliseconds.
	KeyRequestStallMs = "kafkanet.request.stall.ms"
	// KeyNumIOThreads is num.io.threads (socketserver.Config.IOThreads).
	KeyNumIOThreads = "num.io.threads"
	// KeyNumNetworkThreads is num.network.threads, also read with a
	// listener's prefix (socketserver.ListenerConfig.NetworkThreads).
	KeyNumNetworkThreads = "num.network.threads"
	// KeySocketSendBufferBytes and KeySocketReceiveBufferBytes are
	// socket.send.buffer.bytes and socket.receive.buffer.bytes
	// (socketserver.Config.SendBufferBytes, ReceiveBufferBytes); -1 leaves
	// the operating system's default.
	KeySocketSendBufferBytes    = "socket.send.buffer.bytes"
	KeySocketReceiveBufferBytes = "socket.receive.buffer.bytes"
	// KeySASLServerMaxReceiveSize is sasl.server.max.receive.size
	// (socketserver.Config.SASLMaxReceiveSize).
	KeySASLServerMaxReceiveSize = "sasl.server.max.receive.size"
)

// The connection quota keys (socketserver.ConnectionQuotas), Kafka's and kafkanet's
// own. KeyMaxConnections and KeyMaxConnectionCreationRate are also read
// with a listener's prefix.
const (
	KeyMaxConnections               = "max.connections"
	KeyMaxConnectionsPerIP          = "max.connections.per.ip"
	KeyMaxConnectionsPerIPOverrides = "max.connections.per.ip.overrides"
	KeyMaxConnectionCreationRate    = "max.connection.creation.rate"
	KeyQuotaWindowNum               = "quota.window.num"
	KeyQuotaWindowSizeSeconds       = "quota.window.size.seconds"
	KeyIPConnectionCreationRate     = "kafkanet.ip.connection.creation.rate"
	// KeyIPConnectionCreationRateOverrides is kafkanet's key for
	// per-address connection creation rates, which Kafka sets as the
	// connection_creation_rate quota of named ip entities (kafka-configs
	// --entity-type ips): a comma-separated list of address:rate, in the
	// syntax of max.connections.per.ip.overrides (each entry split at its
	// last colon, so ::1:5 gives ::1 five per second), for example
	// 10.0.0.7:5,192.168.1.9:0,2001:db8::1:20. Addresses are IP literals (a
	// bracketed IPv6 address is accepted; a host name is not), each given
	// once; rates are connections per second, 0 admitting none and
	// 2147483647 none limited (exempt from
	// kafkanet.ip.connection.creation.rate).
	KeyIPConnectionCreationRateOverrides = "kafkanet.ip.connection.creation.rate.overrides"
)

// Keys of kafkanet's own for the PROXY protocol, each settable per
// listener with the listener.name.<listener>. prefix (see
// socketserver.ProxyProtocol).
const (
	// KeyProxyProtocol is none (the default) or required: whether the
	// listener's connections must begin with a PROXY protocol header (v1
	// or v2, both accepted).
	KeyProxyProtocol = "kafkanet.proxy.protocol"
	// KeyProxyProtocolTrustedNetworks is a comma-separated list of the
	// networks the header is accepted from, as CIDR prefixes (10.0.0.0/8,
	// fd00::/8) or single addresses; required with
	// kafkanet.proxy.protocol=required. 0.0.0.0/0,::/0 trusts every address,
	// and so lets any client claim any address.
	KeyProxyProtocolTrustedNetworks = "kafkanet.proxy.protocol.trusted.networks"
)

// The keys of kafkanet's own connection controls: the limits of
// socketserver.PrincipalLimits, read into
// ConnectionQuotas.MaxConnectionsPerPrincipal and
// ConnectionQuotas.ListenerMaxConnectionsPerPrincipal (each key also per listener,
// with the listener.name.<listener>. prefix), and socketserver.Config.ConnectionsMaxAge
// and socketserver.Config.ConnectionsMaxAgeJitter (each key also per
// listener, read into socketserver.ListenerConfig's fields of those names).
const (
	// KeyMaxConnectionsPerPrincipal is the limit of every principal but
	// User:ANONYMOUS: an integer, 2147483647 (no limit) by default; 0 is
	// valid only with KeyMaxConnectionsPerPrincipalOverrides, which then
	// names the only principals admitted.
	KeyMaxConnectionsPerPrincipal = "kafkanet.max.connections.per.principal"
	// KeyMaxConnectionsPerPrincipalOverrides gives single principals their
	// own limit: principal:count entries separated by semicolons, as
	// super.users separates principals, each count after the entry's last
	// colon, so that a TLS distinguished name with commas can be named:
	// User:alice:2;User:CN=bob,O=acme:50. User:ANONYMOUS is limited only
	// here.
	KeyMaxConnectionsPerPrincipalOverrides = "kafkanet.max.connections.per.principal.overrides"
	// KeyConnectionsMaxAgeMs is the maximum age of a connection in
	// milliseconds; unset or -1: none (the default); 0 is refused.
	KeyConnectionsMaxAgeMs = "kafkanet.connections.max.age.ms"
	// KeyConnectionsMaxAgeJitter spreads each connection's maximum age by
	// up to this fraction of it either way: a number from 0 (none) to
	// below 1; 0.1 by default.
	KeyConnectionsMaxAgeJitter = "kafkanet.connections.max.age.jitter"
)

// The listener keys that [Listeners] reads, with Kafka's names.
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

// KeyConnectionsMaxIdleMs is Kafka's connections.max.idle.ms
// (socketserver.Config.ConnectionsMaxIdle; default
// listener.DefaultConnectionsMaxIdle, -1 for none).
const KeyConnectionsMaxIdleMs = "connections.max.idle.ms"

// KeyConnectionFailedAuthenticationDelayMs is Kafka's
// connection.failed.authentication.delay.ms (KIP-306;
// socketserver.Config.FailedAuthenticationDelay; default
// security.DefaultFailedAuthenticationDelay, 0 for none). It must be less
// than connections.max.idle.ms unless that is negative.
const KeyConnectionFailedAuthenticationDelayMs = "connection.failed.authentication.delay.ms"

// MechanismKey returns the key of one of a listener's SASL mechanisms, as
// Kafka's ListenerName.saslMechanismConfigPrefix makes it:
// listener.name.<lower-case listener>.<lower-case mechanism>.<key>. For
// example MechanismKey("SASL_SSL", "SCRAM-SHA-512",
// KeySASLJAASConfig) is
// listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config, where a broker
// reads that mechanism's JAAS configuration (its users, for PLAIN and
// SCRAM); with KeySASLServerCallbackHandlerClass and OAUTHBEARER
// it names the listener's token validator.
func MechanismKey(name protocolmap.ListenerName, mechanism, key string) string {
	return name.ConfigPrefix() + strings.ToLower(mechanism) + "." + key
}

// Error is the error of every kafkanet function that reads or checks
// configuration, in this package and in those below it (protocolmap,
// listener, security, socketserver): a value that breaks a rule, naming the
// key as the user wrote it (with its listener prefix), the value and the
// rule, and wrapping the sentinel behind it. Test for it with errors.As and
// a *Error. It is an alias: the type is defined below protocolmap,
// so that the packages under config return this one type rather than
// errors that config converts, and a Listener Set or Settings built in code
// fails its checks with the same error as one parsed here.
type Error = configerr.Error
