package knotel_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkanet/kafkanet/plugin/knotel"
	"github.com/kafkanet/kafkanet/socketserver"
)

// A kgo session makes one server span per request, with the request
// log's attributes: the server's answers (ApiVersions, the SASL exchange)
// and the host's (Metadata), and the failed login's.
func TestTracerKgoSession(t *testing.T) {
	recorder := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	srv := startServer(t, knotel.NewTracer(tp))

	began := time.Now()
	cl, local := session(t, srv.Addr("CLIENT").String())
	defer cl.Close()
	_, localPort, err := net.SplitHostPort(local)
	require.NoError(t, err)

	// The request log is called once a request is done, after its
	// response was written: wait for the failed login's last request.
	byMethod := func() map[string][]sdktrace.ReadOnlySpan {
		out := map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range recorder.Ended() {
			out[s.Name()] = append(out[s.Name()], s)
		}
		return out
	}
	var spans map[string][]sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		spans = byMethod()
		return len(spans["Metadata"]) == 1 && len(spans["SASLAuthenticate"]) == 2
	}, 10*time.Second, 10*time.Millisecond)
	ended := time.Now()

	assert.GreaterOrEqual(t, len(spans["ApiVersions"]), 2, "one or two ApiVersions per connection")
	assert.Len(t, spans["SASLHandshake"], 2)

	metadata := spans["Metadata"][0]
	attrs := attributes(metadata)
	for _, tt := range []struct {
		key  string
		want any
	}{
		{"rpc.system.name", "kafka"},
		{"rpc.method", "Metadata"},
		{"kafka.api_key", int64(3)},
		{"kafka.listener", "CLIENT"},
		{"kafka.principal", "User:alice"},
		{"kafka.client_id", "kgo"},
		{"kafka.client_software.name", "kgo"},
		{"client.address", "127.0.0.1"},
		{"client.port", func() int64 { p, _ := strconv.ParseInt(localPort, 10, 64); return p }()},
		{"network.transport", "tcp"},
		{"kafka.throttle_time_ms", int64(0)},
		{"kafka.server_answered", false},
		{"kafka.connection.closed", false},
	} {
		assert.Equal(t, tt.want, attrs[tt.key], "%s", tt.key)
	}
	for _, key := range []string{"kafka.api_version", "kafka.request.size", "kafka.response.size"} {
		assert.Positive(t, attrs[key], "%s", key)
	}
	assert.NotEmpty(t, attrs["kafka.connection.id"])
	assert.NotEmpty(t, attrs["kafka.client_software.version"])
	assert.Equal(t, trace.SpanKindServer, metadata.SpanKind())
	assert.False(t, metadata.Parent().IsValid(), "a request's span is a trace's root")
	assert.Equal(t, codes.Unset, metadata.Status().Code)
	assert.True(t, !metadata.StartTime().Before(began) && metadata.StartTime().Before(metadata.EndTime()) &&
		!metadata.EndTime().After(ended), "the span runs from %v to %v, the session from %v to %v",
		metadata.StartTime(), metadata.EndTime(), began, ended)
	var events []string
	last := metadata.StartTime()
	for _, e := range metadata.Events() {
		events = append(events, e.Name)
		assert.False(t, e.Time.Before(last) || e.Time.After(metadata.EndTime()), "event %s at %v, out of order", e.Name, e.Time)
		last = e.Time
	}
	assert.Equal(t, []string{"dequeued", "answered", "write started"}, events)

	// The server's answers, on the same connection: the exchange's spans
	// carry the anonymous principal, which the exchange ends.
	for _, s := range spans["SASLHandshake"] {
		a := attributes(s)
		assert.Equal(t, true, a["kafka.server_answered"])
		assert.Equal(t, "User:ANONYMOUS", a["kafka.principal"])
		assert.Empty(t, s.Events(), "a request the server answered has no phases")
	}
	// The failed login's SaslAuthenticate: its error response was written,
	// then the connection closed.
	var failed int
	for _, s := range spans["SASLAuthenticate"] {
		if a := attributes(s); a["kafka.connection.closed"] == true {
			failed++
			assert.Positive(t, a["kafka.response.size"])
			assert.NotEqual(t, attrs["kafka.connection.id"], a["kafka.connection.id"])
		}
	}
	assert.Equal(t, 1, failed, "the failed login's SaslAuthenticate")
}

// With a sampler that records nothing, the request log hook builds no
// attribute and no event: it asks for a span and ends it, which costs
// less than half the allocations of a span recorded.
func TestTracerNotRecording(t *testing.T) {
	r := &socketserver.RequestDone{APIKey: 3, APIVersion: 12, CorrelationID: 7, ClientID: "kgo", RequestBytes: 40, ResponseBytes: 60,
		Latency: socketserver.RequestLatency{Queue: time.Millisecond, Handler: time.Millisecond, Total: 3 * time.Millisecond}}
	allocs := func(sampler sdktrace.Sampler) float64 {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
		defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
		tracer := knotel.NewTracer(tp)
		return testing.AllocsPerRun(100, func() { tracer.OnRequestDone(r) })
	}
	never, always := allocs(sdktrace.NeverSample()), allocs(sdktrace.AlwaysSample())
	assert.Less(t, never, always/2, "allocations per request: %v not recording, %v recording", never, always)
}

func attributes(s sdktrace.ReadOnlySpan) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}
