package socketserver

import (
	"io"
	"net"
	"runtime/metrics"
	"time"
)

// Parking: how an idle connection gives back its memory.
//
// A connection's goroutine grows its stack to 4 KiB or more while it serves
// a request (decoding, queueing, encoding, writing), and the runtime never
// shrinks a stack while the goroutine is blocked in a read that deep. A
// thousand idle connections would keep that, and a read buffer each. So a
// connection that has been idle for Config.ParkAfter (or longer, see
// parkWait) parks:
//
//  1. The processor, on its tick, finds it waiting in awaitRequest
//     (waitAwaiting) and moves it to waitParking under parkMu, then sets a
//     read deadline of now, which wakes the wait.
//  2. The connection's goroutine sees waitParking: it clears the deadline
//     (under parkMu, so after the processor has set it), stops its peer
//     watcher, gives its read buffer back to the server, starts a fresh
//     goroutine in parked and ends.
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
//
// # The connection's states
//
// conn.wait holds one of the states below. "The goroutine" is whichever
// goroutine owns the connection at the time: serve, or the parked
// goroutine that took it over (one at a time).
//
//	state          what the goroutine does                   who leaves it, how, to
//	waitBusy       handshake, reading or serving a request,  the goroutine: Store before its wait
//	               closing (finish); the state it starts in  in awaitRequest → waitAwaiting;
//	                                                         goPark, Store → waitParked
//	waitAwaiting   blocked in awaitRequest: the peer         the goroutine, when its wait ends:
//	               watcher's read, or a read of the next     CAS → waitBusy (request began, or an
//	               request's first byte                      error: it closes);
//	                                                         the processor (askToPark): CAS under
//	                                                         parkMu → waitParking, then the read
//	                                                         deadline to now
//	waitParking    the same wait, which the deadline ends    the goroutine (parkRequested): takes
//	                                                         parkMu, clears the read deadline,
//	                                                         Store → waitBusy; then parks (goPark),
//	                                                         serves, or closes
//	waitParked     the parked goroutine's 4-byte read        the parked goroutine (unpark): CAS →
//	                                                         waitBusy; the processor (askToRepark):
//	                                                         CAS under parkMu → waitReparking, then
//	                                                         the read deadline to now
//	waitReparking  the same read, which the deadline ends    the parked goroutine (unpark): takes
//	                                                         parkMu, clears the read deadline,
//	                                                         Store → waitBusy; then parks again on
//	                                                         a fresh goroutine if nothing arrived
//	                                                         (goPark → waitParked), else serves or
//	                                                         closes
//
// Only the goroutine leaves waitBusy, waitParking and waitReparking, and
// only with a Store; the processor moves a connection only by a CAS from a
// state in which the goroutine is blocked in a read (waitAwaiting,
// waitParked), so a CAS of the goroutine's that fails means the processor
// asked, and its deadline is set, or is being set under parkMu. Close,
// idle expiry and the registry's operator close never change the state:
// they close the socket, which ends any read.
//
// # Who moves the deadlines
//
// The read deadline:
//   - the goroutine: the handshake sets it (with the write deadline) for
//     the TLS handshake and SASL exchange and clears it after;
//     re-authentication sets and clears it the same way; parkRequested and
//     unpark clear the processor's, under parkMu; lingerClose, in finish,
//     moves it while it drains a closing connection's last bytes; with a
//     memory pool, frameMemory sets it (Config.RequestStallTimeout ahead)
//     before the reads of a frame that wait for the peer, and clears it
//     when the frame has been read (waitBusy: the processor sets none);
//   - the processor: askToPark and askToRepark set it to now, under parkMu,
//     and only after their CAS (so only during a wait of the goroutine's);
//   - Shutdown (processor.drain → conn.drain): sets it to now, in any state
//     and without a lock, after setting the server's draining flag. Every
//     clear above is followed, before the next blocking read, by a check of
//     that flag (parkRequested, unpark, awaitRequest), so a clear never
//     loses Shutdown's deadline; frameMemory's moves may postpone it until
//     the frame has been read, at most by the stall timeout at a time,
//     after which the request is served and awaitRequest sees the flag.
//
// The write deadline is the goroutine's alone: writeFrame moves it to
// connections.max.idle.ms from now (once an eighth of it has passed), and
// to turnWriteWait from now for the part of a response written within a
// turn (writeInTurn), after which it moves it back; and
// the handshake sets and clears it with the read deadline. writeFrame moves
// it during the handshake too, so the handshake's deadline bounds its reads
// only; its responses are small (one ApiVersions, one SASL token each), so
// they never fill the socket's buffer and a write never waits on the
// client. No other goroutine writes to the socket or moves the write
// deadline.
//
// # Lock order
//
// No lock is held while another is taken, except:
//   - conn.closeOnce's (close runs once): inside it close takes, one after
//     the other, the registry's entry and registry locks (Entry.Remove),
//     processor.mu (processor.remove) and connectionQuotas.mu (release). So
//     close must not be called with any of those held: the processor and
//     the registry collect the connections to close under their lock and
//     close them after releasing it.
//   - processor.mu → the socket's deadline (processor.drain sets read
//     deadlines under it) and conn.parkMu → the socket's deadline; neither
//     takes any other lock inside.
//   - Server.mu is taken alone (Start, Addr, Shutdown, register), or
//     inside Server.closeOnce's (Close); Start holds it while it calls
//     Config.Listen and Config.BaseContext, which therefore must not call
//     the server. Stats takes only processor.mu, one processor at a time.
//   - connectionQuotas.mu is taken alone (acquire drops it while it
//     waits); so is each registry lock.
//
// Hooks (Config.Hooks, ConnContext) are called with no lock held.

