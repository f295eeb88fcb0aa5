package socketserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/connreg"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// ErrServerClosed is returned by Start, Serve and Shutdown once the server
// has been shut down or closed.
var ErrServerClosed = errors.New("socketserver: server closed")

// Server is Kafka's SocketServer: one acceptor per listener, a pool of
// processors per listener that own their connections, and a bounded request
// channel per plane that the host consumes.
//
// Its life: [New] validates and binds nothing; [Server.Start] starts the
// SASL mechanisms that have work of their own (sasl.Service) and binds
// every listener, or does neither; the host calls [Server.Serve] for each
// plane, whose handlers answer each request; [Server.Shutdown] drains; [Server.Close] stops at once. The mechanisms Start started are
// closed once every connection has ended, before [Server.Done] closes.
// Meanwhile listeners may be added and removed ([Server.AddListener],
// [Server.RemoveListener], [Server.SetListeners]).
//
// Each connection has one goroutine, which runs the whole per-request path:
// it reads a frame (within queued.max.request.bytes), decodes it, queues
// the request or answers it inline, waits for the answer, writes the
// response, reports the request ([HookRequestDone]), mutes the connection
// while a throttle lasts, and only then reads the next frame. An idle
// connection parks: after [Config.ParkAfter] without a request it gives
// back its read buffer and hands its read to a fresh goroutine with the
// smallest stack, so that thousands of idle connections cost little memory;
// the next request's first bytes wake it. The connection's listener
// processor registers it, enforces its idle expiry and asks it to park;
// [Server.Shutdown] and [Server.Close] end it in whatever state it is.
type Server struct {
	cfg    Config
	log    *slog.Logger
	queues [2]chan *Request // by protocolmap.Plane; the control queue is nil without a control plane
	memory [2]*memoryPool   // by protocolmap.Plane: queued.max.request.bytes and the control plane's allowance; nil without a limit
	inline [2]chan struct{} // by protocolmap.Plane: a slot per running inline handler (API.Inline), as many as the plane's queue takes
	turns  [2]chan struct{} // by protocolmap.Plane: a place per connection serving a pipelined request (conn.loop)

	// change makes Start and the changes of the listeners (AddListener,
	// RemoveListener, SetListeners) one at a time; each holds it
	// throughout, but for a removal's drain (listeners.go). It is taken
	// before mu.
	change          sync.Mutex
	nextProcessorID int // the next processor's id, as Kafka's SocketServer.nextProcessorId: never reused; guarded by change

	mu        sync.Mutex
	started   bool
	listeners []*listenerState // served, or to serve once started; replaced, never changed in place: a copy taken under mu is ranged over without it
	set       *listener.Set    // the listeners' configuration (Listeners); replaced, never changed
	// removing are the listeners being removed, by name: their sockets are
	// closed and their connections drain (listeners.go). A name is not
	// added again until its drain ends.
	removing map[protocolmap.ListenerName]*listenerState

	hooks        hooks
	audit        *auditor      // the audit queue; nil without a HookAudit
	startedAt    atomic.Int64  // when Start succeeded: nanoseconds since epoch; 0 before
	draining     atomic.Bool   // Shutdown began: finish requests in flight, read no more
	drainStarted chan struct{} // closed by Shutdown once draining is set: wakes muted connections (conn.mute)
	drainOnce    sync.Once
	epoch        time.Time // with a monotonic reading: connections' activity is kept relative to it
	quotas       *connectionQuotas
	// principalRefusals logs the connections closed over their principal's
	// limit without flooding (admitPrincipal).
	principalRefusals logLimiter
	registry          *connreg.Registry
	quit              chan struct{} // closed by Close: stop everything now
	closeOnce         sync.Once
	conns             sync.WaitGroup // connection goroutines
	workers           sync.WaitGroup // acceptors and processors
	done              chan struct{}  // closed when every goroutine has ended
	writeBufs         sync.Pool      // of *[]byte: response buffers, lent to a connection for one write
	readBufs          sync.Pool      // of *bufio.Reader: plaintext read buffers, held by a connection until it parks
	parked            atomic.Int64   // connections parked now
	stackStart        stackStart     // reads the runtime's starting stack size for parking

	requestsDone sync.Pool // of *RequestDone: lent to the HookRequestDone hooks for one call (conn.requestDone)
	pipeEntries  sync.Pool // of *pipeEntry: a pipelined request's place in its connection's pipeline
}

