package knotel_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/plugin/knotel"
	"github.com/kafkanet/kafkanet/protocolmap"
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
// alice with PLAIN, with hooks and a request memory pool.
func startServer(t *testing.T, hooks ...socketserver.Hook) *socketserver.Server {
	t.Helper()
	users, err := sasl.NewUsers(map[string]string{"alice": "alice-secret"})
	require.NoError(t, err)
	return socketservertest.NewServer(t, config.Properties{
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
		c.Hooks = append(c.Hooks, hooks...)
	}, answerMetadata)
}

// session runs a kgo session against addr (ApiVersions and the SASL
// exchange, which the server answers, then a Metadata the host answers)
// and a failed login, and returns the good client, still connected, and
// the local address of its connection.
func session(t *testing.T, addr string) (*kgo.Client, string) {
	t.Helper()
	cl, local := socketservertest.ConnectKgo(t, addr, socketservertest.KgoSASL("PLAIN", "alice", "alice-secret"))
	bad, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0),
		socketservertest.KgoSASL("PLAIN", "alice", "wrong"))
	require.NoError(t, err)
	defer bad.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = bad.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	require.Error(t, err, "a wrong password logs in")
	return cl, local
}

// A kgo session's events and the server's gauges, read with a
// ManualReader, under their OpenTelemetry names.
func TestMetricsKgoSession(t *testing.T) {
	m, reader := newMetrics(t)
	srv := startServer(t, m)
	reg, err := m.ObserveStats(srv)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })

	cl, _ := session(t, srv.Addr("CLIENT").String())
	const metadata = `kafka.api_key=3,kafka.listener=CLIENT,rpc.method=Metadata,rpc.system.name=kafka`
	// The server calls the hooks of a response after writing it, and of a
	// close after closing, and counts a closed connection out of its gauge
	// after the close's hooks: wait until the last of each has been seen.
	failedClose := `kafka.server.connection.closed{kafka.connection.close_reason=authentication-failed,kafka.listener=CLIENT}`
	metadataDone := `kafka.server.request.phase.duration.count{kafka.api_key=3,kafka.listener=CLIENT,kafka.request.phase=response_send,rpc.method=Metadata,rpc.system.name=kafka}`
	open := `kafka.server.connection.count{kafka.listener=CLIENT}`
	var values map[string]float64
	if !assert.Eventually(t, func() bool {
		values = collect(t, reader)
		return values[failedClose] == 1 && values[metadataDone] == 1 && values[open] == 1
	}, 10*time.Second, 10*time.Millisecond) {
		t.Fatalf("the failed login's close or the Metadata response is not counted:\n%s", dump(collect(t, reader)))
	}
	// A collection reads one instrument after another, and may read the
	// response's size and call duration before the hooks recorded them and
	// the phases (recorded last) after: collected again now, every hook of
	// the response is in.
	values = collect(t, reader)

	const apiVersions = `kafka.api_key=18,kafka.listener=CLIENT,rpc.method=ApiVersions,rpc.system.name=kafka`
	const handshake = `kafka.api_key=17,kafka.listener=CLIENT,rpc.method=SASLHandshake,rpc.system.name=kafka`
	eq := func(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
	positive := func(v float64) bool { return v > 0 }
	tests := []struct {
		series string
		check  func(float64) bool
	}{
		{`rpc.server.request.size.count{` + metadata + `}`, eq(1)},
		{`rpc.server.request.size.sum{` + metadata + `}`, positive},
		// kgo may send ApiVersions twice on a connection: its newest
		// version first, then the newest the server offers.
		{`rpc.server.request.size.count{` + apiVersions + `}`, func(v float64) bool { return v >= 2 }},
		{`rpc.server.request.size.count{` + handshake + `}`, eq(2)},
		{`rpc.server.response.size.count{` + metadata + `}`, eq(1)},
		{`rpc.server.response.size.sum{` + metadata + `}`, positive},
		{`rpc.server.call.duration.count{` + metadata + `}`, eq(1)},
		{`rpc.server.call.duration.sum{` + metadata + `}`, positive},
		{`kafka.server.request.phase.duration.count{kafka.api_key=3,kafka.listener=CLIENT,kafka.request.phase=local,rpc.method=Metadata,rpc.system.name=kafka}`, eq(1)},
		{`kafka.server.request.phase.duration.count{kafka.api_key=3,kafka.listener=CLIENT,kafka.request.phase=request_queue,rpc.method=Metadata,rpc.system.name=kafka}`, eq(1)},
		{`kafka.server.request.phase.duration.count{kafka.api_key=3,kafka.listener=CLIENT,kafka.request.phase=response_queue,rpc.method=Metadata,rpc.system.name=kafka}`, eq(1)},
		{`kafka.server.request.phase.duration.count{kafka.api_key=3,kafka.listener=CLIENT,kafka.request.phase=response_send,rpc.method=Metadata,rpc.system.name=kafka}`, eq(1)},
		{`kafka.server.connection.accepted{kafka.listener=CLIENT}`, eq(2)},
		{`kafka.server.connection.created{kafka.listener=CLIENT}`, eq(2)},
		{failedClose, eq(1)},
		{`kafka.server.authentications{kafka.authentication.reauthentication=false,kafka.authentication.result=success,kafka.listener=CLIENT,kafka.sasl.mechanism=PLAIN}`, eq(1)},
		{`kafka.server.authentications{kafka.authentication.reauthentication=false,kafka.authentication.result=failure,kafka.listener=CLIENT,kafka.sasl.mechanism=PLAIN}`, eq(1)},
		// Gauges (ObserveStats): the good client's connection is open.
		{`kafka.server.connection.count{kafka.listener=CLIENT}`, eq(1)},
		{`kafka.server.request.queue.size{kafka.plane=data}`, eq(0)},
		{`kafka.server.processor.busy.time{kafka.processor.id=0}`, positive},
		{`kafka.server.connection.parked{}`, func(v float64) bool { return v == 0 || v == 1 }},
		{`kafka.server.connection.probes{kafka.listener=CLIENT}`, eq(0)}, // kgo's connections all send requests
		{`kafka.server.request.memory.used{kafka.plane=data}`, eq(0)},
		{`kafka.server.request.memory.limit{kafka.plane=data}`, eq(1 << 20)},
		{`kafka.server.request.memory.depleted.time{kafka.plane=data}`, eq(0)},
	}
	for _, tt := range tests {
		v, ok := values[tt.series]
		if assert.True(t, ok, "no series %s in:\n%s", tt.series, dump(values)) {
			assert.True(t, tt.check(v), "%s = %v", tt.series, v)
		}
	}
	// The exchange before authentication (ApiVersions and SASL) is the
	// authenticator's, as in Kafka: its sizes are recorded, not its times.
	for s := range values {
		if strings.HasPrefix(s, "rpc.server.call.duration") || strings.HasPrefix(s, "kafka.server.request.phase.duration") {
			assert.Contains(t, s, "rpc.method=Metadata", "a time of a request the server answered: %s", s)
		}
	}

	cl.Close()
	if !assert.Eventually(t, func() bool {
		values = collect(t, reader)
		return values[`kafka.server.connection.count{kafka.listener=CLIENT}`] == 0
	}, 10*time.Second, 10*time.Millisecond) {
		t.Fatalf("the client's connection stays open:\n%s", dump(collect(t, reader)))
	}
	assert.Equal(t, 1.0, values[`kafka.server.connection.closed{kafka.connection.close_reason=client-closed,kafka.listener=CLIENT}`], dump(values))
}

