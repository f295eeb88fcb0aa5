package socketserver

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// DefaultAuditQueueSize is [Config.AuditQueueSize]'s default: how many
// audit events may wait for the [HookAudit] hooks.
const DefaultAuditQueueSize = 1024

// MaxAuditText is the longest text field of an [AuditEvent], in bytes: a
// longer one (a user name a client made up, a host's detail) is cut to
// it, at a character's start, so that a queue of events holds a bounded
// amount of memory.
const MaxAuditText = 1024

// AuditKind is what an [AuditEvent] records. It prints as a stable token
// (String), the same in every release, for logs and security tools.
type AuditKind uint8

// The kinds of audit events. The server records all but AuditHostAction,
// which is a host's own (see [Server.Audit]).
const (
	// AuditAuthenticated: a connection authenticated on a listener that
	// requires it (TLS client authentication, SASL): "authenticated".
	AuditAuthenticated AuditKind = iota + 1
	// AuditAuthenticationFailed: its TLS handshake, SASL exchange or
	// principal building failed: "authentication-failed".
	AuditAuthenticationFailed
	// AuditReauthenticated: a KIP-368 re-authentication succeeded:
	// "reauthenticated".
	AuditReauthenticated
	// AuditReauthenticationFailed: a re-authentication failed, and the
	// connection closes: "reauthentication-failed".
	AuditReauthenticationFailed
	// AuditConnectionRefused: a new connection was closed before it was
	// served, by the per-address connection quotas (max.connections.per.ip
	// and its overrides, the per-address creation rate), by the PROXY
	// protocol's rules (an untrusted peer, a bad header), or, once
	// authenticated, by its principal's limit
	// (kafkanet.max.connections.per.principal and its overrides; then
	// ConnID and Principal name it): "connection-refused".
	AuditConnectionRefused
	// AuditConnectionsClosed: an operator asked to close connections
	// (CloseClientConnectionsAPI): who asked, with which filter, how many
	// closed: "connections-closed".
	AuditConnectionsClosed
	// AuditThrottled: a throttle began (Request.Throttle): the connection
	// reads nothing for Throttle: "throttled".
	AuditThrottled
	// AuditEventsDropped: Count events were dropped because the queue was
	// full, reported as soon as it had room again: "events-dropped".
	AuditEventsDropped
	// AuditHostAction: an action of the host's, recorded with
	// [Server.Audit] (Action and Detail say what): "host-action".
	AuditHostAction
)

var auditKindTokens = [...]string{
	AuditAuthenticated:          "authenticated",
	AuditAuthenticationFailed:   "authentication-failed",
	AuditReauthenticated:        "reauthenticated",
	AuditReauthenticationFailed: "reauthentication-failed",
	AuditConnectionRefused:      "connection-refused",
	AuditConnectionsClosed:      "connections-closed",
	AuditThrottled:              "throttled",
	AuditEventsDropped:          "events-dropped",
	AuditHostAction:             "host-action",
}

// String returns the kind's token ("authentication-failed", ...), or
// "unknown" for a value that is no kind.
func (k AuditKind) String() string {
	if int(k) < len(auditKindTokens) && auditKindTokens[k] != "" {
		return auditKindTokens[k]
	}
	return "unknown"
}

