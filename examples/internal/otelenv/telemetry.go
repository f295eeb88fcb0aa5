package otelenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kafkanet/kafkanet/plugin/knotel"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Telemetry is a program's OpenTelemetry SDK: a tracer provider when
// traces are exported, a meter provider when metrics are, each with its
// OTLP exporter. Make it with [Start]; a nil *Telemetry is OpenTelemetry
// off, and its methods do nothing.
type Telemetry struct {
	tp *sdktrace.TracerProvider // nil: traces off
	mp *sdkmetric.MeterProvider // nil: metrics off
}

// ShutdownTimeout bounds [Telemetry.Close]'s export of what is left.
const ShutdownTimeout = 5 * time.Second

// Start builds the SDK for the signals c exports, with service the
// service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names
// another, and logs to log what it exports where. It returns nil when c
// exports nothing. Close the Telemetry when the program is done with it.
func Start(ctx context.Context, c Config, service string, log *slog.Logger) (*Telemetry, error) {
	if !c.On() {
		return nil, nil
	}
	// The environment's attributes come last, so that they win.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	t := &Telemetry{}
	if c.Traces.On() {
		exp, err := traceExporter(ctx, c.Traces)
		if err != nil {
			return nil, err
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	}
	if c.Metrics.On() {
		exp, err := metricExporter(ctx, c.Metrics)
		if err != nil {
			return nil, errors.Join(err, t.Shutdown(ctx))
		}
		t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)), sdkmetric.WithResource(res))
	}
	for _, s := range []struct {
		name, path string
		s          Signal
	}{{"traces", "/v1/traces", c.Traces}, {"metrics", "/v1/metrics", c.Metrics}} {
		if s.s.On() {
			log.Info("exporting OpenTelemetry "+s.name, "url", redacted(s.s.url(s.path)), "from", s.s.EndpointVar, "protocol", s.s.Protocol)
		}
	}
	return t, nil
}

// traceExporter returns the OTLP span exporter of s; it reads the rest of
// its configuration (headers, timeout, TLS files, ...) from the
// environment.
func traceExporter(ctx context.Context, s Signal) (sdktrace.SpanExporter, error) {
	switch s.Protocol {
	case ProtocolGRPC:
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(s.url("")))
	case ProtocolHTTPJSON:
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.url("/v1/traces")), otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	default:
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.url("/v1/traces")), otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf))
	}
}

// metricExporter returns the OTLP metric exporter of s; it reads the rest
// of its configuration from the environment.
func metricExporter(ctx context.Context, s Signal) (sdkmetric.Exporter, error) {
	if s.Protocol == ProtocolGRPC {
		return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(s.url("")))
	}
	return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(s.url("/v1/metrics")))
}

// url is the URL the signal is sent to, as the specification derives it:
// a signal's own endpoint as it is, and for OTLP/HTTP the general
// endpoint with the signal's path (/v1/traces, /v1/metrics) appended.
func (s Signal) url(path string) string {
	if s.EndpointVar != EnvEndpoint || s.Protocol == ProtocolGRPC {
		return s.Endpoint
	}
	return strings.TrimSuffix(s.Endpoint, "/") + path
}

// Close exports what the providers hold and stops their exporters, within
// ShutdownTimeout, and logs to log what failed. On a nil *Telemetry it
// does nothing.
func (t *Telemetry) Close(log *slog.Logger) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Error("OpenTelemetry shutdown", "err", err)
	}
}

// Shutdown exports what the providers hold and stops their exporters,
// within ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	var errs []error
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// Server is the instrumentation of one socket server: plugin/knotel's
// tracer and metrics. A nil *Server instruments nothing.
type Server struct {
	tracer  *knotel.Tracer
	metrics *knotel.Metrics
}

// Instrument makes the instrumentation of one socket server. attrs, if
// any, are set on its tracer's and meter's instrumentation scope, to tell
// apart the servers of one process (the brokers of examples/broker
// -brokers N, by their node id): plugin/knotel's instruments would
// otherwise add up. On a nil *Telemetry it returns nil.
func (t *Telemetry) Instrument(attrs ...attribute.KeyValue) (*Server, error) {
	if t == nil {
		return nil, nil
	}
	s := &Server{}
	if t.tp != nil {
		var tp trace.TracerProvider = t.tp
		if len(attrs) > 0 {
			tp = scopedTracerProvider{tp, attrs}
		}
		s.tracer = knotel.NewTracer(tp)
	}
	if t.mp != nil {
		var mp metric.MeterProvider = t.mp
		if len(attrs) > 0 {
			mp = scopedMeterProvider{mp, attrs}
		}
		var err error
		if s.metrics, err = knotel.NewMetrics(mp); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Hooks returns the hooks to append to the server's
// [socketserver.Config.Hooks]: none on a nil *Server.
func (s *Server) Hooks() []socketserver.Hook {
	var hooks []socketserver.Hook
	if s != nil && s.tracer != nil {
		hooks = append(hooks, s.tracer)
	}
	if s != nil && s.metrics != nil {
		hooks = append(hooks, s.metrics)
	}
	return hooks
}

// ObserveStats adds srv's gauges (see [knotel.Metrics.ObserveStats]),
// read until the meter provider shuts down.
func (s *Server) ObserveStats(srv *socketserver.Server) error {
	if s == nil || s.metrics == nil {
		return nil
	}
	_, err := s.metrics.ObserveStats(srv)
	return err
}

// scopedTracerProvider gives its tracers the instrumentation scope
// attributes attrs.
type scopedTracerProvider struct {
	trace.TracerProvider
	attrs []attribute.KeyValue
}

func (p scopedTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return p.TracerProvider.Tracer(name, append(opts[:len(opts):len(opts)], trace.WithInstrumentationAttributes(p.attrs...))...)
}

// scopedMeterProvider gives its meters the instrumentation scope
// attributes attrs.
type scopedMeterProvider struct {
	metric.MeterProvider
	attrs []attribute.KeyValue
}

func (p scopedMeterProvider) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return p.MeterProvider.Meter(name, append(opts[:len(opts):len(opts)], metric.WithInstrumentationAttributes(p.attrs...))...)
}

// redacted is endpoint with any password replaced by xxxxx, for the log.
func redacted(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return endpoint // Read has checked it parses
	}
	return u.Redacted()
}