// DefaultParkAfter is how long a connection first waits for its next
// request before it parks, when Config.ParkAfter is zero. A connection that
// sends a request at least this often never parks. One that parks pays for
// it when it wakes (BenchmarkParkCycle: about 17 µs and 3 allocations), so
// a connection that wakes soon after parking, a client sending a request
// every few hundred milliseconds, waits twice as long before its next park,
// up to maxParkAfter (or ParkAfter, if longer); one that stays parked long
// brings its wait back down. Parking then costs at most one wake per
// parkedLong×ParkAfter (0.8 s by default) of parked time.
const DefaultParkAfter = 100 * time.Millisecond

const (
	maxParkAfter = 10 * time.Second
	parkedLong   = 8 // times the wait: a park that lasted less was not worth it
)

// parkWait is how long c waits for a request before it parks.
func (c *conn) parkWait() time.Duration {
	if d := time.Duration(c.parkDelay.Load()); d > 0 {
		return d
	}
	return c.p.srv.cfg.ParkAfter
}

// adaptParkWait doubles c's wait before parking when its park lasted
// less than parkedLong times that wait, and halves it (down to ParkAfter)
// when it lasted longer.
func (c *conn) adaptParkWait(parkedFor time.Duration) {
	base := c.p.srv.cfg.ParkAfter
	d := c.parkWait()
	if parkedFor < parkedLong*d {
		d = min(2*d, max(maxParkAfter, base))
	} else {
		d = max(d/2, base)
	}
	c.parkDelay.Store(int64(d))
}

// States of conn.wait: see the table above.
const (
	waitBusy      int32 = iota // handshake, reading or serving a request, closing
	waitAwaiting               // blocked in awaitRequest, waiting for a request
	waitParking                // asked by the processor to park
	waitParked                 // parked
	waitReparking              // parked, and asked by the processor to park again on a smaller stack
)

// prefixReader reads the bytes the parked goroutine read first, then the
// socket. A plaintext connection's read buffer reads from it; a TLS
// connection reads it through prefixedConn, under crypto/tls.
type prefixReader struct {
	buf [4]byte
	n   int // bytes of buf not yet read
	r   io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if p.n == 0 {
		return p.r.Read(b)
	}
	n := copy(b, p.buf[:p.n])
	p.n = copy(p.buf[:], p.buf[n:p.n])
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
	c.parkMu.Lock()
	if c.wait.CompareAndSwap(waitAwaiting, waitParking) {
		_ = c.nc.SetReadDeadline(now)
	}
	c.parkMu.Unlock()
}

