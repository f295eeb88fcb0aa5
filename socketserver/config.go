package socketserver

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// Kafka's defaults for the socket server's keys. The defaults of the keys
// the listener and security packages read (connections.max.idle.ms,
// connection.failed.authentication.delay.ms and the handshake timeout)
// are theirs: [listener.DefaultConnectionsMaxIdle],
// [security.DefaultFailedAuthenticationDelay] and
// [security.DefaultHandshakeTimeout].
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

// Config configures a [Server]. Build it with [ConfigFromProperties] to read
// Kafka's keys, or fill it directly; zero fields take Kafka's defaults.
type Config struct {
	// Listeners is the resolved listener configuration (required).
	Listeners *listener.Set

	// APIs lists the request types each listener accepts, unless its
	// ListenerConfig gives it APIs of its own. ApiVersions is always
	// accepted and answered by the server from the listener's list, unless
	// the list holds key 18 itself, in which case ApiVersions requests go
	// to the host like any other.
	APIs []API
	// PerListener configures single listeners: their own APIs, processors,
	// security settings, SASL mechanisms and credentials. A listener
	// missing here takes APIs, DefaultNumNetworkThreads processors, no
	// security settings (a PLAINTEXT listener needs none) and Credentials.
	// ConfigFromProperties fills an entry for every listener. New reads
	// the entries and keeps no pointer to them. A listener added later
	// gets its ListenerConfig from Server.AddListener or
	// Server.SetListeners.
	PerListener map[protocolmap.ListenerName]*ListenerConfig

	// RequestMaxBytes is socket.request.max.bytes: a larger frame closes
	// the connection. Zero means DefaultRequestMaxBytes.
	RequestMaxBytes int32
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
	RequestMinByteRate int64
	// QueuedMaxRequests is the data plane's request queue capacity
	// (queued.max.requests). Zero means DefaultQueuedMaxRequests.
	QueuedMaxRequests int
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
	QueuedMaxRequestBytes int64
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
	// DefaultSASLMaxReceiveSize.
	SASLMaxReceiveSize int32

	// ConnectionQuotas are the connection quotas; nil means
	// DefaultConnectionQuotas (nothing limited). ConfigFromProperties reads them from Kafka's keys.
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
	// while nc's RemoteAddr is the balancer's. A nil result leaves ctx. The connection's context is cancelled
	// when it closes, whatever ConnContext returned.
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
	// negative: no maximum (the default).
	ConnectionsMaxAge time.Duration
	// ConnectionsMaxAgeJitter is kafkanet.connections.max.age.jitter: each
	// connection's maximum age is ConnectionsMaxAge spread by up to this
	// fraction of it either way (0.1: from 90% to 110%), so that
	// connections opened together do not all leave together. Zero means
	// DefaultConnectionsMaxAgeJitter; negative, none; it must be less than
	// 1.
	ConnectionsMaxAgeJitter float64

	// ParkAfter is how long an idle connection first waits for its next
	// request before it parks, giving back its read buffer and all but the
	// smallest goroutine stack; a connection woken soon after parking
	// waits longer before its next park (see DefaultParkAfter). Zero means
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
	// zero means DefaultNumNetworkThreads. A control-plane listener always
	// has one.
	NetworkThreads int
	// Security is how the listener authenticates its connections: TLS,
	// the SASL mechanisms it enables, principal mapping,
	// re-authentication, the handshake timeout, and OAUTHBEARER's settings
	// when its properties configure them (ConfigFromProperties reads them
	// with security.ForListener). The zero value suits PLAINTEXT.
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
	// each listener from Kafka's JAAS properties.
	Credentials sasl.CredentialStore
	// ProxyProtocol says whether the listener's connections begin with a
	// PROXY protocol header (a listener behind a TCP load balancer), and
	// whose it accepts (kafkanet.proxy.protocol and
	// kafkanet.proxy.protocol.trusted.networks). The zero value: none.
	ProxyProtocol ProxyProtocol
}

