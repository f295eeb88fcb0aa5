package main

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/examples/internal/otelenv"
	"github.com/kafkanet/kafkanet/examples/internal/otlptest"
	"github.com/kafkanet/kafkanet/internal/testkit"
)

// serveCommand runs the command with args in front of a fake upstream
// cluster, on a PLAINTEXT listener PLAIN, until the test calls stop, which
// checks that it exited 0; it returns the listener's address.
func serveCommand(t *testing.T, args ...string) (stderr *testkit.SyncBuffer, addr string, stop func()) {
	t.Helper()
	fake := startFakeUpstream(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr = &testkit.SyncBuffer{}
	done := make(chan int, 1)
	args = append([]string{"-upstream", fake.addr(), "-set", "listeners=PLAIN://127.0.0.1:0", "-set", "listener.security.protocol.map=PLAIN:PLAINTEXT"}, args...)
	go func() { done <- run(ctx, args, stderr) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, "stderr: %s", stderr)
		case <-time.After(20 * time.Second):
			t.Fatal("the command did not stop")
		}
	}
	t.Cleanup(stop)
	listening := regexp.MustCompile(`msg=listening listener=PLAIN addr=(\S+)`)
	require.Eventually(t, func() bool { return listening.MatchString(stderr.String()) }, 20*time.Second, 10*time.Millisecond,
		"the command logs no listener:\n%s", stderr)
	return stderr, listening.FindStringSubmatch(stderr.String())[1], stop
}

// -log-level debug logs every request with its principal, client id,
// API, version, sizes and latency; info logs none.
func TestLogLevel(t *testing.T) {
	line := regexp.MustCompile(`level=DEBUG msg=request conn_id=\S+ listener=PLAIN security_protocol=PLAINTEXT .*principal=User:ANONYMOUS .*` +
		`client_id=test api_key=3 api_name=METADATA api_version=1 correlation_id=\d+ request_bytes=[1-9]\d* response_bytes=[1-9]\d* .*total=\d[^ ]*s `)
	for _, tt := range []struct {
		level string
		want  bool
	}{{"debug", true}, {"info", false}, {"", false}} {
		t.Run(tt.level, func(t *testing.T) {
			var args []string
			if tt.level != "" { // "": the default
				args = []string{"-log-level", tt.level}
			}
			stderr, addr, stop := serveCommand(t, args...)
			c := dialRaw(t, addr)
			c.roundTrip(t, metadataRequest(1))
			stop() // every request it served is logged by now
			assert.Equal(t, tt.want, line.MatchString(stderr.String()), "stderr: %s", stderr)
			assert.Equal(t, tt.want, regexp.MustCompile(`level=DEBUG`).MatchString(stderr.String()))
		})
	}
}

// With an OTLP endpoint in the environment, the proxy exports a span for
// each request and its metrics, under its own service name by default.
func TestOTelExport(t *testing.T) {
	r := otlptest.StartHTTP(t)
	t.Setenv(otelenv.EnvEndpoint, r.Endpoint)
	t.Setenv(otelenv.EnvProtocol, "http/protobuf")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	_, addr, stop := serveCommand(t)
	c := dialRaw(t, addr)
	c.roundTrip(t, metadataRequest(1))
	stop() // exports what it has

	res := map[string]string{"service.name": "kafkanet-proxy"}
	var span bool
	for _, s := range r.Spans() {
		if s.Name == "Metadata" && s.Attrs["kafka.client_id"] == "test" {
			span = assert.Subset(t, s.Resource, res)
		}
	}
	assert.True(t, span, "no span of the Metadata request in %v", r.Spans())
	var metric bool
	for _, m := range r.Metrics() {
		if m.Name == "rpc.server.call.duration" && m.Points > 0 {
			metric = assert.Subset(t, m.Resource, res)
		}
	}
	assert.True(t, metric, "no rpc.server.call.duration in %v", r.Metrics())
}

// An OpenTelemetry variable the proxy cannot use is refused at start,
// named, before anything is served.
func TestRunRejectsOTelEnvironment(t *testing.T) {
	fake := startFakeUpstream(t)
	t.Setenv(otelenv.EnvEndpoint, "collector:4318")
	code, out := runProxy(ctxFor(t, 20*time.Second), "-upstream", fake.addr(), "-set", "listeners=PLAIN://127.0.0.1:0",
		"-set", "listener.security.protocol.map=PLAIN:PLAINTEXT")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, `proxy: invalid value "collector:4318" for environment variable OTEL_EXPORTER_OTLP_ENDPOINT: want a URL`)
	assert.NotContains(t, out, "msg=listening")
}
