package socketserver

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// Hook is a value that observes the server: it implements one or more of
// the Hook... interfaces of this package, each a single event. The server
// checks every hook in [Config.Hooks] against those interfaces once, in
// [New], and calls each hook that implements an event's interface when the
// event happens, in the order the hooks are listed. A host implements only
// the events it wants; an event added later is a new interface, so no
// existing hook breaks (franz-go's kgo hooks work the same way).
//
// Hooks run on the server's goroutines, several at once, without any of the
// server's locks held: they must be safe for concurrent use and fast, since
// the request hooks run on every request's path (a slow hook slows that
// connection; hand slow work to a goroutine of your own). They may call the
// server's methods but Close and Shutdown, which wait for the goroutine a
// hook runs on (call them from a goroutine of your own); RemoveListener
// and SetListeners, called from a hook of a listener they remove, wait
// for the hook's own connection or acceptor until their context ends.
// Names follow Kafka's socket-server and request metrics.
// Gauges (connection count, queue sizes, processor busy time) are read on
// demand from [Server.Stats] instead.
type Hook any

// HookConnAccepted is called when the connection quotas admit a new
// connection, before it is registered (Kafka's connection-accept-rate per
// listener; the broker-wide rate is the sum).
type HookConnAccepted interface {
	OnConnAccepted(l protocolmap.ListenerName)
}

// HookConnRejected is called when a per-address connection quota closes a
// new connection: err wraps [ErrTooManyConnections] (max.connections.per.ip
// and its overrides; hold is zero) or [ErrConnectionThrottled] (the
// per-address creation rate, which held the connection for hold first:
// ip-connection-accept-throttle-time). addr is the client's address: on a
// listener that requires the PROXY protocol, the one its header gave.
type HookConnRejected interface {
	OnConnRejected(l protocolmap.ListenerName, addr netip.Addr, err error, hold time.Duration)
}

// HookAcceptorBlocked is called when a listener's acceptor waited for the
// connection quotas before admitting a connection: blocked is the whole
// wait (AcceptorBlockedPercent), throttle the part of it that was the
// listener's or broker's creation-rate delay
// (connection-accept-throttle-time).
type HookAcceptorBlocked interface {
	OnAcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration)
}

// HookConnCreated is called when an admitted connection has been given its
// id and registered, before anything is read from it
// (connection-creation-total); on a listener that requires the PROXY
// protocol, once its header has been read, so that info has the client's
// address (a connection refused for its header goes to
// [HookProxyRefused] instead). info is the connection as it starts:
// anonymous, before its TLS handshake and SASL exchange.
type HookConnCreated interface {
	OnConnCreated(info connregistry.Info)
}

// HookConnClosed is called once for every connection HookConnCreated saw,
// when it has closed (connection-close-total), with why it closed. info is
// the connection as it ended: its principal, client software and
// authentication, if it got that far. The call happens before
// [Server.Close] and [Server.Shutdown] return.
type HookConnClosed interface {
	OnConnClosed(info connregistry.Info, reason connregistry.CloseReason)
}

// HookRequestReceived is called for each complete request whose header names
// an API the listener accepts, with its frame size in bytes, without the
// size prefix (Kafka's RequestsPerSec per request, and incoming-byte-total).
type HookRequestReceived interface {
	OnRequestReceived(l protocolmap.ListenerName, apiKey int16, bytes int)
}

// HookResponseSent is called for each response written, with its size in
// bytes, size prefix included (outgoing-byte-total).
type HookResponseSent interface {
	OnResponseSent(l protocolmap.ListenerName, apiKey int16, bytes int)
}

// RequestLatency is where a request's time went, after Kafka's
// RequestMetrics: [RequestDone.Latency]. Total is always set; which
// phases a request the server answered itself has, and those of a request
// the connection closed instead of answering, [RequestDone.Latency] says.
type RequestLatency struct {
	// Queue is how long the request waited in its plane's request channel
	// until a worker of [Server.Serve] took it (RequestQueueTimeMs); for an
	// API answered inline ([API.Inline]), until its handler started (the
	// wait for an inline slot).
	Queue time.Duration
	// Handler is from then until the host answered (LocalTimeMs, and
	// RemoteTimeMs for a host that parks requests).
	Handler time.Duration
	// ResponseQueue is from the answer until the connection began to write
	// it (ResponseQueueTimeMs).
	ResponseQueue time.Duration
	// Send is how long writing the response took (ResponseSendTimeMs); zero
	// with NoResponse.
	Send time.Duration
	// Total is from the whole frame read to the response written, or to the
	// answer with NoResponse (TotalTimeMs).
	Total time.Duration
}

// HookAuthenticated is called when a connection has authenticated on a
// listener that requires it (SSL, SASL_PLAINTEXT, SASL_SSL): after its TLS
// handshake and SASL exchange, with info holding the principal built and
// the SASL mechanism ("" for TLS alone) (successful-authentication-total),
// and after each successful re-authentication (KIP-368), with
// reauthentication set (successful-reauthentication-total).
type HookAuthenticated interface {
	OnAuthenticated(info connregistry.Info, reauthentication bool)
}

