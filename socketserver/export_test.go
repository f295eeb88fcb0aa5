package socketserver

import (
	"net/netip"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// QuotaCounts exposes the connection quotas' counts to the external tests:
// the total, per listener and per address.
func QuotaCounts(s *Server) (int, map[protocolmap.ListenerName]int, map[netip.Addr]int) {
	return s.quotas.counts()
}
