package otelenv

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/otlptest"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/plugin/knotel"
	"github.com/kafkanet/kafkanet/socketserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

func TestRead(t *testing.T) {
	const (
		base    = "http://collector:4318"
		traces  = "http://traces:4318/v1/traces"
		metrics = "https://metrics:4318/v1/metrics"
	)
	on := func(endpointVar, endpoint string, p Protocol) Signal {
		return Signal{Endpoint: endpoint, EndpointVar: endpointVar, Protocol: p}
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    Config
		wantErr string // the variable the error names; "" for none
	}{
		{name: "nothing set: off", env: nil, want: Config{}},
		{name: "empty endpoint: off", env: map[string]string{EnvEndpoint: " "}, want: Config{}},
		{name: "protocol alone: off", env: map[string]string{EnvProtocol: "grpc"}, want: Config{}},
		{
			name: "endpoint: both signals over http/protobuf",
			env:  map[string]string{EnvEndpoint: base},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolHTTPProtobuf), Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "traces endpoint alone: traces only",
			env:  map[string]string{EnvTracesEndpoint: traces},
			want: Config{Traces: on(EnvTracesEndpoint, traces, ProtocolHTTPProtobuf)},
		},
		{
			name: "metrics endpoint alone: metrics only",
			env:  map[string]string{EnvMetricsEndpoint: metrics},
			want: Config{Metrics: on(EnvMetricsEndpoint, metrics, ProtocolHTTPProtobuf)},
		},
		{
			name: "a signal's endpoint wins over the general one",
			env:  map[string]string{EnvEndpoint: base, EnvTracesEndpoint: traces},
			want: Config{Traces: on(EnvTracesEndpoint, traces, ProtocolHTTPProtobuf), Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "grpc",
			env:  map[string]string{EnvEndpoint: "http://collector:4317", EnvProtocol: "grpc"},
			want: Config{Traces: on(EnvEndpoint, "http://collector:4317", ProtocolGRPC), Metrics: on(EnvEndpoint, "http://collector:4317", ProtocolGRPC)},
		},
		{
			name: "a signal's protocol wins over the general one",
			env:  map[string]string{EnvEndpoint: base, EnvProtocol: "grpc", EnvMetricsProtocol: "http/protobuf"},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolGRPC), Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "http/json for traces",
			env:  map[string]string{EnvTracesEndpoint: traces, EnvProtocol: "http/json"},
			want: Config{Traces: on(EnvTracesEndpoint, traces, ProtocolHTTPJSON)},
		},
		{
			name:    "http/json for metrics: Go's exporter has none",
			env:     map[string]string{EnvEndpoint: base, EnvTracesProtocol: "http/json", EnvMetricsProtocol: "http/json"},
			wantErr: EnvMetricsProtocol,
		},
		{
			name:    "http/json for both, from the general variable",
			env:     map[string]string{EnvEndpoint: base, EnvProtocol: "http/json"},
			wantErr: EnvProtocol,
		},
		{
			name: "http/json for metrics that are off",
			env:  map[string]string{EnvEndpoint: base, EnvProtocol: "http/json", EnvMetricsExporter: "none"},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolHTTPJSON)},
		},
		{name: "an unknown protocol", env: map[string]string{EnvEndpoint: base, EnvProtocol: "grcp"}, wantErr: EnvProtocol},
		{name: "an unknown traces protocol", env: map[string]string{EnvEndpoint: base, EnvTracesProtocol: "udp"}, wantErr: EnvTracesProtocol},
		{
			name: "SDK disabled",
			env:  map[string]string{EnvEndpoint: base, EnvSDKDisabled: "true"},
			want: Config{},
		},
		{
			name: "SDK disabled in any case, nothing else checked",
			env:  map[string]string{EnvEndpoint: "collector:4318", EnvProtocol: "bogus", EnvSDKDisabled: " TRUE"},
			want: Config{},
		},
		{
			name: "only true disables the SDK",
			env:  map[string]string{EnvEndpoint: base, EnvSDKDisabled: "1"},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolHTTPProtobuf), Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "SDK disabled false",
			env:  map[string]string{EnvEndpoint: base, EnvSDKDisabled: "false"},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolHTTPProtobuf), Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "traces exporter none",
			env:  map[string]string{EnvEndpoint: base, EnvTracesExporter: "none"},
			want: Config{Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "metrics exporter none",
			env:  map[string]string{EnvEndpoint: base, EnvMetricsExporter: "none"},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{
			name: "both exporters none",
			env:  map[string]string{EnvEndpoint: base, EnvTracesExporter: "none", EnvMetricsExporter: "none"},
			want: Config{},
		},
		{
			name: "exporter otlp in a list",
			env:  map[string]string{EnvEndpoint: base, EnvTracesExporter: "none, otlp", EnvMetricsExporter: "otlp"},
			want: Config{Traces: on(EnvEndpoint, base, ProtocolHTTPProtobuf), Metrics: on(EnvEndpoint, base, ProtocolHTTPProtobuf)},
		},
		{name: "console exporter", env: map[string]string{EnvEndpoint: base, EnvTracesExporter: "console"}, wantErr: EnvTracesExporter},
		{name: "prometheus exporter", env: map[string]string{EnvEndpoint: base, EnvMetricsExporter: "otlp,prometheus"}, wantErr: EnvMetricsExporter},
		{name: "endpoint without a scheme", env: map[string]string{EnvEndpoint: "collector:4318"}, wantErr: EnvEndpoint},
		{name: "endpoint of another scheme", env: map[string]string{EnvEndpoint: "grpc://collector:4317"}, wantErr: EnvEndpoint},
		{name: "endpoint without a host", env: map[string]string{EnvEndpoint: "http:///v1"}, wantErr: EnvEndpoint},
		{name: "metrics endpoint not a URL", env: map[string]string{EnvMetricsEndpoint: "http://[::1"}, wantErr: EnvMetricsEndpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				var envErr *EnvError
				require.ErrorAs(t, err, &envErr)
				assert.ErrorIs(t, err, ErrInvalidEnv)
				assert.Equal(t, tt.wantErr, envErr.Var)
				assert.Equal(t, tt.env[tt.wantErr], envErr.Value)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.want != Config{}, got.On())
		})
	}
}

