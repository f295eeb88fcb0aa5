package socketserver

import (
	"io"
	"math"
	"net"
	"runtime/metrics"
	"sync"
	"time"
)

// Parking: how an idle connection gives back its memory. The states it
// moves through, who moves its read deadline and the lock order are in
// conn.go (the concurrency core), with the methods that make each move.
//
// A connection's goroutine grows its stack to 4 KiB or more while it serves
// a request (decoding, queueing, encoding, writing), and the runtime never
// shrinks a stack while the goroutine is blocked in a read that deep. A
// thousand idle connections would keep that, and a read buffer each. So a
// connection that has been idle for its wait (a twentieth of Config.ParkAfter
// before its first park, Config.ParkAfter or longer after it, see
// parkWait) parks:
//
//  1. The processor, on its tick (or, for a connection that has not yet
//     parked, on the quicker timer of parkFresh), finds it waiting in
//     awaitRequest (waitAwaiting) and asks it to park (askToPark,
//     parkFresh): wakeReader moves it
//     to waitParking and sets a read deadline of now, which wakes the wait.
//  2. The connection's goroutine sees waitParking (awaitEnd): it clears the
//     deadline (under wakeMu, so after the processor has set it), stops its
//     peer watcher, gives its read buffer back to the server, has its
//     registry entry drop the copy of its description that its requests
//     shared (connreg.Entry.Idle), starts a fresh goroutine in parked
//     and ends (parkRequested, goPark).
//  3. parked, with the smallest stack the runtime gives, reads the first
//     bytes of the next request (at most the 4 size bytes) into the
//     connection itself, then unparks: it takes a read buffer again, puts
//     those bytes in front of the socket (prefixReader), and serves as
//     before.
//
// If the request began to arrive while the processor was asking, the
// connection clears the deadline and serves it without parking. A parked
// goroutine may have started on a larger stack than the smallest: the
// runtime sizes new stacks by the average it saw at its last collection,
// which a burst of busy connections raises. Once a collection has seen
// them parked and the runtime starts goroutines on less, the processor
// asks those connections to park again (askToRepark), the same way. A parked
// connection closes as any other: Shutdown's drain and the processor's
// idle expiry end its read. A TLS connection parks too: the parked
// goroutine reads the raw bytes of the next TLS record, and crypto/tls
// reads them back through prefixedConn, after any part of a record it had
// buffered already, so the stream keeps its order. crypto/tls keeps its
// own buffers while parked. A negative Config.ParkAfter turns parking off:
// the processor then never asks, and a connection stays in waitBusy and
// waitAwaiting.

// DefaultParkAfter is how long a connection waits for its next request
// before it parks, when Config.ParkAfter is zero; a new connection's first
// park comes after a twentieth of it (5 ms, see parkWait). A connection that
// sends a request at least this often parks at most once. One that parks pays for
// it when it wakes (about 17 µs and 4 allocations; the first request a
// host gets after it also copies the connection's description, which its
// requests share and parking lets go of), so a
// connection that wakes soon after parking, a client sending a request
// every few hundred milliseconds, waits twice as long before its next
// park, up to 10 seconds (or Config.ParkAfter, if longer); one that stays
// parked long brings its wait back down. Parking then costs at most one wake per 8×ParkAfter
// (0.8 s by default) of parked time.
const DefaultParkAfter = 100 * time.Millisecond

const (
	maxParkAfter = 10 * time.Second
	parkedLong   = 8 // times the wait: a park that lasted less was not worth it
)

// firstParkDivisor divides Config.ParkAfter into a new connection's wait
// before its first park (see parkWait).
const firstParkDivisor = 20

