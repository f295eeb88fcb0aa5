package socketserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// Kafka's defaults for the socket server's keys. Three defaults live
// below this package: connections.max.idle.ms's
// ([listener.DefaultConnectionsMaxIdle]),
// connection.failed.authentication.delay.ms's
// ([security.DefaultFailedAuthenticationDelay]) and the handshake
// timeout's ([security.DefaultHandshakeTimeout]).
const (
	DefaultRequestMaxBytes    = 104857600 // socket.request.max.bytes
	DefaultQueuedMaxRequests  = 500       // queued.max.requests
	DefaultNumNetworkThreads  = 3         // num.network.threads
	DefaultNumIOThreads       = 8         // num.io.threads
	DefaultSocketBufferBytes  = 102400    // socket.send.buffer.bytes, socket.receive.buffer.bytes
	DefaultSASLMaxReceiveSize = 524288    // sasl.server.max.receive.size
	// DefaultRequestStallTimeout is kafkanet.request.stall.ms's default:
	// much shorter than connections.max.idle.ms, and shorter than a
	// client's own request.timeout.ms (30 s), after which the client has
	// given the request up anyway.
	DefaultRequestStallTimeout = 10 * time.Second
	// DefaultRequestMinByteRate is kafkanet.request.min.byte.rate's
	// default, in bytes a second: far below any link a Kafka client can
	// work over (a client gives a request up after request.timeout.ms, 30
	// s), far above a slowloris's byte every few seconds.
	DefaultRequestMinByteRate = 1024
	// DefaultConnectionsMaxAgeJitter is kafkanet.connections.max.age.jitter's
	// default: each connection's maximum age within ±10% of
	// kafkanet.connections.max.age.ms.
	DefaultConnectionsMaxAgeJitter = 0.1
	// ControlPlaneQueueSize is the control plane's fixed request queue
	// capacity, as in Kafka.
	ControlPlaneQueueSize = 20
	// processorQueueSize is how many accepted connections may wait for a
	// processor before the acceptor tries the next one (Kafka's value).
	processorQueueSize = 20
)

