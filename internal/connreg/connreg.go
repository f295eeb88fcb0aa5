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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
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
	open    map[*Entry]struct{}
	history []connregistry.Conn // ring of closed connections
	next    int                 // history slot to write next
	full    bool
}

// New returns a registry remembering up to historySize closed connections
// (0 means connregistry.DefaultHistorySize; negative keeps none).
func New(historySize int) *Registry {
	if historySize == 0 {
		historySize = connregistry.DefaultHistorySize
	}
	return &Registry{open: map[*Entry]struct{}{}, history: make([]connregistry.Conn, max(historySize, 0))}
}

// Entry is the server's handle on one open connection's record. Its
// counters are updated without locks on the per-request path.
type Entry struct {
	reg    *Registry
	closer func(connregistry.CloseReason)
	// connectedAt (unix nanoseconds, 8 bytes where a time.Time takes 24:
	// the entry stays in its size class) and id order snapshots; they
	// never change.
	connectedAt int64
	id          string

	mu            sync.Mutex
	c             connregistry.Conn // fields other than the atomics below
	throttledFrom time.Time         // when the current throttle began; zero while none
	// shared is the copy of c.Info that Request returns, made by the
	// first request after a change (Update) or a rest (Idle) and shared by
	// the requests that follow; never changed once made.
	shared *connregistry.Info

	bytesIn, bytesOut, requests atomic.Int64
	lastActivity                atomic.Int64 // unix nanoseconds
	removed                     atomic.Bool
}

// Add registers an open connection in r. closer, which may be nil, closes
// it when an operator asks (see Registry.Close); it must not block. The
// counters start from c's (BytesIn, BytesOut, Requests, and LastActivity,
// or ConnectedAt when it is zero): a server's connection starts from zero,
// a test's may start anywhere.
//
// Add is a function, not a method, so that the registry a host gets
// (connregistry.Registry) has no method that writes, even to reflection.
func Add(r *Registry, c connregistry.Conn, closer func(connregistry.CloseReason)) *Entry {
	e := &Entry{reg: r, closer: closer, c: c, connectedAt: c.ConnectedAt.UnixNano(), id: c.ID}
	last := c.LastActivity
	if last.IsZero() {
		last = c.ConnectedAt
	}
	e.lastActivity.Store(last.UnixNano())
	e.bytesIn.Store(c.BytesIn)
	e.bytesOut.Store(c.BytesOut)
	e.requests.Store(c.Requests)
	r.mu.Lock()
	r.open[e] = struct{}{}
	r.mu.Unlock()
	return e
}

// Info returns the connection's description as it is now, read under the
// entry's lock.
func (e *Entry) Info() connregistry.Info {
	e.mu.Lock()
	info := e.c.Info
	e.mu.Unlock()
	return info
}

// Update changes the connection's description (principal, software, TLS,
// SASL, ...) under the entry's lock: the one place it is written. f must
// be quick.
func (e *Entry) Update(f func(*connregistry.Info)) {
	e.mu.Lock()
	f(&e.c.Info)
	e.shared = nil // the requests read so far keep the description they found
	e.mu.Unlock()
}

// SetState moves the connection to state s (StateReady once it has
// authenticated).
func (e *Entry) SetState(s connregistry.State) {
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
func (e *Entry) Request(t time.Time, size int, clientID string) (*connregistry.Info, string) {
	e.requests.Add(1)
	e.bytesIn.Add(int64(size))
	e.lastActivity.Store(t.UnixNano())
	e.mu.Lock()
	if e.c.ClientID != clientID {
		e.c.ClientID = strings.Clone(clientID) // it may share the memory of a request frame
	}
	info := e.shared
	if info == nil {
		info = new(connregistry.Info)
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
func (e *Entry) Remove(at time.Time, reason connregistry.CloseReason) {
	if e.removed.Swap(true) {
		return
	}
	e.EndThrottle(at)
	c := e.snapshot()
	c.ClosedAt, c.CloseReason, c.State = at, reason, connregistry.StateClosing
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

func (e *Entry) snapshot() connregistry.Conn {
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
func (r *Registry) Snapshot(f connregistry.Filter) []connregistry.Conn {
	match, err := f.Matcher()
	if err != nil {
		return nil // a filter that does not validate matches nothing
	}
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
	out := make([]connregistry.Conn, 0, len(entries))
	for _, e := range entries {
		if c := e.snapshot(); match(c) {
			out = append(out, c)
		}
	}
	return out
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
	for e := range r.open {
		if f.ConnectionIDs != nil && !slices.Contains(f.ConnectionIDs, e.id) {
			continue // by its id alone: closing one connection reads no other
		}
		victims = append(victims, e)
	}
	r.mu.RUnlock()
	var closed []connregistry.Conn
	for _, e := range victims {
		c := e.snapshot()
		if !match(c) || e.closer == nil {
			continue
		}
		e.closer(reason)
		closed = append(closed, c)
	}
	return closed
}
