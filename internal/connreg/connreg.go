// Package connreg is the connection registry's implementation: the
// bookkeeping socketserver does for every connection (Add, and Entry's
// methods) and the read side that connregistry.Registry describes. It is
// internal so that only this module's packages can write to a registry:
// hosts see a server's registry through the connregistry.Registry
// interface, whose methods only read (and close connections through the
// closers the server gave), and build one with connections in it for a
// test through connregistrytest.
package connreg

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/topn"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// Registry is a connregistry.Registry.
var _ connregistry.Registry = (*Registry)(nil)

// Registry holds a server's open connections and a bounded history of
// recently closed ones; it implements connregistry.Registry, whose doc
// describes what its methods promise. It is safe for concurrent use: the
// server adds, updates and removes entries while any goroutine takes
// snapshots. Its methods are the read side; the writes are Add's and
// Entry's.
type Registry struct {
	mu      sync.RWMutex
	open    []*Entry            // in no order; an entry knows its slot
	history []connregistry.Conn // ring of closed connections
	next    int                 // history slot to write next
	full    bool

	software software
}

// software interns the client software names and versions connections
// report (SetClientSoftware): the thousands of connections of one client
// library share one copy of its name and version. It holds at most
// maxSoftware pairs of strings of at most maxSoftwareLen bytes, whatever
// clients send: a longer pair is the connection's own copy, freed with
// it. When it is full it starts again empty: the pairs interned before
// stay with the connections that hold them, so clients that send many
// names (before authenticating, as ApiVersions comes first) cost the
// others at most a copy each, and never keep the table.
type software struct {
	mu    sync.Mutex
	pairs map[[2]string]*[2]string // a pair, to its interned copy
}

// The bounds of the interned software pairs: 256 pairs of two strings of
// 64 bytes, about 52 KiB with the map's own memory.
const (
	maxSoftware    = 256
	maxSoftwareLen = 64
)

