package knprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/plugin/knprom"
	"github.com/kafkanet/kafkanet/socketserver"
)

// The hooks a request passes through allocate nothing once a series
// exists: counting a request costs the label lookups and the additions,
// no garbage (the api_key labels are made once, not formatted per call).
func TestRequestHooksAllocateNothing(t *testing.T) {
	m, err := knprom.NewMetrics(prometheus.NewRegistry())
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
