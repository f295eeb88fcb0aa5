package socketserver

import (
	"context"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/connreg"
)

// processor is one of a listener's network threads (Kafka's Processor). It
// owns its connections: it registers those its acceptor hands it, gives each
// its id, expires idle ones and closes them all when the server stops. Each
// connection's bytes are read and written by a goroutine of its own (see
// conn.serve), started and tracked by the processor.
type processor struct {
	id       int
	srv      *Server
	ls       *listenerState
	newConns chan net.Conn

	mu      sync.Mutex
	conns   map[*conn]struct{}
	pending map[net.Conn]struct{} // sockets of a PROXY listener whose header is being read (serveProxied)
	index   int32                 // next connection index; wraps to 0 after MaxInt32
	// fresh is the connections not yet parked once, younger than
	// Config.ParkAfter, which the processor looks at more often than at
	// the others so that they park soon after their first wait (see
	// parkWait, parkFresh); freshAdded tells run that add made one.
	fresh      []*conn
	freshAdded chan struct{}

	busy atomic.Int64 // nanoseconds its connections spent decoding, queueing and writing

	ageScanned time.Time // when expireIdle last looked for connections past their maximum age (the processor's goroutine's)
}

func newProcessor(s *Server, ls *listenerState, id int) *processor {
	return &processor{id: id, srv: s, ls: ls, newConns: make(chan net.Conn, processorQueueSize),
		conns: map[*conn]struct{}{}, pending: map[net.Conn]struct{}{}, freshAdded: make(chan struct{}, 1)}
}