// HookAuthenticationFailed is called when a connection's TLS handshake,
// SASL exchange or principal building fails, or a re-authentication does
// (failed-authentication-total, failed-reauthentication-total): err says
// why. info.SASLMechanism is the mechanism the client chose, if it got that
// far. A client that merely goes away during the handshake is not counted.
type HookAuthenticationFailed interface {
	OnAuthenticationFailed(info connregistry.Info, reauthentication bool, err error)
}

// hooks are the configured hooks sorted by the events they implement.
type hooks struct {
	connAccepted  []HookConnAccepted
	connRejected  []HookConnRejected
	acceptor      []HookAcceptorBlocked
	connCreated   []HookConnCreated
	connClosed    []HookConnClosed
	requests      []HookRequestReceived
	responses     []HookResponseSent
	requestsDone  []HookRequestDone
	authenticated []HookAuthenticated
	authFailed    []HookAuthenticationFailed
	proxyRefused  []HookProxyRefused
	audit         []HookAudit
}

// newHooks sorts hs by the events each implements. A hook that implements
// none is an error: it would never be called.
func newHooks(hs []Hook) (hooks, error) {
	var h hooks
	for i, hook := range hs {
		implements := false
		if x, ok := hook.(HookConnAccepted); ok {
			h.connAccepted, implements = append(h.connAccepted, x), true
		}
		if x, ok := hook.(HookConnRejected); ok {
			h.connRejected, implements = append(h.connRejected, x), true
		}
		if x, ok := hook.(HookAcceptorBlocked); ok {
			h.acceptor, implements = append(h.acceptor, x), true
		}
		if x, ok := hook.(HookConnCreated); ok {
			h.connCreated, implements = append(h.connCreated, x), true
		}
		if x, ok := hook.(HookConnClosed); ok {
			h.connClosed, implements = append(h.connClosed, x), true
		}
		if x, ok := hook.(HookRequestReceived); ok {
			h.requests, implements = append(h.requests, x), true
		}
		if x, ok := hook.(HookResponseSent); ok {
			h.responses, implements = append(h.responses, x), true
		}
		if x, ok := hook.(HookRequestDone); ok {
			h.requestsDone, implements = append(h.requestsDone, x), true
		}
		if _, ok := hook.(oldHookRequestDone); ok {
			return hooks{}, fmt.Errorf("socketserver: Config.Hooks[%d] (%T) has OnRequestDone(ListenerName, int16, RequestLatency), "+
				"which the server no longer calls: HookRequestDone is OnRequestDone(*RequestDone) (it was the request log's OnRequestLogged)", i, hook)
		}
		if x, ok := hook.(HookAuthenticated); ok {
			h.authenticated, implements = append(h.authenticated, x), true
		}
		if x, ok := hook.(HookAuthenticationFailed); ok {
			h.authFailed, implements = append(h.authFailed, x), true
		}
		if x, ok := hook.(HookProxyRefused); ok {
			h.proxyRefused, implements = append(h.proxyRefused, x), true
		}
		if x, ok := hook.(HookAudit); ok {
			h.audit, implements = append(h.audit, x), true
		}
		if !implements {
			return hooks{}, fmt.Errorf("socketserver: Config.Hooks[%d] (%T) implements no hook interface", i, hook)
		}
	}
	return h, nil
}

// oldHookRequestDone is HookRequestDone as it was before the request log's
// hook replaced it: a hook that still has it is refused by New rather than
// never called.
type oldHookRequestDone interface {
	OnRequestDone(l protocolmap.ListenerName, apiKey int16, t RequestLatency)
}

// timed reports whether a hook wants a request's time split into its
// phases (HookRequestDone): only then are the times of a request's dequeue
// and answer read, and a RequestDone built.
func (h *hooks) timed() bool { return len(h.requestsDone) > 0 }

// authDone reports the outcome of an authentication or re-authentication
// to the authentication hooks: err nil is a success; an error is a failure
// unless the client went away or the server is shutting down, and the
// connection then closes for connregistry.CloseAuthenticationFailed.
func (c *conn) authDone(err error, reauthentication bool) {
	h := &c.p.srv.hooks
	switch {
	case err == nil:
		for _, x := range h.authenticated {
			x.OnAuthenticated(c.info(), reauthentication)
		}
		c.auditAuth(nil, reauthentication)
	case peerGone(err) || errors.Is(err, net.ErrClosed) || errors.Is(err, errDraining) || c.draining():
	default:
		c.setReason(connregistry.CloseAuthenticationFailed) // a TLS handshake's failure too (a SASL exchange's set it already)
		for _, x := range h.authFailed {
			x.OnAuthenticationFailed(c.info(), reauthentication, err)
		}
		c.auditAuth(err, reauthentication)
	}
}
