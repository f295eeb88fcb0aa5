package knprom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/plugin/knprom"
	"github.com/kafkanet/kafkanet/protocolmap"
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

// Each listener's requests of each API count in their own series, made at
// the first request of the kind and shared by those after it. A request
// counts once it is done, as Kafka marks RequestsPerSec with its times,
// and not when it is the SASL exchange's.
func TestRequestSeriesApart(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := knprom.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	done := func(l protocolmap.ListenerName, key int16) *socketserver.RequestDone {
		return &socketserver.RequestDone{Conn: connregistry.Info{Listener: l}, APIKey: key, ResponseBytes: 1,
			Latency: socketserver.RequestLatency{Total: time.Millisecond}}
	}
	for _, r := range []struct {
		l        protocolmap.ListenerName
		key      int16
		in, out  int
		finished bool
	}{{"A", 3, 10, 100, true}, {"B", 3, 20, 200, true}, {"A", 18, 5, 50, false}, {"A", 3, 10, 100, true}} {
		m.OnRequestReceived(r.l, r.key, r.in)
		m.OnResponseSent(r.l, r.key, r.out)
		if r.finished {
			m.OnRequestDone(done(r.l, r.key))
		}
	}
	exchange := done("A", 36)
	exchange.Authenticating = true
	m.OnRequestDone(exchange)
	values := gather(t, reg)
	for series, want := range map[string]float64{
		`kafka_network_request_metrics_requests_total{api_key="3",listener="A",request="Metadata"}`:                     2,
		`kafka_network_request_metrics_requests_total{api_key="3",listener="B",request="Metadata"}`:                     1,
		`kafka_network_request_metrics_requests_total{api_key="18",listener="A",request="ApiVersions"}`:                 0,
		`kafka_server_socket_server_metrics_incoming_byte_total{listener="A"}`:                                          25,
		`kafka_server_socket_server_metrics_incoming_byte_total{listener="B"}`:                                          20,
		`kafka_server_socket_server_metrics_outgoing_byte_total{listener="A"}`:                                          250,
		`kafka_server_socket_server_metrics_outgoing_byte_total{listener="B"}`:                                          200,
		`kafka_network_request_metrics_total_time_seconds_count{api_key="3",listener="A",request="Metadata"}`:           2,
		`kafka_network_request_metrics_total_time_seconds_count{api_key="3",listener="B",request="Metadata"}`:           1,
		`kafka_network_request_metrics_phase_time_seconds_count{listener="A",phase="response_send",request="Metadata"}`: 2,
	} {
		if got, ok := values[series]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if v := values[`kafka_network_request_metrics_requests_total{api_key="36",listener="A",request="SASLAuthenticate"}`]; v != 0 {
		t.Errorf("a request of the SASL exchange counted: %v", v)
	}
	// ApiVersions on A was never timed: no histogram of it.
	for s := range values {
		if strings.Contains(s, "time_seconds") && strings.Contains(s, "ApiVersions") {
			t.Errorf("a time series of a request never timed: %s", s)
		}
	}
}

// BenchmarkRequestHooks measures the hooks one request the host answers
// passes through: received, sent, done.
func BenchmarkRequestHooks(b *testing.B) {
	m, err := knprom.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	done := &socketserver.RequestDone{Conn: connregistry.Info{Listener: "CLIENT"}, APIKey: 3, ResponseBytes: 100,
		Latency: socketserver.RequestLatency{Queue: time.Microsecond, Handler: time.Microsecond, Send: time.Microsecond, Total: 3 * time.Microsecond}}
	b.ReportAllocs()
	for b.Loop() {
		m.OnRequestReceived("CLIENT", 3, 100)
		m.OnResponseSent("CLIENT", 3, 100)
		m.OnRequestDone(done)
	}
}
