package socketserver

import (
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// Metrics receives the server's counters as they happen, named after
// Kafka's socket-server metrics. Implementations must be safe for concurrent
// use and fast: they run on the per-request path. Gauges (connection count,
// queue sizes, processor idle ratio) are read on demand from [Server.Stats]
// instead. A Prometheus adapter lives in examples/broker.
type Metrics interface {
	// ConnectionCreated counts connection-creation-total.
	ConnectionCreated(l protocolmap.ListenerName)
	// ConnectionClosed counts connection-close-total.
	ConnectionClosed(l protocolmap.ListenerName)
	// Request counts one complete request of apiKey (Kafka's
	// RequestsPerSec{request}) and its bytes (incoming-byte-total).
	Request(l protocolmap.ListenerName, apiKey int16, bytes int)
	// Response counts one response written and its bytes
	// (outgoing-byte-total).
	Response(l protocolmap.ListenerName, apiKey int16, bytes int)
}

type nopMetrics struct{}

func (nopMetrics) ConnectionCreated(protocolmap.ListenerName)    {}
func (nopMetrics) ConnectionClosed(protocolmap.ListenerName)     {}
func (nopMetrics) Request(protocolmap.ListenerName, int16, int)  {}
func (nopMetrics) Response(protocolmap.ListenerName, int16, int) {}

// Stats is a snapshot of the server's gauges.
type Stats struct {
	// ConnectionCount is connection-count per listener.
	ConnectionCount map[protocolmap.ListenerName]int
	// RequestQueueSize is RequestQueueSize (data plane) and
	// ControlPlaneRequestQueueSize.
	RequestQueueSize map[listener.Plane]int
	// ProcessorIdleRatio is each processor's share of the time since the
	// previous Stats call that its connections spent waiting rather than
	// decoding, queueing or writing (Kafka's IdlePercent per
	// networkProcessor, as a ratio). The key is the processor id.
	ProcessorIdleRatio map[int]float64
}