// readBuf lends a read buffer over r.
func (s *Server) readBuf(r io.Reader) *bufio.Reader {
	if br, ok := s.readBufs.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, readBufSize)
}

// putReadBuf takes a read buffer back. Whatever it still holds is
// dropped.
func (s *Server) putReadBuf(br *bufio.Reader) {
	if br.Size() == readBufSize {
		br.Reset(nil)
		s.readBufs.Put(br)
	}
}

// writeBuf lends a response buffer.
func (s *Server) writeBuf() *[]byte {
	if b, ok := s.writeBufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

// putWriteBuf takes a response buffer back, unless it grew too large to
// keep.
func (s *Server) putWriteBuf(b *[]byte) {
	if cap(*b) <= writeBufKeep {
		*b = (*b)[:0]
		s.writeBufs.Put(b)
	}
}

// listenerState is one listener's runtime: its socket, APIs and processors.
type listenerState struct {
	cfg        listener.Listener
	apis       *apiTable
	sec        listenerSecurity
	queue      chan *Request
	inline     chan struct{} // slots of running inline handlers (API.Inline)
	turns      chan struct{} // the plane's turns of pipelined requests (conn.loop)
	memory     *memoryPool   // queued.max.request.bytes, or the control plane's allowance; nil: no limit
	proxy      ProxyProtocol // whether connections begin with a PROXY header, and from where (proxyproto.go)
	ln         net.Listener
	base       context.Context // from Config.BaseContext; nil without it
	processors []*processor
	next       int // round-robin position, used by the acceptor alone

	// maxAge is the maximum age of its connections, zero for none, and
	// maxAgeJitter its jitter, zero for none: its ListenerConfig's, else
	// the server's (Config.maxAge).
	maxAge       time.Duration
	maxAgeJitter float64

	services []sasl.Service // its mechanisms that are a sasl.Service, once started: closed when it stops serving

	// The listener's removal (listeners.go), as the server's Shutdown for
	// its connections alone: draining is set under Server.mu and then
	// drainStarted closed; quit closes once its connections have ended,
	// and its processors stop.
	draining     atomic.Bool
	drainStarted chan struct{}
	quit         chan struct{}
	acceptDone   chan struct{}  // closed when its acceptor has returned
	conns        sync.WaitGroup // its connection goroutines, also in Server.conns
	workers      sync.WaitGroup // its acceptor, processors and held connections (Server.admit), also in Server.workers

	probes atomic.Int64 // probes closed (Stats.ProbesClosed)
	// anonymous counts its connections of User:ANONYMOUS, for
	// ListenerMaxConnectionsPerPrincipal (connectionQuotas.acquirePrincipal).
	anonymous atomic.Int64
}

// New validates cfg, including cfg.Listeners with the rules of
// config.Listeners (see listener.Set.Validate), and builds a server. It
// binds nothing and resolves nothing: Start does both.
func New(cfg Config) (*Server, error) {
	if cfg.Listeners == nil || len(cfg.Listeners.All) == 0 {
		return nil, errors.New("socketserver: Config.Listeners is required and must hold a listener")
	}
	if err := cfg.Listeners.Validate(); err != nil { // a Config built in code gets Resolve's checks too
		return nil, fmt.Errorf("socketserver: %w", err)
	}
	if cfg.RequestMaxBytes < 0 || cfg.QueuedMaxRequests < 0 || cfg.IOThreads < 0 {
		return nil, fmt.Errorf("socketserver: RequestMaxBytes (%d), QueuedMaxRequests (%d) and IOThreads (%d) must not be negative",
			cfg.RequestMaxBytes, cfg.QueuedMaxRequests, cfg.IOThreads)
	}
	if cfg.RequestMaxBytes > math.MaxInt32 || cfg.SASLMaxReceiveSize > math.MaxInt32 || cfg.SASLMaxReceiveSize < 0 {
		return nil, fmt.Errorf("socketserver: RequestMaxBytes (%d) and SASLMaxReceiveSize (%d) must be from 0 to %d, Kafka's largest frame",
			cfg.RequestMaxBytes, cfg.SASLMaxReceiveSize, math.MaxInt32)
	}
	cfg = cfg.withDefaults()
	if cfg.QueuedMaxRequestBytes > 0 && cfg.QueuedMaxRequestBytes < cfg.RequestMaxBytes {
		return nil, fmt.Errorf("socketserver: QueuedMaxRequestBytes (%d) must be at least RequestMaxBytes (%d), or 0 for no limit",
			cfg.QueuedMaxRequestBytes, cfg.RequestMaxBytes)
	}
	if j := cfg.ConnectionsMaxAgeJitter; j >= 1 || j != j {
		return nil, fmt.Errorf("socketserver: ConnectionsMaxAgeJitter (%v) must be less than 1", j)
	}
	if err := cfg.ConnectionQuotas.validate(); err != nil {
		return nil, err
	}
	h, err := newHooks(cfg.Hooks)
	if err != nil {
		return nil, err
	}
	if cfg.AuditQueueSize < 0 {
		return nil, fmt.Errorf("socketserver: AuditQueueSize (%d) must not be negative", cfg.AuditQueueSize)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, hooks: h, audit: newAuditor(h.audit, cfg.AuditQueueSize), registry: connreg.New(cfg.RegistryHistory), epoch: time.Now(), quit: make(chan struct{}), drainStarted: make(chan struct{}), done: make(chan struct{}),
		set: cfg.Listeners, removing: map[protocolmap.ListenerName]*listenerState{}}
	// Host names among the per-IP overrides are resolved by Start; until
	// then no override applies, and no connection is accepted.
	s.quotas = newConnectionQuotas(*cfg.ConnectionQuotas, nil, cfg.Listeners.InterBrokerListener, len(cfg.Listeners.All))
	s.queues[protocolmap.DataPlane] = make(chan *Request, cfg.QueuedMaxRequests)
	s.inline[protocolmap.DataPlane] = make(chan struct{}, cfg.QueuedMaxRequests)
	s.turns[protocolmap.DataPlane] = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1))
	if cfg.Listeners.ControlPlaneListener != "" {
		s.queues[protocolmap.ControlPlane] = make(chan *Request, ControlPlaneQueueSize)
		s.inline[protocolmap.ControlPlane] = make(chan struct{}, ControlPlaneQueueSize)
		s.turns[protocolmap.ControlPlane] = make(chan struct{}, 1) // its one processor serves one at a time
	}
	if cfg.QueuedMaxRequestBytes > 0 {
		s.memory[protocolmap.DataPlane] = newMemoryPool(int64(cfg.QueuedMaxRequestBytes))
		if cfg.Listeners.ControlPlaneListener != "" {
			s.memory[protocolmap.ControlPlane] = newMemoryPool(int64(cfg.RequestMaxBytes))
		}
	}
	for name := range cfg.PerListener {
		if !slices.ContainsFunc(cfg.Listeners.All, func(l listener.Listener) bool { return l.Name == name }) {
			return nil, fmt.Errorf("socketserver: Config.PerListener names listener %s, which is not configured", name)
		}
	}
	// Processor ids are the server's, as Kafka numbers them
	// (SocketServer.nextProcessorId): the control plane's acceptor is
	// created first, so its single processor is 0; the data-plane
	// listeners' processors follow, in the order of listeners.
	// listeners added later continue the numbering (AddListener).
	dataPlaneID := 0
	if cfg.Listeners.ControlPlaneListener != "" {
		dataPlaneID = 1
	}
	for _, l := range cfg.Listeners.All {
		first := 0
		if l.Plane == protocolmap.DataPlane {
			first = dataPlaneID
		}
		ls, err := s.newListenerState(l, cfg.listenerConfig(l.Name), first)
		if err != nil {
			return nil, err
		}
		if l.Plane == protocolmap.DataPlane {
			dataPlaneID += len(ls.processors)
		}
		s.listeners = append(s.listeners, ls)
	}
	s.nextProcessorID = dataPlaneID
	return s, nil
}