// parkRequested handles the end of awaitRequest's wait when the processor
// asked the connection to park; err is the wait's result. The deadline
// the processor set is cleared. If the next request has begun to arrive,
// it is served; if the wait ended on that deadline, the connection parks.
func (c *conn) parkRequested(err error) (ok, parked bool) {
	c.parkMu.Lock() // the processor has set the deadline once this is ours
	_ = c.nc.SetReadDeadline(time.Time{})
	c.parkMu.Unlock()
	c.wait.Store(waitBusy)
	switch {
	case c.draining():
		return false, false // Shutdown's deadline may have been cleared with ours
	case err == nil:
		return true, false
	case !isDeadline(err):
		if !isClosedOrEOF(err) {
			c.p.srv.log.Info("closing connection", "conn_id", c.info().ID, "err", err)
		}
		return false, false
	}
	c.stopPeerWatcher()
	c.p.srv.putReadBuf(c.br)
	c.br = nil
	c.p.srv.parked.Add(1)
	c.parkMoved.Store(int64(time.Since(c.p.srv.epoch)))
	c.goPark()
	return false, true
}

// goPark starts the parked goroutine, noting the stack the runtime starts
// it on.
func (c *conn) goPark() {
	c.parkedStack.Store(startingStack())
	c.wait.Store(waitParked)
	go c.parked()
}

// startingStack is the stack size, in bytes, the runtime gives a new
// goroutine now. It is the smallest (2 KiB) unless the goroutines the last
// collection saw used more on average (adaptive stack start): then a
// connection parked during a burst of busy ones starts larger and keeps it
// while it waits, until askToRepark moves it.
func startingStack() uint32 {
	s := [1]metrics.Sample{{Name: "/gc/stack/starting-size:bytes"}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return uint32(s[0].Value.Uint64())
}

// askToRepark asks a parked connection whose goroutine started on a larger
// stack than the runtime gives now to park again, on a fresh goroutine. The
// processor calls it with startingStack's value.
func (c *conn) askToRepark(stack uint32) {
	c.parkMu.Lock()
	if c.parkedStack.Load() > stack && c.wait.CompareAndSwap(waitParked, waitReparking) {
		_ = c.nc.SetReadDeadline(time.Now())
	}
	c.parkMu.Unlock()
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
	if !c.wait.CompareAndSwap(waitParked, waitBusy) { // waitReparking
		c.parkMu.Lock() // the processor has set the deadline once this is ours
		_ = c.nc.SetReadDeadline(time.Time{})
		c.parkMu.Unlock()
		c.wait.Store(waitBusy)
		if n == 0 && isDeadline(err) && !c.draining() {
			c.goPark()
			return
		}
	}
	c.p.srv.parked.Add(-1)
	c.pre.n = n
	c.br = c.p.srv.readBuf(c.readSource())
	now := time.Since(c.p.srv.epoch)
	c.adaptParkWait(now - time.Duration(c.parkMoved.Load()))
	c.parkMoved.Store(int64(now))
	if err != nil && n == 0 {
		if !isClosedOrEOF(err) {
			c.p.srv.log.Info("closing connection", "conn_id", c.info().ID, "err", err)
		}
		c.finish()
		return
	}
	c.loop()
}

// prefixedConn is the socket as crypto/tls sees it: reads go through the
// connection's prefixReader, everything else to the socket.
type prefixedConn struct {
	net.Conn
	pre *prefixReader
}

func (p prefixedConn) Read(b []byte) (int, error) { return p.pre.Read(b) }

// readSource is what the connection's read buffer reads from.
func (c *conn) readSource() io.Reader {
	if c.rw == c.nc {
		return &c.pre
	}
	return c.rw
}
