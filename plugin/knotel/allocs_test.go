package knotel_test

import (
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/plugin/knotel"
	"github.com/kafkanet/kafkanet/socketserver"
)

// The hooks a request passes through allocate nothing once its listener
// and API have been seen: the attribute sets are made once, and the SDK
// records into an existing series without garbage.
func TestRequestHooksAllocateNothing(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(t.Context())
	m, err := knotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	latency := socketserver.RequestLatency{Queue: time.Millisecond, Handler: time.Millisecond, Send: time.Microsecond, Total: 3 * time.Millisecond}
	done := &socketserver.RequestDone{Conn: connregistry.Info{Listener: "CLIENT"}, APIKey: 3, Latency: latency, ResponseBytes: 100}
	ownDone := &socketserver.RequestDone{Conn: connregistry.Info{Listener: "CLIENT"}, APIKey: 18, ServerAnswered: true,
		Latency: socketserver.RequestLatency{Handler: time.Microsecond, Send: time.Microsecond, Total: time.Millisecond}}
	for _, tt := range []struct {
		name string
		hook func()
	}{
		{"OnRequestReceived", func() { m.OnRequestReceived("CLIENT", 3, 100) }},
		{"OnRequestReceived with a key beyond Kafka's", func() { m.OnRequestReceived("CLIENT", 1000, 100) }},
		{"OnResponseSent", func() { m.OnResponseSent("CLIENT", 3, 100) }},
		{"OnRequestDone", func() { m.OnRequestDone(done) }},
		{"OnRequestDone answered by the server", func() { m.OnRequestDone(ownDone) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tt.hook); n != 0 {
				t.Errorf("%s allocates %v times per call", tt.name, n)
			}
		})
	}
}
