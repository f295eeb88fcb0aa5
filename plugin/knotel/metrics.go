package knotel

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// ScopeName is the instrumentation scope of the meter and tracer: the
// package's import path.
const ScopeName = "github.com/kafkanet/kafkanet/plugin/knotel"

// The attribute keys. Those of OpenTelemetry's semantic conventions come
// first; the rest are Kafka's, under kafka.
const (
	keyRPCSystem   = attribute.Key("rpc.system.name") // always "kafka"
	keyRPCMethod   = attribute.Key("rpc.method")      // the API's name: Metadata, Produce
	keyErrorType   = attribute.Key("error.type")
	keyListener    = attribute.Key("kafka.listener")
	keyAPIKey      = attribute.Key("kafka.api_key")
	keyPhase       = attribute.Key("kafka.request.phase")
	keyCloseReason = attribute.Key("kafka.connection.close_reason")
	keyMechanism   = attribute.Key("kafka.sasl.mechanism")
	keyAuthResult  = attribute.Key("kafka.authentication.result")
	keyReauth      = attribute.Key("kafka.authentication.reauthentication")
	keyPlane       = attribute.Key("kafka.plane")
	keyProcessor   = attribute.Key("kafka.processor.id")
)

// rpcSystem is rpc.system.name's value.
var rpcSystem = keyRPCSystem.String("kafka")

// Metrics records a socket server's events as OpenTelemetry metrics: it is
// one hook ([socketserver.Config.Hooks]) implementing every hook interface
// it has a metric for. Make it with [NewMetrics]; add the gauges with
// [Metrics.ObserveStats]. It is safe for concurrent use, as hooks must be.
type Metrics struct {
	meter metric.Meter

	callDuration  metric.Float64Histogram
	requestSize   metric.Int64Histogram
	responseSize  metric.Int64Histogram
	phaseDuration metric.Float64Histogram

	connAccepted    metric.Int64Counter
	connCreated     metric.Int64Counter
	connClosed      metric.Int64Counter
	connRejected    metric.Int64Counter
	proxyRefused    metric.Int64Counter
	acceptorBlocked metric.Float64Counter
	acceptThrottle  metric.Float64Counter
	ipThrottle      metric.Float64Counter
	authentications metric.Int64Counter

	// requestOpts are the measurement options of each (listener, API key)
	// seen, made once so that a request's hooks allocate nothing: a map
	// replaced whole, under requestOptsMu, when a pair is new, and read
	// without a lock. The hooks see only the APIs a listener accepts, so
	// it stays small.
	requestOpts   atomic.Pointer[map[requestKey]*requestOptions]
	requestOptsMu sync.Mutex
}

type requestKey struct {
	listener protocolmap.ListenerName
	apiKey   int16
}

// requestOptions are one (listener, API key)'s options: the request's
// attributes, and those with each phase.
type requestOptions struct {
	record []metric.RecordOption
	phases [4][]metric.RecordOption // request_queue, local, response_queue, response_send
}

var phaseNames = [4]string{"request_queue", "local", "response_queue", "response_send"}

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

// DurationBuckets returns the request-time histograms' bucket boundaries,
// in seconds: from 100 µs to 26 s, four times apart, as plugin/knprom's,
// in a new slice. (An OpenTelemetry SDK view changes them.)
func DurationBuckets() []float64 {
	return []float64{0.0001, 0.0004, 0.0016, 0.0064, 0.0256, 0.1024, 0.4096, 1.6384, 6.5536, 26.2144}
}