// Start starts the listeners' SASL mechanisms that are a sasl.Service
// (such as OAUTHBEARER's JWKS validator, which fetches its keys here),
// resolves the host names of the per-IP connection overrides, binds every
// listener (or makes it with Config.Listen), and starts accepting; if a
// mechanism fails to start or a listener to bind (the error names it), it
// starts and binds nothing. ctx bounds the mechanisms' start, the
// resolution and the binding; it does not bound the server's life. Start
// returns once the server accepts connections; the bound addresses are then
// available from [Server.Addr]. A Start that failed may be called again.
func (s *Server) Start(ctx context.Context) error {
	if s.isClosed() || s.draining.Load() {
		return ErrServerClosed
	}
	if err := s.quotas.resolvePending(ctx, s.cfg.lookupNetIP); err != nil {
		return err
	}
	s.change.Lock()
	defer s.change.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() || s.draining.Load() {
		return ErrServerClosed
	}
	if s.started {
		return errors.New("socketserver: already started")
	}
	if err := s.startServices(ctx, s.listeners); err != nil {
		return err
	}
	if err := s.listen(ctx, s.listeners); err != nil {
		closeServices(s.listeners, s.log)
		return err
	}
	s.started = true
	s.startedAt.Store(max(int64(time.Since(s.epoch)), 1))
	if s.audit != nil {
		s.audit.start()
	}
	for _, ls := range s.listeners {
		s.serveListener(ls)
	}
	go func() {
		// The inter-broker listener is never removed: its processors keep
		// workers above zero until the server quits, so that a listener
		// added meanwhile adds to it before this Wait returns.
		s.workers.Wait()
		s.conns.Wait()
		// No connection is left to authenticate. A removed listener's
		// drain (a worker) has closed its own.
		closeServices(s.serving(), s.log)
		s.closeQueues()
		if s.audit != nil { // delivered all already, after Shutdown
			s.audit.stop()
		}
		close(s.done)
	}()
	return nil
}