// run registers new connections and expires idle ones until the server
// quits, or its listener has been removed, then closes every connection
// it owns (none is left after a removal's drain).
func (p *processor) run() {
	// The tick asks idle connections to park and expires idle ones: at
	// most every 50 ms, more often for a short ParkAfter or idle limit.
	every := DefaultParkAfter / 2
	if park := p.srv.cfg.ParkAfter; park > 0 {
		every = min(max(park/2, 5*time.Millisecond), every)
	}
	if idle := p.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		every = min(max(idle/4, 5*time.Millisecond), every)
	}
	if age := p.ls.maxAge; age > 0 {
		every = min(max(ageScanEvery(age), 5*time.Millisecond), every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// While new connections wait for their first park, a timer looks at
	// them alone, at half their first wait: armed when one is added, not
	// while there is none.
	freshEvery := min(max(p.srv.cfg.ParkAfter/firstParkDivisor/2, time.Millisecond), every)
	fresh := time.NewTimer(freshEvery)
	fresh.Stop()
	defer fresh.Stop()
	freshArmed := false
	for {
		excess, overLimit := p.srv.quotas.claimExcess(p.ls.cfg.Name)
		if excess {
			closed := p.closeLeastRecentlyActive()
			p.srv.quotas.shed()
			if closed {
				continue // one at a time, re-checking the count each time
			}
		}
		select {
		case nc := <-p.newConns:
			p.register(nc)
		case now := <-t.C:
			p.expireIdle(now)
		case <-p.freshAdded:
			if !freshArmed {
				fresh.Reset(freshEvery)
				freshArmed = true
			}
		case now := <-fresh.C:
			if freshArmed = p.parkFresh(now); freshArmed {
				fresh.Reset(freshEvery)
			}
		case <-overLimit:
		case <-p.srv.quit:
			// The acceptor may still hand over a connection it admitted
			// before it saw the quit: close what it leaves once it has
			// returned (Close closes the listener after quit).
			<-p.ls.acceptDone
			p.closeAll()
			return
		case <-p.ls.quit: // closed after the acceptor returned (Server.finishRemoval)
			p.closeAll()
			return
		}
	}
}

// closeLeastRecentlyActive closes the processor's least recently active
// connection, as Kafka's processors do while the broker-wide connection
// count is over max.connections because the protected inter-broker listener
// went past it. It reports whether it closed one.
func (p *processor) closeLeastRecentlyActive() bool {
	var lru *conn
	p.mu.Lock()
	for c := range p.conns {
		if lru == nil || c.active.Load() < lru.active.Load() {
			lru = c
		}
	}
	p.mu.Unlock()
	if lru == nil {
		return false
	}
	p.srv.log.Info("closing least recently active connection: broker-wide connection count over max.connections",
		"conn_id", lru.info().ID, "listener", p.ls.cfg.Name)
	lru.closeWith(connregistry.CloseQuota)
	return true
}

// register starts serving nc, which the acceptor admitted. During
// shutdown, or the listener's removal, it closes it instead. A connection
// of a listener that requires
// the PROXY protocol is pending until its header is read, on its own
// goroutine (serveProxied, proxyproto.go); any other is registered here and
// served at once.
func (p *processor) register(nc net.Conn) {
	// Shutdown and the listener's removal set draining under srv.mu, so
	// once either holds the lock no connection is added to srv.conns or
	// the listener's behind its back.
	p.srv.mu.Lock()
	if p.srv.draining.Load() || p.ls.draining.Load() {
		p.srv.mu.Unlock()
		p.srv.discard(p.ls, nc)
		return
	}
	p.srv.conns.Add(1)
	p.ls.conns.Add(1)
	p.srv.mu.Unlock()
	if p.ls.proxy.required() {
		if !p.addPending(nc) {
			p.srv.discard(p.ls, nc)
			p.connDone()
			return
		}
		go p.serveProxied(nc, time.Now()) // which calls connDone when the connection ends
		return
	}
	c := &conn{nc: nc, p: p}
	if !p.start(c, p.newInfo(nc.LocalAddr(), nc.RemoteAddr(), addrPort(nc.RemoteAddr()))) {
		p.srv.discard(p.ls, nc)
		p.connDone()
		return
	}
	go c.serve() // which calls connDone when the connection ends
}

// connDone ends the count of one of the processor's connections, counted
// by register in the server's conns and its listener's.
func (p *processor) connDone() {
	p.ls.conns.Done()
	p.srv.conns.Done()
}

// addPending makes nc, a socket of a PROXY listener, pending, unless the
// server or the listener began draining since register checked: drain
// takes processor.mu after the flag is set, so it either closes nc or
// addPending sees the flag (as add does for connections).
func (p *processor) addPending(nc net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv.draining.Load() || p.ls.draining.Load() {
		return false
	}
	p.pending[nc] = struct{}{}
	return true
}

// newInfo gives a connection of the processor's its next index and
// returns its description as it starts: its id from the local and remote
// addresses (the remote one the client's, from a PROXY header if there is
// one), and client, the client's address.
func (p *processor) newInfo(local, remote net.Addr, client netip.AddrPort) connregistry.Info {
	p.mu.Lock()
	index := p.index
	p.index++
	if p.index == math.MaxInt32 {
		p.index = 0
	}
	p.mu.Unlock()
	l := p.ls.cfg
	return connregistry.Info{
		ID:               connectionID(local, remote, p.id, index),
		Listener:         l.Name,
		SecurityProtocol: l.SecurityProtocol,
		Plane:            l.Plane,
		Principal:        connregistry.Anonymous(),
		ClientAddr:       client,
		ConnectedAt:      time.Now(),
	}
}

// start makes c, described by info, a connection of the processor's: its
// contexts (ConnContext runs here, with no lock held), its registry entry
// and its place among the processor's connections (add); then the
// HookConnCreated hooks see it. It reports false, having registered
// nothing, when the server has begun to shut down; the caller then closes
// the socket and gives its quota back.
func (p *processor) start(c *conn, info connregistry.Info) bool {
	c.newRequestContext(info)
	c.touch(info.ConnectedAt)
	state := connregistry.StateReady
	if p.ls.sec.tls != nil || len(p.ls.sec.mechanisms) > 0 {
		state = connregistry.StateAuthenticating
	}
	if !p.add(c, connregistry.Conn{Info: info, State: state}) {
		c.ctx.end()
		c.cancelReq()
		return false
	}
	for _, h := range p.srv.hooks.connCreated {
		h.OnConnCreated(info)
	}
	return true
}

// add registers c's entry, from rec, and makes c one of the processor's
// connections, in one hold of processor.mu, unless the server (or the
// listener) is draining. From then on c's description lives in the
// registry entry, written only through the entry's setters. A connection
// is among p.conns only with its entry, and only if it was added before
// Shutdown, Close or the listener's removal set a draining flag: drain and
// closeAll, which take processor.mu after the flag is set, see every
// connection added, whatever goroutine added it (the processor's, or a
// PROXY connection's own: serveProxied).
func (p *processor) add(c *conn, rec connregistry.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv.draining.Load() || p.ls.draining.Load() {
		return false
	}
	c.entry = connreg.Add(p.srv.registry, rec, c)
	delete(p.pending, c.nc)
	p.conns[c] = struct{}{}
	if p.srv.cfg.ParkAfter > 0 {
		p.fresh = append(p.fresh, c)
		select {
		case p.freshAdded <- struct{}{}:
		default: // run has yet to see the last one
		}
	}
	return true
}

// parkFresh asks the fresh connections that wait for a request, idle for
// their first wait, to park, and lets go of those that have parked, closed
// or grown older than Config.ParkAfter: the tick (expireIdle) looks after
// them from then on. It reports whether any is left. It holds
// processor.mu, and takes each asked connection's wakeMu inside it (see
// the lock order in conn.go). It allocates only to shrink its list after
// a storm of connections.
func (p *processor) parkFresh(now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := p.fresh[:0]
	for _, c := range p.fresh {
		if c.reason.Load() != nil || c.parkDelay.Load() != 0 || now.Sub(c.entry.ConnectedAt()) >= p.srv.cfg.ParkAfter {
			continue // closed, parked once, or old: the tick's
		}
		switch c.wait.Load() {
		case waitParking, waitParked, waitReparking:
			continue
		case waitAwaiting:
			if c.idleFor(now) >= c.parkWait() && c.wakeReader(wakeToPark) {
				continue
			}
		}
		keep = append(keep, c)
	}
	clear(p.fresh[len(keep):])
	p.fresh = keep
	if cap(p.fresh) > 64 && len(p.fresh) < cap(p.fresh)/4 { // after a storm of connections, do not keep its slots
		p.fresh = slices.Clone(p.fresh)
	}
	return len(p.fresh) > 0
}

// newRequestContext makes the context its requests carry (Request.Context) when
// the host has a BaseContext or a ConnContext: derived from them, and
// cancelled when the connection closes (close cancels it, and ends the
// connection's own context, connLife, which is part of its state). Without
// them it is made when a request first asks for it (requestContext): a
// connection whose requests the server answers itself (ApiVersions), or
// whose host never asks, keeps none (96 bytes). It is never derived from
// the connection's own context: a child would make the parent keep a done
// channel and the child's registration as long as the connection lives.
func (c *conn) newRequestContext(info connregistry.Info) {
	base, connContext := c.p.ls.base, c.p.srv.cfg.ConnContext
	if base == nil && connContext == nil {
		return
	}
	if base == nil {
		base = context.Background()
	}
	if connContext != nil {
		if ctx := connContext(base, c.nc, info); ctx != nil {
			base = ctx
		}
	}
	ctx, cancel := context.WithCancel(base)
	c.req.Store(&reqContext{ctx, cancel})
}

// reqContext is a connection's request context (Request.Context) and
// its cancel.
type reqContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// reqCancelled stands for a request context cancelled before any request
// asked for it (cancelReq): the one requestContext makes then is
// cancelled at once.
var reqCancelled reqContext

// requestContext returns the context of c's requests (Request.Context),
// making it, from context.Background(), at the first call (the host did
// not give newRequestContext a base): cancelled at once if the connection has
// closed, or its client has sent EOF, before. Any goroutine may call it.
func (c *conn) requestContext() context.Context {
	for {
		old := c.req.Load()
		if old != nil && old != &reqCancelled {
			return old.ctx
		}
		ctx, cancel := context.WithCancel(context.Background())
		if !c.req.CompareAndSwap(old, &reqContext{ctx, cancel}) {
			cancel()
			continue // another goroutine made it, or cancelReq marked it
		}
		if old == &reqCancelled || c.ctx.Err() != nil { // close cancels ctx before it calls cancelReq
			cancel()
		}
		return ctx
	}
}

// cancelReq cancels the context of c's requests alone (the client's EOF;
// close calls it after cancelling ctx), or marks it to be cancelled when
// it is made.
func (c *conn) cancelReq() {
	for {
		old := c.req.Load()
		switch {
		case old == &reqCancelled:
			return
		case old != nil:
			old.cancel()
			return
		case c.req.CompareAndSwap(nil, &reqCancelled):
			return
		}
	}
}

// connectionID formats Kafka's connection id,
// localIP:localPort-remoteIP:remotePort-processorId-index, with the
// addresses as Kafka writes them (see appendHostAddress). An address that
// is not an IP address and port (a connection of a host's listener:
// net.Pipe, a Unix socket) is written as its String gives it.
func connectionID(local, remote net.Addr, processorID int, index int32) string {
	b := make([]byte, 0, 64)
	b = appendAddr(b, local)
	b = append(b, '-')
	b = appendAddr(b, remote)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(processorID), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(index), 10)
	return string(b)
}

