// Package knotel exports a kafkanet socket server's metrics to
// OpenTelemetry, under OpenTelemetry's semantic-convention names where
// they have one, and Kafka's meaning in each description, and traces each
// request as a span with the request log's attributes ([Tracer]).
//
// It is a module of its own (github.com/kafkanet/kafkanet/plugin/knotel),
// so that only a host that imports it gets OpenTelemetry in its build
// list; the library itself depends on no metrics or tracing system.
//
// [Metrics] is a socketserver hook: append it to
// [socketserver.Config.Hooks] before [socketserver.New], then call
// [Metrics.ObserveStats] with the server for its gauges, which are read
// from [socketserver.Server.Stats] only when the meter's reader collects.
// Metrics implements only the hook interfaces it has an instrument for;
// on a request's path it records into instruments whose attribute sets
// were made once per listener and API, and allocates nothing.
//
//	m, err := knotel.NewMetrics(meterProvider)
//	if err != nil { ... }
//	cfg.Hooks = append(cfg.Hooks, m)
//	srv, err := socketserver.New(cfg)
//	if err != nil { ... }
//	reg, err := m.ObserveStats(srv)
//	if err != nil { ... }
//	defer reg.Unregister()
//
// The request instruments follow the RPC semantic conventions, with
// rpc.system.name "kafka" and rpc.method the API's name (Metadata,
// Produce), plus kafka.api_key and kafka.listener:
//
//   - rpc.server.call.duration (s): from a request read to its response
//     written, or to the close that ended it (Kafka's TotalTimeMs), for
//     every request but those of a SASL exchange, which Kafka's
//     authenticator answers outside its request metrics
//     (socketserver.RequestDone.Authenticating);
//   - rpc.server.request.size and rpc.server.response.size (By): every
//     request frame received, without its 4-byte size prefix, and every
//     response written, with it; the SASL exchange's are included, so
//     that their count is Kafka's RequestsPerSec plus the exchange's
//     requests (rpc.server.call.duration's count is RequestsPerSec), and
//     their sums are incoming-byte-total and outgoing-byte-total but for
//     the requests' prefixes;
//   - kafka.server.request.phase.duration (s), with kafka.request.phase
//     request_queue, local, response_queue or response_send: the phases of
//     Kafka's RequestMetrics, for the requests the host answered with a
//     response or NoResponse.
//
// The semantic conventions define no server-side connection metrics for a
// protocol like Kafka's, so the others are named after Kafka's
// socket-server metrics under kafka.server, with OpenTelemetry's units:
// kafka.server.connection.accepted, .created, .closed (with
// kafka.connection.close_reason, a connregistry.CloseReason token such as
// client-closed) and .rejected (with error.type naming the
// quota), kafka.server.acceptor.blocked.time,
// kafka.server.connection.accept.throttle.time,
// kafka.server.ip.connection.accept.throttle.time,
// kafka.server.authentications (with kafka.sasl.mechanism, SSL for a
// TLS listener's, kafka.authentication.result success or failure, and
// kafka.authentication.reauthentication) and
// kafka.server.proxy_protocol.refused (with error.type untrusted or
// header: a listener that requires the PROXY protocol refused the
// connection); the gauges are listed at
// [Metrics.ObserveStats].
package knotel