// intern returns the interned pair of name and version, made if it is
// new; nil for an empty pair.
func (sw *software) intern(name, version []byte) *[2]string {
	if len(name) == 0 && len(version) == 0 {
		return nil
	}
	if len(name) > maxSoftwareLen || len(version) > maxSoftwareLen {
		return &[2]string{string(name), string(version)}
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if p, ok := sw.pairs[[2]string{string(name), string(version)}]; ok { // no conversion allocates
		return p
	}
	if sw.pairs == nil || len(sw.pairs) >= maxSoftware {
		sw.pairs = make(map[[2]string]*[2]string)
	}
	p := &[2]string{string(name), string(version)}
	sw.pairs[*p] = p
	return p
}

// New returns a registry remembering up to historySize closed connections
// (0 means connregistry.DefaultHistorySize; negative keeps none).
func New(historySize int) *Registry {
	if historySize == 0 {
		historySize = connregistry.DefaultHistorySize
	}
	return &Registry{history: make([]connregistry.Conn, max(historySize, 0))}
}

// Entry is the server's handle on one open connection's record. It holds
// the connection's description and what the registry counts, not a whole
// connregistry.Conn: a Conn's fields for closed connections, and its
// counters' second copies, would be paid by every open connection. Of the
// description it holds inline what every connection has; what only some
// have (TLS, SASL, the PROXY protocol, a throttle's bookkeeping) lives in
// ext, made when first needed, and its client's software is a pointer to
// the registry's shared copy: a plaintext connection's entry is a 256-byte
// object where a whole Info inline made it 480 (TestGuardEntrySize).
type Entry struct {
	reg    *Registry
	closer Closer
	// connectedAt (unix nanoseconds) and id order snapshots; they never
	// change.
	connectedAt int64
	id          string
	slot        int32 // e's index in reg.open while it is there; guarded by reg.mu

	mu               sync.Mutex
	securityProtocol protocolmap.SecurityProtocol
	plane            protocolmap.Plane
	state            connregistry.State
	removed          atomic.Bool
	listener         protocolmap.ListenerName
	principal        connregistry.Principal
	clientAddr       netip.AddrPort
	software         *[2]string // the client's name and version, interned (see software); nil while unknown
	ext              *infoExt   // nil while every field of it is zero
	clientID         string     // of the last request
	// shared is the copy of the description that Shared returns, made by
	// its first call after a change (a setter) or a rest (Idle) and shared
	// by the requests that follow; never changed once made.
	shared *connregistry.Info

	bytesIn, bytesOut, requests int64
	// lastActivity (unix nanoseconds) is the last request's or response's
	// time, and the time the rates' sums were last decayed to: the sums
	// are of every request (1), request byte and response byte, each
	// weighted by e^(-age/connregistry.RateWindow) as of lastActivity, so
	// a rate is its sum, decayed to now, over the window; an idle
	// connection's costs nothing until a listing reads it.
	lastActivity                        int64
	requestSum, bytesInSum, bytesOutSum float64
}

// infoExt is the part of a connection's description that only some
// connections have.
type infoExt struct {
	tlsVersion, cipherSuite        uint16
	serverName                     string
	proxyAddr                      netip.AddrPort
	proxyTLVs                      []connregistry.ProxyTLV
	saslMechanism                  string
	authenticatedAt, sessionExpiry time.Time
	throttle                       *throttle // made at the first throttle
}

// throttle is a connection's throttles: the current one, and the time
// muted by all of them.
type throttle struct {
	until time.Time // when the current throttle ends; zero while none
	from  int64     // when it began, unix nanoseconds
	total time.Duration
}

// Closer closes a registered connection when an operator asks (see
// Registry.Close); it must not block.
type Closer interface {
	CloseFor(connregistry.CloseReason)
}

// CloserFunc is a function as a Closer.
type CloserFunc func(connregistry.CloseReason)

// CloseFor calls f(reason).
func (f CloserFunc) CloseFor(reason connregistry.CloseReason) { f(reason) }

// infoLocked returns the connection's description; e.mu is held.
func (e *Entry) infoLocked() connregistry.Info {
	info := connregistry.Info{ID: e.id, Listener: e.listener, SecurityProtocol: e.securityProtocol, Plane: e.plane,
		Principal: e.principal, ClientAddr: e.clientAddr, ConnectedAt: e.ConnectedAt()}
	if sw := e.software; sw != nil {
		info.ClientSoftwareName, info.ClientSoftwareVersion = sw[0], sw[1]
	}
	if x := e.ext; x != nil {
		info.TLSVersion, info.CipherSuite, info.ServerName = x.tlsVersion, x.cipherSuite, x.serverName
		info.ProxyAddr, info.ProxyTLVs = x.proxyAddr, x.proxyTLVs
		info.SASLMechanism, info.AuthenticatedAt, info.SessionExpiry = x.saslMechanism, x.authenticatedAt, x.sessionExpiry
	}
	return info
}

// setInfo stores info as the connection's description, before e is
// shared.
func (e *Entry) setInfo(info *connregistry.Info) {
	e.listener, e.securityProtocol, e.plane = info.Listener, info.SecurityProtocol, info.Plane
	e.principal, e.clientAddr = info.Principal, info.ClientAddr
	if info.ClientSoftwareName != "" || info.ClientSoftwareVersion != "" {
		e.software = &[2]string{info.ClientSoftwareName, info.ClientSoftwareVersion}
	}
	if info.TLSVersion != 0 || info.CipherSuite != 0 || info.ServerName != "" || info.ProxyAddr != (netip.AddrPort{}) || info.ProxyTLVs != nil ||
		info.SASLMechanism != "" || !info.AuthenticatedAt.IsZero() || !info.SessionExpiry.IsZero() {
		e.ext = &infoExt{tlsVersion: info.TLSVersion, cipherSuite: info.CipherSuite, serverName: info.ServerName,
			proxyAddr: info.ProxyAddr, proxyTLVs: info.ProxyTLVs,
			saslMechanism: info.SASLMechanism, authenticatedAt: info.AuthenticatedAt, sessionExpiry: info.SessionExpiry}
	}
}

// window is connregistry.RateWindow in seconds and in nanoseconds.
const (
	windowSeconds = float64(connregistry.RateWindow / time.Second)
	windowNanos   = float64(connregistry.RateWindow)
)

// Add registers an open connection in r. closer, which may be nil, closes
// it when an operator asks (see Registry.Close); it must not block. The
// counters start from c's (BytesIn, BytesOut, Requests, the rates, and
// LastActivity, or ConnectedAt when it is zero, the time of the rates): a
// server's connection starts from zero, a test's may start anywhere.
//
// Add is a function, not a method, so that the registry a host gets
// (connregistry.Registry) has no method that writes, even to reflection.
func Add(r *Registry, c connregistry.Conn, closer Closer) *Entry {
	e := &Entry{reg: r, closer: closer, connectedAt: unixNanos(c.ConnectedAt), id: c.ID,
		clientID: c.ClientID, state: c.State,
		bytesIn: c.BytesIn, bytesOut: c.BytesOut, requests: c.Requests,
		requestSum: c.RequestRate * windowSeconds, bytesInSum: c.BytesInRate * windowSeconds, bytesOutSum: c.BytesOutRate * windowSeconds,
	}
	e.setInfo(&c.Info)
	if !c.ThrottledUntil.IsZero() || c.ThrottleTime != 0 {
		t := &throttle{total: c.ThrottleTime}
		if !c.ThrottledUntil.IsZero() {
			t.until, t.from = c.ThrottledUntil, time.Now().UnixNano()
		}
		e.extLocked().throttle = t
	}
	last := c.LastActivity
	if last.IsZero() {
		last = c.ConnectedAt
	}
	e.lastActivity = last.UnixNano()
	r.mu.Lock()
	e.slot = int32(len(r.open))
	r.open = append(r.open, e)
	r.mu.Unlock()
	return e
}

// dropLocked takes e out of r.open, moving the last entry into its slot;
// r.mu is held.
func (r *Registry) dropLocked(e *Entry) {
	last := len(r.open) - 1
	moved := r.open[last]
	r.open[e.slot], moved.slot = moved, e.slot
	r.open[last] = nil
	r.open = r.open[:last]
	if cap(r.open) > 64 && len(r.open) < cap(r.open)/4 { // after a storm of connections, do not keep its slots
		r.open = slices.Clone(r.open)
	}
}

// decay returns what the rates' sums, decayed to lastActivity, keep at
// now: e^(-(now-lastActivity)/window), 1 when now is not later.
//
// A busy connection decays its sums twice a request, microseconds apart:
// for an exponent under shortDecay (6 ms of a minute's window) the series
// to its fourth term gives math.Exp's value within an ulp, at a fraction
// of its cost.
func decay(lastActivity, now int64) float64 {
	if now <= lastActivity {
		return 1
	}
	x := float64(now-lastActivity) / windowNanos
	if x < shortDecay {
		return 1 - x*(1-x*(0.5-x/6)) // the rest, under x⁴/24, is below the last bit
	}
	return math.Exp(-x)
}

// shortDecay bounds the exponents decay takes from its series.
const shortDecay = 1e-4

// activeLocked moves lastActivity to now, decaying the rates' sums to it;
// a time earlier than lastActivity (a request read before a response
// written on another goroutine was recorded) counts at lastActivity.
func (e *Entry) activeLocked(now int64) {
	if now <= e.lastActivity {
		return
	}
	if e.requestSum != 0 || e.bytesInSum != 0 || e.bytesOutSum != 0 {
		f := decay(e.lastActivity, now)
		e.requestSum, e.bytesInSum, e.bytesOutSum = e.requestSum*f, e.bytesInSum*f, e.bytesOutSum*f
	}
	e.lastActivity = now
}

// Info returns the connection's description as it is now, read under the
// entry's lock.
func (e *Entry) Info() connregistry.Info {
	e.mu.Lock()
	info := e.infoLocked()
	e.mu.Unlock()
	return info
}

// The setters below change the connection's description (its software,
// TLS, SASL, principal) under the entry's lock: the only places it is
// written after Add. The requests read so far keep the description they
// found; the next one shares a new copy. Its id, listener, address and
// connection time never change.

// SetClientSoftware records the client software the connection's
// ApiVersions request named (KIP-511), in the registry's shared copies of
// the name and version (see software): a connection of a known client
// keeps no strings of its own. The same software as before changes
// nothing and allocates nothing: the requests that follow keep sharing
// the description's copy (Shared).
func (e *Entry) SetClientSoftware(name, version []byte) {
	e.mu.Lock()
	sw := e.software
	e.mu.Unlock()
	if sw == nil && len(name) == 0 && len(version) == 0 || sw != nil && sw[0] == string(name) && sw[1] == string(version) {
		return
	}
	sw = e.reg.software.intern(name, version)
	e.mu.Lock()
	e.software = sw
	e.shared = nil
	e.mu.Unlock()
}

// SetTLS records the connection's negotiated TLS version and cipher suite
// and the server name its client asked for.
func (e *Entry) SetTLS(version, cipherSuite uint16, serverName string) {
	e.mu.Lock()
	x := e.extLocked()
	x.tlsVersion, x.cipherSuite, x.serverName = version, cipherSuite, serverName
	e.shared = nil
	e.mu.Unlock()
}

// SetSASLMechanism records the SASL mechanism the client chose.
func (e *Entry) SetSASLMechanism(mechanism string) {
	e.mu.Lock()
	e.extLocked().saslMechanism = mechanism
	e.shared = nil
	e.mu.Unlock()
}

// SetAuthenticated records an authentication: its SASL mechanism, when it
// happened and when its session expires (zero: never).
func (e *Entry) SetAuthenticated(mechanism string, at, sessionExpiry time.Time) {
	e.mu.Lock()
	x := e.extLocked()
	x.saslMechanism, x.authenticatedAt, x.sessionExpiry = mechanism, at, sessionExpiry
	e.shared = nil
	e.mu.Unlock()
}

// SetPrincipal records the connection's authenticated principal.
func (e *Entry) SetPrincipal(p connregistry.Principal) {
	e.mu.Lock()
	e.principal = p
	e.shared = nil
	e.mu.Unlock()
}

// throttleLocked returns the connection's throttles, nil if it was never
// throttled; e.mu is held.
func (e *Entry) throttleLocked() *throttle {
	if e.ext == nil {
		return nil
	}
	return e.ext.throttle
}

// extLocked returns the description's optional part, making it; e.mu is
// held.
func (e *Entry) extLocked() *infoExt {
	if e.ext == nil {
		e.ext = new(infoExt)
	}
	return e.ext
}

// SetState moves the connection to state s (StateReady once it has
// authenticated).
func (e *Entry) SetState(s connregistry.State) {
	e.mu.Lock()
	e.state = s
	e.mu.Unlock()
}

// Request records a complete request of size bytes, at t, from clientID
// (in the counters and the rates, from the time the caller took), and
// returns the entry's copy of clientID, which does not share the memory
// of the caller's (a request frame's) and is copied only when the
// connection's client id changes, and when the connection's session
// expires (zero: never), read under the same lock.
func (e *Entry) Request(t time.Time, size int, clientID string) (string, time.Time) {
	e.mu.Lock()
	e.activeLocked(t.UnixNano())
	e.requests++
	e.bytesIn += int64(size)
	e.requestSum++
	e.bytesInSum += float64(size)
	if e.clientID != clientID {
		e.clientID = strings.Clone(clientID) // it may share the memory of a request frame
	}
	clientID = e.clientID
	var expiry time.Time
	if e.ext != nil {
		expiry = e.ext.sessionExpiry
	}
	e.mu.Unlock()
	return clientID, expiry
}

// Shared returns the connection's description as it is now (what Info
// returns) in a copy that the callers between two changes of the
// description (the setters) share: read it, never change it. It is made
// at the first call after a change or a rest (Idle), so that a
// connection whose requests the server answers itself makes none.
func (e *Entry) Shared() *connregistry.Info {
	e.mu.Lock()
	info := e.shared
	if info == nil {
		info = new(connregistry.Info)
		*info = e.infoLocked()
		e.shared = info
	}
	e.mu.Unlock()
	return info
}

// ConnectedAt returns when the connection was made; it never changes.
func (e *Entry) ConnectedAt() time.Time {
	if e.connectedAt == 0 {
		return time.Time{}
	}
	return time.Unix(0, e.connectedAt)
}

// unixNanos returns t in nanoseconds since 1970, 0 for the zero time.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Idle records that the connection waits, idle, for its next request: the
// entry lets go of the copy of the description that Shared shares, so
// that an idle connection holds only its entry (requests that have it
// keep it). The next call of Shared makes a new copy.
func (e *Entry) Idle() {
	e.mu.Lock()
	e.shared = nil
	e.mu.Unlock()
}

// Response records a response of size bytes written at t (in the
// counters and the rates, from the time the caller took).
func (e *Entry) Response(t time.Time, size int) {
	e.mu.Lock()
	e.activeLocked(t.UnixNano())
	e.bytesOut += int64(size)
	e.bytesOutSum += float64(size)
	e.mu.Unlock()
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
	x := e.extLocked()
	if x.throttle == nil {
		x.throttle = new(throttle)
	}
	x.throttle.until, x.throttle.from = until, from.UnixNano()
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
	t := e.throttleLocked()
	if t == nil || t.until.IsZero() {
		return
	}
	t.total += mutedBetween(t.from, t.until, at)
	t.until, t.from = time.Time{}, 0
}

// mutedBetween is how long a throttle from from (unix nanoseconds) until
// until had lasted at at.
func mutedBetween(from int64, until, at time.Time) time.Duration {
	if at.After(until) {
		at = until
	}
	return max(time.Duration(at.UnixNano()-from), 0)
}

// Remove takes the connection out of the open set and into the history,
// with the time and reason it closed. Only the first call of Remove and
// Forget counts. A throttle still running ends at at.
func (e *Entry) Remove(at time.Time, reason connregistry.CloseReason) {
	if e.removed.Swap(true) {
		return
	}
	e.EndThrottle(at)
	c := e.snapshot(at)
	c.ClosedAt, c.CloseReason, c.State = at, reason, connregistry.StateClosing
	r := e.reg
	r.mu.Lock()
	r.dropLocked(e)
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
	r.dropLocked(e)
	r.mu.Unlock()
}

// snapshot returns the connection's record as of now: its throttle time
// up to now, its rates decayed to now.
func (e *Entry) snapshot(now time.Time) connregistry.Conn {
	e.mu.Lock()
	c := connregistry.Conn{Info: e.infoLocked(), ClientID: e.clientID, State: e.state,
		BytesIn: e.bytesIn, BytesOut: e.bytesOut, Requests: e.requests,
		RequestRate: e.requestSum, BytesInRate: e.bytesInSum, BytesOutRate: e.bytesOutSum}
	var from int64
	if t := e.throttleLocked(); t != nil {
		c.ThrottledUntil, c.ThrottleTime, from = t.until, t.total, t.from
	}
	last := e.lastActivity
	e.mu.Unlock()
	if !c.ThrottledUntil.IsZero() {
		c.ThrottleTime += mutedBetween(from, c.ThrottledUntil, now)
	}
	c.LastActivity = time.Unix(0, last)
	if f := decay(last, now.UnixNano()) / windowSeconds; c.RequestRate != 0 || c.BytesInRate != 0 || c.BytesOutRate != 0 {
		c.RequestRate, c.BytesInRate, c.BytesOutRate = c.RequestRate*f, c.BytesInRate*f, c.BytesOutRate*f
	}
	return c
}

// entries returns the open entries, copied under the registry's read
// lock.
func (r *Registry) entries() []*Entry {
	r.mu.RLock()
	entries := slices.Clone(r.open)
	r.mu.RUnlock()
	return entries
}

// Snapshot returns the open connections that match f, ordered by
// connection time. It copies the set of entries under the registry's read
// lock, then reads each entry under its own lock, so the server is never
// stalled for the whole listing; a connection that opens or closes meanwhile
// may be missed or included, but no record is torn.
func (r *Registry) Snapshot(f connregistry.Filter) []connregistry.Conn {
	match, err := f.Matcher()
	if err != nil {
		return nil // a filter that does not validate matches nothing
	}
	entries := r.entries()
	// Sort the entries, not the records: a pointer swap is cheap, a record
	// is hundreds of bytes.
	slices.SortFunc(entries, func(a, b *Entry) int {
		if c := cmp.Compare(a.connectedAt, b.connectedAt); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	out := make([]connregistry.Conn, 0, len(entries))
	now := time.Now()
	for _, e := range entries {
		if c := e.snapshot(now); match(c) {
			out = append(out, c)
		}
	}
	return out
}

// Top returns the first n open connections that match f in by's order,
// n <= 0 meaning all of them. It reads each entry as Snapshot does, one at
// a time into the same record, and keeps the first n in a heap bounded to
// n (internal/topn): n records, not one per connection, and no sort of
// them all.
func (r *Registry) Top(f connregistry.Filter, by connregistry.SortKey, n int) []connregistry.Conn {
	match, err := f.Matcher()
	order, ok := topn.Parse(string(by))
	if err != nil || !ok {
		return nil
	}
	entries := r.entries()
	if n <= 0 || n > len(entries) {
		n = len(entries)
	}
	if n == 0 {
		return []connregistry.Conn{}
	}
	h := topn.New(order, n)
	kept := make([]connregistry.Conn, n)
	now := time.Now()
	for _, e := range entries {
		c := e.snapshot(now)
		if !match(c) {
			continue
		}
		k := topn.Key{RequestRate: c.RequestRate, BytesInRate: c.BytesInRate, BytesOutRate: c.BytesOutRate,
			LastActivity: c.LastActivity.UnixNano(), ConnectedAt: e.connectedAt, ID: e.id}
		if slot := h.Offer(&k); slot >= 0 {
			kept[slot] = c
		}
	}
	return kept[:h.Order(func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })]
}

// Closed returns the remembered closed connections that match f, oldest
// first.
func (r *Registry) Closed(f connregistry.Filter) []connregistry.Conn {
	match, err := f.Matcher()
	if err != nil {
		return nil
	}
	r.mu.RLock()
	var all []connregistry.Conn
	if r.full {
		all = append(all, r.history[r.next:]...)
	}
	all = append(all, r.history[:r.next]...)
	r.mu.RUnlock()
	return slices.DeleteFunc(all, func(c connregistry.Conn) bool { return !match(c) })
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
func (r *Registry) Close(f connregistry.Filter, reason connregistry.CloseReason) []connregistry.Conn {
	match, err := f.Matcher()
	if err != nil {
		return nil
	}
	r.mu.RLock()
	var victims []*Entry
	for _, e := range r.open {
		if f.ConnectionIDs != nil && !slices.Contains(f.ConnectionIDs, e.id) {
			continue // by its id alone: closing one connection reads no other
		}
		victims = append(victims, e)
	}
	r.mu.RUnlock()
	var closed []connregistry.Conn
	now := time.Now()
	for _, e := range victims {
		c := e.snapshot(now)
		if !match(c) || e.closer == nil {
			continue
		}
		e.closer.CloseFor(reason)
		closed = append(closed, c)
	}
	return closed
}