// appendHostAddress appends a as Java's InetAddress.getHostAddress writes
// it, which Kafka's connection ids use (ServerConnectionId
// .generateConnectionId): an IPv4 (or IPv4-mapped) address dotted; an IPv6
// address unbracketed and in full, its eight groups in lower-case hex
// without leading zeros and no "::" (0:0:0:0:0:0:0:1 for ::1), with a zone
// as its numeric scope id (fe80:0:0:0:0:0:0:1%2), as the JDK builds a
// socket's address from sin6_scope_id.
func appendHostAddress(b []byte, a netip.Addr) []byte {
	if a.Is4In6() {
		a = a.Unmap()
	}
	if !a.Is6() {
		return a.AppendTo(b)
	}
	ip := a.As16()
	for i := 0; i < len(ip); i += 2 {
		if i > 0 {
			b = append(b, ':')
		}
		b = strconv.AppendUint(b, uint64(ip[i])<<8|uint64(ip[i+1]), 16)
	}
	if zone := a.Zone(); zone != "" {
		b = append(b, '%')
		b = append(b, scopeID(zone)...)
	}
	return b
}

// scopeID returns the numeric scope id of an IPv6 zone: Go names the zone
// of a socket's address by its interface when it knows it. A name no
// interface has any more stays as it is.
func scopeID(zone string) string {
	if _, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return zone
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return strconv.Itoa(ifi.Index)
	}
	return zone
}