// OpenTelemetry off costs nothing: no SDK, and no hook for the server.
func TestOffInstrumentsNothing(t *testing.T) {
	tel, err := Start(context.Background(), Config{}, "test", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Nil(t, tel)
	srv, err := tel.Instrument()
	require.NoError(t, err)
	assert.Nil(t, srv)
	assert.Empty(t, srv.Hooks())
	assert.NoError(t, srv.ObserveStats(nil))
	assert.NoError(t, tel.Shutdown(context.Background()))
	tel.Close(slog.New(slog.DiscardHandler))
}

// One signal on: the server gets that signal's hook alone, and the
// signal reaches the receiver, over either protocol, from the endpoint
// and path Read's Config says, with the service name and the scope
// attributes given.
func TestExport(t *testing.T) {
	for _, tt := range []struct {
		name     string
		receiver func(testing.TB) *otlptest.Receiver
		signal   func(endpoint string) Config
	}{
		{"traces over http/protobuf, the general endpoint", otlptest.StartHTTP, func(e string) Config {
			return Config{Traces: Signal{Endpoint: e + "/", EndpointVar: EnvEndpoint, Protocol: ProtocolHTTPProtobuf}}
		}},
		{"traces over http/protobuf, their own endpoint", otlptest.StartHTTP, func(e string) Config {
			return Config{Traces: Signal{Endpoint: e + "/v1/traces", EndpointVar: EnvTracesEndpoint, Protocol: ProtocolHTTPProtobuf}}
		}},
		{"traces over grpc", otlptest.StartGRPC, func(e string) Config {
			return Config{Traces: Signal{Endpoint: e, EndpointVar: EnvEndpoint, Protocol: ProtocolGRPC}}
		}},
		{"metrics over http/protobuf, the general endpoint", otlptest.StartHTTP, func(e string) Config {
			return Config{Metrics: Signal{Endpoint: e, EndpointVar: EnvEndpoint, Protocol: ProtocolHTTPProtobuf}}
		}},
		{"metrics over http/protobuf, their own endpoint", otlptest.StartHTTP, func(e string) Config {
			return Config{Metrics: Signal{Endpoint: e + "/v1/metrics", EndpointVar: EnvMetricsEndpoint, Protocol: ProtocolHTTPProtobuf}}
		}},
		{"metrics over grpc", otlptest.StartGRPC, func(e string) Config {
			return Config{Metrics: Signal{Endpoint: e, EndpointVar: EnvMetricsEndpoint, Protocol: ProtocolGRPC}}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.receiver(t)
			c := tt.signal(r.Endpoint)
			tel, err := Start(context.Background(), c, "test-service", slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			require.NotNil(t, tel)
			srv, err := tel.Instrument(attribute.Int("kafka.node.id", 7))
			require.NoError(t, err)
			hooks := srv.Hooks()
			require.Len(t, hooks, 1, "one signal, one hook")
			done := &socketserver.RequestDone{Conn: connregistry.Info{Listener: "CLIENT"}, APIKey: 3, APIVersion: 12, ClientID: "the-client",
				Latency: socketserver.RequestLatency{Total: time.Millisecond}}
			switch h := hooks[0].(type) {
			case *knotel.Tracer:
				require.True(t, c.Traces.On(), "a tracer with traces off")
				h.OnRequestDone(done)
			case *knotel.Metrics:
				require.True(t, c.Metrics.On(), "metrics with metrics off")
				h.OnRequestDone(done)
			default:
				t.Fatalf("hook %T", h)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, tel.Shutdown(ctx)) // exports what is left
			wantRes := map[string]string{"service.name": "test-service"}
			wantScope := map[string]string{"kafka.node.id": "7"}
			if c.Traces.On() {
				spans := r.Spans()
				require.Len(t, spans, 1)
				assert.Equal(t, "Metadata", spans[0].Name)
				assert.Equal(t, "the-client", spans[0].Attrs["kafka.client_id"])
				assert.Subset(t, spans[0].Resource, wantRes)
				assert.Equal(t, wantScope, spans[0].Scope)
				assert.Empty(t, r.Metrics())
				return
			}
			var found bool
			for _, m := range r.Metrics() {
				if m.Name == "rpc.server.call.duration" {
					found = true
					assert.Equal(t, 1, m.Points)
					assert.Subset(t, m.Resource, wantRes)
					assert.Equal(t, wantScope, m.Scope)
				}
			}
			assert.True(t, found, "no rpc.server.call.duration in %v", r.Metrics())
			assert.Empty(t, r.Spans())
		})
	}
}