// parkWait is how long c waits for a request before it parks. Before its
// first park it is a twentieth of Config.ParkAfter (5 ms by default): a
// client's first requests (ApiVersions, the SASL exchange, Metadata) come
// back to back, and one that then falls quiet is likely to stay quiet
// (a client connected for metadata alone, or one of a reconnect storm).
// Until it parks, a connection keeps the stack its goroutine grew while
// serving and a pooled read buffer, and in a storm of thousands of new
// connections per second the connections that wait to park add up: the
// example broker's memory per idle connection, opened 32 at a time, fell
// by a quarter when they parked after 10 ms rather than 100, and a little
// more after 5 ms (see docs/performance.md). A connection that parks this
// soon and is woken at once pays for one park (tens of microseconds) in
// its life: its next wait is as if it had waited ParkAfter
// (adaptParkWait).
func (c *conn) parkWait() time.Duration {
	if d := time.Duration(c.parkDelay.Load()) * time.Microsecond; d > 0 {
		return d
	}
	return c.p.srv.cfg.ParkAfter / firstParkDivisor
}

// adaptParkWait doubles c's wait before parking when its park lasted
// less than parkedLong times that wait, and halves it (down to ParkAfter)
// when it lasted longer. The first park's wait counts as ParkAfter.
func (c *conn) adaptParkWait(parkedFor time.Duration) {
	base := c.p.srv.cfg.ParkAfter
	d := max(c.parkWait(), base)
	if parkedFor < parkedLong*d {
		d = min(2*d, max(maxParkAfter, base))
	} else {
		d = max(d/2, base)
	}
	c.parkDelay.Store(int32(min(d/time.Microsecond, math.MaxInt32)))
}

// prefixReader reads the bytes the parked goroutine read first, then the
// socket (on Linux, the connection's rawSocket while it is not parked,
// see takeSocket). The connection reads it through socketReader: a
// plaintext connection's read buffer, and a TLS connection's crypto/tls
// (through prefixedConn).
type prefixReader struct {
	buf [4]byte
	n   uint8 // bytes of buf not yet read (beside buf: conn stays in its size class)
	got bool  // a Read has returned bytes since got was last cleared: the TLS handshake's reads tell a probe (see peerLeft)
	// What the client's first bytes told of the connection, kept here, in
	// the padding before r, so that conn stays in its size class; owned by
	// the connection's goroutine.
	heard      bool // the client has sent a byte of a request, or of a TLS handshake that failed: it is no probe (see peerLeft)
	proxyLocal bool // its PROXY header was LOCAL (v1: UNKNOWN): the load balancer's own connection, a health check; set before it is registered
	r          io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		n, err := p.r.Read(b)
		if n > 0 {
			p.got = true
		}
		return n, err
	}
	n := copy(b, p.buf[:p.n])
	p.n = uint8(copy(p.buf[:], p.buf[n:p.n]))
	p.got = true
	return n, nil
}

// idleFor is how long c has waited for a request, as parking counts it:
// since its last complete request or response, or since it last woke from
// parking, whichever is later. A connection that woke on the first bytes of
// a request that is still arriving (a TLS record, whose whole it must read)
// is not asked to park again at once.
func (c *conn) idleFor(now time.Time) time.Duration {
	return now.Sub(c.p.srv.epoch.Add(time.Duration(max(c.active.Load(), c.parkMoved.Load()))))
}

// askToPark asks c to park if it is still waiting for a request and has
// been idle for its parkWait (it may have served one since the processor
// looked). The processor calls it.
func (c *conn) askToPark(now time.Time) {
	if c.idleFor(now) < c.parkWait() {
		return
	}
	c.wakeReader(wakeToPark)
}

// parkRequested handles the end of awaitRequest's wait when the processor
// asked the connection to park; err is the wait's result. The deadline
// the processor set has been cleared (awaitEnd). If the next request has
// begun to arrive, it is served; if the wait ended on that deadline, the
// connection parks.
func (c *conn) parkRequested(err error) (ok, parked bool) {
	switch {
	case c.draining():
		return false, false // Shutdown's deadline may have been cleared with ours
	case err == nil:
		return true, false
	case !isDeadline(err):
		c.readFailed(err)
		return false, false
	case c.pastAge(time.Now()): // woken by the processor's age scan, or idle long enough to park: it closes instead
		c.closeForAge()
		return false, false
	}
	c.stopPeerWatcher()
	c.p.srv.putReadBuf(c.br)
	c.br = nil
	c.entry.Idle() // the copy of its description its requests shared goes too
	// The parked goroutine reads the socket itself.
	c.pre.r = releaseSocket(c.pre.r, c.nc)
	c.p.srv.parked.Add(1)
	c.parkMoved.Store(int64(time.Since(c.p.srv.epoch)))
	c.goPark()
	return false, true
}