// appendAddr appends a as host:port, the host as appendHostAddress
// writes it, or a's String for an address that is not an IP address.
func appendAddr(b []byte, a net.Addr) []byte {
	ap := addrPort(a)
	if !ap.IsValid() {
		if a == nil {
			return b
		}
		return append(b, a.String()...)
	}
	b = appendHostAddress(b, ap.Addr())
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(ap.Port()), 10)
}

// addrPort returns a's IP address (unmapped) and port, or the zero
// AddrPort when a is not an IP address: a connection of a host's listener
// may have any address, or none.
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case nil:
		return netip.AddrPort{}
	case *net.TCPAddr:
		if a == nil {
			return netip.AddrPort{}
		}
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// remove forgets c once it has closed.
func (p *processor) remove(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// counts returns how many connections the processor serves, and how many
// sockets of a PROXY listener wait for their header (pending).
func (p *processor) counts() (conns, pending int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns), len(p.pending)
}

// expireIdle closes connections that have had no activity (a complete
// request or response, or the bytes of a frame arriving at the floor's
// pace or faster: arrival.go) for connections.max.idle.ms, with a request
// in flight or not (as Kafka's Selector, which counts a muted
// connection's time waiting for its response as idle:
// SocketServerTest.testIdleConnection), but not the time a throttle mutes
// one (conn.mute sets its activity to the throttle's end), and asks those
// waiting for a request for their parkWait to park, and those parked on a
// larger stack than the runtime now starts goroutines on to park again.
func (p *processor) expireIdle(now time.Time) {
	limit := p.srv.cfg.ConnectionsMaxIdle
	parking := p.srv.cfg.ParkAfter > 0
	stack := uint32(0)
	if p.srv.parked.Load() > 0 {
		stack = p.srv.stackStart.read()
	}
	var expired, idle, repark, waiting []*conn
	scanAge := false
	if age := p.ls.maxAge; age > 0 && now.Sub(p.ageScanned) >= ageScanEvery(age) {
		p.ageScanned, scanAge = now, true
	}
	p.mu.Lock()
	for c := range p.conns {
		if scanAge {
			if w := c.wait.Load(); w == waitAwaiting || w == waitParked {
				waiting = append(waiting, c)
			}
		}
		switch since := now.Sub(c.lastActive()); {
		case limit > 0 && since > limit:
			expired = append(expired, c)
		case parking && c.wait.Load() == waitAwaiting && c.idleFor(now) >= c.parkWait():
			idle = append(idle, c)
		case stack > 0 && len(repark) < reparkPerTick && c.wait.Load() == waitParked && c.parkedStack.Load() > stack:
			repark = append(repark, c)
		}
	}
	p.mu.Unlock()
	for _, c := range expired {
		reason := c.expiryReason()
		if reason == connregistry.CloseSlowRequest {
			p.srv.log.Info("closing connection: its request arrives too slowly", "conn_id", c.info().ID,
				"idle_limit", limit, "min_byte_rate", p.srv.cfg.RequestMinByteRate, "reason", string(connregistry.CloseSlowRequest))
		} else {
			p.srv.log.Debug("closing idle connection", "conn_id", c.info().ID, "idle_limit", limit, "reason", string(connregistry.CloseIdle))
		}
		c.closeWith(reason)
	}
	for _, c := range idle {
		c.askToPark(now)
	}
	for _, c := range repark {
		c.askToRepark(stack)
	}
	// A connection past its maximum age that waits for a request is woken
	// as to park: its goroutine then closes it (parkRequested, unpark),
	// unless a request has begun to arrive, which it serves first.
	for _, c := range waiting {
		if c.pastAge(now) && !c.wakeReader(wakeToPark) {
			c.wakeReader(wakeToRepark)
		}
	}
}

