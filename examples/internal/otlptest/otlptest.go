// Package otlptest is an OTLP receiver for tests of the example programs'
// OpenTelemetry export: it listens on loopback, over OTLP/HTTP with
// protobuf payloads (StartHTTP) or OTLP/gRPC (StartGRPC), decodes what the
// programs send and keeps it for the test to read.
package otlptest

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps the spans and metrics sent to it.
type Receiver struct {
	// Endpoint is its URL, for OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string

	mu       sync.Mutex
	requests int
	spans    []Span
	metrics  []Metric
}

// Span is a span received, with its resource's and instrumentation
// scope's attributes and its own, each value as a string.
type Span struct {
	Name                   string
	Resource, Scope, Attrs map[string]string
}

// Metric is a metric received, with its resource's and instrumentation
// scope's attributes and its number of data points.
type Metric struct {
	Name            string
	Resource, Scope map[string]string
	Points          int
}

// StartHTTP starts an OTLP/HTTP receiver of protobuf payloads on
// 127.0.0.1, at /v1/traces and /v1/metrics; it stops when the test ends.
func StartHTTP(t testing.TB) *Receiver {
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, req *http.Request) {
		in := &coltracepb.ExportTraceServiceRequest{}
		if decode(w, req, in) {
			r.addSpans(in)
			reply(w, &coltracepb.ExportTraceServiceResponse{})
		}
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, req *http.Request) {
		in := &colmetricpb.ExportMetricsServiceRequest{}
		if decode(w, req, in) {
			r.addMetrics(in)
			reply(w, &colmetricpb.ExportMetricsServiceResponse{})
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

// decode reads an OTLP/HTTP request's protobuf body into m, gunzipped if
// it is; it answers the request itself and returns false if it cannot.
func decode(w http.ResponseWriter, req *http.Request, m proto.Message) bool {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, not "+ct, http.StatusUnsupportedMediaType)
		return false
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return false
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err == nil {
		err = proto.Unmarshal(b, m)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func reply(w http.ResponseWriter, m proto.Message) {
	b, _ := proto.Marshal(m)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

// StartGRPC starts an OTLP/gRPC receiver on 127.0.0.1, without TLS; it
// stops when the test ends.
func StartGRPC(t testing.TB) *Receiver {
	r := &Receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, grpcTraces{r: r})
	colmetricpb.RegisterMetricsServiceServer(srv, grpcMetrics{r: r})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	r.Endpoint = "http://" + ln.Addr().String()
	return r
}

type grpcTraces struct {
	coltracepb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcTraces) Export(_ context.Context, in *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	g.r.addSpans(in)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type grpcMetrics struct {
	colmetricpb.UnimplementedMetricsServiceServer
	r *Receiver
}

func (g grpcMetrics) Export(_ context.Context, in *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	g.r.addMetrics(in)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

func (r *Receiver) addSpans(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	for _, rs := range in.GetResourceSpans() {
		res := resourceAttrs(rs.GetResource())
		for _, ss := range rs.GetScopeSpans() {
			scope := attrs(ss.GetScope().GetAttributes())
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Name: s.GetName(), Resource: res, Scope: scope, Attrs: attrs(s.GetAttributes())})
			}
		}
	}
}

func (r *Receiver) addMetrics(in *colmetricpb.ExportMetricsServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	for _, rm := range in.GetResourceMetrics() {
		res := resourceAttrs(rm.GetResource())
		for _, sm := range rm.GetScopeMetrics() {
			scope := attrs(sm.GetScope().GetAttributes())
			for _, m := range sm.GetMetrics() {
				r.metrics = append(r.metrics, Metric{Name: m.GetName(), Resource: res, Scope: scope, Points: points(m)})
			}
		}
	}
}

// points counts m's data points, whatever its kind.
func points(m *metricpb.Metric) int {
	return len(m.GetSum().GetDataPoints()) + len(m.GetGauge().GetDataPoints()) +
		len(m.GetHistogram().GetDataPoints()) + len(m.GetExponentialHistogram().GetDataPoints()) +
		len(m.GetSummary().GetDataPoints())
}

func resourceAttrs(r *resourcepb.Resource) map[string]string { return attrs(r.GetAttributes()) }

// attrs returns kvs as a map, each value as a string.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = strconv.FormatBool(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			out[kv.GetKey()] = strconv.FormatFloat(v.GetDoubleValue(), 'g', -1, 64)
		default:
			out[kv.GetKey()] = v.GetStringValue()
		}
	}
	return out
}

// Requests returns how many export requests the receiver has had.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Metrics returns the metrics received so far, in the order received.
func (r *Receiver) Metrics() []Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Metric(nil), r.metrics...)
}
