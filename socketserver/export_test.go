package socketserver

import (
	"context"
	"net/netip"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// QuotaCounts exposes the connection quotas' counts to the external tests:
// the total, per listener and per address.
func QuotaCounts(s *Server) (int, map[protocolmap.ListenerName]int, map[netip.Addr]int) {
	return s.quotas.counts()
}

// SetLookupNetIP makes the server built from cfg resolve the host names of
// the per-IP connection overrides with lookup instead of the DNS.
func SetLookupNetIP(cfg *Config, lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)) {
	cfg.lookupNetIP = lookup
}

// Requests returns the request channel of a plane, which Serve consumes,
// for the tests that read it themselves.
func Requests(s *Server, plane protocolmap.Plane) <-chan *Request { return s.requests(plane) }

// SetStreamWatchAfter sets how often a connection whose host reads a
// streamed body looks whether it has been read, until restore is called
// (once no server runs).
func SetStreamWatchAfter(d time.Duration) (restore func()) {
	old := streamWatchAfter
	streamWatchAfter = d
	return func() { streamWatchAfter = old }
}

// PrincipalCounts exposes the connections counted per principal across
// listeners (connection quotas' PrincipalLimits) to the external tests.
func PrincipalCounts(s *Server) map[connregistry.Principal]int { return s.quotas.principalCounts() }

// HandshakeTimeouts returns each listener's bound on the TLS handshake
// and SASL exchange, for the external tests.
func HandshakeTimeouts(s *Server) map[protocolmap.ListenerName]time.Duration {
	out := map[protocolmap.ListenerName]time.Duration{}
	for _, ls := range s.listeners {
		out[ls.cfg.Name] = ls.sec.timeout
	}
	return out
}