// goPark starts the parked goroutine, noting the stack the runtime starts
// it on.
func (c *conn) goPark() {
	c.parkedStack.Store(c.p.srv.stackStart.read())
	c.parkBegin()
	go c.parked()
}

// stackStart reads the stack size, in bytes, the runtime gives a new
// goroutine now. It is the smallest (2 KiB) unless the goroutines the last
// collection saw used more on average (adaptive stack start): then a
// connection parked during a burst of busy ones starts larger and keeps it
// while it waits, until askToRepark moves it. It reads into a sample it
// keeps, under its lock: a sample made for each reading would escape to
// the heap (metrics.Read), garbage at every park and at every tick of a
// processor with parked connections.
type stackStart struct {
	mu     sync.Mutex
	sample [1]metrics.Sample
}

func (s *stackStart) read() uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sample[0].Name = "/gc/stack/starting-size:bytes"
	metrics.Read(s.sample[:])
	if s.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return uint32(s.sample[0].Value.Uint64())
}

// askToRepark asks a parked connection whose goroutine started on a larger
// stack than the runtime gives now to park again, on a fresh goroutine. The
// processor calls it with stackStart.read's value.
func (c *conn) askToRepark(stack uint32) {
	if c.parkedStack.Load() > stack {
		c.wakeReader(wakeToRepark)
	}
}

// parked waits for the next request on a fresh goroutine. It must stay
// shallow: the read below is the deepest it goes before the next request
// arrives, and it fits the runtime's smallest stack.
func (c *conn) parked() {
	n, err := c.nc.Read(c.pre.buf[:])
	c.unpark(n, err)
}

// unpark takes the connection back from parked and serves it, or parks
// it again on a fresh goroutine when the processor asked (askToRepark)
// and no byte had arrived.
func (c *conn) unpark(n int, err error) {
	if c.parkEnd() { // the processor asked (askToRepark, or its age scan)
		if n == 0 && isDeadline(err) && !c.draining() {
			if c.pastAge(time.Now()) {
				c.p.srv.parked.Add(-1)
				c.closeForAge()
				c.finish()
				return
			}
			c.goPark()
			return
		}
	}
	c.p.srv.parked.Add(-1)
	c.pre.n = uint8(n)
	c.pre.r = takeSocket(c.nc)
	c.br = c.p.srv.readBuf(c.readSource())
	now := time.Since(c.p.srv.epoch)
	c.adaptParkWait(now - time.Duration(c.parkMoved.Load()))
	c.parkMoved.Store(int64(now))
	if err != nil && n == 0 {
		c.readFailed(err)
		c.finish()
		return
	}
	c.loop()
}

// prefixedConn is the socket as crypto/tls sees it: reads go through the
// connection's socketReader, everything else to the socket.
type prefixedConn struct {
	net.Conn
	src *socketReader
}

func (p prefixedConn) Read(b []byte) (int, error) { return p.src.Read(b) }

// socketReader is the connection's socket as its reads see it: the bytes
// the parked goroutine read first (prefixReader), then the socket, each
// read that brings bytes of a frame still arriving counted as the
// connection's activity while the frame keeps its pace (arrived). A
// plaintext connection's read buffer reads it; a TLS connection's
// crypto/tls, through prefixedConn, so that the bytes of a TLS record
// count as they arrive, before the record is whole.
type socketReader conn

func (s *socketReader) Read(b []byte) (int, error) {
	c := (*conn)(s)
	n, err := c.pre.Read(b)
	if n > 0 && c.pace.Load() != 0 {
		c.arrived(n)
	}
	return n, err
}

// socket returns the connection's socketReader.
func (c *conn) socket() *socketReader { return (*socketReader)(c) }

// readSource is what the connection's read buffer reads from.
func (c *conn) readSource() io.Reader {
	if c.plain() {
		return c.socket()
	}
	return c.rw
}