// serveListener starts ls's processors and acceptor, under mu once the
// server has started.
func (s *Server) serveListener(ls *listenerState) {
	for _, p := range ls.processors {
		s.goWorker(ls, p.run)
	}
	s.goWorker(ls, func() {
		defer close(ls.acceptDone)
		s.accept(ls)
	})
	s.log.Debug("listening", "listener", ls.cfg.Name, "address", ls.ln.Addr().String(),
		"security_protocol", ls.cfg.SecurityProtocol, "plane", ls.cfg.Plane, "processors", len(ls.processors))
}

// goWorker runs f as a worker of ls's, counted in the server's workers and
// the listener's.
func (s *Server) goWorker(ls *listenerState, f func()) {
	s.workers.Add(1)
	ls.workers.Add(1)
	go func() {
		defer s.workers.Done()
		defer ls.workers.Done()
		f()
	}()
}

// serving returns the listeners served now (a copy that does not change).
func (s *Server) serving() []*listenerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listeners
}

// listen makes the net.Listener and base context of every listener of lss,
// or of none: on a failure it closes those already made.
func (s *Server) listen(ctx context.Context, lss []*listenerState) (err error) {
	defer func() {
		if err != nil {
			for _, ls := range lss {
				if ls.ln != nil {
					ls.ln.Close()
				}
				ls.ln, ls.base = nil, nil
			}
		}
	}()
	listen := s.cfg.Listen
	if listen == nil {
		listen = ListenTCP
	}
	for _, ls := range lss {
		ln, err := listen(ctx, ls.cfg)
		if err != nil {
			if s.cfg.Listen == nil {
				return fmt.Errorf("socketserver: listener %s failed to bind to %s: %w", ls.cfg.Name, ls.cfg.Bind.Address(), err)
			}
			return fmt.Errorf("socketserver: listener %s: Config.Listen: %w", ls.cfg.Name, err)
		}
		if ln == nil {
			return fmt.Errorf("socketserver: listener %s: Config.Listen returned no listener and no error", ls.cfg.Name)
		}
		ls.ln = ln
	}
	if s.cfg.BaseContext != nil {
		for _, ls := range lss {
			if ls.base = s.cfg.BaseContext(ls.cfg, ls.ln); ls.base == nil {
				return fmt.Errorf("socketserver: listener %s: Config.BaseContext returned a nil context", ls.cfg.Name)
			}
		}
	}
	return nil
}

