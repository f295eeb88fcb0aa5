package connregistry

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// State is where a connection is in its life. A connection starts
// StateAuthenticating (on listeners without authentication it moves to
// StateReady at once), becomes StateReady once authenticated, and
// StateClosing when the server has decided to close it.
type State int8

// The states. Each prints as its token (String): "authenticating", "ready"
// and "closing", what a listing's State field, the CLI and the logs show.
const (
	StateAuthenticating State = iota
	StateReady
	StateClosing
)

// String returns the state's token: "authenticating", "ready" or
// "closing".
func (s State) String() string {
	switch s {
	case StateAuthenticating:
		return "authenticating"
	case StateReady:
		return "ready"
	case StateClosing:
		return "closing"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// CloseReason says why a connection closed. Its value is a stable machine
// token, lower case words joined by hyphens, that never changes meaning:
// what a listing's CloseReason field carries (ListClientConnections), and
// what the CLI, the metrics' reason labels (plugin/knprom, plugin/knotel)
// and the logs show, as it is; docs/connection-listing.md says when each
// is given. The constants below are the server's; a host may close
// connections with tokens of its own (Registry.Close), in the same form.
type CloseReason string

// The reasons the server closes a connection for, each with its token.
const (
	// CloseByClient ("client-closed"): the client went away, however it
	// did (it closed its end, or reset the connection) and whoever noticed
	// first: a host that closes a connection whose client had already
	// sent its EOF closes it for the client.
	CloseByClient CloseReason = "client-closed"
	// CloseIdle ("idle"): no request or response for
	// connections.max.idle.ms.
	CloseIdle CloseReason = "idle"
	// CloseQuota ("quota"): the broker-wide connection count was over
	// max.connections (the inter-broker listener, which the limit does not
	// hold back, went past it), and the connection, its processor's least
	// recently active, was closed to make room, as Kafka's processors do.
	CloseQuota CloseReason = "quota"
	// CloseAuthenticationFailed ("authentication-failed"): the TLS
	// handshake or the SASL exchange failed.
	CloseAuthenticationFailed CloseReason = "authentication-failed"
	// CloseSessionExpired ("session-expired"): a request came after the
	// SASL session expired (connections.max.reauth.ms, KIP-368) without
	// re-authentication.
	CloseSessionExpired CloseReason = "session-expired"
	// CloseServerShutdown ("server-shutdown"): the server shut down.
	CloseServerShutdown CloseReason = "server-shutdown"
	// CloseByOperator ("closed-by-operator"): an operator closed it
	// (Registry.Close, CloseClientConnections).
	CloseByOperator CloseReason = "closed-by-operator"
	// CloseProtocolError ("protocol-error"): the client sent bytes that
	// break Kafka's protocol (a frame too large, a request that does not
	// parse, an API or version the listener does not serve).
	CloseProtocolError CloseReason = "protocol-error"
	// CloseByHandler ("closed-by-handler"): the host closed it instead of
	// answering a request, its client still there.
	CloseByHandler CloseReason = "closed-by-handler"
	// CloseStalledRequest ("request-stalled"): the connection held request
	// memory (queued.max.request.bytes) for a frame it had begun and sent
	// nothing more of it for the server's stall timeout.
	CloseStalledRequest CloseReason = "request-stalled"
	// CloseSlowRequest ("request-too-slow"): the connection's request
	// arrived so slowly that it was idle for connections.max.idle.ms: its
	// bytes came slower than the server's floor (socketserver's
	// Config.RequestMinByteRate), so they did not count as activity; or a
	// host's deadline for a streamed body passed before the body had
	// arrived.
	CloseSlowRequest CloseReason = "request-too-slow"
	// CloseProxyRefused ("proxy-refused"): on a listener that requires the
	// PROXY protocol, the connection came from outside the trusted
	// networks, or did not begin with a valid PROXY header within the
	// handshake timeout. It was closed before anything else was read, and
	// never served.
	CloseProxyRefused CloseReason = "proxy-refused"
	// CloseListenerRemoved ("listener-removed"): the connection's listener
	// was removed while the server ran (socketserver's
	// Server.RemoveListener), which drains its connections as a shutdown
	// does.
	CloseListenerRemoved CloseReason = "listener-removed"
	// ClosePrincipalLimit ("principal-limit"): the connection's principal
	// already had the most connections its limit allows (socketserver's
	// ConnectionQuotas.MaxConnectionsPerPrincipal and its overrides), so the
	// connection was closed as soon as its principal was known, before any
	// request was read, as Kafka closes a connection over
	// max.connections.per.ip: the client retries after its reconnect
	// backoff.
	ClosePrincipalLimit CloseReason = "principal-limit"
	// CloseMaxAge ("max-age"): the connection outlived its maximum age
	// (socketserver's Config.ConnectionsMaxAge) and was closed between
	// requests: every request it had read was answered first, and no later
	// one was read.
	CloseMaxAge CloseReason = "max-age"
)

// Principal is an authenticated identity, as Kafka's KafkaPrincipal: a type
// (User) and a name: a connection's (Info.Principal), and what a
// socketserver.PrincipalBuilder builds.
type Principal struct {
	Type string
	Name string
}

// Anonymous returns the principal of an unauthenticated connection,
// Kafka's User:ANONYMOUS.
func Anonymous() Principal { return Principal{Type: "User", Name: "ANONYMOUS"} }

// String returns Type:Name.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// Info describes a connection: who is connected, from where, on which
// listener and how. The server writes it in one place, the connection's
// entry in its registry; a request carries the copy it found when it was
// read, shared by the requests read until the next change, and the hooks
// and listings read it from there.
//
// Its small fields are together, so that a copy has no padding.
type Info struct {
	// ID is Kafka's connection id:
	// localIP:localPort-remoteIP:remotePort-processorId-index, with IPv6
	// addresses in Java's uncompressed form (0:0:0:0:0:0:0:1), as Kafka
	// writes them, and processors numbered across the server, the control
	// plane's first.
	ID               string
	Listener         protocolmap.ListenerName
	SecurityProtocol protocolmap.SecurityProtocol
	Plane            protocolmap.Plane
	// TLSVersion and CipherSuite are the negotiated TLS parameters (zero
	// without TLS); tls.VersionName and tls.CipherSuiteName name them, as
	// a listing does.
	TLSVersion  uint16
	CipherSuite uint16
	// ServerName is the TLS server name the client asked for (SNI), as it
	// sent it; "" without TLS or when the client sent none (a client that
	// dials an IP address).
	ServerName string
	Principal  Principal
	// ClientAddr is the client's address: the socket's peer, or, on a
	// listener that requires the PROXY protocol, the source address its
	// header gave (the socket's peer for a LOCAL header, which a load
	// balancer sends for its own connections, such as health checks).
	ClientAddr netip.AddrPort
	// ProxyAddr is the address of the load balancer that sent the PROXY
	// header, the socket's peer; the zero value without the PROXY
	// protocol.
	ProxyAddr netip.AddrPort
	// ProxyTLVs are the type-length-value fields of a PROXY protocol v2
	// header, in the order sent, NOOP padding left out: what the load
	// balancer adds about the client, such as the server name it asked
	// for ([Info.ProxyAuthority]) or the cloud endpoint it came through
	// ([Info.ProxyAWSVPCEndpointID], [Info.ProxyAzureLinkID],
	// [Info.ProxyGCPConnectionID]). Nil without them. Every copy of the
	// connection's Info shares them: read them, never change them.
	ProxyTLVs []ProxyTLV
	// ClientSoftwareName and ClientSoftwareVersion come from the
	// connection's last valid ApiVersions v3+ request (KIP-511); they are
	// empty before one.
	ClientSoftwareName    string
	ClientSoftwareVersion string
	// SASLMechanism is the mechanism the client chose (from its
	// SaslHandshake, so that a failed authentication names it), and
	// AuthenticatedAt when the connection last authenticated (zero without
	// SASL).
	SASLMechanism   string
	ConnectedAt     time.Time
	AuthenticatedAt time.Time
	// SessionExpiry is when the SASL session expires
	// (connections.max.reauth.ms, KIP-368); zero when it does not.
	SessionExpiry time.Time
}

// Conn is a connection as the registry lists it: its [Info], and what the
// registry counts and keeps of its life (the fields KIP-1329 lists, and
// more).
type Conn struct {
	Info
	ClientID     string // of the last request
	LastActivity time.Time
	BytesIn      int64
	BytesOut     int64
	Requests     int64
	State        State
	// ThrottledUntil is when the connection's throttle ends: until then the
	// server reads nothing from it (Kafka's MUTED_AND_THROTTLED, KIP-219).
	// It is zero when the connection is not muted, and on closed
	// connections.
	ThrottledUntil time.Time
	// ThrottleTime is how long the connection has been muted by throttles
	// in all, the current one up to now included.
	ThrottleTime time.Duration
	// RequestRate, BytesInRate and BytesOutRate are the connection's
	// recent rates, per second over about the last minute: requests read,
	// and the bytes of its requests and of its responses. Each is an
	// exponentially weighted rate with a time constant of [RateWindow]
	// (as the Unix 1-minute load average), so a request a minute old
	// weighs 1/e of one just read, and the rates decay while the
	// connection is idle: a steady rate shows as itself after a few
	// minutes (63% of it after one), and a burst of n requests as about
	// n/60 per second for the minute after it. On a closed connection they
	// are the rates when it closed.
	RequestRate  float64
	BytesInRate  float64
	BytesOutRate float64
	// ClosedAt and CloseReason are set on closed connections only.
	ClosedAt    time.Time
	CloseReason CloseReason
}

// RateWindow is the time constant of a connection's rates
// ([Conn.RequestRate], [Conn.BytesInRate], [Conn.BytesOutRate]): what
// "over the last minute" means.
const RateWindow = time.Minute

// DefaultHistorySize is how many closed connections a registry remembers
// unless told otherwise.
const DefaultHistorySize = 1000

// Registry is a server's registry of connections as a host sees it: its
// open connections and a bounded history of recently closed ones, to read
// and to close, never to write. socketserver's Server.Registry returns its
// server's; connregistrytest builds one with connections in it for a
// host's unit tests. Every method is safe for concurrent use, while
// connections come and go.
//
// Registry is an interface so that its writes stay the server's: see the
// package documentation. A host may implement it too (over the connections
// of a network layer of its own, or as a view over several servers): as
// CONTRIBUTING.md promises of an interface a host implements, it gains no
// method within v1.
type Registry interface {
	// Snapshot returns the open connections that match f, ordered by
	// connection time (then by id). The server is never stalled for the
	// whole listing: a connection that opens or closes meanwhile may be
	// missed or included, but no record is torn.
	Snapshot(f Filter) []Conn
	// Top returns the first n open connections that match f in by's
	// order (see [SortKey]; the busiest first), in that order; n <= 0
	// returns all of them in that order. The registry keeps only n of
	// them while it looks (a bounded heap), so asking for the busiest 10
	// of 100,000 costs no copy of the other 99,990. A sort key that does
	// not validate ([SortKey.Validate]) returns none.
	Top(f Filter, by SortKey, n int) []Conn
	// Closed returns the remembered closed connections that match f,
	// oldest first.
	Closed(f Filter) []Conn
	// Len returns the number of open connections.
	Len() int
	// Close closes the open connections that match f, giving reason (the
	// incident-response "kill" that Redis CLIENT KILL USER and RabbitMQ
	// close_all_user_connections offer), and returns them as they were
	// just before. A filter that matches everything closes everything.
	// The connections close as the server closes them, on their own
	// goroutines: Snapshot may list them for a moment more, Closed lists
	// them once they have.
	Close(f Filter, reason CloseReason) []Conn
}
