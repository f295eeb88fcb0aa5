package knprom_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/plugin/knprom"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

// answerMetadata answers Metadata with an empty response.
var answerMetadata = socketserver.HandlerFunc(func(r *socketserver.Request) {
	req, ok := r.Body.(*kmsg.MetadataRequest)
	if !ok {
		_ = r.CloseConnection()
		return
	}
	_ = r.Respond(req.ResponseKind())
})

// startServer starts a server whose SASL_PLAINTEXT listener CLIENT accepts
// alice with PLAIN, with m as a hook and a request memory pool, and
// registers its Stats with reg.
func startServer(t *testing.T, reg prometheus.Registerer, m *knprom.Metrics) *socketserver.Server {
	t.Helper()
	users, err := sasl.NewUsers(map[string]string{"alice": "alice-secret"})
	require.NoError(t, err)
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                                 "CLIENT://127.0.0.1:0",
		"listener.security.protocol.map":            "CLIENT:SASL_PLAINTEXT",
		"inter.broker.listener.name":                "CLIENT",
		"sasl.enabled.mechanisms":                   "PLAIN",
		"connection.failed.authentication.delay.ms": "0",
		"queued.max.request.bytes":                  "1048576",
		"socket.request.max.bytes":                  "1048576",
	}, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
		c.Credentials = users
		c.Hooks = append(c.Hooks, m)
	}, answerMetadata)
	require.NoError(t, reg.Register(knprom.NewStats(srv)))
	return srv
}

// A kgo session (ApiVersions and the SASL exchange, which the server
// answers, then a Metadata the host answers), a failed login and the
// connections' close show in the series under Kafka's names.
func TestKgoSession(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := knprom.NewMetrics(reg)
	require.NoError(t, err)
	srv := startServer(t, reg, m)
	addr := srv.Addr("CLIENT").String()

	cl, _ := socketservertest.ConnectKgo(t, addr, socketservertest.KgoSASL("PLAIN", "alice", "alice-secret"))
	bad, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		socketservertest.KgoSASL("PLAIN", "alice", "wrong"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = bad.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	require.Error(t, err, "a wrong password logs in")
	bad.Close()

	// The server calls the hooks of a response after writing it, and of a
	// close after closing: wait until the last of each has been counted.
	var values map[string]float64
	if !assert.Eventually(t, func() bool {
		values = gather(t, reg)
		return values[`kafka_server_socket_server_metrics_connection_close_total{listener="CLIENT",reason="authentication-failed"}`] == 1 &&
			values[`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",phase="response_send",request="Metadata"}`] == 1
	}, 10*time.Second, 10*time.Millisecond) {
		t.Fatalf("the failed login's close or the Metadata response is not counted:\n%s", dump(gather(t, reg)))
	}
	// A gathering reads one metric after another, and may read the
	// response's size and total time before the hooks recorded them and
	// the phases (recorded last) after: gathered again now, every hook of
	// the response is in.
	values = gather(t, reg)

	tests := []struct {
		series string
		check  func(float64) bool
	}{
		// Events (Metrics).
		{`kafka_server_socket_server_metrics_connection_accept_total{listener="CLIENT"}`, eq(2)},
		{`kafka_server_socket_server_metrics_connection_creation_total{listener="CLIENT"}`, eq(2)},
		{`kafka_network_request_metrics_requests_total{api_key="3",listener="CLIENT",request="Metadata"}`, eq(1)},
		{`kafka_server_socket_server_metrics_incoming_byte_total{listener="CLIENT"}`, gt(0)},
		{`kafka_server_socket_server_metrics_outgoing_byte_total{listener="CLIENT"}`, gt(0)},
		{`kafka_network_request_metrics_total_time_seconds_count{api_key="3",listener="CLIENT",request="Metadata"}`, eq(1)},
		{`kafka_network_request_metrics_total_time_seconds_sum{api_key="3",listener="CLIENT",request="Metadata"}`, gt(0)},
		{`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",phase="request_queue",request="Metadata"}`, eq(1)},
		{`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",phase="local",request="Metadata"}`, eq(1)},
		{`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",phase="response_queue",request="Metadata"}`, eq(1)},
		{`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",phase="response_send",request="Metadata"}`, eq(1)},
		{`kafka_server_socket_server_metrics_successful_authentication_total{listener="CLIENT",mechanism="PLAIN"}`, eq(1)},
		{`kafka_server_socket_server_metrics_failed_authentication_total{listener="CLIENT"}`, eq(1)},
		{`kafka_server_socket_server_metrics_connection_close_total{listener="CLIENT",reason="authentication-failed"}`, eq(1)},
		// Gauges (Stats): the good client's connection is open.
		{`kafka_server_socket_server_metrics_connection_count{listener="CLIENT"}`, eq(1)},
		{`kafka_network_request_channel_request_queue_size{plane="data"}`, eq(0)},
		{`kafka_network_processor_busy_seconds_total{processor="0"}`, gt(0)},
		{`kafka_network_processor_idle_ratio{processor="0"}`, func(v float64) bool { return v >= 0 && v <= 1 }},
		{`kafkanet_parked_connections`, func(v float64) bool { return v == 0 || v == 1 }},
		{`kafkanet_connection_probes_total{listener="CLIENT"}`, eq(0)}, // kgo's connections all send requests
		{`kafka_network_socket_server_memory_pool_used_bytes{plane="data"}`, eq(0)},
		{`kafka_network_socket_server_memory_pool_available_bytes{plane="data"}`, eq(1 << 20)},
		{`kafka_server_socket_server_metrics_memory_pool_depleted_seconds_total{plane="data"}`, eq(0)},
	}
	for _, tt := range tests {
		v, ok := values[tt.series]
		if assert.True(t, ok, "no series %s in:\n%s", tt.series, dump(values)) {
			assert.True(t, tt.check(v), "%s = %v", tt.series, v)
		}
	}
	// The exchange before authentication (ApiVersions and SASL) is the
	// authenticator's, as in Kafka: its bytes are counted, but neither
	// its requests (RequestsPerSec) nor their times, so that the request
	// count and the total time's count agree.
	for s, v := range values {
		if strings.HasPrefix(s, "kafka_network_request_metrics_phase_time_seconds") ||
			strings.HasPrefix(s, "kafka_network_request_metrics_total_time_seconds") {
			assert.Contains(t, s, `request="Metadata"`, "a time of a request the server answered: %s", s)
		}
		if strings.HasPrefix(s, "kafka_network_request_metrics_requests_total") && !strings.Contains(s, `request="Metadata"`) {
			assert.Zero(t, v, "a request of the exchange counted: %s", s)
		}
	}

	cl.Close()
	if !assert.Eventually(t, func() bool {
		values = gather(t, reg)
		return values[`kafka_server_socket_server_metrics_connection_count{listener="CLIENT"}`] == 0
	}, 10*time.Second, 10*time.Millisecond) {
		t.Fatalf("the client's connection stays open:\n%s", dump(gather(t, reg)))
	}
	assert.Equal(t, 2.0, values[`kafka_server_socket_server_metrics_connection_close_total{listener="CLIENT",reason="client-closed"}`]+
		values[`kafka_server_socket_server_metrics_connection_close_total{listener="CLIENT",reason="authentication-failed"}`], dump(values))
}

// Connections closed by their client before a request, with a FIN or a
// reset (a health check's bare connect), count as probes.
func TestProbes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := knprom.NewMetrics(reg)
	require.NoError(t, err)
	srv := startServer(t, reg, m)
	const series = `kafkanet_connection_probes_total{listener="CLIENT"}`
	assert.Equal(t, 0.0, gather(t, reg)[series])
	for i := range 5 {
		c := socketservertest.Dial(t, srv, "CLIENT")
		if i%2 == 0 {
			require.NoError(t, c.(*net.TCPConn).SetLinger(0)) // RST
		}
		require.NoError(t, c.Close())
	}
	assert.Eventually(t, func() bool { return gather(t, reg)[series] == 5 }, 10*time.Second, 10*time.Millisecond,
		"%s", dump(gather(t, reg)))
}

