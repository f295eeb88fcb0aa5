package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// The adapter from socketserver's hooks and Stats to Prometheus. Names
// follow Kafka's: kafka.server:type=socket-server-metrics becomes
// kafka_server_socket_server_metrics_..., kafka.network's RequestMetrics,
// RequestChannel and Processor become kafka_network_... . Every metric has
// the node_id label of its broker.

// promMetrics counts socketserver's events: it is one hook (Config.Hooks)
// implementing every event interface it has a metric for.
type promMetrics struct {
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
	ipThrottle         *prometheus.CounterVec
	authenticated      *prometheus.CounterVec
	authFailed         *prometheus.CounterVec
	reauthenticated    *prometheus.CounterVec
	reauthFailed       *prometheus.CounterVec
}

var (
	_ socketserver.HookConnCreated          = (*promMetrics)(nil)
	_ socketserver.HookConnClosed           = (*promMetrics)(nil)
	_ socketserver.HookRequestReceived      = (*promMetrics)(nil)
	_ socketserver.HookResponseSent         = (*promMetrics)(nil)
	_ socketserver.HookRequestDone          = (*promMetrics)(nil)
	_ socketserver.HookConnAccepted         = (*promMetrics)(nil)
	_ socketserver.HookAcceptorBlocked      = (*promMetrics)(nil)
	_ socketserver.HookConnRejected         = (*promMetrics)(nil)
	_ socketserver.HookAuthenticated        = (*promMetrics)(nil)
	_ socketserver.HookAuthenticationFailed = (*promMetrics)(nil)
)

// latencyBuckets run from 100 µs to 26 s, four times apart.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10)

// newPromMetrics makes the counters and histograms and registers them with
// reg.
func newPromMetrics(reg prometheus.Registerer) (*promMetrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
	}
	m := &promMetrics{
		connectionsCreated: counter("kafka_server_socket_server_metrics_connection_creation_total",
			"Connections accepted (connection-creation-total).", "listener"),
		connectionsClosed: counter("kafka_server_socket_server_metrics_connection_close_total",
			"Connections closed (connection-close-total), by why they closed.", "listener", "reason"),
		requests: counter("kafka_network_request_metrics_requests_total",
			"Requests received (RequestsPerSec), by API.", "listener", "api_key", "request"),
		bytesIn: counter("kafka_server_socket_server_metrics_incoming_byte_total",
			"Bytes of requests received (incoming-byte-total).", "listener"),
		bytesOut: counter("kafka_server_socket_server_metrics_outgoing_byte_total",
			"Bytes of responses sent (outgoing-byte-total).", "listener"),
		totalTime: histogram("kafka_network_request_metrics_total_time_seconds",
			"Time from a request read to its response written (TotalTimeMs), by API.", "listener", "api_key", "request"),
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
		m.totalTime, m.phaseTime, m.accepted, m.acceptorBlocked, m.acceptThrottle, m.ipRejected, m.ipThrottle,
		m.authenticated, m.authFailed, m.reauthenticated, m.reauthFailed} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *promMetrics) OnConnCreated(info connregistry.Info) {
	m.connectionsCreated.WithLabelValues(string(info.Listener)).Inc()
}

func (m *promMetrics) OnConnClosed(info connregistry.Info, reason connregistry.CloseReason) {
	m.connectionsClosed.WithLabelValues(string(info.Listener), string(reason)).Inc()
}

func (m *promMetrics) OnRequestReceived(l protocolmap.ListenerName, apiKey int16, bytes int) {
	m.requests.WithLabelValues(string(l), strconv.Itoa(int(apiKey)), kmsg.NameForKey(apiKey)).Inc()
	m.bytesIn.WithLabelValues(string(l)).Add(float64(bytes))
}

func (m *promMetrics) OnResponseSent(l protocolmap.ListenerName, _ int16, bytes int) {
	m.bytesOut.WithLabelValues(string(l)).Add(float64(bytes))
}

func (m *promMetrics) OnRequestDone(l protocolmap.ListenerName, apiKey int16, t socketserver.RequestLatency) {
	name := kmsg.NameForKey(apiKey)
	m.totalTime.WithLabelValues(string(l), strconv.Itoa(int(apiKey)), name).Observe(t.Total.Seconds())
	if t == (socketserver.RequestLatency{Total: t.Total}) {
		return // answered by the server itself: no phases
	}
	for _, p := range []struct {
		phase string
		d     time.Duration
	}{{"request_queue", t.Queue}, {"local", t.Handler}, {"response_queue", t.ResponseQueue}, {"response_send", t.Send}} {
		m.phaseTime.WithLabelValues(string(l), name, p.phase).Observe(p.d.Seconds())
	}
}