// startServices starts, in listener order, every SASL mechanism of lss
// that is a sasl.Service, once per listener that enables it (Services
// count their starts). On error it closes those it started.
func (s *Server) startServices(ctx context.Context, lss []*listenerState) error {
	for i, ls := range lss {
		for _, m := range ls.sec.mechanisms {
			svc, ok := m.(sasl.Service)
			if !ok {
				continue
			}
			logger := s.log.With("listener", ls.cfg.Name, "sasl_mechanism", m.Name())
			if err := svc.Start(ctx, logger); err != nil {
				closeServices(lss[:i+1], s.log)
				return fmt.Errorf("socketserver: listener %s: SASL mechanism %s failed to start: %w", ls.cfg.Name, m.Name(), err)
			}
			ls.services = append(ls.services, svc)
		}
	}
	return nil
}

// ListenTCP binds listener l's address (l.Bind) with TCP: what Start does
// for each listener unless Config.Listen is set.
func ListenTCP(ctx context.Context, l listener.Listener) (net.Listener, error) {
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", l.Bind.Address())
}

// closeServices closes the started services of lss, last started first.
func closeServices(lss []*listenerState, log *slog.Logger) {
	for i := len(lss) - 1; i >= 0; i-- {
		lss[i].closeServices(log)
	}
}

// closeServices closes the listener's started services, last started
// first.
func (ls *listenerState) closeServices(log *slog.Logger) {
	for i := len(ls.services) - 1; i >= 0; i-- {
		if err := ls.services[i].Close(); err != nil {
			log.Warn("closing a SASL mechanism failed", "listener", ls.cfg.Name, "err", err)
		}
	}
	ls.services = nil
}

// Addr returns the bound address of the named listener (compared without
// regard to case, as [protocolmap.ParseListenerName] compares), or nil
// before Start, for an unknown name or for a listener removed
// ([Server.RemoveListener]).
func (s *Server) Addr(name protocolmap.ListenerName) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ls := range s.listeners {
		if ls.ln != nil && string(ls.cfg.Name) == normalise(name) {
			return ls.ln.Addr()
		}
	}
	return nil
}

// requests returns the request channel of a plane; nil for the control
// plane when there is none. The channel is closed once the server has
// stopped and every connection has ended. Serve is its one consumer (and
// the tests): it recovers a handler's panic and takes the queue-latency
// figure, which a raw channel handed to the host would not.
func (s *Server) requests(plane protocolmap.Plane) <-chan *Request {
	if plane != protocolmap.DataPlane && plane != protocolmap.ControlPlane {
		return nil
	}
	return s.queues[plane]
}