// ConfigFromProperties reads a server's configuration from Kafka's keys,
// once, into typed and checked values: the listeners (listener.Resolve:
// listeners, advertised.listeners, listener.security.protocol.map, the
// inter-broker and control-plane listeners), then socket.request.max.bytes,
// connections.max.idle.ms, kafkanet.request.min.byte.rate,
// queued.max.requests, queued.max.request.bytes,
// kafkanet.request.stall.ms, num.network.threads (and its listener-prefixed form),
// socket.send.buffer.bytes, socket.receive.buffer.bytes,
// connection.failed.authentication.delay.ms, sasl.server.max.receive.size,
// the connection quotas (with kafkanet's per-principal limits),
// kafkanet.connections.max.age.ms and its jitter, each listener's use of the PROXY protocol
// (kafkanet.proxy.protocol and kafkanet.proxy.protocol.trusted.networks,
// see ProxyProtocol), and each listener's TLS and SASL settings
// (security.ForListener) into its ListenerConfig, among them, for a
// listener whose sasl.enabled.mechanisms holds OAUTHBEARER, its OAUTHBEARER
// settings (security.OAuthBearer). It builds no mechanism from them: the
// host does (see ListenerConfig.Mechanisms), so that only a host that
// serves OAUTHBEARER links its validators. Credentials are the host's to
// set (security.NewJAASUsers builds them from Kafka's JAAS keys). Errors
// name the offending key. New reads no property: a host may change any
// value between the two.
func ConfigFromProperties(props listener.Properties) (Config, error) {
	cfg, err := listener.Resolve(props)
	if err != nil {
		return Config{}, err
	}
	c := Config{Listeners: cfg, PerListener: make(map[protocolmap.ListenerName]*ListenerConfig, len(cfg.Listeners))}
	maxBytes, err := props.Int("socket.request.max.bytes", DefaultRequestMaxBytes, 1)
	if err != nil {
		return Config{}, err
	}
	c.RequestMaxBytes = int32(min(maxBytes, 1<<31-1))
	idleMS, err := props.Int("connections.max.idle.ms", int(listener.DefaultConnectionsMaxIdle/time.Millisecond), -1<<62)
	if err != nil {
		return Config{}, err
	}
	c.ConnectionsMaxIdle = time.Duration(idleMS) * time.Millisecond
	if idleMS < 0 {
		c.ConnectionsMaxIdle = -1
	}
	rate, err := props.Int(KeyRequestMinByteRate, DefaultRequestMinByteRate, -1<<62)
	if err != nil {
		return Config{}, err
	}
	c.RequestMinByteRate = int64(rate)
	if rate <= 0 {
		c.RequestMinByteRate = -1
	}
	if c.QueuedMaxRequests, err = props.Int("queued.max.requests", DefaultQueuedMaxRequests, 1); err != nil {
		return Config{}, err
	}
	if c.QueuedMaxRequestBytes, err = queuedMaxRequestBytes(props, c.RequestMaxBytes); err != nil {
		return Config{}, err
	}
	stallMS, err := props.Int(KeyRequestStallMs, int(DefaultRequestStallTimeout/time.Millisecond), -1<<62)
	if err != nil {
		return Config{}, err
	}
	c.RequestStallTimeout = time.Duration(stallMS) * time.Millisecond
	if stallMS <= 0 {
		c.RequestStallTimeout = -1
	}
	if c.SendBufferBytes, err = props.Int("socket.send.buffer.bytes", DefaultSocketBufferBytes, -1); err != nil {
		return Config{}, err
	}
	if c.ReceiveBufferBytes, err = props.Int("socket.receive.buffer.bytes", DefaultSocketBufferBytes, -1); err != nil {
		return Config{}, err
	}
	if c.FailedAuthenticationDelay, err = security.FailedAuthenticationDelay(cfg); err != nil {
		return Config{}, err
	}
	if c.FailedAuthenticationDelay == 0 {
		c.FailedAuthenticationDelay = -1 // set to 0 on purpose: no delay
	}
	saslMax, err := props.Int("sasl.server.max.receive.size", DefaultSASLMaxReceiveSize, 1)
	if err != nil {
		return Config{}, err
	}
	c.SASLMaxReceiveSize = int32(min(saslMax, 1<<31-1))
	if c.ConnectionQuotas, err = quotasFromProperties(cfg); err != nil {
		return Config{}, err
	}
	if c.ConnectionsMaxAge, c.ConnectionsMaxAgeJitter, err = maxAgeFromProperties(props); err != nil {
		return Config{}, err
	}
	for _, l := range cfg.Listeners {
		n, err := props.ListenerInt(l.Name, "num.network.threads", DefaultNumNetworkThreads, 1)
		if err != nil {
			return Config{}, err
		}
		sec, err := security.ForListener(cfg, l.Name)
		if err != nil {
			return Config{}, err
		}
		proxy, err := proxyProtocolFromProperties(props, l.Name)
		if err != nil {
			return Config{}, err
		}
		c.PerListener[l.Name] = &ListenerConfig{NetworkThreads: n, Security: sec, ProxyProtocol: proxy}
	}
	return c, nil
}

