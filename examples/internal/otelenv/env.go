// Package otelenv turns on OpenTelemetry in the example programs
// (examples/broker, examples/proxy) from the standard OTEL_* environment
// variables, as OpenTelemetry's SDKs read them, and instruments their
// socket servers with plugin/knotel: a span per request and the socket
// server's metrics, exported over OTLP.
//
// [Read] decides, from the environment, which signals are exported and
// how; [Start] builds the SDK's tracer and meter providers for them, and
// [Telemetry.Instrument] the hooks of one socket server. When the
// environment turns OpenTelemetry off, Start returns nil, and a nil
// *Telemetry instruments nothing: no exporter, no SDK, no hook.
//
// A signal (traces, metrics) is exported when an OTLP endpoint is set for
// it, OTEL_EXPORTER_OTLP_ENDPOINT or its own
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT),
// unless OTEL_SDK_DISABLED is true or its exporter
// (OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER) is none. Unlike the SDKs,
// which send to localhost by default, the programs export nothing unless
// told where to. The protocol is OTEL_EXPORTER_OTLP_PROTOCOL, or the
// signal's own (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, ...): http/protobuf
// (the default, as the specification says), grpc, and for traces also
// http/json, which Go's OTLP metric exporter does not speak.
//
// The endpoint is used as the specification says: over OTLP/HTTP
// /v1/traces or /v1/metrics is appended to OTEL_EXPORTER_OTLP_ENDPOINT,
// while a signal's own endpoint is taken as it is; an http URL is sent to
// without TLS. The rest is read by OpenTelemetry's Go SDK and exporters
// themselves, as their documentation says: OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE and
// _CLIENT_KEY (and their per-signal forms),
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (the resource, whose service.name is the
// program's own by default), OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG, the batch span processor's OTEL_BSP_* and the
// metric reader's OTEL_METRIC_EXPORT_INTERVAL and
// OTEL_METRIC_EXPORT_TIMEOUT.
package otelenv

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Usage is a line for a program's -h: where OpenTelemetry is configured.
const Usage = "OpenTelemetry: set OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables) to export a span\n" +
	"per request and the socket server's metrics over OTLP (http/protobuf or grpc); see go doc"

// The environment variables Read reads.
const (
	EnvSDKDisabled      = "OTEL_SDK_DISABLED"
	EnvTracesExporter   = "OTEL_TRACES_EXPORTER"
	EnvMetricsExporter  = "OTEL_METRICS_EXPORTER"
	EnvEndpoint         = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint   = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint  = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvProtocol         = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol   = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvMetricsProtocol  = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	defaultProtocol     = ProtocolHTTPProtobuf
	exporterOTLP        = "otlp"
	exporterNone        = "none"
	endpointRuleExample = "want a URL with the scheme http or https and a host, such as http://localhost:4318"
)

// Protocol is an OTLP transport, as OTEL_EXPORTER_OTLP_PROTOCOL names it.
type Protocol string

// The protocols the programs export with.
const (
	ProtocolGRPC         Protocol = "grpc"
	ProtocolHTTPProtobuf Protocol = "http/protobuf"
	ProtocolHTTPJSON     Protocol = "http/json" // traces only: Go's OTLP metric exporter has no JSON
)

// Signal is how one signal is exported: over Protocol to the endpoint
// that EndpointVar sets to Endpoint. The zero Signal is off.
type Signal struct {
	Endpoint    string
	EndpointVar string
	Protocol    Protocol
}

// On reports whether the signal is exported.
func (s Signal) On() bool { return s.Endpoint != "" }

// Config is which signals the environment exports, and how.
type Config struct {
	Traces, Metrics Signal
}

// On reports whether any signal is exported.
func (c Config) On() bool { return c.Traces.On() || c.Metrics.On() }

// ErrInvalidEnv is the sentinel of the errors of Read.
var ErrInvalidEnv = errors.New("invalid OpenTelemetry environment variable")

// EnvError is an environment variable Read refuses: its name, value and
// the rule it breaks.
type EnvError struct {
	Var, Value, Rule string
}

func (e *EnvError) Error() string {
	return fmt.Sprintf("invalid value %q for environment variable %s: %s", e.Value, e.Var, e.Rule)
}

// Unwrap returns ErrInvalidEnv.
func (e *EnvError) Unwrap() error { return ErrInvalidEnv }

// Read reads the OTEL_* environment variables through getenv (os.Getenv,
// or a test's) and returns which signals to export (see the package
// documentation). A value it cannot use is an *EnvError naming the
// variable: an exporter other than otlp or none, a protocol the signal's
// Go exporter does not speak, an endpoint that is not an http or https
// URL. Variables of a signal that is off are not checked, and nothing is
// checked when OTEL_SDK_DISABLED is true.
func Read(getenv func(string) string) (Config, error) {
	// The specification: only "true", in any case, disables the SDK;
	// anything else, unset or empty included, is false.
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return Config{}, nil
	}
	traces, err := readSignal(getenv, EnvTracesExporter, EnvTracesEndpoint, EnvTracesProtocol,
		ProtocolGRPC, ProtocolHTTPProtobuf, ProtocolHTTPJSON)
	if err != nil {
		return Config{}, err
	}
	metrics, err := readSignal(getenv, EnvMetricsExporter, EnvMetricsEndpoint, EnvMetricsProtocol,
		ProtocolGRPC, ProtocolHTTPProtobuf)
	if err != nil {
		return Config{}, err
	}
	return Config{Traces: traces, Metrics: metrics}, nil
}

