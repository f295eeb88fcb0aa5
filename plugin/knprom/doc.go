// Package knprom exports a kafkanet socket server's metrics to Prometheus
// under Apache Kafka's metric names, so that the dashboards and alerts
// written for a Kafka broker's network layer read a kafkanet host too.
//
// It is a module of its own (github.com/kafkanet/kafkanet/plugin/knprom),
// so that only a host that imports it gets the Prometheus client in its
// build list; the library itself depends on no metrics system.
//
// Two parts, registered with the same [prometheus.Registerer]:
//
//   - [Metrics] counts the server's events. It is a socketserver hook:
//     append it to [socketserver.Config.Hooks] before [socketserver.New].
//     It implements only the hook interfaces it has a metric for, and does
//     nothing on a request's path beyond those calls.
//   - [Stats] reports the gauges (open connections, request queue sizes,
//     processor busy time and idle ratio, parked connections, the request
//     memory pool, sockets waiting for a PROXY header) and the probes
//     closed (kafkanet_connection_probes_total: health checks and other
//     connections closed before a request, which the registry's history
//     leaves out) and the audit events dropped behind a slow audit hook
//     (kafkanet_audit_events_dropped_total), read from
//     [socketserver.Server.Stats] when Prometheus collects, so they cost
//     nothing between scrapes, and when each certificate a TLS listener
//     serves expires, for an alert before it does
//     (kafkanet_tls_certificate_not_after_timestamp_seconds; Kafka has no
//     such metric).
//
// A host with several servers in one process labels each one's metrics,
// as the example broker does with Kafka's node_id:
//
//	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node_id": "1"}, registry)
//	m, err := knprom.NewMetrics(reg)
//	if err != nil { ... }
//	cfg.Hooks = append(cfg.Hooks, m)
//	srv, err := socketserver.New(cfg)
//	if err != nil { ... }
//	if err := reg.Register(knprom.NewStats(srv)); err != nil { ... }
//
// Names follow Kafka's JMX names: kafka.server:type=socket-server-metrics
// becomes kafka_server_socket_server_metrics_..., and kafka.network's
// RequestMetrics, RequestChannel, Acceptor, Processor and SocketServer
// become kafka_network_... . Times are in seconds and byte counts in bytes,
// as Prometheus names them (Kafka's TotalTimeMs is
// kafka_network_request_metrics_total_time_seconds). Each metric's help
// text names the Kafka metric it stands for, where Kafka has one:
// kafka_server_socket_server_metrics_ip_connection_rejected_total counts
// what Kafka only logs (a connection closed by max.connections.per.ip or
// the per-address creation rate), and the kafkanet_ metrics what Kafka
// does not have.
package knprom