// KeyQueuedMaxRequestBytes is the key of [Config.QueuedMaxRequestBytes].
const KeyQueuedMaxRequestBytes = "queued.max.request.bytes"

// KeyRequestStallMs is the key of [Config.RequestStallTimeout], in
// milliseconds; zero or negative disables it.
const KeyRequestStallMs = "kafkanet.request.stall.ms"

// KeyRequestMinByteRate is the key of [Config.RequestMinByteRate], in
// bytes a second; zero or negative sets no floor.
const KeyRequestMinByteRate = "kafkanet.request.min.byte.rate"

// queuedMaxRequestBytes reads queued.max.request.bytes (a long, default -1)
// with Kafka's rule that a limit is at least socket.request.max.bytes.
func queuedMaxRequestBytes(props listener.Properties, requestMax int32) (int64, error) {
	v, ok := props.Get(KeyQueuedMaxRequestBytes)
	if !ok {
		return -1, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, &protocolmap.ConfigError{Key: KeyQueuedMaxRequestBytes, Value: v, Err: listener.ErrInvalidValue,
			Rule: "Expected value to be a 64-bit integer"}
	}
	if n > 0 && n < int64(requestMax) {
		return 0, &protocolmap.ConfigError{Key: KeyQueuedMaxRequestBytes, Value: v, Err: listener.ErrInvalidValue,
			Rule: fmt.Sprintf("a limit must be at least socket.request.max.bytes (%d), or -1 for none", requestMax)}
	}
	return n, nil
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

// quotasFromProperties reads Kafka's connection quota keys: max.connections
// and max.connection.creation.rate (each also per listener),
// max.connections.per.ip, max.connections.per.ip.overrides,
// quota.window.num, quota.window.size.seconds, and this library's
// kafkanet.ip.connection.creation.rate and
// kafkanet.ip.connection.creation.rate.overrides (see
// ipConnectionCreationRateOverrides).
func quotasFromProperties(cfg *listener.Set) (*ConnectionQuotas, error) {
	q := DefaultConnectionQuotas()
	props := cfg.Properties()
	var err error
	if q.MaxConnections, err = props.Int("max.connections", Unlimited, 0); err != nil {
		return nil, err
	}
	if q.MaxConnectionsPerIP, err = props.Int("max.connections.per.ip", Unlimited, 0); err != nil {
		return nil, err
	}
	if q.MaxConnectionCreationRate, err = props.Int("max.connection.creation.rate", Unlimited, 0); err != nil {
		return nil, err
	}
	if q.IPConnectionCreationRate, err = props.Int("kafkanet.ip.connection.creation.rate", Unlimited, 0); err != nil {
		return nil, err
	}
	if q.WindowNum, err = props.Int("quota.window.num", 11, 1); err != nil {
		return nil, err
	}
	seconds, err := props.Int("quota.window.size.seconds", 1, 1)
	if err != nil {
		return nil, err
	}
	q.WindowSize = time.Duration(seconds) * time.Second
	if q.ListenerMaxConnections, err = listenerOverrides(cfg, "max.connections"); err != nil {
		return nil, err
	}
	if q.ListenerMaxConnectionCreationRate, err = listenerOverrides(cfg, "max.connection.creation.rate"); err != nil {
		return nil, err
	}
	const overridesKey = "max.connections.per.ip.overrides"
	if v, ok := props.Get(overridesKey); ok {
		entries, err := protocolmap.ParseCSVMap(overridesKey, v)
		if err != nil {
			return nil, err
		}
		var invalid []string
		for _, e := range entries {
			if !listener.ValidHost(e.Key) {
				invalid = append(invalid, e.Key)
			}
		}
		if len(invalid) > 0 {
			return nil, &protocolmap.ConfigError{Key: overridesKey, Value: v, Err: ErrInvalidConnectionQuotas,
				Rule: overridesKey + " contains invalid addresses : " + strings.Join(invalid, ",")}
		}
		q.MaxConnectionsPerIPOverrides = map[string]int{}
		for _, e := range entries {
			n, err := strconv.Atoi(e.Value)
			if err != nil || n < 0 {
				return nil, &protocolmap.ConfigError{Key: overridesKey, Value: v, Err: ErrInvalidConnectionQuotas,
					Rule: fmt.Sprintf("the limit %q of %s is not a non-negative integer", e.Value, e.Key)}
			}
			q.MaxConnectionsPerIPOverrides[e.Key] = n
		}
	}
	if q.IPConnectionCreationRateOverrides, err = ipConnectionCreationRateOverrides(props); err != nil {
		return nil, err
	}
	if q.MaxConnectionsPerPrincipal, q.ListenerMaxConnectionsPerPrincipal, err = principalLimitsFromProperties(cfg); err != nil {
		return nil, err
	}
	if q.MaxConnectionsPerIP == 0 && len(q.MaxConnectionsPerIPOverrides) == 0 {
		return nil, &protocolmap.ConfigError{Key: "max.connections.per.ip", Value: "0", Err: ErrInvalidConnectionQuotas,
			Rule: "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."}
	}
	return &q, nil
}

// KeyIPConnectionCreationRateOverrides is this library's key for per-address
// connection creation rates, which Kafka sets as the connection_creation_rate
// quota of named ip entities (kafka-configs --entity-type ips): a
// comma-separated list of address:rate, in the syntax of
// max.connections.per.ip.overrides (each entry split at its last colon, so
// ::1:5 gives ::1 five per second), for example
// 10.0.0.7:5,192.168.1.9:0,2001:db8::1:20. Addresses are IP literals (a
// bracketed IPv6 address is accepted; a host name is not), each given once;
// rates are connections per second, 0 admitting none and 2147483647 none
// limited (exempt from kafkanet.ip.connection.creation.rate).
const KeyIPConnectionCreationRateOverrides = "kafkanet.ip.connection.creation.rate.overrides"

// ipConnectionCreationRateOverrides reads
// kafkanet.ip.connection.creation.rate.overrides; nil when it is not set.
func ipConnectionCreationRateOverrides(props listener.Properties) (map[netip.Addr]int, error) {
	const key = KeyIPConnectionCreationRateOverrides
	v, ok := props.Get(key)
	if !ok {
		return nil, nil
	}
	entries, err := protocolmap.ParseCSVMap(key, v)
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Addr]int, len(entries))
	for _, e := range entries {
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(e.Key, "["), "]"))
		if err != nil {
			return nil, &protocolmap.ConfigError{Key: key, Value: v, Err: ErrInvalidConnectionQuotas,
				Rule: fmt.Sprintf("%q is not an IP address (host names are not accepted)", e.Key)}
		}
		ip = ip.Unmap().WithZone("") // a zone does not tell addresses apart, as in Java
		if _, dup := out[ip]; dup {
			return nil, &protocolmap.ConfigError{Key: key, Value: v, Err: ErrInvalidConnectionQuotas,
				Rule: fmt.Sprintf("address %s is given more than once", ip)}
		}
		n, err := strconv.Atoi(e.Value)
		if err != nil || n < 0 || n > Unlimited {
			return nil, &protocolmap.ConfigError{Key: key, Value: v, Err: ErrInvalidConnectionQuotas,
				Rule: fmt.Sprintf("the rate %q of %s is not an integer from 0 to %d", e.Value, e.Key, Unlimited)}
		}
		out[ip] = n
	}
	return out, nil
}