func (m *promMetrics) OnConnAccepted(l protocolmap.ListenerName) {
	m.accepted.WithLabelValues(string(l)).Inc()
}

func (m *promMetrics) OnAcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration) {
	m.acceptorBlocked.WithLabelValues(string(l)).Add(blocked.Seconds())
	m.acceptThrottle.WithLabelValues(string(l)).Add(throttle.Seconds())
}

func (m *promMetrics) OnConnRejected(l protocolmap.ListenerName, _ netip.Addr, err error, hold time.Duration) {
	if errors.Is(err, socketserver.ErrConnectionThrottled) {
		m.ipRejected.WithLabelValues(string(l), "ip_connection_creation_rate").Inc()
		m.ipThrottle.WithLabelValues(string(l)).Add(hold.Seconds())
		return
	}
	m.ipRejected.WithLabelValues(string(l), "max_connections_per_ip").Inc()
}

func (m *promMetrics) OnAuthenticated(info connregistry.Info, reauthentication bool) {
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

func (m *promMetrics) OnAuthenticationFailed(info connregistry.Info, reauthentication bool, _ error) {
	if reauthentication {
		m.reauthFailed.WithLabelValues(string(info.Listener)).Inc()
		return
	}
	m.authFailed.WithLabelValues(string(info.Listener)).Inc()
}

// statsCollector reports a server's gauges and running totals, read from
// Stats at each scrape. Stats has no side effects; the idle ratio is
// measured between this collector's scrapes, from the snapshot it keeps.
type statsCollector struct {
	srv *socketserver.Server

	mu   sync.Mutex
	prev socketserver.Stats
}

var _ prometheus.Collector = (*statsCollector)(nil)

var (
	connectionCountDesc = prometheus.NewDesc("kafka_server_socket_server_metrics_connection_count",
		"Open connections (connection-count).", []string{"listener"}, nil)
	requestQueueSizeDesc = prometheus.NewDesc("kafka_network_request_channel_request_queue_size",
		"Requests waiting for a handler (RequestQueueSize, ControlPlaneRequestQueueSize).", []string{"plane"}, nil)
	processorBusyDesc = prometheus.NewDesc("kafka_network_processor_busy_seconds_total",
		"Time a network processor's connections spent decoding, queueing and writing (1 - IdlePercent: take its rate).", []string{"processor"}, nil)
	processorIdleRatioDesc = prometheus.NewDesc("kafka_network_processor_idle_ratio",
		"Share of the time since the previous scrape that a network processor was idle (IdlePercent).", []string{"processor"}, nil)
	parkedConnectionsDesc = prometheus.NewDesc("kafkanet_parked_connections",
		"Idle connections parked: holding the smallest goroutine stack and no read buffer.", nil, nil)
)

func (*statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionCountDesc
	ch <- requestQueueSizeDesc
	ch <- processorBusyDesc
	ch <- processorIdleRatioDesc
	ch <- parkedConnectionsDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
	c.mu.Lock()
	idle := st.ProcessorIdleRatio(c.prev)
	if st.At.After(c.prev.At) {
		c.prev = st
	}
	c.mu.Unlock()
	for l, n := range st.ConnectionCount {
		ch <- prometheus.MustNewConstMetric(connectionCountDesc, prometheus.GaugeValue, float64(n), string(l))
	}
	for plane, n := range st.RequestQueueSize {
		ch <- prometheus.MustNewConstMetric(requestQueueSizeDesc, prometheus.GaugeValue, float64(n), plane.String())
	}
	for id, busy := range st.ProcessorBusy {
		ch <- prometheus.MustNewConstMetric(processorBusyDesc, prometheus.CounterValue, busy.Seconds(), strconv.Itoa(id))
		ch <- prometheus.MustNewConstMetric(processorIdleRatioDesc, prometheus.GaugeValue, idle[id], strconv.Itoa(id))
	}
	ch <- prometheus.MustNewConstMetric(parkedConnectionsDesc, prometheus.GaugeValue, float64(st.ParkedConnections))
}

// metricsServer serves reg at /metrics on ln until Shutdown.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

func serveMetrics(ln net.Listener, reg *prometheus.Registry) *metricsServer {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln) // ends with ErrServerClosed
	}()
	return m
}

// Shutdown stops the metrics server, waiting for scrapes in progress until
// ctx ends.
func (m *metricsServer) Shutdown(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		_ = m.srv.Close()
	}
	<-m.done
	return err
}
