package knotel

import (
	"context"
	"crypto/x509"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

var (
	keyCertificateIndex = attribute.Key("kafka.tls.certificate.index")
	keyTLSSubject       = attribute.Key("tls.server.subject") // OpenTelemetry's semantic conventions
)

// ObserveStats adds srv's gauges and running totals, read from
// [socketserver.Server.Stats] when the meter's reader collects, so that
// they cost nothing between collections:
//
//   - kafka.server.connection.count: open connections, per kafka.listener
//     (Kafka's connection-count);
//   - kafka.server.request.queue.size: requests waiting for a handler, per
//     kafka.plane (RequestQueueSize, ControlPlaneRequestQueueSize);
//   - kafka.server.processor.busy.time: time each network processor's
//     connections spent decoding, queueing and writing, per
//     kafka.processor.id (its rate is 1 - Kafka's IdlePercent);
//   - kafka.server.connection.parked: idle connections parked;
//   - kafka.server.proxy_protocol.pending: accepted sockets waiting for
//     their PROXY header, per kafka.listener that requires the protocol;
//   - kafka.server.connection.probes: probes closed, per kafka.listener:
//     connections closed by their client before a byte of a request, and
//     a load balancer's own (PROXY LOCAL), such as health checks, which
//     the registry's history of closed connections leaves out
//     ([socketserver.Stats.ProbesClosed]);
//   - kafka.server.audit.events.dropped: audit events dropped because the
//     audit queue was full ([socketserver.Stats.AuditDropped]);
//   - kafka.server.request.memory.used and .limit, and
//     kafka.server.request.memory.depleted.time, per kafka.plane, with
//     queued.max.request.bytes set (MemoryPoolUsed, the pool's size, and
//     MemoryPoolDepletedTimeTotal);
//   - kafka.server.tls.certificate.not_after: when each certificate a TLS
//     listener serves new connections expires, in seconds since the Unix
//     epoch, per kafka.listener, kafka.tls.certificate.index (0 is the
//     listener's default certificate, the others its server names', in
//     the order of kafkanet.ssl.server.names) and tls.server.subject, read
//     from [socketserver.Server.TLSConfig], so a reload shows at the next
//     collection: an alert can fire before a certificate expires (Kafka
//     has no such metric).
//
// Unregister the returned registration when srv is gone; a host with
// several servers calls ObserveStats for each, and their series add up
// unless the meter provider tells them apart.
func (m *Metrics) ObserveStats(srv *socketserver.Server) (metric.Registration, error) {
	connections, err1 := m.meter.Int64ObservableUpDownCounter("kafka.server.connection.count",
		metric.WithUnit("{connection}"), metric.WithDescription("Open connections (Kafka's connection-count)."))
	queue, err2 := m.meter.Int64ObservableUpDownCounter("kafka.server.request.queue.size",
		metric.WithUnit("{request}"), metric.WithDescription("Requests waiting for a handler (Kafka's RequestQueueSize, ControlPlaneRequestQueueSize)."))
	busy, err3 := m.meter.Float64ObservableCounter("kafka.server.processor.busy.time",
		metric.WithUnit("s"), metric.WithDescription("Time a network processor's connections spent decoding, queueing and writing (1 - Kafka's IdlePercent: take its rate)."))
	parked, err4 := m.meter.Int64ObservableUpDownCounter("kafka.server.connection.parked",
		metric.WithUnit("{connection}"), metric.WithDescription("Idle connections parked: holding the smallest goroutine stack and no read buffer."))
	memUsed, err5 := m.meter.Int64ObservableUpDownCounter("kafka.server.request.memory.used",
		metric.WithUnit("By"), metric.WithDescription("Bytes of requests read and not yet answered (Kafka's MemoryPoolUsed)."))
	memLimit, err6 := m.meter.Int64ObservableUpDownCounter("kafka.server.request.memory.limit",
		metric.WithUnit("By"), metric.WithDescription("The request memory pool's size: queued.max.request.bytes on the data plane, socket.request.max.bytes on the control plane."))
	memDepleted, err7 := m.meter.Float64ObservableCounter("kafka.server.request.memory.depleted.time",
		metric.WithUnit("s"), metric.WithDescription("Time the request memory pool has been spent, so that connections waited to read (Kafka's MemoryPoolDepletedTimeTotal)."))
	proxyPending, err8 := m.meter.Int64ObservableUpDownCounter("kafka.server.proxy_protocol.pending",
		metric.WithUnit("{connection}"), metric.WithDescription("Accepted sockets of a listener that requires the PROXY protocol waiting for their header: counted against max.connections, not yet connections."))
	notAfter, err9 := m.meter.Int64ObservableGauge("kafka.server.tls.certificate.not_after",
		metric.WithUnit("s"), metric.WithDescription("When a certificate a TLS listener serves new connections expires (its NotAfter, in seconds since the Unix epoch)."))
	probes, err10 := m.meter.Int64ObservableCounter("kafka.server.connection.probes",
		metric.WithUnit("{connection}"), metric.WithDescription("Probes closed: connections closed by their client before a byte of a request, and a load balancer's own (PROXY LOCAL), such as health checks; kept out of the history of closed connections."))
	auditDropped, err11 := m.meter.Int64ObservableCounter("kafka.server.audit.events.dropped",
		metric.WithUnit("{event}"), metric.WithDescription("Audit events dropped because the audit queue was full (a slow audit hook); each drop is also reported in the audit trail itself once there is room."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6, err7, err8, err9, err10, err11); err != nil {
		return nil, err
	}
	return m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := srv.Stats()
		for l, n := range st.ConnectionCount {
			o.ObserveInt64(connections, int64(n), metric.WithAttributes(keyListener.String(string(l))))
		}
		for plane, n := range st.RequestQueueSize {
			o.ObserveInt64(queue, int64(n), metric.WithAttributes(keyPlane.String(plane.String())))
		}
		for id, d := range st.ProcessorBusy {
			o.ObserveFloat64(busy, d.Seconds(), metric.WithAttributes(keyProcessor.String(strconv.Itoa(id))))
		}
		o.ObserveInt64(parked, int64(st.ParkedConnections))
		for l, n := range st.PendingProxyHeaders {
			o.ObserveInt64(proxyPending, int64(n), metric.WithAttributes(keyListener.String(string(l))))
		}
		for l, n := range st.ProbesClosed {
			o.ObserveInt64(probes, n, metric.WithAttributes(keyListener.String(string(l))))
		}
		o.ObserveInt64(auditDropped, st.AuditDropped)
		for _, l := range srv.Listeners().All {
			cfg := srv.TLSConfig(l.Name)
			if cfg == nil {
				continue
			}
			for i, cert := range cfg.Certificates {
				leaf := cert.Leaf
				if leaf == nil && len(cert.Certificate) > 0 {
					leaf, _ = x509.ParseCertificate(cert.Certificate[0]) // a certificate that does not parse is not observed
				}
				if leaf != nil {
					o.ObserveInt64(notAfter, leaf.NotAfter.Unix(), metric.WithAttributes(keyListener.String(string(l.Name)),
						keyCertificateIndex.Int(i), keyTLSSubject.String(security.SubjectDN(leaf))))
				}
			}
		}
		for plane, mem := range st.RequestMemory {
			attrs := metric.WithAttributeSet(attribute.NewSet(keyPlane.String(plane.String())))
			o.ObserveInt64(memUsed, int64(mem.Used), attrs)
			o.ObserveInt64(memLimit, int64(mem.Size), attrs)
			o.ObserveFloat64(memDepleted, mem.Depleted.Seconds(), attrs)
		}
		return nil
	}, connections, queue, busy, parked, proxyPending, probes, auditDropped, memUsed, memLimit, memDepleted, notAfter)
}
