package socketserver

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

// HookRequestDone is called once for every request a connection read and
// decoded, when the request is done: the one request-completion event,
// which a request log ([SlogRequestLog], Kafka's kafka.request.logger), a
// tracer and request metrics (Kafka's RequestMetrics) all read, as Kafka
// updates its request metrics and logs the request in one place. It covers
// the requests the server answers itself too (ApiVersions unless the host
// took it over, SaslHandshake and SaslAuthenticate during and after
// authentication, [ListClientConnectionsAPI] and
// [CloseClientConnectionsAPI], and the error responses of the SASL
// exchange), marked [RequestDone.ServerAnswered]. A connection's requests
// are reported in the order they came, one at a time.
//
// A request is done when its response has been written, when the host
// answered it with NoResponse, or when the connection closed instead:
// the host's CloseConnection, a failed authentication, a session that
// expired (KIP-368), a response that could not be written, or the
// connection closing while the request waited for its answer (the client
// went away, idle expiry, Close). Such a request is reported with
// [RequestDone.Closed] set: the host may have acted on it, and an audit
// log must say so.
//
// Not reported: a frame that is not a request (its header does not parse,
// its API or version is not enabled on the listener, or its body does not
// decode: the connection closes without a response, with
// connregistry.CloseProtocolError), the raw token frames of a SaslHandshake v0
// exchange, which have no request header, and the message that fails a
// re-authentication with another mechanism, which is not read as a
// request.
//
// The *RequestDone is valid during the call only: the server reuses it. A
// hook that keeps any of it copies the fields it keeps (the strings in it
// are the hook's to keep). It carries no request or response body: no
// SASL token, password or secret ever reaches it.
type HookRequestDone interface {
	OnRequestDone(*RequestDone)
}

// RequestDone is one request as it ended (see [HookRequestDone]), with
// what Kafka's RequestChannel logs and times of a completed request.
type RequestDone struct {
	// Conn is the connection's description when the request was done:
	// its id, listener, security protocol (with the TLS server name the
	// client asked for), client address, principal and client software
	// (KIP-511). An ApiVersions v3+ is reported with the
	// client software it announced. The requests of the SASL exchange
	// that authenticates a connection are reported with the anonymous
	// principal, the last SaslAuthenticate too: the principal is built
	// once the exchange has ended, as in Kafka (its SASLMechanism and
	// AuthenticatedAt are set already); [HookAuthenticated] reports it.
	Conn connregistry.Info
	// ClientID is the request header's client id; "" when it is null.
	ClientID string
	// APIKey, APIVersion and CorrelationID come from the request header.
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	// RequestBytes is the request frame's size, without its size prefix
	// (as [Request.Size] and [HookRequestReceived]).
	RequestBytes int
	// ResponseBytes is the size of the response written, size prefix
	// included (as [HookResponseSent]); 0 when none was: NoResponse, or a
	// connection that closed first.
	ResponseBytes int
	// Throttle is the throttle time the host gave the request
	// ([Request.Throttle]): after the answer the connection read nothing
	// more for that long (less if it closed first). Zero when the request
	// was not throttled, and for the requests the server answers itself.
	Throttle time.Duration
	// Latency is where the request's time went (see [RequestLatency]).
	// Total is always set: up to the response written, the answer with
	// NoResponse, or the close. For a request the host answered, and one
	// answered by an inline API of the server's
	// ([ListClientConnectionsAPI], [CloseClientConnectionsAPI]), every
	// phase is timed (the phases a closed request did not reach are zero).
	// For the other requests the server answers itself Queue and
	// ResponseQueue are zero, Handler is the server's work on the request
	// (a SASL step, and the failed-authentication delay of a failure), and
	// Send the response's write.
	Latency RequestLatency
	// ServerAnswered is set for a request the server answered itself
	// (see [HookRequestDone]), not the host's handler.
	ServerAnswered bool
	// Authenticating is set for the requests of a SASL exchange, which
	// the server answers itself: ApiVersions, SaslHandshake and
	// SaslAuthenticate before the connection has authenticated, and a
	// KIP-368 re-authentication's SaslAuthenticate requests (its
	// SaslHandshake is a request of the authenticated connection). Kafka's
	// authenticator answers these outside its request metrics, which the
	// metrics hooks of plugin/knprom and plugin/knotel follow by skipping
	// them.
	Authenticating bool
	// Closed is set when the connection closed after the request, or
	// instead of its answer (see [HookRequestDone]). ResponseBytes says
	// whether a response was written first: an error response of a
	// failed authentication is.
	Closed bool
}

// SlogRequestLog returns a hook that logs every request to l at debug
// level, one record each, with the attributes of the [RequestDone], as
// Kafka's kafka.request.logger logs each completed request at debug level.
// Nothing is logged, and nothing built, while l does not log at debug
// level.
//
// The record's message is "request" and its attributes are conn_id,
// listener, security_protocol, server_name (the TLS server name the client
// asked for, "" without one), principal, client_address,
// client_software_name, client_software_version, client_id, api_key,
// api_name, api_version, correlation_id, request_bytes, response_bytes,
// throttle, and the latency phases queue, handler, response_queue, send
// and total (durations), server_answered and closed.
func SlogRequestLog(l *slog.Logger) Hook { return slogRequestLog{l} }

type slogRequestLog struct{ l *slog.Logger }

