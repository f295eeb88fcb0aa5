package knprom

import (
	"crypto/x509"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Stats is a [prometheus.Collector] of a server's gauges and running
// totals, read from [socketserver.Server.Stats] at each collection; it
// costs nothing between scrapes. Make it with [NewStats] and register it
// with the registerer [NewMetrics] was given. The processor idle ratio is
// measured between this collector's collections, from the snapshot it
// keeps, so give each scraper (registry) a collector of its own.
type Stats struct {
	srv *socketserver.Server

	mu   sync.Mutex
	prev socketserver.Stats
}

// NewStats returns the collector of srv's gauges.
func NewStats(srv *socketserver.Server) *Stats { return &Stats{srv: srv} }

var _ prometheus.Collector = (*Stats)(nil)

var (
	connectionCountDesc = prometheus.NewDesc("kafka_server_socket_server_metrics_connection_count",
		"Open connections (connection-count).", []string{"listener"}, nil)
	requestQueueSizeDesc = prometheus.NewDesc("kafka_network_request_channel_request_queue_size",
		"Requests waiting for a handler (RequestQueueSize, ControlPlaneRequestQueueSize).", []string{"plane"}, nil)
	processorBusyDesc = prometheus.NewDesc("kafka_network_processor_busy_seconds_total",
		"Time a network processor's connections spent decoding, queueing and writing (1 - IdlePercent: take its rate).", []string{"processor"}, nil)
	processorIdleRatioDesc = prometheus.NewDesc("kafka_network_processor_idle_ratio",
		"Share of the time since the previous collection that a network processor was idle (IdlePercent).", []string{"processor"}, nil)
	parkedConnectionsDesc = prometheus.NewDesc("kafkanet_parked_connections",
		"Idle connections parked: holding the smallest goroutine stack and no read buffer.", nil, nil)
	proxyPendingDesc = prometheus.NewDesc("kafkanet_proxy_protocol_pending",
		"Accepted sockets of a listener that requires the PROXY protocol waiting for their header: counted against max.connections, not yet connections.", []string{"listener"}, nil)
	memoryPoolUsedDesc = prometheus.NewDesc("kafka_network_socket_server_memory_pool_used_bytes",
		"Bytes of requests read and not yet answered, against the plane's pool: queued.max.request.bytes on the data plane, socket.request.max.bytes on the control plane (MemoryPoolUsed).", []string{"plane"}, nil)
	memoryPoolAvailableDesc = prometheus.NewDesc("kafka_network_socket_server_memory_pool_available_bytes",
		"Bytes of the plane's pool not in use (MemoryPoolAvailable); 0 when the pool is overdrawn by one request.", []string{"plane"}, nil)
	certificateNotAfterDesc = prometheus.NewDesc("kafkanet_tls_certificate_not_after_timestamp_seconds",
		"When a certificate a TLS listener serves new connections expires (its NotAfter, in seconds since the Unix epoch); index 0 is the listener's default certificate, the others its server names' (kafkanet.ssl.server.names, in order).",
		[]string{"listener", "index", "subject"}, nil)
	probesDesc = prometheus.NewDesc("kafkanet_connection_probes_total",
		"Probes closed: connections closed by their client before a byte of a request (after the PROXY header and TLS handshake, if any), and a load balancer's own (PROXY LOCAL), such as health checks; kept out of the history of closed connections.", []string{"listener"}, nil)
	auditDroppedDesc = prometheus.NewDesc("kafkanet_audit_events_dropped_total",
		"Audit events dropped because the audit queue was full (a slow audit hook); each drop is also reported in the audit trail itself once there is room.", nil, nil)
	memoryPoolDepletedDesc = prometheus.NewDesc("kafka_server_socket_server_metrics_memory_pool_depleted_seconds_total",
		"Time the request memory pool has been spent, so that connections waited to read (MemoryPoolDepletedTimeTotal).", []string{"plane"}, nil)
)

// Describe implements [prometheus.Collector].
func (*Stats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{connectionCountDesc, requestQueueSizeDesc, processorBusyDesc,
		processorIdleRatioDesc, parkedConnectionsDesc, proxyPendingDesc, probesDesc, auditDroppedDesc, certificateNotAfterDesc, memoryPoolUsedDesc, memoryPoolAvailableDesc, memoryPoolDepletedDesc} {
		ch <- d
	}
}

// Collect implements [prometheus.Collector]. The request memory pool's
// series exist only for a server with queued.max.request.bytes set, the
// PROXY protocol's for the listeners that require it, and the
// certificates' for the TLS listeners ([socketserver.Server.TLSConfig]:
// the certificates in force after the last reload).
func (c *Stats) Collect(ch chan<- prometheus.Metric) {
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
	for l, n := range st.PendingProxyHeaders {
		ch <- prometheus.MustNewConstMetric(proxyPendingDesc, prometheus.GaugeValue, float64(n), string(l))
	}
	for l, n := range st.ProbesClosed {
		ch <- prometheus.MustNewConstMetric(probesDesc, prometheus.CounterValue, float64(n), string(l))
	}
	ch <- prometheus.MustNewConstMetric(auditDroppedDesc, prometheus.CounterValue, float64(st.AuditDropped))
	for _, l := range c.srv.Listeners().All {
		cfg := c.srv.TLSConfig(l.Name)
		if cfg == nil {
			continue
		}
		for i, cert := range cfg.Certificates {
			leaf := cert.Leaf
			if leaf == nil && len(cert.Certificate) > 0 {
				leaf, _ = x509.ParseCertificate(cert.Certificate[0]) // a certificate that does not parse has no series
			}
			if leaf != nil {
				ch <- prometheus.MustNewConstMetric(certificateNotAfterDesc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()),
					string(l.Name), strconv.Itoa(i), security.SubjectDN(leaf))
			}
		}
	}
	for plane, mem := range st.RequestMemory {
		ch <- prometheus.MustNewConstMetric(memoryPoolUsedDesc, prometheus.GaugeValue, float64(mem.Used), plane.String())
		ch <- prometheus.MustNewConstMetric(memoryPoolAvailableDesc, prometheus.GaugeValue, float64(max(mem.Size-mem.Used, 0)), plane.String())
		ch <- prometheus.MustNewConstMetric(memoryPoolDepletedDesc, prometheus.CounterValue, mem.Depleted.Seconds(), plane.String())
	}
}
