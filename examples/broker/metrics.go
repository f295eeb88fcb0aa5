package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// The adapter from socketserver's metrics to Prometheus. Names follow
// Kafka's: kafka.server:type=socket-server-metrics becomes
// kafka_server_socket_server_metrics_..., kafka.network's RequestMetrics,
// RequestChannel and Processor become kafka_network_... . Every metric has
// the node_id label of its broker.

// promMetrics counts socketserver's events (socketserver.Metrics).
type promMetrics struct {
	connectionsCreated *prometheus.CounterVec
	connectionsClosed  *prometheus.CounterVec
	requests           *prometheus.CounterVec
	bytesIn            *prometheus.CounterVec
	bytesOut           *prometheus.CounterVec
	accepted           *prometheus.CounterVec
	acceptorBlocked    *prometheus.CounterVec
	acceptThrottle     *prometheus.CounterVec
	ipRejected         *prometheus.CounterVec
	ipThrottle         *prometheus.CounterVec
}

var _ socketserver.Metrics = (*promMetrics)(nil)

// newPromMetrics makes the counters and registers them with reg.
func newPromMetrics(reg prometheus.Registerer) (*promMetrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &promMetrics{
		connectionsCreated: counter("kafka_server_socket_server_metrics_connection_creation_total",
			"Connections accepted (connection-creation-total).", "listener"),
		connectionsClosed: counter("kafka_server_socket_server_metrics_connection_close_total",
			"Connections closed (connection-close-total).", "listener"),
		requests: counter("kafka_network_request_metrics_requests_total",
			"Requests received (RequestsPerSec), by API.", "listener", "api_key", "request"),
		bytesIn: counter("kafka_server_socket_server_metrics_incoming_byte_total",
			"Bytes of requests received (incoming-byte-total).", "listener"),
		bytesOut: counter("kafka_server_socket_server_metrics_outgoing_byte_total",
			"Bytes of responses sent (outgoing-byte-total).", "listener"),
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
	}
	for _, c := range []prometheus.Collector{m.connectionsCreated, m.connectionsClosed, m.requests, m.bytesIn, m.bytesOut,
		m.accepted, m.acceptorBlocked, m.acceptThrottle, m.ipRejected, m.ipThrottle} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *promMetrics) ConnectionCreated(l protocolmap.ListenerName) {
	m.connectionsCreated.WithLabelValues(string(l)).Inc()
}

func (m *promMetrics) ConnectionClosed(l protocolmap.ListenerName) {
	m.connectionsClosed.WithLabelValues(string(l)).Inc()
}

func (m *promMetrics) Request(l protocolmap.ListenerName, apiKey int16, bytes int) {
	m.requests.WithLabelValues(string(l), strconv.Itoa(int(apiKey)), kmsg.NameForKey(apiKey)).Inc()
	m.bytesIn.WithLabelValues(string(l)).Add(float64(bytes))
}

func (m *promMetrics) Response(l protocolmap.ListenerName, _ int16, bytes int) {
	m.bytesOut.WithLabelValues(string(l)).Add(float64(bytes))
}

func (m *promMetrics) ConnectionAccepted(l protocolmap.ListenerName) {
	m.accepted.WithLabelValues(string(l)).Inc()
}

func (m *promMetrics) AcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration) {
	m.acceptorBlocked.WithLabelValues(string(l)).Add(blocked.Seconds())
	m.acceptThrottle.WithLabelValues(string(l)).Add(throttle.Seconds())
}

func (m *promMetrics) ConnectionRejected(l protocolmap.ListenerName, hold time.Duration) {
	if hold == 0 {
		m.ipRejected.WithLabelValues(string(l), "max_connections_per_ip").Inc()
		return
	}
	m.ipRejected.WithLabelValues(string(l), "ip_connection_creation_rate").Inc()
	m.ipThrottle.WithLabelValues(string(l)).Add(hold.Seconds())
}

// statsCollector reports a server's gauges, read from Stats at each scrape.
type statsCollector struct{ srv *socketserver.Server }

var _ prometheus.Collector = statsCollector{}

var (
	connectionCountDesc = prometheus.NewDesc("kafka_server_socket_server_metrics_connection_count",
		"Open connections (connection-count).", []string{"listener"}, nil)
	requestQueueSizeDesc = prometheus.NewDesc("kafka_network_request_channel_request_queue_size",
		"Requests waiting for a handler (RequestQueueSize, ControlPlaneRequestQueueSize).", []string{"plane"}, nil)
	processorIdleRatioDesc = prometheus.NewDesc("kafka_network_processor_idle_ratio",
		"Share of the time since the previous scrape that a network processor was idle (IdlePercent).", []string{"processor"}, nil)
)

func (statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connectionCountDesc
	ch <- requestQueueSizeDesc
	ch <- processorIdleRatioDesc
}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.Stats()
	for l, n := range st.ConnectionCount {
		ch <- prometheus.MustNewConstMetric(connectionCountDesc, prometheus.GaugeValue, float64(n), string(l))
	}
	for plane, n := range st.RequestQueueSize {
		ch <- prometheus.MustNewConstMetric(requestQueueSizeDesc, prometheus.GaugeValue, float64(n), plane.String())
	}
	for id, ratio := range st.ProcessorIdleRatio {
		ch <- prometheus.MustNewConstMetric(processorIdleRatioDesc, prometheus.GaugeValue, ratio, strconv.Itoa(id))
	}
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