// SizeBuckets returns the request and response size histograms' bucket
// boundaries, in bytes: from 64 B to 64 MiB, four times apart, in a new
// slice.
func SizeBuckets() []float64 {
	return []float64{64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
}

// NewMetrics makes the instruments with a meter of mp named [ScopeName].
func NewMetrics(mp metric.MeterProvider) (*Metrics, error) {
	m := &Metrics{meter: mp.Meter(ScopeName)}
	var errs []error
	fhist := func(name, unit, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	ihist := func(name, unit, desc string, buckets []float64) metric.Int64Histogram {
		h, err := m.meter.Int64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	icounter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	fcounter := func(name, unit, desc string) metric.Float64Counter {
		c, err := m.meter.Float64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.callDuration = fhist("rpc.server.call.duration", "s",
		"Time from a request read to its response written, to the answer without one, or to the close that ended it (Kafka's TotalTimeMs); the SASL exchange is not timed, as in Kafka.", DurationBuckets())
	m.requestSize = ihist("rpc.server.request.size", "By",
		"Size of the requests received, without the size prefix (Kafka's RequestsPerSec and incoming-byte-total).", SizeBuckets())
	m.responseSize = ihist("rpc.server.response.size", "By",
		"Size of the responses written, with the size prefix (Kafka's outgoing-byte-total).", SizeBuckets())
	m.phaseDuration = fhist("kafka.server.request.phase.duration", "s",
		"Where the time of requests the host answered went (Kafka's RequestQueueTimeMs, LocalTimeMs, ResponseQueueTimeMs, ResponseSendTimeMs).", DurationBuckets())
	m.connAccepted = icounter("kafka.server.connection.accepted", "{connection}",
		"Connections admitted by the connection quotas (Kafka's connection-accept-rate).")
	m.connCreated = icounter("kafka.server.connection.created", "{connection}",
		"Connections registered (Kafka's connection-creation-total).")
	m.connClosed = icounter("kafka.server.connection.closed", "{connection}",
		"Connections closed, by why (Kafka's connection-close-total).")
	m.connRejected = icounter("kafka.server.connection.rejected", "{connection}",
		"Connections closed by max.connections.per.ip or the per-address creation rate.")
	m.proxyRefused = icounter("kafka.server.proxy_protocol.refused", "{connection}",
		"Connections refused on a listener that requires the PROXY protocol (kafkanet.proxy.protocol), by why: untrusted (from outside its trusted networks) or header (no valid header).")
	m.acceptorBlocked = fcounter("kafka.server.acceptor.blocked.time", "s",
		"Time the acceptor waited for the connection quotas (Kafka's AcceptorBlockedPercent: take its rate).")
	m.acceptThrottle = fcounter("kafka.server.connection.accept.throttle.time", "s",
		"Creation-rate delay imposed on new connections (Kafka's connection-accept-throttle-time).")
	m.ipThrottle = fcounter("kafka.server.ip.connection.accept.throttle.time", "s",
		"Time throttled connections were held before closing (Kafka's ip-connection-accept-throttle-time).")
	m.authentications = icounter("kafka.server.authentications", "{authentication}",
		"TLS and SASL authentications and re-authentications, by result (Kafka's successful- and failed-(re)authentication-total).")
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// opts returns the measurement options of requests of apiKey on l.
func (m *Metrics) opts(l protocolmap.ListenerName, apiKey int16) *requestOptions {
	k := requestKey{l, apiKey}
	if all := m.requestOpts.Load(); all != nil {
		if o, ok := (*all)[k]; ok {
			return o
		}
	}
	m.requestOptsMu.Lock()
	defer m.requestOptsMu.Unlock()
	next := map[requestKey]*requestOptions{}
	if all := m.requestOpts.Load(); all != nil {
		if o, ok := (*all)[k]; ok {
			return o
		}
		for k, o := range *all {
			next[k] = o
		}
	}
	attrs := []attribute.KeyValue{rpcSystem, keyRPCMethod.String(kmsg.NameForKey(apiKey)),
		keyAPIKey.Int(int(apiKey)), keyListener.String(string(l))}
	o := &requestOptions{record: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}}
	for i, phase := range phaseNames {
		o.phases[i] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(attrs, keyPhase.String(phase))...))}
	}
	next[k] = o
	m.requestOpts.Store(&next)
	return o
}

// OnRequestReceived implements [socketserver.HookRequestReceived].
func (m *Metrics) OnRequestReceived(l protocolmap.ListenerName, apiKey int16, bytes int) {
	m.requestSize.Record(context.Background(), int64(bytes), m.opts(l, apiKey).record...)
}

// OnResponseSent implements [socketserver.HookResponseSent].
func (m *Metrics) OnResponseSent(l protocolmap.ListenerName, apiKey int16, bytes int) {
	m.responseSize.Record(context.Background(), int64(bytes), m.opts(l, apiKey).record...)
}

// OnRequestDone implements [socketserver.HookRequestDone], as Kafka's
// RequestMetrics: the duration of every request but those of a SASL
// exchange (RequestDone.Authenticating), which Kafka's authenticator
// answers outside its request metrics, and the phases of those the host
// answered (not the server itself) without the connection closing
// instead.
func (m *Metrics) OnRequestDone(r *socketserver.RequestDone) {
	if r.Authenticating {
		return
	}
	ctx := context.Background()
	t := r.Latency
	o := m.opts(r.Conn.Listener, r.APIKey)
	m.callDuration.Record(ctx, t.Total.Seconds(), o.record...)
	if r.ServerAnswered || r.Closed && r.ResponseBytes == 0 {
		return // no phases: the server's own work, or an answer never written
	}
	for i, d := range [4]time.Duration{t.Queue, t.Handler, t.ResponseQueue, t.Send} {
		m.phaseDuration.Record(ctx, d.Seconds(), o.phases[i]...)
	}
}

// OnConnAccepted implements [socketserver.HookConnAccepted].
func (m *Metrics) OnConnAccepted(l protocolmap.ListenerName) {
	m.connAccepted.Add(context.Background(), 1, metric.WithAttributes(keyListener.String(string(l))))
}

// OnConnCreated implements [socketserver.HookConnCreated].
func (m *Metrics) OnConnCreated(info connregistry.Info) {
	m.connCreated.Add(context.Background(), 1, metric.WithAttributes(keyListener.String(string(info.Listener))))
}

// OnConnClosed implements [socketserver.HookConnClosed].
func (m *Metrics) OnConnClosed(info connregistry.Info, reason connregistry.CloseReason) {
	m.connClosed.Add(context.Background(), 1, metric.WithAttributes(keyListener.String(string(info.Listener)),
		keyCloseReason.String(string(reason))))
}

// OnConnRejected implements [socketserver.HookConnRejected]. error.type
// says which quota: max_connections_per_ip or ip_connection_creation_rate.
func (m *Metrics) OnConnRejected(l protocolmap.ListenerName, _ netip.Addr, err error, hold time.Duration) {
	ctx := context.Background()
	listener := keyListener.String(string(l))
	if errors.Is(err, socketserver.ErrConnectionThrottled) {
		m.connRejected.Add(ctx, 1, metric.WithAttributes(listener, keyErrorType.String("ip_connection_creation_rate")))
		m.ipThrottle.Add(ctx, hold.Seconds(), metric.WithAttributes(listener))
		return
	}
	m.connRejected.Add(ctx, 1, metric.WithAttributes(listener, keyErrorType.String("max_connections_per_ip")))
}

// OnProxyRefused implements [socketserver.HookProxyRefused]. error.type
// says why: untrusted ([socketserver.ErrProxyUntrusted]) or header
// ([socketserver.ErrProxyHeader]).
func (m *Metrics) OnProxyRefused(l protocolmap.ListenerName, _ netip.AddrPort, err error) {
	reason := "header"
	if errors.Is(err, socketserver.ErrProxyUntrusted) {
		reason = "untrusted"
	}
	m.proxyRefused.Add(context.Background(), 1, metric.WithAttributes(keyListener.String(string(l)), keyErrorType.String(reason)))
}

// OnAcceptorBlocked implements [socketserver.HookAcceptorBlocked].
func (m *Metrics) OnAcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration) {
	ctx := context.Background()
	listener := metric.WithAttributes(keyListener.String(string(l)))
	m.acceptorBlocked.Add(ctx, blocked.Seconds(), listener)
	m.acceptThrottle.Add(ctx, throttle.Seconds(), listener)
}