// ageScanEvery is how often a processor looks for waiting connections past
// their maximum age: a twentieth of the age, at most a minute (and no
// more often than its tick).
func ageScanEvery(age time.Duration) time.Duration { return min(age/20, time.Minute) }

// reparkPerTick bounds the connections a processor parks again in one
// tick, so that a fall in the runtime's starting stack with many
// connections parked does not hold the processor for long: the rest follow
// on the next ticks.
const reparkPerTick = 1000

// drain makes every connection finish the request it is serving and then
// close; a connection waiting for its next request closes now: its read is
// woken (wakeReader), and the goroutine, which checks the draining flags
// before each wait for a request, sees the flag Shutdown (the server's) or
// the listener's removal (the listener's) set before. A pending socket (a PROXY header being read) has no request: it
// is closed. It holds processor.mu, and takes each connection's wakeMu inside
// it (see the lock order in conn.go).
func (p *processor) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.wakeReader(wakeToDrain)
	}
	for nc := range p.pending {
		nc.Close() // its goroutine's read fails, and it gives the socket up
	}
}

// closeAll closes every connection, including any still waiting to be
// registered.
func (p *processor) closeAll() {
	for {
		select {
		case nc := <-p.newConns:
			p.srv.discard(p.ls, nc)
			continue
		default:
		}
		break
	}
	p.mu.Lock()
	all := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		all = append(all, c)
	}
	pending := make([]net.Conn, 0, len(p.pending))
	for nc := range p.pending {
		pending = append(pending, nc)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	for _, nc := range pending {
		nc.Close() // its goroutine gives it up (serveProxied)
	}
}
