// Package adminhost is a small host of the socket server: it serves
// Metadata to clients on its data listeners, and gives its operator an
// ADMIN listener that answers ListClientConnections and
// CloseClientConnections, Go calls that list and close connections, hooks
// that count what happened, and connection quotas (max.connections,
// max.connections.per.ip) that it can change while it runs.
//
// It was written against kafkanet's first API baseline (commit b35622a)
// as a host of that day would write it, then ported to the v1 API with
// CHANGELOG.md's migration notes alone (issue 39); its test keeps the
// port honest and runs listing, closing, hooks and quotas together over
// TCP, as a host uses them.
package adminhost

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Admin is the name of the operator's listener.
const Admin = "ADMIN"

// Host is a running server.
type Host struct {
	srv    *socketserver.Server
	quotas socketserver.ConnectionQuotas
	served chan error
	events *Events
}

// Start resolves props (Kafka's keys: listeners, the protocol map,
// max.connections, max.connections.per.ip, ...), which must name an ADMIN
// listener, and serves them until Shutdown.
func Start(ctx context.Context, props config.Properties, log *slog.Logger) (*Host, error) {
	cfg, err := config.Server(props)
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.Listeners.Listener(Admin); !ok {
		return nil, errors.New("adminhost: no ADMIN listener")
	}
	metadata := socketserver.KmsgAPI(kmsg.Metadata, 0, 12)
	cfg.APIs = []socketserver.API{metadata}
	cfg.PerListener[Admin].APIs = []socketserver.API{
		metadata,
		socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil),
		socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, nil),
	}
	h := &Host{served: make(chan error, 1), events: newEvents()}
	cfg.Hooks = []socketserver.Hook{h.events}
	cfg.RegistryHistory = 100
	cfg.Logger = log
	cfg.IOThreads = 2
	h.quotas = *cfg.ConnectionQuotas

	if h.srv, err = socketserver.New(cfg); err != nil {
		return nil, err
	}
	if err := h.srv.Start(ctx); err != nil {
		_ = h.srv.Close()
		return nil, err
	}
	self := []socketserver.Broker{h.srv.Broker(0, "")}
	handler := socketserver.HandlerFunc(func(r *socketserver.Request) {
		req, ok := r.Body.(*kmsg.MetadataRequest)
		if !ok {
			_ = r.CloseConnection()
			return
		}
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = socketserver.MetadataBrokers(r.Conn.Listener, self)
		resp.ControllerID = 0
		_ = r.Respond(resp)
	})
	go func() {
		h.served <- h.srv.Serve(context.Background(), protocolmap.DataPlane, handler)
	}()
	return h, nil
}

// Addr is where the listener named l listens.
func (h *Host) Addr(l string) string { return h.srv.Addr(protocolmap.ListenerName(l)).String() }

// Clients lists the open connections of listener l from principal (both
// optional: "" is any).
func (h *Host) Clients(l, principal string) ([]connregistry.Conn, error) {
	f, err := filter(l, principal, "")
	if err != nil {
		return nil, err
	}
	return h.srv.Registry().Snapshot(f), nil
}

// Closed lists the closed connections of listener l the server remembers.
func (h *Host) Closed(l string) ([]connregistry.Conn, error) {
	f, err := filter(l, "", "")
	if err != nil {
		return nil, err
	}
	return h.srv.Registry().Closed(f), nil
}

// Kick closes, as an operator, the open connections of those ids and
// returns them.
func (h *Host) Kick(ids ...string) []connregistry.Conn {
	// Never nil: a nil list is no filter, and would close every connection.
	f := connregistry.Filter{ConnectionIDs: append([]string{}, ids...)}
	return h.srv.Registry().Close(f, connregistry.CloseByOperator)
}

// KickFrom closes, as an operator, the open connections from addr (an
// address or a CIDR) and returns them.
func (h *Host) KickFrom(addr string) ([]connregistry.Conn, error) {
	f, err := filter("", "", addr)
	if err != nil {
		return nil, err
	}
	return h.srv.Registry().Close(f, connregistry.CloseByOperator), nil
}

func filter(l, principal, addr string) (connregistry.Filter, error) {
	var pl, pp, pa *string
	if l != "" {
		pl = &l
	}
	if principal != "" {
		pp = &principal
	}
	if addr != "" {
		pa = &addr
	}
	f := connregistry.Filter{Principal: pp, ClientAddress: pa, Listener: pl}
	return f, f.Validate()
}

// LimitPerIP changes max.connections.per.ip while the host runs.
func (h *Host) LimitPerIP(ctx context.Context, n int) error {
	q := h.quotas
	q.MaxConnectionsPerIP = n
	if err := h.srv.SetConnectionQuotas(ctx, q); err != nil {
		return err
	}
	h.quotas = q
	return nil
}

// Events returns what the hooks have seen.
func (h *Host) Events() *Events { return h.events }

// Shutdown answers what has arrived, closes every connection and stops.
func (h *Host) Shutdown(ctx context.Context) error {
	if err := h.srv.Shutdown(ctx); err != nil {
		return err
	}
	if err := <-h.served; !errors.Is(err, socketserver.ErrServerClosed) {
		return err
	}
	return nil
}

// Events counts the hooks' calls.
type Events struct {
	mu       sync.Mutex
	opened   map[string]netip.AddrPort           // by connection id
	closed   map[string]connregistry.CloseReason // by connection id
	rejected []error
	requests map[int16]int // answered, by API key
	slowest  time.Duration
}

func newEvents() *Events {
	return &Events{opened: map[string]netip.AddrPort{}, closed: map[string]connregistry.CloseReason{},
		requests: map[int16]int{}}
}

func (e *Events) OnConnCreated(info connregistry.Info) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opened[info.ID] = info.ClientAddr
}

func (e *Events) OnConnClosed(info connregistry.Info, reason connregistry.CloseReason) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed[info.ID] = reason
}

func (e *Events) OnConnRejected(_ protocolmap.ListenerName, _ netip.Addr, err error, _ time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rejected = append(e.rejected, err)
}

func (e *Events) OnRequestDone(r *socketserver.RequestDone) {
	if r.Closed || r.Authenticating { // not answered, or the SASL exchange's
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests[r.APIKey]++
	e.slowest = max(e.slowest, r.Latency.Total)
}

// Opened is how many connections have opened.
func (e *Events) Opened() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.opened)
}

// ClosedBecause is why connection id closed ("" while it is open).
func (e *Events) ClosedBecause(id string) connregistry.CloseReason {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed[id]
}

// Rejected is the errors of the connections a per-address quota refused.
func (e *Events) Rejected() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.rejected...)
}

// Slowest is the longest time a request took, from its frame read to its
// answer.
func (e *Events) Slowest() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.slowest
}

// Requests is how many requests of apiKey were answered.
func (e *Events) Requests(apiKey int16) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests[apiKey]
}