// NewMetrics fails, rather than counting twice, on a registerer that
// already holds its metrics; a wrapping registerer that adds a label
// (node_id) makes room for a second server's.
func TestNewMetricsRegisters(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := knprom.NewMetrics(reg)
	require.NoError(t, err)
	_, err = knprom.NewMetrics(reg)
	var already prometheus.AlreadyRegisteredError
	require.ErrorAs(t, err, &already)
	_, err = knprom.NewMetrics(prometheus.WrapRegistererWith(prometheus.Labels{"node_id": "1"}, reg))
	require.Error(t, err, "the same names with another label set are inconsistent in one registry")
}

func eq(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func gt(min float64) func(float64) bool  { return func(v float64) bool { return v > min } }

// gather flattens reg's metrics into series (name{label="value",...}, the
// labels sorted as Prometheus's text format has them) → value; a
// histogram gives its _count and _sum.
func gather(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(labels)
			suffix := ""
			if len(labels) > 0 {
				suffix = "{" + strings.Join(labels, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[f.GetName()+suffix] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[f.GetName()+suffix] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[f.GetName()+"_count"+suffix] = float64(m.GetHistogram().GetSampleCount())
				out[f.GetName()+"_sum"+suffix] = m.GetHistogram().GetSampleSum()
			}
		}
	}
	return out
}