// OnAuthenticated implements [socketserver.HookAuthenticated]. A
// connection authenticated by TLS alone has the mechanism SSL.
func (m *Metrics) OnAuthenticated(info connregistry.Info, reauthentication bool) {
	mechanism := info.SASLMechanism
	if mechanism == "" {
		mechanism = "SSL" // a TLS client certificate, or none
	}
	m.authentications.Add(context.Background(), 1, metric.WithAttributes(keyListener.String(string(info.Listener)),
		keyMechanism.String(mechanism), keyAuthResult.String("success"), keyReauth.Bool(reauthentication)))
}

// OnAuthenticationFailed implements [socketserver.HookAuthenticationFailed].
// A failed TLS handshake on an SSL listener has the mechanism SSL, as its
// successes do, so that the two results of a listener share a mechanism;
// a SASL listener's failure before the client chose a mechanism has none.
func (m *Metrics) OnAuthenticationFailed(info connregistry.Info, reauthentication bool, _ error) {
	mechanism := info.SASLMechanism
	if mechanism == "" && info.SecurityProtocol == protocolmap.SSL {
		mechanism = "SSL"
	}
	m.authentications.Add(context.Background(), 1, metric.WithAttributes(keyListener.String(string(info.Listener)),
		keyMechanism.String(mechanism), keyAuthResult.String("failure"), keyReauth.Bool(reauthentication)))
}