// listenerOverrides reads listener.name.<l>.<key> for every listener that
// sets it; listeners without it are left out (the broker-wide value
// applies).
func listenerOverrides(cfg *listener.Set, key string) (map[protocolmap.ListenerName]int, error) {
	var out map[protocolmap.ListenerName]int
	for _, l := range cfg.Listeners {
		if _, from, ok := cfg.Properties().ListenerValue(l.Name, key); !ok || from == key {
			continue
		}
		n, err := cfg.Properties().ListenerInt(l.Name, key, Unlimited, 0)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[protocolmap.ListenerName]int{}
		}
		out[l.Name] = n
	}
	return out, nil
}

// The keys of kafkanet's own connection controls: the limits of
// [PrincipalLimits], read into Quotas.MaxConnectionsPerPrincipal and
// Quotas.ListenerMaxConnectionsPerPrincipal (each key also per listener,
// with the listener.name.<listener>. prefix), and [Config.ConnectionsMaxAge]
// and [Config.ConnectionsMaxAgeJitter].
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
	// milliseconds; unset, zero or negative: none (the default).
	KeyConnectionsMaxAgeMs = "kafkanet.connections.max.age.ms"
	// KeyConnectionsMaxAgeJitter spreads each connection's maximum age by
	// up to this fraction of it either way: a number from 0 (none) to
	// below 1; 0.1 by default.
	KeyConnectionsMaxAgeJitter = "kafkanet.connections.max.age.jitter"
)

