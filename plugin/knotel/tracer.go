package knotel

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkanet/kafkanet/socketserver"
)

// The span attributes' keys beyond the metrics' (see [Tracer]).
const (
	keyAPIVersion      = attribute.Key("kafka.api_version")
	keyCorrelationID   = attribute.Key("kafka.correlation_id")
	keyClientID        = attribute.Key("kafka.client_id")
	keyConnID          = attribute.Key("kafka.connection.id")
	keyPrincipal       = attribute.Key("kafka.principal")
	keySoftwareName    = attribute.Key("kafka.client_software.name")
	keySoftwareVersion = attribute.Key("kafka.client_software.version")
	keyRequestSize     = attribute.Key("kafka.request.size")
	keyResponseSize    = attribute.Key("kafka.response.size")
	keyThrottleMs      = attribute.Key("kafka.throttle_time_ms")
	keyServerAnswered  = attribute.Key("kafka.server_answered")
	keyClosed          = attribute.Key("kafka.connection.closed")
	keyClientAddress   = attribute.Key("client.address")
	keyClientPort      = attribute.Key("client.port")
	keyNetTransport    = attribute.Key("network.transport")
)

// Tracer makes a span for every request the server reads: it is a hook
// ([socketserver.Config.Hooks]) implementing
// [socketserver.HookRequestDone] and nothing else. Make it with
// [NewTracer].
//
// Each span is a server span named after the API (Metadata, Produce),
// from the request's frame read to its response written (the hook runs
// when the request is done, and the span starts the request's total time
// before), with the request log's attributes: rpc.system.name "kafka",
// rpc.method, kafka.api_key, kafka.api_version, kafka.correlation_id,
// kafka.client_id, kafka.listener, kafka.connection.id, kafka.principal,
// kafka.client_software.name and .version, client.address, client.port,
// network.transport "tcp", kafka.request.size and kafka.response.size
// (bytes), kafka.throttle_time_ms, kafka.server_answered and
// kafka.connection.closed. A request the host answered has an event at
// each phase's end: dequeued, answered and, with a response, write
// started (where Kafka's RequestQueueTimeMs, LocalTimeMs and
// ResponseQueueTimeMs end; the span's end is ResponseSendTimeMs's). A
// request whose connection closed before a response was written has the
// status Error.
//
// Requests arrive on a connection of their own, with no trace context in
// the Kafka protocol, so each span is the root of a trace. The attributes
// are set only on spans the sampler records.
type Tracer struct {
	tracer trace.Tracer
}

var _ socketserver.HookRequestDone = (*Tracer)(nil)

// NewTracer returns the hook that traces requests with a tracer of tp
// named [ScopeName].
func NewTracer(tp trace.TracerProvider) *Tracer {
	return &Tracer{tracer: tp.Tracer(ScopeName)}
}

// OnRequestDone implements [socketserver.HookRequestDone].
func (t *Tracer) OnRequestDone(r *socketserver.RequestDone) {
	end := time.Now()
	start := end.Add(-r.Latency.Total)
	name := kmsg.NameForKey(r.APIKey)
	_, span := t.tracer.Start(context.Background(), name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(start), trace.WithNewRoot())
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(end))
		return
	}
	c := &r.Conn
	span.SetAttributes(
		rpcSystem,
		keyRPCMethod.String(name),
		keyAPIKey.Int(int(r.APIKey)),
		keyAPIVersion.Int(int(r.APIVersion)),
		keyCorrelationID.Int(int(r.CorrelationID)),
		keyClientID.String(r.ClientID),
		keyListener.String(string(c.Listener)),
		keyConnID.String(c.ID),
		keyPrincipal.String(c.Principal.String()),
		keySoftwareName.String(c.ClientSoftwareName),
		keySoftwareVersion.String(c.ClientSoftwareVersion),
		keyClientAddress.String(c.ClientAddr.Addr().String()),
		keyClientPort.Int(int(c.ClientAddr.Port())),
		keyNetTransport.String("tcp"),
		keyRequestSize.Int(r.RequestBytes),
		keyResponseSize.Int(r.ResponseBytes),
		keyThrottleMs.Int64(r.Throttle.Milliseconds()),
		keyServerAnswered.Bool(r.ServerAnswered),
		keyClosed.Bool(r.Closed),
	)
	if l := r.Latency; !r.ServerAnswered && l.Handler > 0 {
		dequeued := start.Add(l.Queue)
		answered := dequeued.Add(l.Handler)
		span.AddEvent("dequeued", trace.WithTimestamp(dequeued))
		span.AddEvent("answered", trace.WithTimestamp(answered))
		if r.ResponseBytes > 0 {
			span.AddEvent("write started", trace.WithTimestamp(answered.Add(l.ResponseQueue)))
		}
	}
	if r.Closed && r.ResponseBytes == 0 {
		span.SetStatus(codes.Error, "the connection closed before a response was written")
	}
	span.End(trace.WithTimestamp(end))
}