// Handler answers requests. It must answer each request exactly once, now or
// later, from any goroutine (see [Request]).
type Handler interface {
	ServeKafka(*Request)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(*Request)

// ServeKafka calls f(r).
func (f HandlerFunc) ServeKafka(r *Request) { f(r) }

// Serve runs the plane's workers, goroutines that hand its requests to h,
// until the server has stopped (it then returns ErrServerClosed) or ctx
// ends (ctx.Err()): Config.IOThreads of them on the data plane (Kafka's
// num.io.threads), one on the control plane, as in Kafka. A handler that
// panics has its request's connection closed and the panic logged with
// its stack; the others go on.
func (s *Server) Serve(ctx context.Context, plane protocolmap.Plane, h Handler) error {
	queue := s.requests(plane)
	if queue == nil {
		return fmt.Errorf("socketserver: no %s plane", plane)
	}
	workers := 1
	if plane == protocolmap.DataPlane {
		workers = s.cfg.IOThreads
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case r, ok := <-queue:
					if !ok {
						return
					}
					s.handle(h, r)
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrServerClosed
}

func (s *Server) handle(h Handler, r *Request) {
	if s.hooks.timed() {
		r.dequeuedAt.Store(int64(time.Since(s.epoch)))
	}
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("handler panicked; closing the connection", "conn_id", r.Conn.ID,
				"api_key", r.APIKey, "panic", v, "stack", string(debug.Stack()))
			if r.CloseConnection() != nil { // answered before the panic: close all the same
				r.conn.closeWith(connregistry.CloseByHandler)
			}
		}
	}()
	h.ServeKafka(r)
}

// Shutdown shuts the server down gracefully:
//  1. it stops accepting connections;
//  2. each connection finishes the request it is serving, if any, and its
//     response is written; connections then close (a client sees the close,
//     never a lost response);
//  3. when every connection has closed, the request channels close.
//
// If ctx ends first, Shutdown closes the server at once (as Close) and
// returns ctx.Err(). The host keeps [Server.Serve] running until it
// returns ErrServerClosed (the channels have closed), so that requests in
// flight are answered. Shutdown, as Close, waits for the server's
// goroutines: it must not be called from a hook, an Inline handler or
// ConnContext, which run on them; call it from a goroutine of your own.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.isClosed() {
		return ErrServerClosed
	}
	s.mu.Lock()
	started := s.started
	s.draining.Store(true) // no listener is added or removed from now on
	lss := s.listeners
	s.mu.Unlock()
	if !started {
		return s.Close()
	}
	s.drainOnce.Do(func() { close(s.drainStarted) })
	for _, ls := range lss {
		ls.ln.Close()
	}
	for _, ls := range lss { // a listener being removed drains already
		for _, p := range ls.processors {
			p.drain()
		}
	}
	idle := make(chan struct{})
	go func() { s.conns.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-ctx.Done():
		s.Close()
		return ctx.Err()
	}
	if s.audit != nil && !s.audit.drain(ctx.Done()) { // every connection has recorded its last event
		s.Close()
		return ctx.Err()
	}
	s.Close()
	<-s.done
	return nil
}

// Close stops the server at once: listeners and connections close, and
// goroutines end. It waits for them and is safe to call more than once.
// It must not be called from a hook, an Inline handler or ConnContext,
// which run on the goroutines it waits for: call it from a goroutine of
// your own.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		started := s.started
		s.draining.Store(true)
		close(s.quit)
		lss := s.listeners
		s.mu.Unlock()
		if !started {
			s.closeQueues()
			if s.audit != nil { // events the host recorded: never delivered
				s.audit.stop()
			}
			close(s.done)
			return
		}
		for _, ls := range lss { // a listener being removed has closed its own
			ls.ln.Close()
		}
	})
	<-s.done
	return nil
}

// Done is closed when the server has stopped and all its goroutines have
// ended.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) isClosed() bool {
	select {
	case <-s.quit:
		return true
	default:
		return false
	}
}

func (s *Server) closeQueues() {
	for _, q := range s.queues {
		if q != nil {
			close(q)
		}
	}
}