// maxAgeFromProperties reads kafkanet.connections.max.age.ms and
// kafkanet.connections.max.age.jitter into Config's values: no maximum is
// -1, no jitter -1.
func maxAgeFromProperties(props listener.Properties) (time.Duration, float64, error) {
	ms, err := props.Int(KeyConnectionsMaxAgeMs, -1, -1<<62)
	if err != nil {
		return 0, 0, err
	}
	age := time.Duration(-1)
	if ms > 0 {
		age = time.Duration(min(ms, int(math.MaxInt64/time.Millisecond))) * time.Millisecond
	}
	jitter := DefaultConnectionsMaxAgeJitter
	if v, ok := props.Get(KeyConnectionsMaxAgeJitter); ok {
		j, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(j >= 0 && j < 1) {
			return 0, 0, &protocolmap.ConfigError{Key: KeyConnectionsMaxAgeJitter, Value: v, Err: listener.ErrInvalidValue,
				Rule: "Expected a number from 0 to less than 1"}
		}
		jitter = j
		if j == 0 {
			jitter = -1 // set to 0 on purpose: none
		}
	}
	return age, jitter, nil
}

// principalLimitsFromProperties reads kafkanet.max.connections.per.principal
// and its overrides, broker-wide and per listener (listener.name.<l>.
// prefixed: a listener that sets neither has no entry).
func principalLimitsFromProperties(cfg *listener.Set) (PrincipalLimits, map[protocolmap.ListenerName]PrincipalLimits, error) {
	props := cfg.Properties()
	read := func(maxKey, overridesKey string, maxSet bool) (PrincipalLimits, error) {
		pl := PrincipalLimits{Max: Unlimited}
		var err error
		if maxSet {
			if pl.Max, err = props.Int(maxKey, Unlimited, 0); err != nil {
				return pl, err
			}
		}
		if v, ok := props.Get(overridesKey); ok {
			if pl.Overrides, err = parsePrincipalOverrides(overridesKey, v); err != nil {
				return pl, err
			}
		}
		if pl.Max == 0 && len(pl.Overrides) == 0 {
			return pl, &protocolmap.ConfigError{Key: maxKey, Value: "0", Err: ErrInvalidConnectionQuotas,
				Rule: maxKey + " can be set to zero only if " + overridesKey + " is set"}
		}
		return pl, nil
	}
	all, err := read(KeyMaxConnectionsPerPrincipal, KeyMaxConnectionsPerPrincipalOverrides, true)
	if err != nil {
		return PrincipalLimits{}, nil, err
	}
	var byListener map[protocolmap.ListenerName]PrincipalLimits
	for _, l := range cfg.Listeners {
		prefix := l.Name.ConfigPrefix()
		_, maxSet := props.Get(prefix + KeyMaxConnectionsPerPrincipal)
		_, overridesSet := props.Get(prefix + KeyMaxConnectionsPerPrincipalOverrides)
		if !maxSet && !overridesSet {
			continue
		}
		pl, err := read(prefix+KeyMaxConnectionsPerPrincipal, prefix+KeyMaxConnectionsPerPrincipalOverrides, maxSet)
		if err != nil {
			return PrincipalLimits{}, nil, err
		}
		if byListener == nil {
			byListener = map[protocolmap.ListenerName]PrincipalLimits{}
		}
		byListener[l.Name] = pl
	}
	return all, byListener, nil
}

// parsePrincipalOverrides parses the value v of key, a
// kafkanet.max.connections.per.principal.overrides: principal:count
// entries separated by semicolons (blank ones skipped), each principal
// Type:name as in super.users, its count after the entry's last colon, an
// integer from 0 to 2147483647. Each principal may be named once.
func parsePrincipalOverrides(key, v string) (map[connregistry.Principal]int, error) {
	bad := func(format string, args ...any) error {
		return &protocolmap.ConfigError{Key: key, Value: v, Err: ErrInvalidConnectionQuotas, Rule: fmt.Sprintf(format, args...)}
	}
	var out map[connregistry.Principal]int
	for entry := range strings.SplitSeq(v, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.LastIndexByte(entry, ':')
		if i < 0 {
			return nil, bad("the entry %q is not principal:count, such as User:alice:2", entry)
		}
		name, count := strings.TrimSpace(entry[:i]), strings.TrimSpace(entry[i+1:])
		typ, pname, ok := strings.Cut(name, ":")
		if !ok || typ == "" || pname == "" {
			return nil, bad("%q is not a principal: Type:name, such as User:alice", name)
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 || n > Unlimited {
			return nil, bad("the limit %q of %s is not an integer from 0 to %d", count, name, Unlimited)
		}
		p := connregistry.Principal{Type: typ, Name: pname}
		if _, dup := out[p]; dup {
			return nil, bad("principal %s is given more than once", p)
		}
		if out == nil {
			out = map[connregistry.Principal]int{}
		}
		out[p] = n
	}
	return out, nil
}