// Connections refused on listeners that require the PROXY protocol count
// by why: one from outside the trusted networks, one whose first bytes
// are no PROXY header; a socket whose header is still coming is pending.
func TestProxyRefused(t *testing.T) {
	m, reader := newMetrics(t)
	srv := socketservertest.NewServer(t, testkit.ProxyProtocolListeners(), func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
		c.Hooks = append(c.Hooks, m)
	}, answerMetadata)
	testkit.SendNoProxyHeader(t, srv, "ELSEWHERE")
	testkit.SendNoProxyHeader(t, srv, "LOOPBACK")
	// A socket from a trusted address whose header is cut short waits:
	// pending, not refused.
	reg, err := m.ObserveStats(srv)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	testkit.DialProxyPending(t, srv, "LOOPBACK")
	want := map[string]float64{
		`kafka.server.proxy_protocol.refused{error.type=untrusted,kafka.listener=ELSEWHERE}`: 1,
		`kafka.server.proxy_protocol.refused{error.type=header,kafka.listener=LOOPBACK}`:     1,
		`kafka.server.proxy_protocol.pending{kafka.listener=ELSEWHERE}`:                      0,
		`kafka.server.proxy_protocol.pending{kafka.listener=LOOPBACK}`:                       1,
	}
	assert.Eventually(t, func() bool {
		values := collect(t, reader)
		for series, v := range want {
			if values[series] != v {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "%s", dump(collect(t, reader)))
}

// Connections closed by their client before a request, with a FIN or a
// reset (a health check's bare connect), count as probes.
func TestProbes(t *testing.T) {
	m, reader := newMetrics(t)
	srv := startServer(t, m)
	reg, err := m.ObserveStats(srv)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	const series = `kafka.server.connection.probes{kafka.listener=CLIENT}`
	assert.Equal(t, 0.0, collect(t, reader)[series])
	for i := range 5 {
		c := socketservertest.Dial(t, srv, "CLIENT")
		if i%2 == 0 {
			require.NoError(t, c.(*net.TCPConn).SetLinger(0)) // RST
		}
		require.NoError(t, c.Close())
	}
	assert.Eventually(t, func() bool { return collect(t, reader)[series] == 5 }, 10*time.Second, 10*time.Millisecond,
		"%s", dump(collect(t, reader)))
}

// Each certificate a TLS listener serves has its expiry observed, the
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
	m, reader := newMetrics(t)
	reg, err := m.ObserveStats(srv)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	const name = "kafka.server.tls.certificate.not_after"
	series := func() map[string]float64 {
		out := map[string]float64{}
		for s, v := range collect(t, reader) {
			if strings.HasPrefix(s, name+"{") {
				out[s] = v
			}
		}
		return out
	}
	defaultSeries := name + `{kafka.listener=SSL,kafka.tls.certificate.index=0,tls.server.subject=CN=localhost}`
	nameSeries := name + `{kafka.listener=SSL,kafka.tls.certificate.index=1,tls.server.subject=CN=a.example.com}`
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

// newMetrics returns Metrics on a meter provider read by the returned
// reader; the provider shuts down when the test ends.
// An SSL listener's failed handshakes and its successes share the
// mechanism SSL, so that a ratio of failures to successes can be taken
// by mechanism; a SASL listener's failure before a mechanism was chosen
// is not counted as SSL's.
func TestAuthenticationsByMechanism(t *testing.T) {
	m, reader := newMetrics(t)
	ssl := connregistry.Info{Listener: "TLS", SecurityProtocol: protocolmap.SSL}
	m.OnAuthenticated(ssl, false)
	m.OnAuthenticationFailed(ssl, false, errors.New("bad certificate"))
	m.OnAuthenticationFailed(connregistry.Info{Listener: "SASL", SecurityProtocol: protocolmap.SASLSSL}, false, errors.New("handshake"))
	values := collect(t, reader)
	for series, want := range map[string]float64{
		`kafka.server.authentications{kafka.authentication.reauthentication=false,kafka.authentication.result=success,kafka.listener=TLS,kafka.sasl.mechanism=SSL}`: 1,
		`kafka.server.authentications{kafka.authentication.reauthentication=false,kafka.authentication.result=failure,kafka.listener=TLS,kafka.sasl.mechanism=SSL}`: 1,
		`kafka.server.authentications{kafka.authentication.reauthentication=false,kafka.authentication.result=failure,kafka.listener=SASL,kafka.sasl.mechanism=}`:   1,
	} {
		got, ok := values[series]
		assert.True(t, ok && got == want, "%s = %v (present %v), want %v in:\n%s", series, got, ok, want, dump(values))
	}
}

func newMetrics(t *testing.T) (*knotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	m, err := knotel.NewMetrics(mp)
	require.NoError(t, err)
	return m, reader
}

// collect reads the reader's metrics into series (name{key=value,...},
// the keys sorted) → value; a histogram gives name.count and name.sum.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]float64{}
	series := func(name string, set attribute.Set) string {
		var kvs []string
		for _, kv := range set.ToSlice() {
			kvs = append(kvs, fmt.Sprintf("%s=%s", kv.Key, kv.Value.Emit()))
		}
		sort.Strings(kvs)
		return name + "{" + strings.Join(kvs, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, knotel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range data.DataPoints {
					out[series(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Sum[float64]:
				for _, p := range data.DataPoints {
					out[series(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range data.DataPoints {
					out[series(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[int64]:
				for _, p := range data.DataPoints {
					out[series(m.Name+".count", p.Attributes)] = float64(p.Count)
					out[series(m.Name+".sum", p.Attributes)] = float64(p.Sum)
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					out[series(m.Name+".count", p.Attributes)] = float64(p.Count)
					out[series(m.Name+".sum", p.Attributes)] = p.Sum
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
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
	m, reader := newMetrics(t)
	reg, err := m.ObserveStats(srv)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, reg.Unregister()) })
	const series = `kafka.server.audit.events.dropped{}`
	v, ok := collect(t, reader)[series]
	require.True(t, ok, "no series %s in:\n%s", series, dump(collect(t, reader)))
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
	assert.Equal(t, 3.0, collect(t, reader)[series])
	assert.EqualValues(t, 3, srv.Stats().AuditDropped)
}