func (s slogRequestLog) OnRequestDone(r *RequestDone) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	s.l.LogAttrs(ctx, slog.LevelDebug, "request",
		slog.String("conn_id", r.Conn.ID),
		slog.String("listener", string(r.Conn.Listener)),
		slog.String("security_protocol", r.Conn.SecurityProtocol.String()),
		slog.String("server_name", r.Conn.ServerName),
		slog.String("principal", r.Conn.Principal.String()),
		slog.String("client_address", r.Conn.ClientAddr.String()),
		slog.String("client_software_name", r.Conn.ClientSoftwareName),
		slog.String("client_software_version", r.Conn.ClientSoftwareVersion),
		slog.String("client_id", r.ClientID),
		slog.Int("api_key", int(r.APIKey)),
		slog.String("api_name", apiName(r.APIKey)),
		slog.Int("api_version", int(r.APIVersion)),
		slog.Int("correlation_id", int(r.CorrelationID)),
		slog.Int("request_bytes", r.RequestBytes),
		slog.Int("response_bytes", r.ResponseBytes),
		slog.Duration("throttle", r.Throttle),
		slog.Duration("queue", r.Latency.Queue),
		slog.Duration("handler", r.Latency.Handler),
		slog.Duration("response_queue", r.Latency.ResponseQueue),
		slog.Duration("send", r.Latency.Send),
		slog.Duration("total", r.Latency.Total),
		slog.Bool("server_answered", r.ServerAnswered),
		slog.Bool("closed", r.Closed),
	)
}

// logged is a request on its way through its connection, as
// HookRequestDone will report it: a value on the connection's goroutine,
// filled from the frame's header when the request is decoded and reported
// by requestDone when the request is done.
type logged struct {
	h        header
	size     int           // the frame's bytes, without the size prefix
	received time.Time     // when the whole frame had been read
	own      bool          // the server answers it (RequestDone.ServerAnswered)
	auth     bool          // a request of the SASL exchange (RequestDone.Authenticating)
	throttle time.Duration // the host's Request.Throttle
}

// requestDone calls the HookRequestDone hooks with q's record: t its
// latency, sent its response's bytes (0: none), closed whether the
// connection closes after it or instead of its answer. The RequestDone is
// lent from the server's pool for the calls. q's client id is the
// registry entry's copy (decode), never the frame's bytes, so that a hook
// may keep it.
func (c *conn) requestDone(q *logged, t RequestLatency, sent int, closed bool) {
	srv := c.p.srv
	rl, _ := srv.requestsDone.Get().(*RequestDone)
	if rl == nil {
		rl = new(RequestDone)
	}
	*rl = RequestDone{
		Conn: c.info(), ClientID: q.h.clientID,
		APIKey: q.h.key, APIVersion: q.h.version, CorrelationID: q.h.correlationID,
		RequestBytes: q.size, ResponseBytes: sent, Throttle: q.throttle, Latency: t,
		ServerAnswered: q.own, Authenticating: q.auth, Closed: closed,
	}
	for _, h := range srv.hooks.requestsDone {
		h.OnRequestDone(rl)
	}
	*rl = RequestDone{} // keeps nothing of the connection alive in the pool
	srv.requestsDone.Put(rl)
}

// answerOwn writes the server's own response to q, a request it answers
// itself, and reports q (requestDone); closing says the connection closes after it (a
// failed authentication's error response).
func (c *conn) answerOwn(q *logged, resp kmsg.Response, closing bool) error {
	start := c.ownStart()
	n, err := c.write(q.h.correlationID, resp)
	c.ownDone(q, start, n, closing || err != nil)
	return err
}

// refuseOwn refuses q, a request of the SASL exchange that closes the
// connection without a response, after the failed-authentication delay
// (refuse), and reports it. It returns err.
func (c *conn) refuseOwn(q *logged, err error) error {
	err = c.refuse(err)
	c.ownDone(q, c.ownStart(), 0, true)
	return err
}

// ownStart is when the server began to write its own response to a
// request it answers itself: now, when a HookRequestDone wants it.
func (c *conn) ownStart() time.Time {
	if c.p.srv.hooks.timed() {
		return time.Now()
	}
	return time.Time{}
}

// ownDone reports q, which the server answered itself with a response of
// n bytes (0: none) whose write began at writeStart (ownStart).
func (c *conn) ownDone(q *logged, writeStart time.Time, n int, closed bool) {
	if !c.p.srv.hooks.timed() {
		return
	}
	end := time.Now()
	q.own = true
	c.requestDone(q, RequestLatency{
		Handler: writeStart.Sub(q.received), Send: end.Sub(writeStart), Total: end.Sub(q.received),
	}, n, closed)
}

// latency splits the time of r, a request the host answered (or had
// not, when the connection closed), as RequestLatency describes: received
// is when its frame had been read, writeStart when the connection took the
// answer up, end when the response was written (writeStart without one).
func (c *conn) latency(r *Request, received, writeStart, end time.Time) RequestLatency {
	epoch := c.p.srv.epoch
	t := RequestLatency{Total: end.Sub(received), Send: end.Sub(writeStart)}
	handled := received
	if d := r.dequeuedAt.Load(); d > 0 { // atomic: the connection may have closed while a worker holds r
		handled = epoch.Add(time.Duration(d))
		t.Queue = handled.Sub(received)
	}
	answered := writeStart // not answered: the connection closed while the host had it
	if at := r.answered.Load(); at > 1 {
		answered = epoch.Add(time.Duration(at))
	}
	t.Handler = max(answered.Sub(handled), 0)
	t.ResponseQueue = max(writeStart.Sub(answered), 0)
	return t
}