// readSignal reads one signal: its exporter list (exporterVar), its own
// endpoint and protocol variables, else the general ones; supported are
// the protocols its Go exporter speaks.
func readSignal(getenv func(string) string, exporterVar, endpointVar, protocolVar string, supported ...Protocol) (Signal, error) {
	otlp, err := exportsOTLP(exporterVar, getenv(exporterVar))
	if err != nil || !otlp {
		return Signal{}, err
	}
	s := Signal{EndpointVar: endpointVar, Endpoint: strings.TrimSpace(getenv(endpointVar))}
	if s.Endpoint == "" {
		s.EndpointVar, s.Endpoint = EnvEndpoint, strings.TrimSpace(getenv(EnvEndpoint))
	}
	if s.Endpoint == "" {
		return Signal{}, nil
	}
	if u, err := url.Parse(s.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Signal{}, &EnvError{Var: s.EndpointVar, Value: s.Endpoint, Rule: endpointRuleExample}
	}
	s.Protocol = defaultProtocol
	v, pvar := strings.TrimSpace(getenv(protocolVar)), protocolVar
	if v == "" {
		v, pvar = strings.TrimSpace(getenv(EnvProtocol)), EnvProtocol
	}
	if v == "" {
		return s, nil
	}
	s.Protocol = Protocol(v)
	for _, p := range supported {
		if s.Protocol == p {
			return s, nil
		}
	}
	names := make([]string, len(supported))
	for i, p := range supported {
		names[i] = string(p)
	}
	return Signal{}, &EnvError{Var: pvar, Value: v, Rule: "want " + strings.Join(names, ", ") + " (the protocols Go's OTLP exporter of the signal speaks)"}
}

// exportsOTLP reads an exporter list (OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER): comma-separated, otlp when empty; it reports
// whether otlp is in it. The programs have no other exporter: none is
// the only other value allowed.
func exportsOTLP(name, value string) (bool, error) {
	if strings.TrimSpace(value) == "" {
		return true, nil
	}
	otlp := false
	for e := range strings.SplitSeq(value, ",") {
		switch strings.TrimSpace(e) {
		case exporterOTLP:
			otlp = true
		case exporterNone:
		default:
			return false, &EnvError{Var: name, Value: value, Rule: "want otlp or none (the programs export over OTLP only)"}
		}
	}
	return otlp, nil
}