func dump(values map[string]float64) string {
	var lines []string
	for s, v := range values {
		lines = append(lines, fmt.Sprintf("%s %v", s, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Connections refused on listeners that require the PROXY protocol count
// by why: one from outside the trusted networks, one whose first bytes
// are no PROXY header; a socket whose header is still coming is pending.
func TestProxyRefused(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := knprom.NewMetrics(reg)
	require.NoError(t, err)
	srv := socketservertest.NewServer(t, testkit.ProxyProtocolListeners(), func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
		c.Hooks = append(c.Hooks, m)
	}, answerMetadata)
	testkit.SendNoProxyHeader(t, srv, "ELSEWHERE")
	testkit.SendNoProxyHeader(t, srv, "LOOPBACK")
	// A socket from a trusted address whose header is cut short waits:
	// pending, not refused.
	require.NoError(t, reg.Register(knprom.NewStats(srv)))
	testkit.DialProxyPending(t, srv, "LOOPBACK")
	want := map[string]float64{
		`kafkanet_proxy_protocol_refused_total{listener="ELSEWHERE",reason="untrusted"}`: 1,
		`kafkanet_proxy_protocol_refused_total{listener="LOOPBACK",reason="header"}`:     1,
		`kafkanet_proxy_protocol_pending{listener="ELSEWHERE"}`:                          0,
		`kafkanet_proxy_protocol_pending{listener="LOOPBACK"}`:                           1,
	}
	assert.Eventually(t, func() bool {
		values := gather(t, reg)
		for series, v := range want {
			if got, ok := values[series]; !ok || got != v { // a zero is a series exported at zero, not a missing one
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "%s", dump(gather(t, reg)))
}

// Each certificate a TLS listener serves has its expiry as a series, the
// default at index 0 and a server name's after it, read at each
// collection: a reload shows at the next. A listener without TLS has none.
func TestCertificateNotAfter(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	a := socketservertest.NewServerCert(t, "a.example.com")
	props := testkit.ServerNameListeners(pki.ServerFile,
		testkit.ServerNameKeyStore{Name: "a.example.com", KeyStoreFile: a.KeyStoreFile})
	srv := socketservertest.NewServer(t, props, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
	}, answerMetadata)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(knprom.NewStats(srv)))
	const name = "kafkanet_tls_certificate_not_after_timestamp_seconds"
	series := func() map[string]float64 {
		out := map[string]float64{}
		for s, v := range gather(t, reg) {
			if strings.HasPrefix(s, name) {
				out[s] = v
			}
		}
		return out
	}
	defaultSeries := name + `{index="0",listener="SSL",subject="CN=localhost"}`
	nameSeries := name + `{index="1",listener="SSL",subject="CN=a.example.com"}`
	before := series()
	require.Len(t, before, 2, "%v", before)
	assert.InDelta(t, float64(time.Now().Add(24*time.Hour).Unix()), before[defaultSeries], float64(5*time.Minute/time.Second), "NewPKI's server certificate is valid for a day")
	assert.Equal(t, float64(a.Leaf.NotAfter.Unix()), before[nameSeries])

	rotated, err := pki.RotateServer("", 90*24*time.Hour)
	require.NoError(t, err)
	cfg, err := config.Server(props)
	require.NoError(t, err)
	require.NoError(t, srv.ReloadTLSFrom(cfg))
	assert.Equal(t, map[string]float64{
		defaultSeries: float64(rotated.NotAfter.Unix()),
		nameSeries:    float64(a.Leaf.NotAfter.Unix()),
	}, series())
}

// blockingAudit holds the audit queue's goroutine in its first call until
// release is closed.
type blockingAudit struct {
	entered, release chan struct{}
	once             sync.Once
}

func (b *blockingAudit) OnAudit(socketserver.AuditEvent) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
}

// Audit events dropped behind a slow hook are counted.
func TestAuditEventsDropped(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	hook := &blockingAudit{entered: make(chan struct{}), release: make(chan struct{})}
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "CLIENT://127.0.0.1:0",
		"listener.security.protocol.map": "CLIENT:PLAINTEXT",
		"inter.broker.listener.name":     "CLIENT",
	}, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
		c.AuditQueueSize = 1
		c.Hooks = append(c.Hooks, hook)
	}, answerMetadata)
	t.Cleanup(func() { close(hook.release) }) // before the server's cleanup, which waits for the hook's call
	require.NoError(t, reg.Register(knprom.NewStats(srv)))
	const series = `kafkanet_audit_events_dropped_total`
	v, ok := gather(t, reg)[series]
	require.True(t, ok, "no series %s", series)
	assert.Equal(t, 0.0, v)

	event := socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Action: "test"}
	srv.Audit(event)
	select {
	case <-hook.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the audit hook was not called")
	}
	for range 4 { // one waits in the queue, three are dropped
		srv.Audit(event)
	}
	assert.Equal(t, 3.0, gather(t, reg)[series])
	assert.EqualValues(t, 3, srv.Stats().AuditDropped)
}