// MarshalText returns the kind's token, for encoding/json and the like.
func (k AuditKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// AuditEvent is one event of the audit trail: who did what, from where,
// with what outcome. It never holds a secret: no password, token, proof or
// key, however a client sent it. Fields that do not apply to a kind are
// zero.
type AuditEvent struct {
	Kind AuditKind
	// Time is when it happened.
	Time time.Time
	// Listener, ConnID, ClientAddr and ProxyAddr name the connection the
	// event is about, as the connection listing names it: for
	// AuditConnectionsClosed, the operator's connection. ConnID is empty
	// for a refused connection, which never got one. ClientAddr is the
	// client's address (on a listener that requires the PROXY protocol,
	// the one its header gave); ProxyAddr the load balancer's that sent
	// the header, else the zero value.
	Listener   protocolmap.ListenerName
	ConnID     string
	ClientAddr netip.AddrPort
	ProxyAddr  netip.AddrPort
	// Principal is the connection's principal (Type:Name): the one
	// authenticated, the one kept through a failed re-authentication, the
	// operator's or the throttled client's; empty when the connection
	// never authenticated (a failed first authentication).
	Principal string
	// User is the user name a failed authentication tried, where the
	// mechanism carries one (PLAIN and SCRAM: sasl.Error.User), else
	// empty.
	User string
	// Mechanism is the SASL mechanism of an authentication, as far as the
	// client got; empty for TLS alone.
	Mechanism string
	// TLSSubject is the subject distinguished name of the client's
	// certificate (RFC 2253, as Kafka's principal builder reads it), when
	// the client sent one and the TLS handshake verified it: empty when
	// the handshake failed (Reason says why), whatever the client sent.
	TLSSubject string
	// Reason is why an authentication failed or a connection was refused
	// (the text the server logs), or why an operator's close or a host's
	// action was refused; empty on success.
	Reason string
	// Filter is an operator's filter, as key=value pairs
	// (principal=User:alice listener=CLIENT ...).
	Filter string
	// Count is the number of connections an operator's request closed, or
	// of events dropped (AuditEventsDropped).
	Count int
	// Throttle is how long a throttled connection reads nothing, or how
	// long a connection over its address's creation rate was held before
	// its close.
	Throttle time.Duration
	// Action and Detail are a host's: what it did (a stable token of its
	// choosing, such as "alter-client-quotas") and to what.
	Action string
	Detail string
}

// HookAudit receives the audit trail: authentications and
// re-authentications, refused connections, operators' closes, throttles
// and the host's own events ([Server.Audit]). Unlike the other hooks it
// is not called on the connections' goroutines: events wait in a queue of
// [Config.AuditQueueSize] and one goroutine of the server's, started by
// [Server.Start], hands them to the hooks one at a time, in the order they
// were recorded (so a connection's events keep their order). A slow hook
// never holds a connection or a request: when the queue is full, events
// are dropped and counted ([Stats.AuditDropped]), and an
// AuditEventsDropped event reports them as soon as there is room: after
// the events queued before the drops, before those recorded after them,
// without waiting for another event.
// [Server.Shutdown] delivers what waits before it returns (unless its
// context ends first); [Server.Close] waits for the call in progress and
// drops the rest. Without a HookAudit, nothing is recorded.
type HookAudit interface {
	OnAudit(e AuditEvent)
}

// auditor is the audit queue and its goroutine.
type auditor struct {
	hooks   []HookAudit
	queue   chan AuditEvent
	dropped atomic.Int64 // dropped in all (Stats.AuditDropped)

	// mu orders the drops and their report with the events queued: an
	// event is dropped, and the drops not yet reported (pending) are
	// taken and reported, under it. dropping is pending > 0, for emit's
	// path without the lock: an event recorded once dropping is set
	// queues under mu, after the report.
	mu       sync.Mutex
	pending  int64 // dropped and not yet reported
	dropping atomic.Bool

	started   atomic.Bool
	quit      chan struct{} // Close: deliver nothing more
	flush     chan struct{} // Shutdown: deliver what waits, then end
	done      chan struct{} // closed when the goroutine has ended
	quitOnce  sync.Once
	flushOnce sync.Once
}

// newAuditor returns the audit queue of hooks, nil without any.
func newAuditor(hooks []HookAudit, size int) *auditor {
	if len(hooks) == 0 {
		return nil
	}
	return &auditor{hooks: hooks, queue: make(chan AuditEvent, size),
		quit: make(chan struct{}), flush: make(chan struct{}), done: make(chan struct{})}
}

// start starts the goroutine, once.
func (a *auditor) start() {
	if a.started.CompareAndSwap(false, true) {
		go a.run()
	}
}

// run hands the queue's events to the hooks until Close, or until
// Shutdown's flush has emptied the queue. Whenever the queue is empty, it
// reports the drops not yet reported itself (reportDrops), so that a
// report never waits for another event.
func (a *auditor) run() {
	defer close(a.done)
	for {
		select {
		case <-a.quit:
			return
		case e := <-a.queue:
			a.deliver(e)
			continue
		default:
			a.reportDrops() // an event left waiting is taken next
		}
		select {
		case <-a.quit:
			return
		case e := <-a.queue:
			a.deliver(e)
		case <-a.flush:
			for {
				select {
				case <-a.quit:
					return
				case e := <-a.queue:
					a.deliver(e)
				default:
					if a.reportDrops() { // dropped after the last report: told last
						return
					}
				}
			}
		}
	}
}

// reportDrops delivers an AuditEventsDropped event for the drops not yet
// reported, when no event waits (the goroutine found the queue empty).
// The count is taken under mu, as emit takes it to queue the report
// before its event, so the drops are reported once, by one of them. Once
// dropping is set every emit queues under mu, so an empty queue under mu
// means that every event queued before the drops has been delivered, and
// the goroutine delivers the report before any event queued after. An
// event that came after the goroutine found the queue empty goes first:
// the report waits for the queue to be empty again, or for the next
// emit, and reportDrops returns false.
func (a *auditor) reportDrops() bool {
	if !a.dropping.Load() {
		return true
	}
	a.mu.Lock()
	n := a.pending
	if n == 0 || len(a.queue) > 0 {
		a.mu.Unlock()
		return n == 0
	}
	a.pending = 0
	a.dropping.Store(false)
	a.mu.Unlock()
	a.deliver(AuditEvent{Kind: AuditEventsDropped, Time: time.Now(), Count: int(n)})
	return true
}

func (a *auditor) deliver(e AuditEvent) {
	select {
	case <-a.quit: // Close came while the last call ran
		a.dropped.Add(1)
		return
	default:
	}
	for _, h := range a.hooks {
		h.OnAudit(e)
	}
}

// emit queues e, or drops and counts it when the queue is full; it never
// waits. Drops not yet reported (which the goroutine reports itself once
// the queue is empty) are reported first, when there is room.
func (a *auditor) emit(e AuditEvent) {
	select {
	case <-a.quit: // Close has come: nothing more is delivered
		a.dropped.Add(1)
		return
	default:
	}
	e.bound()
	if !a.dropping.Load() {
		select {
		case a.queue <- e:
			return
		default:
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending > 0 {
		select {
		case a.queue <- AuditEvent{Kind: AuditEventsDropped, Time: e.Time, Count: int(a.pending)}:
			a.pending = 0
			a.dropping.Store(false)
		default:
			a.drop()
			return
		}
	}
	select {
	case a.queue <- e:
	default:
		a.drop()
	}
}

// drop counts an event dropped; mu is held.
func (a *auditor) drop() {
	a.pending++
	a.dropping.Store(true)
	a.dropped.Add(1)
}

// drain delivers what waits and ends the goroutine (Shutdown), unless ctx
// ends first.
func (a *auditor) drain(done <-chan struct{}) bool {
	if !a.started.Load() {
		return true
	}
	a.flushOnce.Do(func() { close(a.flush) })
	select {
	case <-a.done:
		return true
	case <-done:
		return false
	}
}

// stop ends the goroutine after the call in progress (Close) and waits
// for it.
func (a *auditor) stop() {
	a.quitOnce.Do(func() { close(a.quit) })
	if a.started.Load() {
		<-a.done
	}
	a.dropped.Add(int64(len(a.queue))) // left undelivered
}

// bound cuts e's text fields to MaxAuditText.
func (e *AuditEvent) bound() {
	for _, s := range []*string{&e.ConnID, &e.Principal, &e.User, &e.Mechanism, &e.TLSSubject, &e.Reason, &e.Filter, &e.Action, &e.Detail} {
		*s = cutText(*s)
	}
	if len(e.Listener) > MaxAuditText {
		e.Listener = protocolmap.ListenerName(cutText(string(e.Listener)))
	}
}

// cutText cuts s to at most MaxAuditText bytes, at a character's start.
func cutText(s string) string {
	if len(s) <= MaxAuditText {
		return s
	}
	i := MaxAuditText
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// Audit records e, an event of the host's own (AuditHostAction, with
// Action and Detail; the host may record events of the other kinds too,
// such as a proxy's own authentications), in the audit trail the
// [HookAudit] hooks receive, in order with the server's events: for
// example a change an operator made through a request the host serves
// (the example broker records AlterClientQuotas so). A zero Time is set
// to now. It never waits; without a HookAudit it does nothing. e must
// hold no secret.
func (s *Server) Audit(e AuditEvent) {
	if s.audit == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	s.audit.emit(e)
}

// auditConn records an event of kind about c, described as it is now.
func (c *conn) auditConn(kind AuditKind, mod func(*AuditEvent)) {
	a := c.p.srv.audit
	if a == nil {
		return
	}
	info := c.info()
	e := AuditEvent{
		Kind: kind, Time: time.Now(), Listener: info.Listener, ConnID: info.ID, ClientAddr: info.ClientAddr, ProxyAddr: info.ProxyAddr,
		Principal: principalName(info.Principal), Mechanism: info.SASLMechanism,
	}
	if st := c.tlsState(); st != nil && len(st.PeerCertificates) > 0 {
		e.TLSSubject = security.SubjectDN(st.PeerCertificates[0])
	}
	if mod != nil {
		mod(&e)
	}
	a.emit(e)
}

// auditAuth records the outcome of an authentication (err nil: success)
// or a re-authentication.
func (c *conn) auditAuth(err error, reauthentication bool) {
	kind := AuditAuthenticated
	switch {
	case reauthentication && err == nil:
		kind = AuditReauthenticated
	case reauthentication:
		kind = AuditReauthenticationFailed
	case err != nil:
		kind = AuditAuthenticationFailed
	}
	c.auditConn(kind, func(e *AuditEvent) {
		if err == nil {
			return
		}
		e.Reason = err.Error()
		var se *sasl.Error
		if errors.As(err, &se) {
			e.User = se.User
		}
		if !reauthentication { // not authenticated: the anonymous principal is no one's
			e.Principal = ""
		}
	})
}

// auditRefused records a new connection from client (through the load
// balancer at proxy, on a PROXY listener) that ls refused for err, held
// for hold first.
func (s *Server) auditRefused(ls *listenerState, client, proxy netip.AddrPort, err error, hold time.Duration) {
	if s.audit == nil {
		return
	}
	s.audit.emit(AuditEvent{Kind: AuditConnectionRefused, Time: time.Now(), Listener: ls.cfg.Name, ClientAddr: client, ProxyAddr: proxy,
		Reason: err.Error(), Throttle: hold})
}

// principalName is p as an audit event names it: "" for the zero value.
func principalName(p connregistry.Principal) string {
	if p == (connregistry.Principal{}) {
		return ""
	}
	return p.String()
}