// Config configures a [Server]. Build it with config.Server (package github.com/kafkanet/kafkanet/config) to read
// Kafka's keys, or fill it directly. One convention holds for its fields
// (docs/configuration.md, "Default and off"): zero means the default, and
// a negative value turns a feature off where it can be off. Byte sizes are
// ints.
type Config struct {
	// Listeners is the resolved listener configuration (required).
	Listeners *listener.Set

	// APIs lists the request types each listener accepts, unless its
	// ListenerConfig gives it APIs of its own. ApiVersions is always
	// accepted and answered by the server from the listener's list, unless
	// the list holds key 18 itself, in which case ApiVersions requests go
	// to the host like any other once the connection has authenticated:
	// on a SASL listener the server still answers those that come before
	// (SASL clients ask first), as Kafka does.
	APIs []API
	// PerListener configures single listeners: their own APIs, processors,
	// security settings, SASL mechanisms and credentials. A listener
	// missing here takes APIs, DefaultNumNetworkThreads processors, no
	// security settings (a PLAINTEXT listener needs none) and Credentials.
	// config.Server fills an entry for every listener. New reads
	// the entries and keeps no pointer to them. A listener added later
	// gets its ListenerConfig from Server.AddListener or
	// Server.SetListeners.
	PerListener map[protocolmap.ListenerName]*ListenerConfig

	// RequestMaxBytes is socket.request.max.bytes: a larger frame closes
	// the connection. Zero means DefaultRequestMaxBytes; at most
	// math.MaxInt32, Kafka's largest frame.
	RequestMaxBytes int
	// ConnectionsMaxIdle is connections.max.idle.ms: a connection with no
	// complete request received or response sent for this long, and no
	// request arriving at RequestMinByteRate or faster, is closed, as in
	// Kafka even while the host holds its request (the request's context
	// is then cancelled, and a late answer is dropped).
	// Zero means listener.DefaultConnectionsMaxIdle; negative disables the limit.
	ConnectionsMaxIdle time.Duration
	// RequestMinByteRate is kafkanet.request.min.byte.rate, a key of
	// kafkanet's own, in bytes a second: the floor of a request still
	// arriving. While a frame arrives (a streamed body too), its bytes
	// count as activity for ConnectionsMaxIdle as long as they average
	// this rate or more since the frame's reading first waited for them,
	// with at most ConnectionsMaxIdle of credit carried from faster
	// stretches; a frame that falls behind it is closed at the idle limit
	// with the reason connregistry.CloseSlowRequest, so that a slowloris
	// (a byte every few seconds) still is. A frame that stops arriving
	// is idle. Zero means DefaultRequestMinByteRate; negative sets no
	// floor: every byte counts, as in Kafka.
	RequestMinByteRate int
	// QueuedMaxRequests is the data plane's request queue capacity
	// (queued.max.requests). Zero means DefaultQueuedMaxRequests.
	QueuedMaxRequests int
	// IOThreads is the number of the data plane's workers that
	// Server.Serve runs, the goroutines that hand its requests to the
	// host's Handler (num.io.threads). Zero means DefaultNumIOThreads. The
	// control plane has one, as in Kafka.
	IOThreads int
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// requests read but not yet answered, across the data plane's
	// connections. When they are spent, connections read no more until
	// answers give memory back (nothing is dropped). Zero or
	// negative, Kafka's default (-1), sets no limit. A positive value must be
	// at least RequestMaxBytes, as in Kafka. The control plane has an
	// allowance of its own, RequestMaxBytes, so that it is never starved;
	// frames before authentication are bounded by SASLMaxReceiveSize
	// instead. The budget bounds the bytes in hand, not the heap: with
	// GOGC's default the heap may grow to twice what was live, so a host
	// that sets a budget to bound its memory sets GOMEMLIMIT too (about
	// twice the budget plus its own needs), as a Kafka broker runs with a
	// fixed heap.
	//
	// A request takes memory from the budget as its bytes arrive, not for
	// the size its frame announces, so a peer that claims a large frame and
	// sends little cannot spend the budget; a frame of at most 64 KiB
	// never waits for it; and while the budget is spent, frames nearest to
	// whole are read first. See RequestStallTimeout.
	QueuedMaxRequestBytes int
	// RequestStallTimeout is kafkanet.request.stall.ms, a key of
	// kafkanet's own: with QueuedMaxRequestBytes, a connection that holds
	// some of the budget for a frame it has begun and sends none of the
	// frame's next bytes for this long is closed
	// (connregistry.CloseStalledRequest), since connections waiting for the
	// budget may be waiting for it. Zero means DefaultRequestStallTimeout;
	// negative disables it, as in Kafka, where only ConnectionsMaxIdle
	// closes such a connection. Without a budget it has no effect.
	RequestStallTimeout time.Duration
	// SendBufferBytes and ReceiveBufferBytes set SO_SNDBUF and SO_RCVBUF
	// (socket.send.buffer.bytes, socket.receive.buffer.bytes). Zero means
	// DefaultSocketBufferBytes; -1 leaves the operating system's default.
	SendBufferBytes    int
	ReceiveBufferBytes int

	// Credentials backs the built-in SASL mechanisms (PLAIN,
	// SCRAM-SHA-256, SCRAM-SHA-512) of every SASL listener whose
	// ListenerConfig has no Credentials of its own. Kafka configures users
	// per listener and mechanism (JAAS); a host may keep one store for all.
	Credentials sasl.CredentialStore
	// PrincipalBuilder builds each connection's principal once it has
	// authenticated; nil means DefaultPrincipal.
	PrincipalBuilder PrincipalBuilder
	// FailedAuthenticationDelay is connection.failed.authentication.delay.ms
	// (KIP-306): how long a failed authentication waits before its response
	// and close. Zero means
	// security.DefaultFailedAuthenticationDelay; negative, none.
	FailedAuthenticationDelay time.Duration
	// SASLMaxReceiveSize is sasl.server.max.receive.size: the largest frame
	// accepted before authentication completes. Zero means
	// DefaultSASLMaxReceiveSize; at most math.MaxInt32.
	SASLMaxReceiveSize int

	// ConnectionQuotas are the connection quotas; nil means
	// DefaultConnectionQuotas (nothing limited). config.Server reads them
	// from Kafka's keys.
	ConnectionQuotas *ConnectionQuotas

	// RegistryHistory is how many recently closed connections the
	// server's registry of connections (Server.Registry, listed by
	// KIP-1329's ListClientConnections) remembers: 0 means
	// connregistry.DefaultHistorySize, a negative value none.
	RegistryHistory int

	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Hooks observe the server's events: connections accepted, rejected,
	// created and closed, requests, responses and their latency,
	// authentications. Each hook implements any of the Hook... interfaces
	// (see [Hook]); one that implements none is an error in New.
	Hooks []Hook
	// AuditQueueSize is how many audit events may wait for the HookAudit
	// hooks before further ones are dropped and counted (see [HookAudit]).
	// Zero means DefaultAuditQueueSize; negative is an error in New.
	// Without a HookAudit no queue is made.
	AuditQueueSize int

	// Listen makes the net.Listener that listener l is served on, as
	// net/http's Server.Serve takes one: a proxy's listener, an in-memory
	// one for tests, a socket inherited from systemd. Start calls it once
	// per listener, in order, with its own context, and Server.AddListener
	// and Server.SetListeners once per listener they add, with theirs; nil
	// means [ListenTCP], which binds l.Bind with TCP. A Listen that
	// supplies only some listeners calls ListenTCP for the others. The
	// server owns the listeners made: it closes them when Start fails on a
	// later listener, on Shutdown and Close, and when the listener is
	// removed. Start holds the server's lock meanwhile, so Listen must not
	// call the server's methods.
	//
	// The listener's Accept, and the RemoteAddr and LocalAddr of the
	// connections it returns, run on the listener's acceptor path, one
	// connection after another: the acceptor calls Accept, reads
	// RemoteAddr to apply the connection quotas, and hands the connection
	// to a processor, which reads both addresses to name it. None of them
	// may block: an Accept that does more than wait for the next connection
	// (a handshake of its own, a lookup) holds up every connection behind
	// it, so do such work in the connection's own Read, or on a goroutine of
	// the listener's that hands Accept finished connections. (The PROXY
	// protocol needs none of that: ListenerConfig.ProxyProtocol reads the
	// header on the connection's goroutine; a listener that wraps its
	// connections in a PROXY-reading Conn whose RemoteAddr reads the
	// header would stall the acceptor.) Accept must return, with any error,
	// once the listener is closed: Shutdown and Close wait for the acceptor.
	//
	// Connections need not be TCP. For one whose addresses are not IP
	// addresses (net.Pipe, a Unix socket), the connection id shows the
	// addresses as the connection gives them, Info.ClientAddr is the
	// zero value, and the per-address quotas (max.connections.per.ip, its
	// overrides and the per-address creation rate) do not apply; the
	// listener and broker limits do. Socket options are set on connections
	// that have the methods (SetNoDelay, SetKeepAlive, SetReadBuffer,
	// SetWriteBuffer), and Shutdown half-closes those that have CloseWrite
	// (see Shutdown). Read deadlines must work, as net.Conn requires: idle
	// connections park, and Shutdown drains, by moving them.
	Listen func(ctx context.Context, l listener.Listener) (net.Listener, error)
	// BaseContext returns the context the connections of listener l derive
	// from, as net/http's Server.BaseContext: their [Request.Context] carries
	// its values and is cancelled when it is. Start calls it once per
	// listener, once every listener is made, and a listener change once
	// per listener it adds; nil means context.Background(). It must not
	// return nil (Start, or the change, fails). A
	// cancelled base context cancels the requests' contexts only: the
	// connections stay open and their responses are written.
	BaseContext func(l listener.Listener, ln net.Listener) context.Context
	// ConnContext may derive the context of a new connection from ctx, its
	// listener's base context, as net/http's Server.ConnContext: to add
	// values for the host's handlers, such as a connection-scoped logger.
	// It sees the connection as accepted, before any TLS handshake, and its
	// description (id, listener, client address). It runs on the listener's
	// processor, which registers connections one at a time: it must be
	// fast. On a listener that requires the PROXY protocol it runs on the
	// connection's goroutine once the header is read: info then has the
	// client's address from the header (and the balancer's in ProxyAddr),
	// while nc's RemoteAddr is the balancer's. A nil result leaves ctx.
	// The connection's context is cancelled when it closes, whatever
	// ConnContext returned.
	ConnContext func(ctx context.Context, nc net.Conn, info connregistry.Info) context.Context

	// ConnectionsMaxAge is kafkanet.connections.max.age.ms, a key of
	// kafkanet's own: a connection older than this (from its accept, each
	// connection's age spread by ConnectionsMaxAgeJitter) is closed, with
	// the reason connregistry.CloseMaxAge, so that clients reconnect and a
	// load balancer in front spreads them over the instances added since
	// they came. It is closed between requests: one waiting for a request
	// (or parked) is closed within a twentieth of the age (at most a
	// minute) of reaching it; one whose requests keep coming reads no
	// further request once one it read finds it past its age, and closes
	// when every request it read has been answered and its response
	// written, so that nothing it took is lost and the client sends the
	// rest again on its next connection, as after an idle close. Zero or
	// negative: no maximum (the default). A listener may have its own
	// (ListenerConfig.ConnectionsMaxAge).
	ConnectionsMaxAge time.Duration
	// ConnectionsMaxAgeJitter is kafkanet.connections.max.age.jitter: each
	// connection's maximum age is ConnectionsMaxAge spread by up to this
	// fraction of it either way (0.1: from 90% to 110%), so that
	// connections opened together do not all leave together. Zero means
	// DefaultConnectionsMaxAgeJitter; negative, none; it must be less than
	// 1.
	ConnectionsMaxAgeJitter float64

	// ParkAfter is how long an idle connection waits for its next request
	// before it parks, giving back its read buffer and all but the
	// smallest goroutine stack; a new connection's first park comes after
	// a twentieth of it, and a connection woken soon after parking waits
	// longer before its next park (see DefaultParkAfter). Zero means
	// DefaultParkAfter; negative disables parking.
	ParkAfter time.Duration

	// lookupNetIP resolves the host names of
	// ConnectionQuotas.MaxConnectionsPerIPOverrides; nil means
	// net.DefaultResolver.LookupNetIP. Tests set it.
	lookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ListenerConfig is the socket server's configuration of one listener,
// beside what package listener resolves of it (where it listens, its
// security protocol and plane).
type ListenerConfig struct {
	// APIs, when not nil, replaces Config.APIs on this listener: a
	// control-plane listener, which a ZooKeeper-era broker limits to
	// controller requests, ApiVersions and Metadata; an admin listener.
	APIs []API
	// NetworkThreads is the number of the listener's processors
	// (num.network.threads, or listener.name.<name>.num.network.threads);
	// zero means DefaultNumNetworkThreads; New refuses a negative count. A
	// control-plane listener always has one.
	NetworkThreads int
	// Security is how the listener authenticates its connections: TLS,
	// the SASL mechanisms it enables, principal mapping,
	// re-authentication, the handshake timeout, and OAUTHBEARER's settings
	// when its properties configure them (config.Server reads them
	// with config.Security). The zero value suits PLAINTEXT.
	Security security.Settings
	// Mechanisms are the host's implementations of SASL mechanisms for the
	// listener, such as OAUTHBEARER, GSSAPI or AWS_MSK_IAM, or its own
	// PLAIN. The listener offers the mechanisms Security enables
	// (sasl.enabled.mechanisms), in that order, each implemented by the
	// mechanism given here of that name or else by the built-in one
	// (sasl.Builtin: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) over
	// Credentials. Names are compared case-sensitively, as in Kafka. New
	// fails for an enabled mechanism that neither implements, and for a
	// mechanism given here that the listener does not enable. OAUTHBEARER
	// is never built in, so that a server does not link its validators; a
	// host that serves it as Kafka configures it adds the mechanism the
	// listener's settings describe:
	//
	//	l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security)
	//
	// (package github.com/kafkanet/kafkanet/security/sasl/oauthbearer).
	// Mechanisms that are a sasl.Service are started by Server.Start (or
	// by Server.AddListener or Server.SetListeners, for a listener they
	// add) and closed when the server stops or the listener is removed.
	Mechanisms []sasl.Mechanism
	// Credentials backs the listener's built-in SASL mechanisms; nil
	// means Config.Credentials. security.NewJAASUsers builds a store for
	// each listener from its users, which config.JAASUsers reads from
	// Kafka's JAAS properties.
	Credentials sasl.CredentialStore
	// ProxyProtocol says whether the listener's connections begin with a
	// PROXY protocol header (a listener behind a TCP load balancer), and
	// whose it accepts (kafkanet.proxy.protocol and
	// kafkanet.proxy.protocol.trusted.networks). The zero value: none.
	ProxyProtocol ProxyProtocol
	// ConnectionsMaxAge is the listener's own maximum connection age
	// (listener.name.<name>.kafkanet.connections.max.age.ms), in place of
	// Config.ConnectionsMaxAge on this listener, so that, say, the
	// inter-broker or control-plane listener keeps its connections while
	// the clients' listener spreads its own: zero means
	// Config.ConnectionsMaxAge; negative, no maximum on this listener.
	ConnectionsMaxAge time.Duration
	// ConnectionsMaxAgeJitter is the listener's own jitter of the maximum
	// age (listener.name.<name>.kafkanet.connections.max.age.jitter):
	// zero means Config.ConnectionsMaxAgeJitter; negative, none; it must
	// be less than 1.
	ConnectionsMaxAgeJitter float64
}

// withDefaults returns c with zero fields set to Kafka's defaults.
func (c Config) withDefaults() Config {
	if c.RequestMaxBytes == 0 {
		c.RequestMaxBytes = DefaultRequestMaxBytes
	}
	if c.ConnectionsMaxIdle == 0 {
		c.ConnectionsMaxIdle = listener.DefaultConnectionsMaxIdle
	}
	if c.QueuedMaxRequests == 0 {
		c.QueuedMaxRequests = DefaultQueuedMaxRequests
	}
	if c.IOThreads == 0 {
		c.IOThreads = DefaultNumIOThreads
	}
	if c.RequestStallTimeout == 0 {
		c.RequestStallTimeout = DefaultRequestStallTimeout
	}
	if c.RequestMinByteRate == 0 {
		c.RequestMinByteRate = DefaultRequestMinByteRate
	}
	if c.SendBufferBytes == 0 {
		c.SendBufferBytes = DefaultSocketBufferBytes
	}
	if c.ReceiveBufferBytes == 0 {
		c.ReceiveBufferBytes = DefaultSocketBufferBytes
	}
	if c.FailedAuthenticationDelay == 0 {
		c.FailedAuthenticationDelay = security.DefaultFailedAuthenticationDelay
	}
	if c.SASLMaxReceiveSize == 0 {
		c.SASLMaxReceiveSize = DefaultSASLMaxReceiveSize
	}
	if c.AuditQueueSize == 0 {
		c.AuditQueueSize = DefaultAuditQueueSize
	}
	if c.ConnectionQuotas == nil {
		q := DefaultConnectionQuotas()
		c.ConnectionQuotas = &q
	}
	if c.PrincipalBuilder == nil {
		c.PrincipalBuilder = DefaultPrincipal
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ParkAfter == 0 {
		c.ParkAfter = DefaultParkAfter
	}
	if c.ConnectionsMaxAgeJitter == 0 {
		c.ConnectionsMaxAgeJitter = DefaultConnectionsMaxAgeJitter
	}
	if c.lookupNetIP == nil {
		c.lookupNetIP = net.DefaultResolver.LookupNetIP
	}
	return c
}

// listenerConfig returns listener name's ListenerConfig: its entry in
// PerListener, or the zero value.
func (c Config) listenerConfig(name protocolmap.ListenerName) ListenerConfig {
	if lc := c.PerListener[name]; lc != nil {
		return *lc
	}
	return ListenerConfig{}
}

// maxAge returns the maximum connection age on a listener configured by
// lc, zero for none, and its jitter, zero for none: lc's own where set,
// else the server's (c, with its defaults).
func (c Config) maxAge(lc ListenerConfig) (age time.Duration, jitter float64, err error) {
	if j := lc.ConnectionsMaxAgeJitter; j >= 1 || j != j {
		return 0, 0, fmt.Errorf("ConnectionsMaxAgeJitter (%v) must be less than 1", j)
	}
	age, jitter = c.ConnectionsMaxAge, c.ConnectionsMaxAgeJitter
	if lc.ConnectionsMaxAge != 0 {
		age = lc.ConnectionsMaxAge
	}
	if lc.ConnectionsMaxAgeJitter != 0 {
		jitter = lc.ConnectionsMaxAgeJitter
	}
	return max(age, 0), max(jitter, 0), nil
}

// networkThreads returns the processor count of listener l, configured
// by lc.
func networkThreads(l listener.Listener, lc ListenerConfig) int {
	if l.Plane == protocolmap.ControlPlane {
		return 1
	}
	if lc.NetworkThreads > 0 {
		return lc.NetworkThreads
	}
	return DefaultNumNetworkThreads
}
