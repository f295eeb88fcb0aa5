package connregistry

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// State is where a connection is in its life. A connection starts
// Authenticating (on listeners without authentication it moves to Ready at
// once), becomes Ready once authenticated, and Closing when the server has
// decided to close it.
type State int8

// The states.
const (
	Authenticating State = iota
	Ready
	Closing
)

// String returns "authenticating", "ready" or "closing".
func (s State) String() string {
	switch s {
	case Authenticating:
		return "authenticating"
	case Ready:
		return "ready"
	case Closing:
		return "closing"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// CloseReason says why a connection closed.
type CloseReason string

// The reasons a connection closes.
const (
	// ClientClosed: the client went away, however it did (it closed its
	// end, or reset the connection) and whoever noticed first: a host that
	// closes a connection whose client had already sent its EOF closes it
	// for the client.
	ClientClosed CloseReason = "client closed"
	// Idle: no request or response for connections.max.idle.ms.
	Idle CloseReason = "idle"
	// Quota: the broker-wide connection count was over max.connections
	// (the inter-broker listener, which the limit does not hold back,
	// went past it), and the connection, its processor's least recently
	// active, was closed to make room, as Kafka's processors do.
	Quota CloseReason = "quota"
	// AuthenticationFailed: the TLS handshake or the SASL exchange failed.
	AuthenticationFailed CloseReason = "authentication failed"
	// SessionExpired: a request came after the SASL session expired
	// (connections.max.reauth.ms, KIP-368) without re-authentication.
	SessionExpired CloseReason = "session expired"
	// ServerShutdown: the server shut down.
	ServerShutdown CloseReason = "server shutdown"
	// ClosedByOperator: an operator closed it (Registry.Close,
	// CloseClientConnections).
	ClosedByOperator CloseReason = "closed by an operator"
	// ProtocolError: the client sent bytes that break Kafka's protocol (a
	// frame too large, a request that does not parse, an API or version
	// the listener does not serve).
	ProtocolError CloseReason = "protocol error"
	// HandlerClosed: the host closed it instead of answering a request,
	// its client still there.
	HandlerClosed CloseReason = "closed by the request handler"
	// StalledRequest: the connection held request memory
	// (queued.max.request.bytes) for a frame it had begun and sent nothing
	// more of it for the server's stall timeout.
	StalledRequest CloseReason = "request stalled"
	// SlowRequest: the connection's request arrived so slowly that it was
	// idle for connections.max.idle.ms: its bytes came slower than the
	// server's floor (socketserver's Config.RequestMinByteRate), so they
	// did not count as activity; or a host's deadline for a streamed body
	// passed before the body had arrived.
	SlowRequest CloseReason = "request too slow"
	// ProxyRefused: on a listener that requires the PROXY protocol, the
	// connection came from outside the trusted networks, or did not begin
	// with a valid PROXY header within the handshake timeout. It was
	// closed before anything else was read, and never served.
	ProxyRefused CloseReason = "PROXY header refused"
	// ListenerRemoved: the connection's listener was removed while the
	// server ran (socketserver's Server.RemoveListener), which drains its
	// connections as a shutdown does.
	ListenerRemoved CloseReason = "listener removed"
	// ClosePrincipalLimit: the connection's principal already had the most
	// connections its limit allows (socketserver's
	// Quotas.MaxConnectionsPerPrincipal and its overrides), so the
	// connection was closed as soon as its principal was known, before any
	// request was read, as Kafka closes a connection over
	// max.connections.per.ip: the client retries after its reconnect
	// backoff. Its value is a token, as all reasons will be.
	ClosePrincipalLimit CloseReason = "principal-limit"
	// CloseMaxAge: the connection outlived its maximum age (socketserver's
	// Config.ConnectionsMaxAge) and was closed between requests: every
	// request it had read was answered first, and no later one was read.
	CloseMaxAge CloseReason = "max-age"
)

// Principal is an authenticated identity, as Kafka's KafkaPrincipal: a type
// (User) and a name: a connection's (Info.Principal), and what a
// socketserver.PrincipalBuilder builds.
type Principal struct {
	Type string
	Name string
}

// Anonymous is the principal of an unauthenticated connection, Kafka's
// User:ANONYMOUS.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

// String returns Type:Name.
func (p Principal) String() string { return p.Type + ":" + p.Name }

// Info describes a connection: who is connected, from where, on which
// listener and how. The server writes it in one place, the connection's
// [Entry] (see [Entry.Update]); a request carries the copy it found when it
// was read, shared by the requests read until the next change (see
// [Entry.Request]), and the hooks and listings read it from there.
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
	// ClosedAt and CloseReason are set on closed connections only.
	ClosedAt    time.Time
	CloseReason CloseReason
}

// DefaultHistorySize is how many closed connections a registry remembers
// unless told otherwise.
const DefaultHistorySize = 1000

// Registry holds a server's open connections and a bounded history of
// recently closed ones. It is safe for concurrent use: the server adds,
// updates and removes entries while any goroutine takes snapshots.
type Registry struct {
	mu      sync.RWMutex
	open    map[*Entry]struct{}
	history []Conn // ring of closed connections
	next    int    // history slot to write next
	full    bool
}

// New returns a registry remembering up to historySize closed connections
// (0 means DefaultHistorySize; negative keeps none).
func New(historySize int) *Registry {
	if historySize == 0 {
		historySize = DefaultHistorySize
	}
	return &Registry{open: map[*Entry]struct{}{}, history: make([]Conn, max(historySize, 0))}
}

// Entry is the server's handle on one open connection's record. Its
// counters are updated without locks on the per-request path.
type Entry struct {
	reg    *Registry
	closer func(CloseReason)
	// connectedAt (unix nanoseconds, 8 bytes where a time.Time takes 24:
	// the entry stays in its size class) and id order snapshots; they
	// never change.
	connectedAt int64
	id          string

	mu            sync.Mutex
	c             Conn      // fields other than the atomics below
	throttledFrom time.Time // when the current throttle began; zero while none
	// shared is the copy of c.Info that Request returns, made by the
	// first request after a change (Update) or a rest (Idle) and shared by
	// the requests that follow; never changed once made.
	shared *Info

	bytesIn, bytesOut, requests atomic.Int64
	lastActivity                atomic.Int64 // unix nanoseconds
	removed                     atomic.Bool
}

// Add registers an open connection. closer, which may be nil, closes it
// when an operator asks (see Registry.Close); it must not block.
func (r *Registry) Add(c Conn, closer func(CloseReason)) *Entry {
	e := &Entry{reg: r, closer: closer, c: c, connectedAt: c.ConnectedAt.UnixNano(), id: c.ID}
	e.lastActivity.Store(c.ConnectedAt.UnixNano())
	r.mu.Lock()
	r.open[e] = struct{}{}
	r.mu.Unlock()
	return e
}

// Info returns the connection's description as it is now, read under the
// entry's lock.
func (e *Entry) Info() Info {
	e.mu.Lock()
	info := e.c.Info
	e.mu.Unlock()
	return info
}

// Update changes the connection's description (principal, software, TLS,
// SASL, ...) under the entry's lock: the one place it is written. f must
// be quick.
func (e *Entry) Update(f func(*Info)) {
	e.mu.Lock()
	f(&e.c.Info)
	e.shared = nil // the requests read so far keep the description they found
	e.mu.Unlock()
}

// SetState moves the connection to state s (Ready once it has
// authenticated).
func (e *Entry) SetState(s State) {
	e.mu.Lock()
	e.c.State = s
	e.mu.Unlock()
}

// Request records a complete request of size bytes, at t, from clientID,
// and returns the connection's description as the request found it (what
// Info returns), read under the same lock, and the entry's copy of
// clientID, which does not share the memory of the caller's (a request
// frame's) and is copied only when the connection's client id changes.
// The requests read between two changes of the description (Update) share
// one copy of it: read it, never change it. Idle lets go of it.
func (e *Entry) Request(t time.Time, size int, clientID string) (*Info, string) {
	e.requests.Add(1)
	e.bytesIn.Add(int64(size))
	e.lastActivity.Store(t.UnixNano())
	e.mu.Lock()
	if e.c.ClientID != clientID {
		e.c.ClientID = strings.Clone(clientID) // it may share the memory of a request frame
	}
	info := e.shared
	if info == nil {
		info = new(Info)
		*info = e.c.Info
		e.shared = info
	}
	clientID = e.c.ClientID
	e.mu.Unlock()
	return info, clientID
}

// Idle records that the connection waits, idle, for its next request: the
// entry lets go of the copy of the description that Request shares, so
// that an idle connection holds only its entry (requests that have it
// keep it). The next request makes a new copy.
func (e *Entry) Idle() {
	e.mu.Lock()
	e.shared = nil
	e.mu.Unlock()
}

// Response records a response of size bytes written at t.
func (e *Entry) Response(t time.Time, size int) {
	e.bytesOut.Add(int64(size))
	e.lastActivity.Store(t.UnixNano())
}

// Throttle records that the server mutes the connection from from until
// until: it reads nothing from it meanwhile (see [Conn.ThrottledUntil]).
// A throttle still running ends at from.
func (e *Entry) Throttle(from, until time.Time) {
	e.mu.Lock()
	if e.removed.Load() { // closed: Remove has ended its throttles; its record shows none
		e.mu.Unlock()
		return
	}
	e.endThrottleLocked(from)
	e.c.ThrottledUntil, e.throttledFrom = until, from
	e.mu.Unlock()
}

// EndThrottle records that the connection's throttle ended at at: the
// server reads from it again. The time it was muted, from the throttle's
// start to at (or to its end, if earlier), adds to [Conn.ThrottleTime].
func (e *Entry) EndThrottle(at time.Time) {
	e.mu.Lock()
	e.endThrottleLocked(at)
	e.mu.Unlock()
}

func (e *Entry) endThrottleLocked(at time.Time) {
	if e.c.ThrottledUntil.IsZero() {
		return
	}
	e.c.ThrottleTime += mutedBetween(e.throttledFrom, e.c.ThrottledUntil, at)
	e.c.ThrottledUntil, e.throttledFrom = time.Time{}, time.Time{}
}

// mutedBetween is how long a throttle from from until until had lasted at
// at.
func mutedBetween(from, until, at time.Time) time.Duration {
	if at.After(until) {
		at = until
	}
	return max(at.Sub(from), 0)
}

// Remove takes the connection out of the open set and into the history,
// with the time and reason it closed. Only the first call of Remove and
// Forget counts. A throttle still running ends at at.
func (e *Entry) Remove(at time.Time, reason CloseReason) {
	if e.removed.Swap(true) {
		return
	}
	e.EndThrottle(at)
	c := e.snapshot()
	c.ClosedAt, c.CloseReason, c.State = at, reason, Closing
	r := e.reg
	r.mu.Lock()
	delete(r.open, e)
	if len(r.history) > 0 {
		r.history[r.next] = c
		r.next = (r.next + 1) % len(r.history)
		r.full = r.full || r.next == 0
	}
	r.mu.Unlock()
}

// Forget takes the connection out of the open set without keeping it in
// the history: a server forgets the connections that were never a
// client's (socketserver forgets probes: health checks and port scans
// that close before a request), so that they do not push real closes out
// of the history. After Remove, or a second call, it does nothing.
func (e *Entry) Forget() {
	if e.removed.Swap(true) {
		return
	}
	r := e.reg
	r.mu.Lock()
	delete(r.open, e)
	r.mu.Unlock()
}

func (e *Entry) snapshot() Conn {
	e.mu.Lock()
	c := e.c
	from := e.throttledFrom
	e.mu.Unlock()
	if !c.ThrottledUntil.IsZero() {
		c.ThrottleTime += mutedBetween(from, c.ThrottledUntil, time.Now())
	}
	c.BytesIn, c.BytesOut, c.Requests = e.bytesIn.Load(), e.bytesOut.Load(), e.requests.Load()
	c.LastActivity = time.Unix(0, e.lastActivity.Load())
	return c
}

// Snapshot returns the open connections that match f, ordered by
// connection time. It copies the set of entries under the registry's read
// lock, then reads each entry under its own lock, so the server is never
// stalled for the whole listing; a connection that opens or closes meanwhile
// may be missed or included, but no record is torn.
func (r *Registry) Snapshot(f Filter) []Conn {
	r.mu.RLock()
	entries := make([]*Entry, 0, len(r.open))
	for e := range r.open {
		entries = append(entries, e)
	}
	r.mu.RUnlock()
	// Sort the entries, not the records: a pointer swap is cheap, a record
	// is hundreds of bytes.
	slices.SortFunc(entries, func(a, b *Entry) int {
		if c := cmp.Compare(a.connectedAt, b.connectedAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]Conn, 0, len(entries))
	for _, e := range entries {
		if c := e.snapshot(); f.Match(c) {
			out = append(out, c)
		}
	}
	return out
}

// Closed returns the remembered closed connections that match f, oldest
// first.
func (r *Registry) Closed(f Filter) []Conn {
	r.mu.RLock()
	var all []Conn
	if r.full {
		all = append(all, r.history[r.next:]...)
	}
	all = append(all, r.history[:r.next]...)
	r.mu.RUnlock()
	return slices.DeleteFunc(all, func(c Conn) bool { return !f.Match(c) })
}

// Len returns the number of open connections.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.open)
}

// Close closes the open connections that match f, giving reason (the
// incident-response "kill" that Redis CLIENT KILL USER and RabbitMQ
// close_all_user_connections offer), and returns what it closed. A filter
// that matches everything closes everything.
func (r *Registry) Close(f Filter, reason CloseReason) []Conn {
	r.mu.RLock()
	var victims []*Entry
	for e := range r.open {
		if _, ok := f.ids[e.id]; f.ids != nil && !ok {
			continue // by its id alone: closing one connection reads no other
		}
		victims = append(victims, e)
	}
	r.mu.RUnlock()
	var closed []Conn
	for _, e := range victims {
		c := e.snapshot()
		if !f.Match(c) || e.closer == nil {
			continue
		}
		e.closer(reason)
		closed = append(closed, c)
	}
	return closed
}
