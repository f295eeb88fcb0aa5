package knprom

import (
	"errors"
	"maps"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Metrics counts a socket server's events: it is one hook
// ([socketserver.Config.Hooks]) implementing every hook interface it has a
// metric for. Make it with [NewMetrics]. It is safe for concurrent use, as
// hooks must be, and may serve several servers (their counts add up).
type Metrics struct {
	connectionsCreated *prometheus.CounterVec
	connectionsClosed  *prometheus.CounterVec
	requests           *prometheus.CounterVec
	bytesIn            *prometheus.CounterVec
	bytesOut           *prometheus.CounterVec
	totalTime          *prometheus.HistogramVec
	phaseTime          *prometheus.HistogramVec
	accepted           *prometheus.CounterVec
	acceptorBlocked    *prometheus.CounterVec
	acceptThrottle     *prometheus.CounterVec
	ipRejected         *prometheus.CounterVec
	proxyRefused       *prometheus.CounterVec
	ipThrottle         *prometheus.CounterVec
	authenticated      *prometheus.CounterVec
	authFailed         *prometheus.CounterVec
	reauthenticated    *prometheus.CounterVec
	reauthFailed       *prometheus.CounterVec

	// series holds, for each listener and API seen, the series a request
	// adds to (see requestSeries): a map replaced whole, under seriesMu,
	// when a listener or an API is new, and read without a lock, so that a
	// request's hooks look up no labels (hashing and checking each label
	// value) after the first of its kind.
	series   atomic.Pointer[map[seriesKey]*requestSeries]
	seriesMu sync.Mutex
}

// seriesKey is what a request's series depend on: its listener and API.
type seriesKey struct {
	listener protocolmap.ListenerName
	apiKey   int16
}

// requestSeries are the series of one listener's requests of one API.
// Those of their times are made when first observed, as WithLabelValues
// would make them: a scrape shows no histogram of times never measured
// (the phases of requests the server answers itself, the SASL exchange's).
type requestSeries struct {
	listener, apiKey, name string // the labels
	requests               prometheus.Counter
	bytesIn, bytesOut      prometheus.Counter
	totalTime              atomic.Pointer[prometheus.Observer]
	phases                 atomic.Pointer[phaseSeries]
}

// phaseSeries are the series of where requests' time went:
// request_queue, local, response_queue, response_send.
type phaseSeries struct{ queue, handler, responseQueue, send prometheus.Observer }

var (
	_ socketserver.HookConnCreated          = (*Metrics)(nil)
	_ socketserver.HookConnClosed           = (*Metrics)(nil)
	_ socketserver.HookRequestReceived      = (*Metrics)(nil)
	_ socketserver.HookResponseSent         = (*Metrics)(nil)
	_ socketserver.HookRequestDone          = (*Metrics)(nil)
	_ socketserver.HookConnAccepted         = (*Metrics)(nil)
	_ socketserver.HookAcceptorBlocked      = (*Metrics)(nil)
	_ socketserver.HookConnRejected         = (*Metrics)(nil)
	_ socketserver.HookProxyRefused         = (*Metrics)(nil)
	_ socketserver.HookAuthenticated        = (*Metrics)(nil)
	_ socketserver.HookAuthenticationFailed = (*Metrics)(nil)
)

// LatencyBuckets returns the request-time histograms' buckets, in seconds:
// from 100 µs to 26 s, four times apart, in a new slice.
func LatencyBuckets() []float64 { return prometheus.ExponentialBuckets(0.0001, 4, 10) }

// NewMetrics makes the counters and histograms and registers them with
// reg. It fails if reg already holds metrics of the same names (and
// labels), as a second NewMetrics on the same registerer would.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: LatencyBuckets()}, labels)
	}
	m := &Metrics{
		connectionsCreated: counter("kafka_server_socket_server_metrics_connection_creation_total",
			"Connections accepted (connection-creation-total).", "listener"),
		connectionsClosed: counter("kafka_server_socket_server_metrics_connection_close_total",
			"Connections closed (connection-close-total), by why they closed: reason is a connregistry.CloseReason token (client-closed, idle, ...).", "listener", "reason"),
		requests: counter("kafka_network_request_metrics_requests_total",
			"Requests done (RequestsPerSec), by API; the SASL exchange's are not counted, as in Kafka.", "listener", "api_key", "request"),
		bytesIn: counter("kafka_server_socket_server_metrics_incoming_byte_total",
			"Bytes of request frames received, without their 4-byte size prefixes, the SASL exchange's included (incoming-byte-total).", "listener"),
		bytesOut: counter("kafka_server_socket_server_metrics_outgoing_byte_total",
			"Bytes of responses sent (outgoing-byte-total).", "listener"),
		totalTime: histogram("kafka_network_request_metrics_total_time_seconds",
			"Time from a request read to its response written, or to the close that ended it (TotalTimeMs), by API; the SASL exchange is not timed, as in Kafka.", "listener", "api_key", "request"),
		phaseTime: histogram("kafka_network_request_metrics_phase_time_seconds",
			"Where the time of requests the host answered went (RequestQueueTimeMs, LocalTimeMs, ResponseQueueTimeMs, ResponseSendTimeMs), by API.",
			"listener", "request", "phase"),
		accepted: counter("kafka_server_socket_server_metrics_connection_accept_total",
			"Connections admitted by the connection quotas (connection-accept-rate; sum the listeners for broker-connection-accept-rate).", "listener"),
		acceptorBlocked: counter("kafka_network_acceptor_blocked_seconds_total",
			"Time the acceptor waited for the connection quotas (AcceptorBlockedPercent: take its rate).", "listener"),
		acceptThrottle: counter("kafka_server_socket_server_metrics_connection_accept_throttle_seconds_total",
			"Creation-rate delay imposed on new connections (connection-accept-throttle-time).", "listener"),
		ipRejected: counter("kafka_server_socket_server_metrics_ip_connection_rejected_total",
			"Connections closed by max.connections.per.ip or the per-address creation rate.", "listener", "reason"),
		proxyRefused: counter("kafkanet_proxy_protocol_refused_total",
			"Connections refused on a listener that requires the PROXY protocol (kafkanet.proxy.protocol): from outside its trusted networks, or without a valid header.", "listener", "reason"),
		ipThrottle: counter("kafka_server_socket_server_metrics_ip_connection_accept_throttle_seconds_total",
			"Time throttled connections were held before closing (ip-connection-accept-throttle-time).", "listener"),
		authenticated: counter("kafka_server_socket_server_metrics_successful_authentication_total",
			"Connections authenticated by TLS or SASL (successful-authentication-total).", "listener", "mechanism"),
		authFailed: counter("kafka_server_socket_server_metrics_failed_authentication_total",
			"Failed TLS handshakes and SASL exchanges (failed-authentication-total).", "listener"),
		reauthenticated: counter("kafka_server_socket_server_metrics_successful_reauthentication_total",
			"Successful SASL re-authentications (successful-reauthentication-total).", "listener", "mechanism"),
		reauthFailed: counter("kafka_server_socket_server_metrics_failed_reauthentication_total",
			"Failed SASL re-authentications (failed-reauthentication-total).", "listener"),
	}
	for _, c := range []prometheus.Collector{m.connectionsCreated, m.connectionsClosed, m.requests, m.bytesIn, m.bytesOut,
		m.totalTime, m.phaseTime, m.accepted, m.acceptorBlocked, m.acceptThrottle, m.ipRejected, m.proxyRefused, m.ipThrottle,
		m.authenticated, m.authFailed, m.reauthenticated, m.reauthFailed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// OnConnCreated implements [socketserver.HookConnCreated].
func (m *Metrics) OnConnCreated(info connregistry.Info) {
	m.connectionsCreated.WithLabelValues(string(info.Listener)).Inc()
}

// OnConnClosed implements [socketserver.HookConnClosed].
func (m *Metrics) OnConnClosed(info connregistry.Info, reason connregistry.CloseReason) {
	m.connectionsClosed.WithLabelValues(string(info.Listener), string(reason)).Inc()
}

// requestSeries returns the series of l's requests of apiKey, made the
// first time they are asked for.
func (m *Metrics) requestSeries(l protocolmap.ListenerName, apiKey int16) *requestSeries {
	key := seriesKey{l, apiKey}
	if all := m.series.Load(); all != nil {
		if s, ok := (*all)[key]; ok {
			return s
		}
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	next := map[seriesKey]*requestSeries{}
	if all := m.series.Load(); all != nil {
		if s, ok := (*all)[key]; ok {
			return s
		}
		maps.Copy(next, *all)
	}
	listener, code, name := string(l), apiKeyLabel(apiKey), kmsg.NameForKey(apiKey)
	s := &requestSeries{listener: listener, apiKey: code, name: name,
		requests: m.requests.WithLabelValues(listener, code, name),
		bytesIn:  m.bytesIn.WithLabelValues(listener),
		bytesOut: m.bytesOut.WithLabelValues(listener),
	}
	next[key] = s
	m.series.Store(&next)
	return s
}

// totalTimeOf returns s's series of total times, making it the first
// time (two callers may both make it: the vector gives both the same).
func (m *Metrics) totalTimeOf(s *requestSeries) prometheus.Observer {
	if o := s.totalTime.Load(); o != nil {
		return *o
	}
	o := m.totalTime.WithLabelValues(s.listener, s.apiKey, s.name)
	s.totalTime.Store(&o)
	return o
}

// phasesOf returns s's series of phases, making them the first time.
func (m *Metrics) phasesOf(s *requestSeries) *phaseSeries {
	if p := s.phases.Load(); p != nil {
		return p
	}
	p := &phaseSeries{
		queue:         m.phaseTime.WithLabelValues(s.listener, s.name, "request_queue"),
		handler:       m.phaseTime.WithLabelValues(s.listener, s.name, "local"),
		responseQueue: m.phaseTime.WithLabelValues(s.listener, s.name, "response_queue"),
		send:          m.phaseTime.WithLabelValues(s.listener, s.name, "response_send"),
	}
	s.phases.Store(p)
	return p
}

// OnRequestReceived implements [socketserver.HookRequestReceived]: the
// bytes of every request frame read, the SASL exchange's included. The
// request count is OnRequestDone's.
func (m *Metrics) OnRequestReceived(l protocolmap.ListenerName, apiKey int16, bytes int) {
	m.requestSeries(l, apiKey).bytesIn.Add(float64(bytes))
}

// OnResponseSent implements [socketserver.HookResponseSent].
func (m *Metrics) OnResponseSent(l protocolmap.ListenerName, apiKey int16, bytes int) {
	m.requestSeries(l, apiKey).bytesOut.Add(float64(bytes))
}

// OnRequestDone implements [socketserver.HookRequestDone], as Kafka's
// RequestMetrics: the count and total time of every request but those of
// a SASL exchange (RequestDone.Authenticating), which Kafka's
// authenticator answers outside its request metrics, and the phases of
// those the host answered (not the server itself) without the connection
// closing instead. Kafka marks RequestsPerSec as it records a request's
// times, once the request is done.
func (m *Metrics) OnRequestDone(r *socketserver.RequestDone) {
	if r.Authenticating {
		return
	}
	s, t := m.requestSeries(r.Conn.Listener, r.APIKey), r.Latency
	s.requests.Inc()
	m.totalTimeOf(s).Observe(t.Total.Seconds())
	if r.ServerAnswered || r.Closed && r.ResponseBytes == 0 {
		return // no phases: the server's own work, or an answer never written
	}
	p := m.phasesOf(s)
	p.queue.Observe(t.Queue.Seconds())
	p.handler.Observe(t.Handler.Seconds())
	p.responseQueue.Observe(t.ResponseQueue.Seconds())
	p.send.Observe(t.Send.Seconds())
}

// OnConnAccepted implements [socketserver.HookConnAccepted].
func (m *Metrics) OnConnAccepted(l protocolmap.ListenerName) {
	m.accepted.WithLabelValues(string(l)).Inc()
}

// OnAcceptorBlocked implements [socketserver.HookAcceptorBlocked].
func (m *Metrics) OnAcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration) {
	m.acceptorBlocked.WithLabelValues(string(l)).Add(blocked.Seconds())
	m.acceptThrottle.WithLabelValues(string(l)).Add(throttle.Seconds())
}

// OnConnRejected implements [socketserver.HookConnRejected].
func (m *Metrics) OnConnRejected(l protocolmap.ListenerName, _ netip.Addr, err error, hold time.Duration) {
	if errors.Is(err, socketserver.ErrConnectionThrottled) {
		m.ipRejected.WithLabelValues(string(l), "ip_connection_creation_rate").Inc()
		m.ipThrottle.WithLabelValues(string(l)).Add(hold.Seconds())
		return
	}
	m.ipRejected.WithLabelValues(string(l), "max_connections_per_ip").Inc()
}

// OnProxyRefused implements [socketserver.HookProxyRefused]: the reason is
// untrusted (socketserver.ErrProxyUntrusted) or header
// (socketserver.ErrProxyHeader).
func (m *Metrics) OnProxyRefused(l protocolmap.ListenerName, _ netip.AddrPort, err error) {
	reason := "header"
	if errors.Is(err, socketserver.ErrProxyUntrusted) {
		reason = "untrusted"
	}
	m.proxyRefused.WithLabelValues(string(l), reason).Inc()
}

// OnAuthenticated implements [socketserver.HookAuthenticated]. A
// connection authenticated by TLS alone counts under the mechanism SSL.
func (m *Metrics) OnAuthenticated(info connregistry.Info, reauthentication bool) {
	mechanism := info.SASLMechanism
	if mechanism == "" {
		mechanism = "SSL" // a TLS client certificate, or none
	}
	if reauthentication {
		m.reauthenticated.WithLabelValues(string(info.Listener), mechanism).Inc()
		return
	}
	m.authenticated.WithLabelValues(string(info.Listener), mechanism).Inc()
}

// OnAuthenticationFailed implements [socketserver.HookAuthenticationFailed].
func (m *Metrics) OnAuthenticationFailed(info connregistry.Info, reauthentication bool, _ error) {
	if reauthentication {
		m.reauthFailed.WithLabelValues(string(info.Listener)).Inc()
		return
	}
	m.authFailed.WithLabelValues(string(info.Listener)).Inc()
}

// apiKeyLabels are the api_key labels of the keys Kafka defines, made once
// so that a request's hooks format no number.
var apiKeyLabels = func() []string {
	labels := make([]string, kmsg.MaxKey+1)
	for i := range labels {
		labels[i] = strconv.Itoa(i)
	}
	return labels
}()

// otherKeyLabels are the labels of the other keys seen (a host's own APIs,
// such as ListClientConnections): a map replaced whole, under
// otherKeyLabelsMu, when a key is new, and read without a lock. The hooks
// see only the keys a listener accepts, so it holds a few entries at most.
var (
	otherKeyLabels   atomic.Pointer[map[int16]string]
	otherKeyLabelsMu sync.Mutex
)

func apiKeyLabel(k int16) string {
	if k >= 0 && int(k) < len(apiKeyLabels) {
		return apiKeyLabels[k]
	}
	if m := otherKeyLabels.Load(); m != nil {
		if l, ok := (*m)[k]; ok {
			return l
		}
	}
	otherKeyLabelsMu.Lock()
	defer otherKeyLabelsMu.Unlock()
	next := map[int16]string{}
	if m := otherKeyLabels.Load(); m != nil {
		if l, ok := (*m)[k]; ok {
			return l
		}
		maps.Copy(next, *m)
	}
	l := strconv.Itoa(int(k))
	next[k] = l
	otherKeyLabels.Store(&next)
	return l
}