// accept is a listener's acceptor: it hands each new connection to the
// listener's processors in turn. When a processor's queue of new connections
// is full it tries the next; only when all are full does it wait (Kafka's
// KIP-402 fairness).
func (s *Server) accept(ls *listenerState) {
	backoff := 5 * time.Millisecond
	for {
		nc, err := ls.ln.Accept()
		if err != nil {
			// Shutdown, Close and the listener's removal close the
			// listener after setting draining: a listener of the host's
			// may not say net.ErrClosed then.
			if errors.Is(err, net.ErrClosed) || s.draining.Load() || ls.draining.Load() {
				return
			}
			s.log.Warn("accept failed; retrying", "listener", ls.cfg.Name, "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, time.Second)
				continue
			case <-s.quit:
				return
			case <-ls.drainStarted:
				return
			}
		}
		backoff = 5 * time.Millisecond
		if !s.admit(ls, nc) {
			continue
		}
		s.configureSocket(nc)
		if !s.assign(ls, nc) {
			s.discard(ls, nc)
			return
		}
	}
}

// admit applies the connection quotas to a new connection, as Kafka's
// acceptor does: it may wait (listener or broker limit, creation rate), and
// it closes the connection at once when its address has too many, or after
// a delay when its address opens them too fast. It reports whether the
// connection was admitted; an admitted connection holds a quota slot until
// it closes. On a listener that requires the PROXY protocol the socket's
// address is the balancer's: the per-address quotas wait for the header,
// on the connection's goroutine (serveProxied).
func (s *Server) admit(ls *listenerState, nc net.Conn) bool {
	ip := ls.acceptAddr(nc)
	res, err := s.quotas.acquire(ls.cfg.Name, ip, s.quit, ls.drainStarted)
	if res.blocked > 0 {
		for _, h := range s.hooks.acceptor {
			h.OnAcceptorBlocked(ls.cfg.Name, res.blocked, res.throttle)
		}
	}
	switch {
	case err == nil:
		for _, h := range s.hooks.connAccepted {
			h.OnConnAccepted(ls.cfg.Name)
		}
		return true
	case errors.Is(err, ErrTooManyConnections):
		s.connRejected(ls, addrPort(nc.RemoteAddr()), netip.AddrPort{}, err, 0)
		nc.Close()
	case errors.Is(err, ErrConnectionThrottled):
		s.connRejected(ls, addrPort(nc.RemoteAddr()), netip.AddrPort{}, err, res.ipHold)
		s.goWorker(ls, func() { // the acceptor is a worker, so the groups cannot be waited to zero here
			t := time.NewTimer(res.ipHold)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.quit:
			case <-ls.drainStarted:
			}
			nc.Close()
		})
	default: // the server quit, or the listener is being removed, while the acceptor waited
		nc.Close()
	}
	return false
}

// connRejected logs, reports and audits a connection from client (through
// the load balancer at proxy, on a PROXY listener) that a per-address quota
// closed (err wraps ErrTooManyConnections, or ErrConnectionThrottled after
// hold).
func (s *Server) connRejected(ls *listenerState, client, proxy netip.AddrPort, err error, hold time.Duration) {
	ip := client.Addr()
	if errors.Is(err, ErrConnectionThrottled) {
		s.log.Info("throttling connection: address exceeds its connection creation rate; closing it after the delay",
			"listener", ls.cfg.Name, "address", ip, "delay", hold, "err", err)
	} else {
		s.log.Info("rejected connection: address already has the configured maximum of connections",
			"listener", ls.cfg.Name, "address", ip, "err", err)
	}
	for _, h := range s.hooks.connRejected {
		h.OnConnRejected(ls.cfg.Name, ip, err, hold)
	}
	s.auditRefused(ls, client, proxy, err, hold)
}

// acceptAddr is the address the acceptor counts nc under: its peer's, or
// none on a listener that requires the PROXY protocol (the per-address
// quotas count the client's, once its header is read).
func (ls *listenerState) acceptAddr(nc net.Conn) netip.Addr {
	if ls.proxy.required() {
		return netip.Addr{}
	}
	return addrPort(nc.RemoteAddr()).Addr()
}

