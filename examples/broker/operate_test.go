package main

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/examples/internal/otelenv"
	"github.com/kafkanet/kafkanet/examples/internal/otlptest"
	"github.com/kafkanet/kafkanet/internal/testkit"
)

// requestLine is a request log line of alice's Metadata request from the
// client id log-level-test: the principal, client id, API, version,
// sizes and latency, as Kafka's kafka.request.logger has them at DEBUG.
var requestLine = regexp.MustCompile(`level=DEBUG msg=request broker=0 conn_id=\S+ listener=CLIENT security_protocol=SASL_PLAINTEXT .*` +
	`principal=User:alice .*client_id=log-level-test api_key=3 api_name=METADATA api_version=\d+ correlation_id=\d+ ` +
	`request_bytes=[1-9]\d* response_bytes=[1-9]\d* .*total=\d[^ ]*s `)

// -log-level debug logs every request with its principal, client id,
// API, version, sizes and latency; info logs none.
func TestLogLevel(t *testing.T) {
	for _, tt := range []struct {
		level string // "" for the default
		want  bool
	}{{"debug", true}, {"DEBUG", true}, {"info", false}, {"", false}} {
		t.Run(tt.level, func(t *testing.T) {
			args := []string{"-config", writeProperties(t, saslFile(`user_alice="alice-secret"`))}
			if tt.level != "" {
				args = append(args, "-log-level", tt.level)
			}
			var stderr *testkit.SyncBuffer
			if !tt.want {
				// Cleanups run last first: this one after the broker has
				// stopped, when every request it served has been logged.
				t.Cleanup(func() {
					assert.NotContains(t, stderr.String(), "msg=request ", "a request logged at %q", tt.level)
					assert.NotContains(t, stderr.String(), "level=DEBUG")
				})
			}
			stderr, _ = serveBroker(t, args...)
			m := regexp.MustCompile(`msg="listener started" broker=0 listener=CLIENT bind=(\S+)`).FindStringSubmatch(stderr.String())
			require.NotNil(t, m, "stderr: %s", stderr)
			require.NoError(t, login(t, m[1], 10*time.Second, kgo.ClientID("log-level-test"),
				kgo.SASL(saslMechanism("PLAIN", "alice", "alice-secret"))))
			if tt.want {
				require.Eventually(t, func() bool { return requestLine.MatchString(stderr.String()) }, 10*time.Second, 10*time.Millisecond,
					"no request line of alice's Metadata in:\n%s", stderr)
			}
		})
	}
}

func TestRunRejectsOTelEnvironment(t *testing.T) {
	t.Setenv(otelenv.EnvEndpoint, "http://127.0.0.1:4318")
	t.Setenv(otelenv.EnvProtocol, "grcp")
	code, stdout, stderr := runBroker(t, "-check")
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, `broker: invalid value "grcp" for environment variable OTEL_EXPORTER_OTLP_PROTOCOL: want grpc, http/protobuf, http/json (the protocols Go's OTLP exporter of the signal speaks)`+"\n", stderr)
}

// With an OTLP endpoint in the environment, the broker exports a span for
// each request and its metrics, each broker's told apart by
// kafka.node.id, under the service name and resource attributes the
// environment gives, over either protocol.
func TestOTelExport(t *testing.T) {
	for _, tt := range []struct {
		protocol string
		receiver func(testing.TB) *otlptest.Receiver
	}{{"http/protobuf", otlptest.StartHTTP}, {"grpc", otlptest.StartGRPC}} {
		t.Run(tt.protocol, func(t *testing.T) {
			r := tt.receiver(t)
			t.Setenv(otelenv.EnvEndpoint, r.Endpoint)
			t.Setenv(otelenv.EnvProtocol, tt.protocol)
			t.Setenv("OTEL_SERVICE_NAME", "test-broker")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,service.name=overridden")
			t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "100") // ms: export while the test waits
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
			args := []string{"-brokers", "2"}
			for _, s := range testSettings {
				args = append(args, "-set", s)
			}
			stderr, _ := serveBroker(t, args...)
			assert.Contains(t, stderr.String(), `msg="exporting OpenTelemetry traces" url=`+r.Endpoint)
			assert.Contains(t, stderr.String(), `msg="exporting OpenTelemetry metrics" url=`+r.Endpoint)
			m := regexp.MustCompile(`msg="listener started" broker=1 listener=CLIENT bind=(\S+)`).FindStringSubmatch(stderr.String())
			require.NotNil(t, m, "stderr: %s", stderr)
			conn := dialRaw(t, m[1])
			roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false))

			res := map[string]string{"service.name": "test-broker", "deployment.environment.name": "test"}
			node1 := map[string]string{"kafka.node.id": "1"}
			require.Eventually(t, func() bool {
				for _, s := range r.Spans() {
					if s.Name == "Metadata" && s.Attrs["kafka.client_id"] == "test" && s.Attrs["kafka.listener"] == "CLIENT" {
						return assert.Subset(t, s.Resource, res) && assert.Equal(t, node1, s.Scope)
					}
				}
				return false
			}, 10*time.Second, 10*time.Millisecond, "no span of the Metadata request: %v", r.Spans())
			require.Eventually(t, func() bool {
				seen := map[string]bool{}
				for _, m := range r.Metrics() {
					if m.Scope["kafka.node.id"] == "1" && m.Points > 0 {
						seen[m.Name] = assert.Subset(t, m.Resource, res)
					}
				}
				return seen["rpc.server.call.duration"] && seen["kafka.server.connection.count"]
			}, 10*time.Second, 10*time.Millisecond, "broker 1's rpc.server.call.duration or kafka.server.connection.count missing")
		})
	}
}

// OpenTelemetry is off without an endpoint, with OTEL_SDK_DISABLED=true
// and with both exporters none: nothing is exported and nothing said.
func TestOTelOff(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{
		{"no endpoint", map[string]string{otelenv.EnvProtocol: "grpc"}},
		{"SDK disabled", map[string]string{otelenv.EnvSDKDisabled: "true"}},
		{"exporters none", map[string]string{otelenv.EnvTracesExporter: "none", otelenv.EnvMetricsExporter: "none"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := otlptest.StartHTTP(t)
			endpoint := r.Endpoint
			if tt.name == "no endpoint" {
				endpoint = ""
			}
			t.Setenv(otelenv.EnvEndpoint, endpoint)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stderr *testkit.SyncBuffer
			// After the broker has stopped, when it would have exported
			// what it had.
			t.Cleanup(func() {
				assert.Zero(t, r.Requests(), "exports received")
				assert.NotContains(t, stderr.String(), "OpenTelemetry")
			})
			args := []string{}
			for _, s := range testSettings {
				args = append(args, "-set", s)
			}
			stderr, _ = serveBroker(t, args...)
			m := regexp.MustCompile(`msg="listener started" broker=0 listener=CLIENT bind=(\S+)`).FindStringSubmatch(stderr.String())
			require.NotNil(t, m, "stderr: %s", stderr)
			conn := dialRaw(t, m[1])
			roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false))
		})
	}
}
