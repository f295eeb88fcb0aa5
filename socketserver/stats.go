package socketserver

import (
	"slices"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// Stats is a snapshot of the server's gauges and running totals. Taking
// one changes nothing, so any number of readers may take them
// independently; rates and ratios come from two snapshots (see
// [Stats.ProcessorIdleRatio]).
type Stats struct {
	// At is when the snapshot was taken (with a monotonic clock reading).
	At time.Time
	// Started is when [Server.Start] succeeded; zero before.
	Started time.Time
	// ConnectionCount is connection-count per listener.
	ConnectionCount map[protocolmap.ListenerName]int
	// PendingProxyHeaders is, per listener that requires the PROXY
	// protocol, how many accepted sockets wait for their header: not
	// connections yet (not in ConnectionCount, nor in the registry), but
	// counted against max.connections and the listener's limit, each until
	// its header is read or kafkanet.handshake.timeout.ms passes. Nil when
	// no listener requires the protocol.
	PendingProxyHeaders map[protocolmap.ListenerName]int
	// RequestQueueSize is RequestQueueSize (data plane) and
	// ControlPlaneRequestQueueSize.
	RequestQueueSize map[protocolmap.Plane]int
	// ProcessorBusy is, for each processor id, how long its connections
	// have spent decoding, queueing and writing since Start: the
	// complement of Kafka's IdlePercent per networkProcessor, as a running
	// total (a Prometheus counter, say, whose rate is the busy ratio).
	ProcessorBusy map[int]time.Duration
	// ParkedConnections is how many connections have been idle long enough
	// to park: each then holds only the runtime's smallest goroutine stack
	// and no read buffer (a TLS connection keeps crypto/tls's own).
	ParkedConnections int
	// ProbesClosed is, per listener, how many probes have closed since the
	// listener was added: connections their client closed (however: its
	// EOF or a reset) before it sent a byte of a request, after its PROXY
	// header and TLS handshake if any (a TLS listener's client that sent
	// nothing at all too), and connections of a load balancer of its own
	// (a PROXY LOCAL header; v1's UNKNOWN) that it closed, whatever they
	// sent. Health checks and port scans do that every few seconds: a
	// probe is logged at Debug only, and kept out of the registry's
	// history of closed connections, so that it does not push real closes
	// out; HookConnClosed still sees it, as connregistry.CloseByClient. A
	// socket of a listener that requires the PROXY protocol, closed
	// before a byte of its header, counts too. A connection that sent
	// part of a request, or part of a TLS handshake, or that the server
	// closed (a TLS or SASL failure, a refused PROXY header, a quota, idle
	// expiry) is no probe.
	ProbesClosed map[protocolmap.ListenerName]int64
	// RequestMemory is, per plane, the memory pool of
	// queued.max.request.bytes (the control plane's own allowance): Kafka's
	// MemoryPoolUsed and, as a running total, the time the pool has been
	// spent (MemoryPoolDepletedTimeTotal). Empty without a limit.
	RequestMemory map[protocolmap.Plane]RequestMemory
	// AuditDropped is how many audit events have been dropped since New
	// because the audit queue was full (see [HookAudit]); 0 without a
	// HookAudit.
	AuditDropped int64
}

// RequestMemory is one plane's request memory pool (see
// [Config.QueuedMaxRequestBytes]).
type RequestMemory struct {
	// Size is the pool's size; Used the bytes of requests read and not yet
	// answered, which may exceed Size by one request.
	Size, Used int
	// Depleted is the total time the pool has been spent, so that
	// connections waited to read.
	Depleted time.Duration
}

// ProcessorIdleRatio returns each processor's share of the time from since
// to s that its connections spent waiting rather than decoding, queueing or
// writing (Kafka's IdlePercent per networkProcessor, as a ratio from 0 to
// 1), keyed by processor id. since is an earlier snapshot of the same
// server; a zero since (no earlier snapshot) measures from Start. A
// processor that did nothing, or an empty interval, has a ratio of 1.
func (s Stats) ProcessorIdleRatio(since Stats) map[int]float64 {
	from := since.At
	if from.IsZero() {
		from = s.Started
	}
	elapsed := s.At.Sub(from)
	out := make(map[int]float64, len(s.ProcessorBusy))
	for id, busy := range s.ProcessorBusy {
		if elapsed <= 0 || from.IsZero() {
			out[id] = 1
			continue
		}
		delta := busy - since.ProcessorBusy[id]
		out[id] = 1 - min(max(float64(delta)/float64(elapsed), 0), 1)
	}
	return out
}

// Stats returns a snapshot of the server's gauges and running totals (see
// [Stats]). It has no side effects.
func (s *Server) Stats() Stats {
	st := Stats{
		At:                time.Now(),
		ConnectionCount:   map[protocolmap.ListenerName]int{},
		RequestQueueSize:  map[protocolmap.Plane]int{},
		ProcessorBusy:     map[int]time.Duration{},
		ParkedConnections: int(s.parked.Load()),
		ProbesClosed:      map[protocolmap.ListenerName]int64{},
	}
	if s.audit != nil {
		st.AuditDropped = s.audit.dropped.Load()
	}
	if started := s.startedAt.Load(); started > 0 {
		st.Started = s.epoch.Add(time.Duration(started))
	}
	for plane, q := range s.queues {
		if q != nil {
			st.RequestQueueSize[protocolmap.Plane(plane)] = len(q)
		}
	}
	for plane, pool := range s.memory {
		if pool != nil {
			if st.RequestMemory == nil {
				st.RequestMemory = map[protocolmap.Plane]RequestMemory{}
			}
			used, depleted := pool.stats()
			st.RequestMemory[protocolmap.Plane(plane)] = RequestMemory{Size: int(pool.size), Used: int(used), Depleted: depleted}
		}
	}
	s.mu.Lock()
	lss := s.listeners
	for _, ls := range s.removing { // their connections drain: still counted
		lss = append(slices.Clip(lss), ls)
	}
	s.mu.Unlock()
	for _, ls := range lss {
		st.ProbesClosed[ls.cfg.Name] += ls.probes.Load()
		proxied := ls.proxy.required()
		if proxied && st.PendingProxyHeaders == nil {
			st.PendingProxyHeaders = map[protocolmap.ListenerName]int{}
		}
		for _, p := range ls.processors {
			conns, pending := p.counts()
			st.ConnectionCount[ls.cfg.Name] += conns
			if proxied {
				st.PendingProxyHeaders[ls.cfg.Name] += pending
			}
			st.ProcessorBusy[p.id] = time.Duration(p.busy.Load())
		}
	}
	return st
}