// discard closes an admitted connection that never reached a processor's
// care, giving back its quota slot.
func (s *Server) discard(ls *listenerState, nc net.Conn) {
	nc.Close()
	s.quotas.release(ls.cfg.Name, ls.acceptAddr(nc))
}

// SetConnectionQuotas changes the connection quotas while the server runs, as Kafka
// reconfigures them dynamically: a raised limit lets waiting acceptors go
// on; a lowered one applies to new connections. Host names in the per-IP
// overrides are resolved now, within ctx (see [ConnectionQuotas]).
func (s *Server) SetConnectionQuotas(ctx context.Context, q ConnectionQuotas) error {
	if err := q.validate(); err != nil {
		return err
	}
	overrides, err := resolveOverrides(ctx, s.cfg.lookupNetIP, q.MaxConnectionsPerIPOverrides)
	if err != nil {
		return err
	}
	s.quotas.set(q, overrides)
	return nil
}

// configureSocket sets Kafka's socket options on a new connection, where
// it has the methods to: a *net.TCPConn has them all, a connection of a
// host's listener may have some or none.
func (s *Server) configureSocket(nc net.Conn) {
	if c, ok := nc.(interface{ SetNoDelay(bool) error }); ok {
		_ = c.SetNoDelay(true)
	}
	if c, ok := nc.(interface{ SetKeepAlive(bool) error }); ok {
		_ = c.SetKeepAlive(true)
	}
	if c, ok := nc.(interface{ SetWriteBuffer(int) error }); ok && s.cfg.SendBufferBytes > 0 {
		_ = c.SetWriteBuffer(s.cfg.SendBufferBytes)
	}
	if c, ok := nc.(interface{ SetReadBuffer(int) error }); ok && s.cfg.ReceiveBufferBytes > 0 {
		_ = c.SetReadBuffer(s.cfg.ReceiveBufferBytes)
	}
}

// assign hands nc to a processor; false if the server quit, or the
// listener began its removal, meanwhile.
func (s *Server) assign(ls *listenerState, nc net.Conn) bool {
	n := len(ls.processors)
	for range n - 1 {
		p := ls.processors[ls.next%n]
		ls.next++
		select {
		case p.newConns <- nc:
			return true
		default:
		}
	}
	p := ls.processors[ls.next%n]
	ls.next++
	select {
	case p.newConns <- nc:
		return true
	case <-s.quit:
		return false
	case <-ls.drainStarted: // the listener is being removed
		return false
	}
}

// Registry returns the registry of the server's connections, for listing
// them (connregistry.Registry.Snapshot, the ListClientConnections handler)
// and closing them by filter. It is the server's to write: the host reads
// it.
func (s *Server) Registry() connregistry.Registry { return s.registry }

func normalise(name protocolmap.ListenerName) string {
	n, err := protocolmap.ParseListenerName(string(name))
	if err != nil {
		return ""
	}
	return string(n)
}

// Broker returns this server as one broker of a cluster, for Metadata and
// DescribeCluster responses ([MetadataBrokers], [DescribeClusterBrokers]):
// the listeners' advertised endpoints, in the order of the listeners
// ([listener.Set.AdvertisedEndPoints]; a response names the endpoint of
// the listener the request came through, so the order does not reach
// clients). An advertised port 0
// becomes the port the listener bound (after Start), and an empty
// advertised host the machine's host name (Kafka advertises the canonical
// host name there). The endpoints are those of [Server.Listeners] now:
// a host that caches the result takes it again after changing listeners.
func (s *Server) Broker(nodeID int32, rack string) Broker {
	b := Broker{NodeID: nodeID, Rack: rack, EndPoints: s.Listeners().AdvertisedEndPoints()}
	for i, ep := range b.EndPoints {
		if a, ok := s.Addr(ep.Name).(*net.TCPAddr); ok && ep.Port == 0 {
			b.EndPoints[i].Port = a.Port
		}
		if ep.Host == "" {
			if h, err := os.Hostname(); err == nil {
				b.EndPoints[i].Host = h
			}
		}
	}
	return b
}
