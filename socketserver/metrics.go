package socketserver

import (
	"time"

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
	// ConnectionAccepted counts a connection admitted by the connection
	// quotas (connection-accept-rate per listener; the broker-wide rate is
	// their sum).
	ConnectionAccepted(l protocolmap.ListenerName)
	// AcceptorBlocked records how long the listener's acceptor waited for
	// the connection quotas (AcceptorBlockedPercent), and how much of it
	// was the creation-rate delay (connection-accept-throttle-time).
	AcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration)
	// ConnectionRejected counts a connection closed by a per-address quota:
	// max.connections.per.ip when hold is zero, else the per-address
	// creation rate, which held it for hold first
	// (ip-connection-accept-throttle-time).
	ConnectionRejected(l protocolmap.ListenerName, hold time.Duration)
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
	// ParkedConnections is how many connections have been idle long enough
	// to park: each then holds only the runtime's smallest goroutine stack
	// and no read buffer (a TLS connection keeps crypto/tls's own).
	ParkedConnections int
}

func (nopMetrics) ConnectionAccepted(protocolmap.ListenerName)                            {}
func (nopMetrics) AcceptorBlocked(protocolmap.ListenerName, time.Duration, time.Duration) {}
func (nopMetrics) ConnectionRejected(protocolmap.ListenerName, time.Duration)             {}
