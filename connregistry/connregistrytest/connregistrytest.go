// Package connregistrytest builds connection registries for a host's unit
// tests, as net/http/httptest builds requests and recorders: a
// [connregistry.Registry] with the connections a test describes, without a
// server, for the code that lists, filters or closes them (a
// [connregistry.ListHandler], an operator's tool, a metrics exporter).
package connregistrytest

import (
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/connreg"
)

// NewRegistry returns a registry holding conns, remembering up to
// historySize closed connections (0 means connregistry.DefaultHistorySize;
// negative keeps none), as a server's registry does.
//
// A connection without a CloseReason is open; one with a CloseReason is in
// the history of closed connections, closed at its ClosedAt (now when
// zero), in the order given. The counters (BytesIn, BytesOut, Requests,
// LastActivity) are listed as given; a zero LastActivity is ConnectedAt.
// The rates (RequestRate, BytesInRate, BytesOutRate) are those at
// LastActivity, and decay from there as a server's do.
//
// Closing open connections through the registry (Registry.Close) closes
// them as a server does: each leaves the open set for the history, with the
// reason given, closed at the time of the call.
func NewRegistry(historySize int, conns ...connregistry.Conn) connregistry.Registry {
	r := connreg.New(historySize)
	for _, c := range conns {
		reason, at := c.CloseReason, c.ClosedAt
		c.CloseReason, c.ClosedAt = "", time.Time{}
		var e *connreg.Entry
		e = connreg.Add(r, c, connreg.CloserFunc(func(reason connregistry.CloseReason) { e.Remove(time.Now(), reason) }))
		if reason != "" {
			if at.IsZero() {
				at = time.Now()
			}
			e.Remove(at, reason)
		}
	}
	return r
}
