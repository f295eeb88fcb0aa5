package socketserver

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/connreg"
)

// conn is one client connection. Its goroutine, serve, is the whole
// per-request path: read a frame, decode it, queue the request, wait for
// the host's answer, write the response, and only then read the next frame.
// An idle connection parks (park.go): a fresh goroutine with the smallest
// stack takes it over.
//
// Its life, with the wait state (conn.wait) each step runs in; the
// concurrency core below has the full transition table, who moves the read
// and write deadlines, and the lock order:
//
//	processor.register   id, contexts, registry entry; starts serve       waitBusy
//	                     (a PROXY listener's: serveProxied, proxyproto.go,
//	                     reads the header first, then registers it)
//	serve → handshake    TLS handshake, SASL exchange (auth.go)            waitBusy
//	loop:
//	  awaitRequest       waits for the next request's first bytes         waitAwaiting
//	                     (asked to park: parkRequested → parked, park.go)  waitParking
//	  serveRequest       reads (within queued.max.request.bytes), decodes, waitBusy
//	                     (or, for an API served raw, leaves the body as
//	                     it is, or in the socket when streamed: raw.go),
//	                     queues or answers inline, waits for the answer
//	                     (the peer watcher reads meanwhile once the
//	                     request is held past peerWatchAfter, and a
//	                     streamed body has been read), writes,
//	                     reports it (HookRequestDone, requestlog.go)
//	  mute               a throttled request's connection reads nothing    waitBusy
//	                     until the throttle has passed (Request.Throttle)
//	finish               lingers if draining, closes, hooks, conns.Done    waitBusy
//
// Anyone may close it (close: idle expiry, quotas, the registry's operator
// close, Shutdown, its listener's removal, the peer watcher); its
// goroutine then sees its read or write fail and finishes. Only its
// goroutine writes to the socket, and reads it but for the peer watcher
// and a streamed body's reads (see the concurrency core).
//
// Its fields are laid out to fit the 224-byte size class (TestGuardConnSize):
// the small ones are paired to leave no padding.
type conn struct {
	nc      net.Conn // the connection: closed and given deadlines from any goroutine
	p       *processor
	ctx     connLife                   // the connection's life: ended when it closes; the server's waits watch it
	req     atomic.Pointer[reqContext] // Request.Context and its cancel (see requestContext): nil until a request asks for it, unless the host's BaseContext or ConnContext made it at the start
	answers chan answer                // made with the first request the host answers

	// Owned by the connection's goroutine (serve, or the parked goroutine
	// that took over: one at a time). A parked connection holds no read
	// buffer and no write buffer.
	rw            io.ReadWriter // nc, or the TLS connection over it (over prefixedConn)
	br            *bufio.Reader // over the socket (socketReader: plaintext) or rw (TLS), readBufSize
	pace          atomic.Int64  // the arrival of the frame being read, for connections.max.idle.ms (see arrived); 0 while none is tracked
	reauthStarted int64         // when the last KIP-368 re-authentication began: nanoseconds since the server's epoch; 0 before one
	writeDeadline time.Duration // the write deadline last set, from the server's epoch (see writeFrame)
	peer          *peerWatcher  // made with the first request the host answers; its goroutine starts when one is held (watchPeer); stopped when the connection parks
	pre           prefixReader  // under br: what the parked goroutine read
	pipe          *pipeline     // made with the first pipelined request (API.Pipeline)

	wait        atomic.Int32  // waitBusy, waitAwaiting, ...: changed only through the concurrency core's methods
	parkedStack atomic.Uint32 // the stack size its parked goroutine started on (see askToRepark)
	parkDelay   atomic.Int32  // microseconds to wait before parking; 0: Config.ParkAfter (see parkWait)
	turn        atomic.Bool   // the connection holds a turn of its plane's (see loop): its goroutine's, but a pipeline's writer may end it (writeFrame), beside parkDelay to fill its padding
	parkMoved   atomic.Int64  // when the connection last parked or unparked: nanoseconds since the server's epoch
	wakeMu      sync.Mutex    // held around every read deadline move but lingerClose's (see the concurrency core)

	active    atomic.Int64 // monotonic nanoseconds since the server's epoch of the last complete request or response, or a response's write beginning; while muted, the throttle's end (mute)
	closeOnce sync.Once
	held      int32 // owned by the connection's goroutine: bytes of the request in flight taken from the listener's memory pool (nextFrame), beside closeOnce to fill its padding
	entry     *connreg.Entry
	reason    atomic.Pointer[connregistry.CloseReason] // the first reason given wins
}

// readBufSize is a connection's read buffer: one read takes in a small
// request whole (size, header and body), and frames larger than the
// buffer are read straight into their own memory.
const readBufSize = 256

// writeBufKeep is the largest write buffer the server keeps for reuse.
const writeBufKeep = 64 << 10

// smallFrame is the largest frame read into a buffer allocated at its
// size with a requestBuf for its request: most requests other than
// Produce fit.
const smallFrame = 320

// requestBuf holds a request and its client id in one allocation. The
// frame is an allocation of its own, with no pointers in it, and so is
// the decoded body: a host that keeps a byte field of the body (a
// Produce's record batches) keeps the frame's bytes alive and nothing
// else, not the request, nor through it the connection, which would stay
// in memory, closed, for as long as the host keeps the batch.
// TestGuardRequestSizeClass holds it to its size class.
type requestBuf struct {
	req      Request
	clientID string
}

// errDraining ends a connection that Shutdown, or its listener's removal
// (RemoveListener), is draining.
var errDraining = errors.New("socketserver: server shutting down")

// # The concurrency core
//
// A connection is served by one goroutine at a time, "the goroutine":
// serve, or the parked goroutine that took it over (park.go). Other
// goroutines reach into it in two ways only: they read and change its wait
// state (conn.wait), and they move its read deadline to end a read of the
// goroutine's. Both go through the methods below, which follow the table;
// nothing else stores to conn.wait, and nothing else moves a deadline
// from another goroutine. Anyone may read the state (the processor's tick
// picks its candidates by it, then asks through wakeReader).
//
// # The connection's states
//
//	state          what the goroutine does                   who leaves it, with which method, to
//	waitBusy       handshake, reading or serving a request,  the goroutine: awaitBegin, before its wait
//	               muted by a throttle (mute), closing       in awaitRequest → waitAwaiting;
//	               (finish); the state it starts in          parkBegin, in goPark → waitParked
//	waitAwaiting   blocked in awaitRequest: the peer         the goroutine, when its wait ends:
//	               watcher's read, or a read of the next     awaitEnd (CAS) → waitBusy (request
//	               request's first byte                      began, or an error: it closes);
//	                                                         the processor (askToPark):
//	                                                         wakeReader(wakeToPark), CAS under
//	                                                         wakeMu → waitParking, then the read
//	                                                         deadline to now
//	waitParking    the same wait, which the deadline ends    the goroutine: awaitEnd (clearWake:
//	                                                         takes wakeMu, clears the read deadline,
//	                                                         Store) → waitBusy; then parks (goPark),
//	                                                         serves, or closes (parkRequested)
//	waitParked     the parked goroutine's 4-byte read        the parked goroutine (unpark): parkEnd
//	                                                         (CAS) → waitBusy; the processor
//	                                                         (askToRepark): wakeReader(wakeToRepark),
//	                                                         CAS under wakeMu → waitReparking, then
//	                                                         the read deadline to now
//	waitReparking  the same read, which the deadline ends    the parked goroutine (unpark): parkEnd
//	                                                         (clearWake, as above) → waitBusy; then
//	                                                         parks again on a fresh goroutine if
//	                                                         nothing arrived (goPark → waitParked),
//	                                                         else serves or closes
//
// Only the goroutine leaves waitBusy, waitParking and waitReparking, and
// only with a Store; the processor moves a connection only by a CAS from a
// state in which the goroutine is blocked in a read (waitAwaiting,
// waitParked), and sets the deadline before it releases wakeMu. So a CAS
// of the goroutine's that fails (awaitEnd, parkEnd) means the processor
// asked, and its deadline is set, or is being set under wakeMu, which
// clearWake takes before it clears it. Close, idle expiry, Shutdown's
// drain and the registry's operator close never change the state: they
// close the socket, or move the deadline, which ends any read. A muted
// connection (mute) is in no read, and stays in waitBusy, so the processor
// never asks it to park: its wait ends at the throttle's end, when it
// closes (its context), or when Shutdown, having set the draining flag,
// closes Server.drainStarted (a removal of its listener: the listener's
// flag and listenerState.drainStarted).
//
// # Who moves the deadlines
//
// The read deadline, always under wakeMu but in lingerClose:
//   - other goroutines, only with wakeReader, which sets it to now: the
//     processor (askToPark, askToRepark: only after their CAS, so only
//     during a wait of the goroutine's), and Shutdown and the removal of
//     the connection's listener (processor.drain, wakeToDrain: in any
//     state, after setting the server's, or the listener's, draining flag,
//     which conn.draining reads);
//   - the goroutine, with moveReadDeadline and clearReadDeadline: the
//     handshake (auth.go) sets it, with the write deadline, for the TLS
//     handshake and SASL exchange and clears it after; re-authentication
//     sets and clears it the same way; with a memory pool, frameMemory sets
//     it (Config.RequestStallTimeout ahead) before the reads of a frame that
//     wait for the peer, and clears it when the frame has been read
//     (waitBusy: the processor sets none); clearWake clears a wake's;
//   - the goroutine, without the lock: lingerClose, in finish, when
//     Shutdown drains the connection: it moves it while it reads the
//     closing connection's last bytes, and tells a wake of Shutdown's from
//     its own by the time;
//   - the host's goroutine reading a streamed body (RawRequest, under its
//     mu), with limitRead and clearReadDeadline: the host's deadline
//     (RawRequest.SetReadDeadline) and a splice's steps (RawRequest.splice),
//     cleared when the body ends (RawRequest.finish). The connection's
//     goroutine waits for the answer meanwhile and moves none, and the
//     processor sets none on a connection in waitBusy.
//
// A clear never loses Shutdown's wake: clearReadDeadline sets the deadline
// to now instead once the draining flag is set, and Shutdown sets the flag
// before it takes wakeMu to wake, so a clear made after the wake sees it
// (a listener's removal likewise, with the listener's flag). limitRead
// does the same for a set.
// A set may postpone the wake: the handshake checks the flag after its
// set, and closes the connection if it is up; re-authentication's set by
// its timeout, after which it sees the flag; frameMemory's until
// the frame has been read, at most by the stall timeout at a time, after
// which its clear wakes the goroutine again. The goroutine checks the flag
// before each wait for a request too (awaitRequest, parkRequested, unpark).
//
// The write deadline is the goroutine's alone: writeFrame moves it to
// connections.max.idle.ms from now (once an eighth of it has passed), and
// to turnWriteWait from now for the part of a response written within a
// turn (writeInTurn), after which it moves it back; and the handshake sets
// and clears it with the read deadline. writeFrame moves it during the
// handshake too, so the handshake's deadline bounds its reads only; its
// responses are small (one ApiVersions, one SASL token each), so they
// never fill the socket's buffer and a write never waits on the client. No
// other goroutine writes to the socket or moves the write deadline, but one
// that calls RespondRawFrom while the request's inline handler runs: it
// writes the answer itself (writeAnswer) while the goroutine runs the
// handler and then waits for that answer, touching nothing of the
// connection's (RawRequest.stage: rawWriting).
//
// # A streamed body
//
// While the host holds a request whose body is streamed (API.StreamAbove,
// raw.go), the host's goroutine reads the rest of the body from the read
// buffer and the socket (RawRequest.Read, WriteTo), under RawRequest.mu.
// The goroutine leaves both alone until it takes the read side back
// (takeBack, under the same lock): when the answer comes, reading and
// dropping what the host left unread before it writes, or when the
// connection closes (abandon), before finish gives the read buffer back.
// The peer watcher starts only once the body has been read whole
// (RawRequest.done). The host's reads move the read deadline only for the
// host's deadline and a splice's steps (see above): Shutdown's wake ends
// them as it ends a frame still arriving, and closes the connection. They
// count the body's arrival as the connection's activity (arrival.go).
//
// # Lock order
//
// No lock is held while another is taken, except:
//   - conn.closeOnce's (close runs once): inside it close takes, one after
//     the other, the registry's entry and registry locks (connreg.Entry.Remove),
//     processor.mu (processor.remove) and connectionQuotas.mu (release). So
//     close must not be called with any of those held: the processor and
//     the registry collect the connections to close under their lock and
//     close them after releasing it.
//   - processor.mu → conn.wakeMu → the socket's deadline: processor.drain
//     wakes its connections under processor.mu, and processor.parkFresh
//     asks its new connections to park under it. wakeMu is held only around
//     a deadline move (and, in wakeReader, a change of state), and nothing
//     is taken inside it but the socket's own: a net.Conn that a host's
//     Config.Listen gives must not call the server from SetReadDeadline.
//     The processor's tick makes its wakes (askToPark, askToRepark) after
//     it has released processor.mu.
//   - processor.mu → the registry's lock: processor.add registers a
//     connection's entry and makes it one of the processor's connections
//     in one hold of processor.mu, so that drain and closeAll, which take
//     it, never see a connection without its entry (connreg.Add takes
//     its own lock and nothing else). processor.drain and closeAll close
//     the sockets of a PROXY listener still pending (their header being
//     read) under processor.mu or after it: a pending socket is no conn,
//     and nothing but its goroutine moves its deadline.
//   - Server.change → Server.mu: Start and the listener changes
//     (AddListener, RemoveListener, SetListeners, listeners.go) hold
//     Server.change throughout, one at a time, but for a removal's drain,
//     which runs after it is released (so a hook or handler may change
//     listeners meanwhile); inside it they take Server.mu. Nothing that
//     holds Server.mu takes Server.change.
//   - Server.mu is taken alone (Addr, Listeners, Shutdown, Stats,
//     register, a removal's drain as it ends), inside Server.change's
//     (above), or inside Server.closeOnce's (Close). Start holds it while
//     it calls Config.Listen and Config.BaseContext, which therefore must
//     not call the server; an added listener's Listen, BaseContext and
//     sasl.Service.Start run under Server.change alone. A removal closes
//     the removed listener's socket under Server.mu. Shutdown and a
//     removal release it before they drain. Stats copies the listeners
//     under it, then takes processor.mu, one processor at a time, without
//     it.
//   - Server.mu → connectionQuotas.mu: a listener change counts a listener
//     in (and, before Start, out) under Server.mu. Otherwise
//     connectionQuotas.mu is taken alone (acquire drops it while it
//     waits), and a registry lock alone or inside processor.mu (above).
//   - RawRequest.mu → conn.closeOnce's: a streamed body whose read of the
//     connection fails closes the connection with the lock held (fail).
//   - RawRequest.mu → conn.wakeMu: the host's deadline, and a splice's
//     steps, are moved with the lock held.
//
// Hooks (Config.Hooks, ConnContext) are called with no lock held.

// States of conn.wait: see the table above.
const (
	waitBusy      int32 = iota // handshake, reading or serving a request, closing
	waitAwaiting               // blocked in awaitRequest, waiting for a request
	waitParking                // asked by the processor to park
	waitParked                 // parked
	waitReparking              // parked, and asked by the processor to park again on a smaller stack
)

// awaitBegin moves the connection from waitBusy to waitAwaiting: the
// goroutine is about to wait for its next request in awaitRequest, and
// the processor may ask it to park from now on.
func (c *conn) awaitBegin() { c.wait.Store(waitAwaiting) }

// awaitEnd moves the connection back to waitBusy when awaitRequest's wait
// has ended: from waitAwaiting (CAS), or, when the processor asked it to
// park meanwhile, from waitParking (clearWake). It reports whether the
// processor had asked: the wait's error may then be the processor's
// deadline.
func (c *conn) awaitEnd() (woken bool) {
	if c.wait.CompareAndSwap(waitAwaiting, waitBusy) {
		return false
	}
	c.clearWake() // waitParking
	return true
}

// parkBegin moves the connection from waitBusy to waitParked, before the
// parked goroutine starts (goPark): the processor may ask it to park
// again from now on.
func (c *conn) parkBegin() { c.wait.Store(waitParked) }

// parkEnd moves the connection back to waitBusy when the parked
// goroutine's read has ended: from waitParked (CAS), or, when the
// processor asked it to park again meanwhile, from waitReparking
// (clearWake). It reports whether the processor had asked.
func (c *conn) parkEnd() (woken bool) {
	if c.wait.CompareAndSwap(waitParked, waitBusy) {
		return false
	}
	c.clearWake() // waitReparking
	return true
}

// clearWake takes the connection from waitParking or waitReparking back to
// waitBusy: it clears the deadline the processor set to wake the
// goroutine's read, under wakeMu, so after the processor has set it (its
// CAS and its deadline are made under wakeMu in one hold).
func (c *conn) clearWake() {
	c.wakeMu.Lock()
	c.clearReadDeadlineLocked()
	c.wakeMu.Unlock()
	c.wait.Store(waitBusy)
}

// wakeReason is why another goroutine wakes the connection's read
// (wakeReader).
type wakeReason uint8

const (
	wakeToPark   wakeReason = iota // the processor asks a connection waiting for a request to park: waitAwaiting → waitParking
	wakeToRepark                   // the processor asks a parked connection to park again: waitParked → waitReparking
	wakeToDrain                    // Shutdown's drain: in any state, which does not change
)

// wakeReader ends the goroutine's read, if it is blocked in one, by
// setting the read deadline to now: the only way another goroutine moves a
// connection's deadline. To park (or park again), the connection must be
// in the state the table gives, and moves out of it by CAS first; it
// reports whether it did (a drain always does). The CAS and the deadline
// are made in one hold of wakeMu (see clearWake).
func (c *conn) wakeReader(why wakeReason) bool {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	switch why {
	case wakeToPark:
		if !c.wait.CompareAndSwap(waitAwaiting, waitParking) {
			return false
		}
	case wakeToRepark:
		if !c.wait.CompareAndSwap(waitParked, waitReparking) {
			return false
		}
	}
	_ = c.nc.SetReadDeadline(time.Now())
	return true
}

// moveReadDeadline sets the read deadline to t, for a wait of the
// goroutine's own (the handshake's, re-authentication's, a frame's stall);
// clearReadDeadline ends it. Only the goroutine calls them.
func (c *conn) moveReadDeadline(t time.Time) {
	c.wakeMu.Lock()
	_ = c.nc.SetReadDeadline(t)
	c.wakeMu.Unlock()
}

// limitRead sets the read deadline to t, or to now once Shutdown drains
// the connection, so that the move does not undo Shutdown's wake (as
// clearReadDeadline): the host's reads of a streamed body (RawRequest)
// use it.
func (c *conn) limitRead(t time.Time) {
	c.wakeMu.Lock()
	if c.draining() {
		t = time.Now()
	}
	_ = c.nc.SetReadDeadline(t)
	c.wakeMu.Unlock()
}

// clearReadDeadline clears the read deadline the goroutine set (see
// moveReadDeadline), or sets it to now once Shutdown drains, so that the
// clear does not undo Shutdown's wake.
func (c *conn) clearReadDeadline() {
	c.wakeMu.Lock()
	c.clearReadDeadlineLocked()
	c.wakeMu.Unlock()
}

func (c *conn) clearReadDeadlineLocked() {
	var t time.Time
	if c.draining() {
		t = time.Now()
	}
	_ = c.nc.SetReadDeadline(t)
}

// serve runs the connection until it closes or parks (see park.go). An
// idle connection waits in awaitRequest, whose stack is shallow; after
// Config.ParkAfter (or longer) without a request it parks: its goroutine ends and
// a fresh one with the smallest stack waits for the next request without a
// read buffer. serveRequest does the deep work.
func (c *conn) serve() {
	c.rw = c.nc
	c.pre.r = takeSocket(c.nc)
	c.br = c.p.srv.readBuf(c.socket())
	c.run(time.Now().Add(c.p.ls.sec.timeout))
}

// run authenticates the connection, its TLS handshake and SASL exchange
// ending by deadline, and serves it (loop). serve calls it for a new
// connection; serveProxied (proxyproto.go) once a PROXY listener's
// connection has sent its header, with the read buffer holding what came
// after it.
//
// run stays under the frames of every wait for a request (loop), so its
// own frame must stay small: the runtime starts new goroutines on the
// average stack its last collection saw, and connections waiting for a
// request are most of what a burst of new ones shows it (see park.go).
func (c *conn) run(deadline time.Time) {
	if err := c.handshake(deadline); err != nil {
		c.authenticationFailed(err)
		return
	}
	if !c.admitPrincipal() {
		c.end(false)
		return
	}
	c.loop()
}

// admitPrincipal counts the connection under its principal, now known,
// against the connection quotas' PrincipalLimits. Over a limit, it logs
// the refusal (without flooding), records it in the audit trail, sets the
// close reason and reports false: the connection is closed before any request is read, as Kafka
// closes one over max.connections.per.ip. Never inlined, as
// authenticationFailed.
//
//go:noinline
func (c *conn) admitPrincipal() bool {
	srv := c.p.srv
	info := c.info()
	err := srv.quotas.acquirePrincipal(info.Listener, info.Principal, &c.p.ls.anonymous)
	if err == nil {
		return true
	}
	c.setReason(connregistry.ClosePrincipalLimit)
	c.auditConn(AuditConnectionRefused, func(e *AuditEvent) { e.Reason = err.Error() })
	if ok, held := srv.principalRefusals.allow(time.Now()); ok {
		srv.log.Info("closing connection: its principal already has the configured maximum of connections",
			"conn_id", info.ID, "listener", info.Listener, "principal", info.Principal, "address", info.ClientAddr,
			"refused_unlogged", held, "err", err)
	}
	return false
}

// authenticationFailed logs why the connection's authentication failed,
// unless the peer left or the server is draining, and ends the
// connection. It is never inlined: its log call would put a description
// of the connection (connregistry.Info) and the log's arguments in run's
// frame, about 1 KiB under every wait of the connection's goroutine.
//
//go:noinline
func (c *conn) authenticationFailed(err error) {
	if !c.peerLeft(err) && !isClosedOrEOF(err) && !errors.Is(err, errDraining) {
		c.p.srv.log.Info("closing connection during authentication", "conn_id", c.info().ID, "err", err,
			"reason", string(connregistry.CloseAuthenticationFailed))
	}
	c.end(false)
}

// loop serves requests until the connection closes, or parks: then a
// parked goroutine has taken the connection over.
//
// A connection whose next request is in its read buffer already (a client
// that pipelines) would serve it at once, and the next, without ever
// waiting: answered inline or by the server, its requests never give the
// goroutine up. Many such connections keep every P of the Go scheduler
// busy, and the scheduler then polls the network only every 10 ms
// (sysmon), and runs each goroutine for a 10 ms slice: every other
// connection waits behind them. So a request that was in the buffer whole
// when the one before it was answered is served in a turn of the plane's
// (takeTurn): at most GOMAXPROCS-1 connections serve such requests at
// once, the others wait for a turn in order, and a P is left for the
// connections that wait on the network. A turn covers the answer's write
// on a plaintext connection for at most turnWriteWait (writeInTurn) and
// ends before anything else that may wait (endTurn), so that a client
// that does not read, or a host that holds the request, holds no turn.
// It is Kafka's processors' one request per connection per turn.
func (c *conn) loop() {
	for {
		ok, parked := c.awaitRequest()
		if parked {
			return
		}
		if !ok {
			if c.pipe != nil { // the requests read before the EOF, or the drain, are answered first
				if !c.draining() && !c.aged() {
					c.cancelReq() // the client has gone, or half-closed: the host may stop
				}
				c.pipe.await(1)
			}
			c.finish()
			return
		}
		if c.pipe != nil { // a throttled pipelined answer written meanwhile mutes the connection now
			if t := c.pipe.takeMute(); !t.IsZero() && !c.mute(t) {
				c.finish()
				return
			}
		}
		served, muteUntil := c.serveRequest()
		if !served || c.aged() { // an aged connection reads no further request (see Config.ConnectionsMaxAge)
			c.finish()
			return
		}
		c.endTurn()
		if !muteUntil.IsZero() && !c.mute(muteUntil) {
			c.finish()
			return
		}
		if c.frameBuffered() && !c.takeTurn() {
			c.finish()
			return
		}
	}
}

// frameBuffered reports whether the next request's frame is in the read
// buffer whole, so that serving it reads nothing from the socket. While the
// peer watcher reads the buffer (a request the host held), it is not
// looked at: that request was not served at once anyway.
func (c *conn) frameBuffered() bool {
	if c.watchingPeer() {
		return false
	}
	n := c.br.Buffered()
	if n < 4 {
		return false
	}
	b, _ := c.br.Peek(4)
	size := int32(binary.BigEndian.Uint32(b))
	return size >= 0 && int(size) <= n-4
}

// takeTurn waits for a turn of the plane's to serve a pipelined request
// (see loop). It reports false if the connection closed meanwhile.
//
// A turn that had to be waited for was handed over by a connection ending
// its own, and the Go scheduler put this goroutine in that P's next slot,
// where it inherits the rest of the time slice: handed from connection to
// connection, turns would run on one P for a whole slice (10 ms) without
// that P ever looking at the global run queue, where the goroutines that
// the network poller readied wait when no P was free to take them (sysmon
// polls the network every 10 ms; so does a thread that waits for work
// without a P). So a connection handed its turn yields once before it
// serves, and those goroutines go first.
func (c *conn) takeTurn() bool {
	select {
	case c.p.ls.turns <- struct{}{}:
		c.turn.Store(true)
		return true
	default:
	}
	select {
	case c.p.ls.turns <- struct{}{}:
		c.turn.Store(true)
		runtime.Gosched()
		return true
	case <-c.ctx.Done():
		return false
	}
}

// endTurn ends the connection's turn, if it has one: before anything that
// may wait, and after each request.
func (c *conn) endTurn() {
	if c.turn.CompareAndSwap(true, false) {
		<-c.p.ls.turns
	}
}

// finish ends a connection that was counted under its principal
// (admitPrincipal): see end.
func (c *conn) finish() { c.end(true) }

// end ends the connection: it lingers when Shutdown drains it, or it is
// closed for its age, closes it, stops its peer watcher, gives its read
// buffer back, its socket's state (rawSocket) unless a pipeline may still
// write, and, if counted is true, its principal's count. When Shutdown
// drains it, or it is closed for its age, the pipelined requests the host
// holds are answered first, whatever woke it (the wake may cut a frame
// short: serveRequest fails).
func (c *conn) end(counted bool) {
	c.endTurn()
	leaving := c.draining() || c.aged()
	if c.pipe != nil && leaving {
		c.pipe.await(1) // false once the connection is closed: Close, or Shutdown's deadline
	}
	if !c.watchingPeer() && leaving {
		c.lingerClose()
	}
	c.close()
	if counted {
		c.p.srv.quotas.releasePrincipal(c.p.ls.cfg.Name, c.info().Principal, &c.p.ls.anonymous) // the principal never changes once counted (re-authentication keeps it)
	}
	if c.pipe != nil {
		c.pipe.close()
	}
	c.stopPeerWatcher()
	c.releaseMemory()
	if c.br != nil {
		c.p.srv.putReadBuf(c.br)
		c.br = nil
	}
	if c.pipe == nil { // else a pipelined answer's writer may still be writing
		c.pre.r = releaseSocket(c.pre.r, c.nc)
	}
	if hooks := c.p.srv.hooks.connClosed; len(hooks) > 0 {
		info := c.info()
		for _, h := range hooks {
			h.OnConnClosed(info, *c.reason.Load()) // close set the reason
		}
	}
	c.p.connDone()
}

// awaitRequest waits until the next request begins to arrive: the peer
// watcher's read, or a read of the first size bytes. It reports ok false
// when the connection must close, and parked true when the processor asked
// an idle connection to park and it has (see park.go).
func (c *conn) awaitRequest() (ok, parked bool) {
	if c.watchingPeer() { // the peer watcher's read is the wait
		c.peer.watching = false
		c.awaitBegin()
		err := <-c.peer.done
		if c.awaitEnd() {
			return c.parkRequested(err)
		}
		if err != nil {
			c.readFailed(err)
			return false, false
		}
	}
	if c.draining() {
		return false, false
	}
	for c.br.Buffered() == 0 {
		if !c.plain() { // a record's bytes count as they arrive (arrival.go)
			c.awaitArrival()
		}
		c.awaitBegin()
		_, err := c.br.Peek(1)
		if err != nil && c.pace.Load() == paceAwaiting {
			c.endArrival()
		}
		if c.awaitEnd() {
			if isDeadline(err) && c.pipe != nil && c.pipe.holds() && !c.draining() {
				continue // not parked: pipelined requests wait for their answers
			}
			return c.parkRequested(err)
		}
		if err != nil {
			c.readFailed(err)
			return false, false
		}
	}
	return true, false
}

// serveRequest reads the request whose first bytes have arrived, decodes
// it, and answers it or hands it to the host and writes the host's answer.
// It reports ok false when the connection must close, and when the host
// throttled the request (Request.Throttle), until when it must stay muted.
// Every request it decodes is reported once (HookRequestDone), when it is
// done: the server's own answers where they are written (ownDone), the
// host's here (hostDone).
func (c *conn) serveRequest() (ok bool, muteUntil time.Time) {
	srv := c.p.srv
	ls := c.p.ls
	log := srv.log
	if !c.pre.heard { // the request's first bytes are in the read buffer (awaitRequest)
		c.pre.heard = true
	}
	frame, size, peeked, err := c.nextFrame(int32(srv.cfg.RequestMaxBytes), ls.apis, ls.memory)
	if err != nil {
		if !c.peerLeft(err) && !isClosedOrEOF(err) {
			c.setReason(connregistry.CloseProtocolError)
			log.Info("closing connection", "conn_id", c.info().ID, "err", err, "reason", string(connregistry.CloseProtocolError))
		}
		return false, time.Time{}
	}
	start := time.Now()
	c.touch(start)
	h, api, body, rest, expiry, err := c.decode(frame, size, start, ls.apis.serverAnswersAPIVersions)
	if err != nil {
		c.setReason(connregistry.CloseProtocolError)
		log.Info("closing connection", "conn_id", c.info().ID, "err", err, "api_key", h.key, "api_version", h.version,
			"reason", string(connregistry.CloseProtocolError))
		return false, time.Time{}
	}
	q := logged{h: h, size: size, received: start}
	if ls.maxAge > 0 && !start.Before(c.ageLimit(c.entry.ConnectedAt())) {
		c.closeForAge() // this request is served; the loop then closes (aged)
	}
	if c.pipe != nil && api.Pipeline == 0 && !c.pipe.await(1) { // answers leave in order: the pipelined ones first
		return false, time.Time{}
	}
	// After the session's expiry only a SaslHandshake that starts
	// re-authentication is served; any other request closes, including
	// those the server answers itself (KIP-368, as Kafka's processor).
	// decode read the expiry with the request's bookkeeping, under the
	// registry entry's one lock.
	if !expiry.IsZero() && start.After(expiry) {
		if _, hs := body.(*kmsg.SASLHandshakeRequest); !hs || !c.mayReauthenticate(start) {
			c.setReason(connregistry.CloseSessionExpired)
			info := c.info()
			log.Info("closing connection", "conn_id", info.ID, "err", ErrSessionExpired, "principal", info.Principal,
				"reason", string(connregistry.CloseSessionExpired))
			c.ownDone(&q, c.ownStart(), 0, true)
			return false, time.Time{}
		}
	}
	if answered, err := c.answerInServer(&q, api, body, rest); answered || err != nil {
		c.releaseMemory()
		if peeked > 0 { // answered: the frame may leave the read buffer now
			_, _ = c.br.Discard(peeked)
		}
		if err != nil {
			if !isClosedOrEOF(err) {
				log.Info("closing connection", "conn_id", c.info().ID, "err", err)
			}
			return false, time.Time{}
		}
		// The answer's write ended when its activity was recorded (wrote):
		// the busy time ends there, with no clock read of its own (one
		// costs about 0.1 µs on a virtual machine's kvm-clock, where the
		// whole request costs the server 5 to 6 µs). Never negative: a
		// pipelined answer written meanwhile by another goroutine may
		// record an earlier time.
		c.p.busy.Add(int64(max(c.lastActive().Sub(start), 0)))
		return true, time.Time{}
	}

	var (
		r        *Request
		clientID *string
	)
	if api.Raw { // undecoded: its bytes, a streamed body's reading and a raw answer in one allocation with the request
		rb := &rawRequestBuf{}
		r, clientID = &rb.req, &rb.clientID
		r.Raw = &rb.raw
		r.Raw.init(c, frame, size, &h, len(frame)-len(rest), &api)
	} else {
		rb := &requestBuf{}
		r, clientID = &rb.req, &rb.clientID
	}
	// The connection as the request found it: Request.Conn, the copy the
	// requests between two changes of its description share (a request
	// the server answers itself needs none, and makes none).
	info := c.entry.Shared()
	r.APIKey, r.APIVersion, r.CorrelationID = h.key, h.version, h.correlationID
	r.Body, r.Conn, r.ReceivedAt, r.Size, r.conn = body, info, start, size, c
	if !h.nullClientID {
		*clientID = h.clientID
		r.ClientID = clientID
	}
	if av, ok := body.(*kmsg.ApiVersionsRequest); ok {
		c.noteClientSoftware(av) // the request itself carries the earlier values, as in Kafka
	}
	pipelined := api.Pipeline > 0
	if pipelined && !c.pipeline().admit(r, &q, api.Pipeline) {
		c.hostDone(&q, r, time.Now(), 0, true)
		return false, time.Time{}
	}
	if c.answers == nil {
		c.answers = make(chan answer, 1)
	}
	callerWrites := false // a RespondRawFrom writes the answer on the inline handler's behalf
	if api.Inline != nil {
		q.own = api.own
		// Answered in place, on this goroutine (the inline mode): the
		// handler runs in one of as many slots as the queue has places, so
		// that no more requests are in hand at once than the queue and its
		// workers would hold. A request the handler hands on (to answer it
		// later, as a long poll) gives its slot back, as a worker moves on.
		select {
		case ls.inline <- struct{}{}:
		case <-c.ctx.Done():
			if !pipelined { // else logged with the pipeline's close
				c.hostDone(&q, r, time.Now(), 0, true)
			}
			return false, time.Time{}
		}
		r.Raw.enterInline()
		srv.handle(api.Inline, r) // the answer is in c.answers, or comes later
		callerWrites = !r.Raw.leaveInline()
		<-ls.inline
	} else {
		c.endTurn() // the queue may be full
		select {
		case ls.queue <- r:
		case <-c.ctx.Done():
			if !pipelined { // else logged with the pipeline's close
				c.hostDone(&q, r, time.Now(), 0, true)
			}
			return false, time.Time{}
		}
	}
	c.p.busy.Add(int64(time.Since(start)))
	if pipelined { // the answer is written when it comes (pipeline.answer); read on once the body has been
		return c.pipe.awaitBody(r), time.Time{}
	}

	// Wait for the answer. A request the host holds for peerWatchAfter gets
	// the peer watched meanwhile, so that a client that goes away cancels
	// its context; one answered sooner (most are) costs no second
	// goroutine's wake-ups. The peer may send EOF while the request is held
	// (its context is then cancelled): the answer is still written, as
	// Kafka, which reads nothing while a request is in flight, writes it
	// before it sees the EOF. Only the connection's close, or idle expiry,
	// ends the wait. While the host reads a streamed body from the
	// connection (RawRequest), the watcher waits for it to end; the host's
	// reads see a client that goes away meanwhile.
	if c.peer == nil {
		c.peer = &peerWatcher{held: time.NewTimer(peerWatchAfter)}
	} else {
		c.peer.held.Reset(peerWatchAfter)
	}
	var a answer
	if callerWrites {
		a = <-c.answers // written already (RespondRawFrom): nothing of the connection's is touched until it is here
	} else {
		if len(c.answers) == 0 {
			c.endTurn() // an inline handler handed the request on: the answer is to wait for
		}
	wait:
		for {
			select {
			case a = <-c.answers:
				break wait
			case <-c.peer.held.C:
				if r.Raw.streaming() {
					c.peer.held.Reset(streamWatchAfter)
				} else if c.br.Buffered() == 0 { // else the next request is here already
					c.watchPeer()
				}
			case <-c.ctx.Done():
				r.Raw.abandon(c)
				c.hostDone(&q, r, time.Now(), 0, true)
				return false, time.Time{}
			}
		}
	}
	c.peer.held.Stop()
	c.releaseMemory() // answered: the request's bytes no longer count (the response's are its own)
	q.throttle = a.throttle
	writeStart := time.Now()
	if a.close {
		c.setReason(connregistry.CloseByHandler)
		if r.Raw.streaming() {
			c.close() // now: a read of the body the host may still be making then fails
		}
		_ = r.Raw.takeBack(false, ErrAlreadyAnswered) // before finish gives the read buffer back
		c.hostDone(&q, r, writeStart, 0, true)
		return false, time.Time{}
	}
	sent := 0
	if ra := a.raw; ra != nil && ra.written {
		sent, err, writeStart = ra.sent, ra.err, srv.epoch.Add(time.Duration(ra.start))
	} else {
		sent, err = c.writeAnswer(r, &a, writeStart)
		a.raw.release(err) // to a RespondRawFrom that waits
	}
	if err != nil {
		c.hostDone(&q, r, writeStart, 0, true)
		return false, time.Time{}
	}
	c.hostDone(&q, r, writeStart, sent, false)
	if a.throttle > 0 { // counted from when the answer was taken up, as Kafka's from its ThrottledChannel
		return true, writeStart.Add(a.throttle)
	}
	return true, time.Time{}
}

// streamWatchAfter is how often a connection whose host reads a streamed
// body (RawRequest) looks whether the body has been read, to watch its
// peer from then on. A var for the tests.
var streamWatchAfter = 10 * time.Millisecond

// writeAnswer writes the response of a, the host's answer to r, whose
// writing begins at writeStart, once a streamed body's unread bytes have
// been read and dropped (RawRequest; a pipelined request's are dropped by
// the connection's goroutine, after): a kmsg response, or the host's bytes
// (RespondRaw, RespondRawFrom). It returns the bytes written, size prefix
// included (0 with NoResponse), or an error: the connection must close.
// It runs on the connection's goroutine, or on the goroutine of a
// RespondRawFrom called while r's inline handler runs (see there).
func (c *conn) writeAnswer(r *Request, a *answer, writeStart time.Time) (int, error) {
	if r.Raw != nil && r.Raw.pipe != nil {
		// A pipelined request's answer may be written on another
		// goroutine, before its body has arrived: the connection's
		// goroutine drops the rest (pipeline.awaitBody).
		r.Raw.stopReading(ErrAlreadyAnswered)
	} else if err := r.Raw.takeBack(true, ErrAlreadyAnswered); err != nil {
		return 0, err
	}
	switch {
	case a.raw != nil:
		c.touch(writeStart) // as Kafka's Selector, to which a connection with a response to write is active
		return c.writeRaw(r, a.raw)
	case a.resp != nil:
		c.touch(writeStart)
		return c.write(r.CorrelationID, a.resp)
	}
	return 0, nil
}

// mute holds a throttled connection (Request.Throttle) until until: it
// reads nothing, so a client that ignores the throttle is held, as Kafka's
// MUTED_AND_THROTTLED channel. The answer has been written (or there was
// none) and the request's memory given back, and no turn or queue place is
// held, so a muted connection holds only its goroutine and read buffer;
// its next request, if sent, waits in the socket. It stays in waitBusy:
// the processor neither parks it nor expires it, as its activity is set
// to until (the idle limit counts from the throttle's end). It reports
// false when the connection must close: it closed, or Shutdown (or its
// listener's removal) began, which does not wait for a throttle (a muted
// connection is idle).
func (c *conn) mute(until time.Time) bool {
	now := time.Now()
	if !until.After(now) { // the response's write took longer
		return true
	}
	c.touch(until)
	c.entry.Throttle(now, until)
	if c.p.srv.audit != nil {
		c.auditConn(AuditThrottled, func(e *AuditEvent) { e.Throttle = until.Sub(now) })
	}
	if c.peer == nil { // only pipelined requests so far: none waited
		c.peer = &peerWatcher{held: time.NewTimer(peerWatchAfter)}
	}
	t := c.peer.held // idle until the next request is taken up (made with the throttled request's wait)
	t.Reset(until.Sub(now))
	ok := false
	select {
	case <-t.C:
		ok = true
	case <-c.ctx.Done():
	case <-c.p.srv.drainStarted:
	case <-c.p.ls.drainStarted:
	}
	t.Stop()
	c.entry.EndThrottle(time.Now())
	return ok
}

// hostDone ends q, a request handed to the host as r, whose answer the
// connection took up at writeStart with a response of sent bytes (0:
// none): it counts the write as the processor's busy time, records the
// activity (unless the connection closes: closed), and reports the
// request to the HookRequestDone hooks.
func (c *conn) hostDone(q *logged, r *Request, writeStart time.Time, sent int, closed bool) {
	end := writeStart
	if sent > 0 {
		end = time.Now()
		c.p.busy.Add(int64(end.Sub(writeStart)))
	}
	if !closed {
		c.touch(end)
	}
	if c.p.srv.hooks.timed() {
		c.requestDone(q, c.latency(r, q.received, writeStart, end), sent, closed)
	}
}

// decode parses a request frame: header, API lookup on the listener,
// version check, header tags and body. An ApiVersions request comes back
// undecoded, with a nil body and the bytes after its header, when it is too
// new (to be answered in the v0 layout) or when ownAPIVersions is set (the
// server answers it without kmsg: see answerAPIVersions). expiry is when
// the connection's session expires (zero: never), read as the request is
// recorded in the registry entry. An error means the connection must
// close without a response.
func (c *conn) decode(frame []byte, size int, received time.Time, ownAPIVersions bool) (h header, api API, body kmsg.Request, rest []byte, expiry time.Time, err error) {
	apis := c.p.ls.apis
	h, rest, err = parseHeaderPrefix(frame)
	if err != nil {
		return h, api, nil, nil, expiry, err
	}
	h.clientID, expiry = c.entry.Request(received, size, h.clientID) // the entry's copy: a HookRequestDone may keep it
	api, ok := apis.lookup(h.key)
	if !ok {
		return h, api, nil, nil, expiry, ErrUnknownAPI
	}
	for _, hook := range c.p.srv.hooks.requests {
		hook.OnRequestReceived(c.p.ls.cfg.Name, h.key, size)
	}
	if h.key == apiVersionsKey && h.version > api.MaxVersion {
		return h, api, nil, rest, expiry, nil
	}
	if h.version < api.MinVersion || h.version > api.MaxVersion {
		return h, api, nil, nil, expiry, ErrUnsupportedVersion
	}
	if h.key == apiVersionsKey && ownAPIVersions {
		if h.version >= 3 { // flexible: the header has tags
			if rest, err = skipTags(rest); err != nil {
				return h, api, nil, nil, expiry, err
			}
		}
		return h, api, nil, rest, expiry, nil
	}
	if api.Raw { // undecoded: rest is the body (or, streamed, its first bytes)
		if h.version >= api.flexible {
			h.tagsAt = int32(len(frame) - len(rest))
			if rest, err = skipTags(rest); err != nil {
				return h, api, nil, nil, expiry, err
			}
		}
		return h, api, nil, rest, expiry, nil
	}
	body = api.New()
	if ks, ok := body.(KeySetter); ok {
		ks.SetKey(h.key)
	}
	body.SetVersion(h.version)
	if body.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return h, api, nil, nil, expiry, err
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return h, api, nil, nil, expiry, fmt.Errorf("%w: %w", ErrMalformedBody, err)
	}
	return h, api, body, nil, expiry, nil
}

// answerInServer answers the requests the server owns: ApiVersions (unless
// the host took it over) and, after authentication, SaslHandshake and
// SaslAuthenticate, and logs them. It reports whether it answered; an
// error means the connection must close. A request of an API served raw
// is the host's.
func (c *conn) answerInServer(q *logged, api API, body kmsg.Request, rest []byte) (bool, error) {
	if api.Raw {
		return false, nil
	}
	switch body.(type) {
	case nil: // ApiVersions, left undecoded
		return true, c.answerAPIVersions(q, rest)
	case *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		return true, c.answerSASLAfterAuthentication(q, body)
	}
	return false, nil
}

// answerAPIVersions answers q, an ApiVersions request that decode left
// undecoded (body holds what follows its header and header tags): too new,
// in the v0 layout; with invalid client software fields, INVALID_REQUEST;
// otherwise with the listener's encoded answer, recording the client
// software (KIP-511) when it differs from what the connection's
// description names. Nothing is allocated for a client that sends the
// same software as before, nor for one a connection of the registry's
// has sent before (connreg's interned names).
func (c *conn) answerAPIVersions(q *logged, body []byte) error {
	apis := c.p.ls.apis
	h := q.h
	if a, _ := apis.lookup(apiVersionsKey); h.version > a.MaxVersion {
		return c.answerOwn(q, apis.apiVersionsResponse(nil, true), false)
	}
	if h.version >= 3 {
		name, version, err := parseClientSoftware(body)
		if err != nil {
			c.setReason(connregistry.CloseProtocolError)
			return fmt.Errorf("%w: ApiVersions: %w", ErrMalformedBody, err)
		}
		if !validSoftwareField(name) || !validSoftwareField(version) {
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version, resp.ErrorCode = h.version, kerr.InvalidRequest.Code
			return c.answerOwn(q, resp, false)
		}
		c.entry.SetClientSoftware(name, version) // strings made only for a software the registry has not seen
	}
	start := c.ownStart()
	n, err := c.writeEncoded(h.correlationID, apiVersionsKey, apis.encodedVersions[h.version])
	c.ownDone(q, start, n, err != nil)
	return err
}

// peerWatcher is a connection's second goroutine: while a request the
// host holds is in flight it waits for the peer's next bytes, so that a
// client that goes away cancels the request's context (the host can stop
// working for it) instead of going unnoticed until the response is
// written. It reads into serve's bufio.Reader, which serve leaves alone
// from a send on start until it has received the read's error from done
// (nil when the next request has begun to arrive). Closing start ends it;
// it then closes done. It starts only for a request held longer than
// peerWatchAfter (held fires), so that the many answered sooner cost no
// wake-ups of a second goroutine.
//
// EOF cancels the context but leaves the connection open: a client that
// half-closed its socket after its last request still reads, and gets the
// responses to the requests it sent, then the close (Kafka mutes a
// connection while its request is handled and reads the EOF only after
// the response has gone). Any other error closes the connection at once.
type peerWatcher struct {
	held     *time.Timer   // fires when the request in flight has been held for peerWatchAfter
	start    chan struct{} // nil until the goroutine runs
	done     chan error
	watching bool // the connection's goroutine's: the watcher reads c.br for the request in flight (watchPeer); false again once awaitRequest has its result
}

// peerWatchAfter is how long the host may hold a request before the
// connection watches its peer: Request.Context is cancelled at most this
// late after a client goes away, and requests answered sooner need no
// second goroutine.
const peerWatchAfter = time.Millisecond

// watchPeer makes the peer watcher read the peer's next bytes, starting
// its goroutine the first time.
func (c *conn) watchPeer() {
	w := c.peer
	if w.start == nil {
		w.start, w.done = make(chan struct{}, 1), make(chan error, 1)
		go func() {
			defer close(w.done)
			for range w.start {
				_, err := c.br.Peek(1)
				switch {
				case err == nil, isDeadline(err): // a deadline is Shutdown's drain or a request to park, not the peer
				case errors.Is(err, io.EOF): // the peer sends no more; it may still read
					c.peerLeft(err) // before the cancel: a host that closes the connection then closes it for the client
					c.cancelReq()
				default:
					c.peerLeft(err)
					c.close() // and a write blocked on a peer that is gone ends now
				}
				w.done <- err
			}
		}()
	}
	w.start <- struct{}{}
	w.watching = true
}

// watchingPeer reports whether the peer watcher reads the read buffer
// for the request in flight: the connection's goroutine leaves it alone.
func (c *conn) watchingPeer() bool { return c.peer != nil && c.peer.watching }

// stopPeerWatcher ends the peer watcher, if there is one, and waits for it.
func (c *conn) stopPeerWatcher() {
	if c.peer == nil {
		return
	}
	c.peer.held.Stop()
	if c.peer.start != nil {
		close(c.peer.start)
		for range c.peer.done { // until the watcher has ended
		}
	}
	c.peer = nil
}

// write encodes resp and writes it, under a write deadline of
// connections.max.idle.ms so that a client that stops reading is closed.
// It returns the bytes written, size prefix included: the whole frame, or
// 0 with an error.
func (c *conn) write(correlationID int32, resp kmsg.Response) (int, error) {
	if f, ok := resp.(*FetchResponse); ok {
		return c.writeFetch(correlationID, f)
	}
	buf := c.p.srv.writeBuf()
	*buf = appendResponse((*buf)[:0], correlationID, resp)
	return c.writeBuf(buf, resp.Key())
}

// writeEncoded writes a response whose body is encoded already: the
// server's own ApiVersions answers, whose header has no tags.
func (c *conn) writeEncoded(correlationID int32, key int16, body []byte) (int, error) {
	buf := c.p.srv.writeBuf()
	b := binary.BigEndian.AppendUint32((*buf)[:0], uint32(4+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	*buf = append(b, body...)
	return c.writeBuf(buf, key)
}

// writeBuf writes a response frame and gives its buffer back to the
// server. It returns the frame's size, or 0 with an error.
func (c *conn) writeBuf(buf *[]byte, key int16) (int, error) {
	n := len(*buf)
	err := c.writeFrame(*buf)
	c.p.srv.putWriteBuf(buf)
	if err != nil {
		return 0, err
	}
	c.responseSent(key, n)
	return n, nil
}

// responseSent reports a response of n bytes written to the hooks.
func (c *conn) responseSent(key int16, n int) {
	for _, h := range c.p.srv.hooks.responses {
		h.OnResponseSent(c.p.ls.cfg.Name, key, n)
	}
}

// writeToken writes a size-prefixed raw token (SaslHandshake v0's SASL
// exchange).
func (c *conn) writeToken(token []byte) error {
	buf := c.p.srv.writeBuf()
	*buf = append(binary.BigEndian.AppendUint32((*buf)[:0], uint32(len(token))), token...)
	err := c.writeFrame(*buf)
	c.p.srv.putWriteBuf(buf)
	return err
}

// nextFrame reads the next frame, of at most limit bytes, and returns it
// with its size: a small frame is allocated at its size at once; a larger
// one is read into its own slice, which grows as its bytes arrive
// (readBody). With apis (not during the handshake, which passes nil):
//
//   - when the server answers ApiVersions, an ApiVersions request that is
//     in the read buffer whole is not copied: the frame returned is a view
//     of the buffer, and peeked is how many bytes to discard once it is
//     answered (the server answers it without keeping any of it). Nothing
//     is then allocated.
//   - a frame of an API that streams frames of its size (API.StreamAbove)
//     is not read whole: the frame returned is its head (streamHead),
//     shorter than size, and the rest of its body is the host's to read
//     (RawRequest).
//
// With a memory pool (queued.max.request.bytes, after authentication), the
// frame's buffer is taken from the pool as it grows, not at the size the
// frame announces (frameMemory), and given back when the request is
// answered (releaseMemory).
func (c *conn) nextFrame(limit int32, apis *apiTable, pool *memoryPool) (frame []byte, size int, peeked int, err error) {
	if apis != nil && apis.serverAnswersAPIVersions && c.br.Buffered() >= 6 {
		b, _ := c.br.Peek(6)
		size := int32(binary.BigEndian.Uint32(b))
		if int16(binary.BigEndian.Uint16(b[4:])) == apiVersionsKey && size >= 0 && size <= limit && int(size)+4 <= c.br.Buffered() {
			all, _ := c.br.Peek(int(size) + 4)
			c.endArrival() // a TLS record's, begun in awaitRequest
			return all[4:], int(size), len(all), nil
		}
	}
	tracked := apis != nil // a request's arrival counts as activity (arrival.go); the handshake has a deadline of its own
	if tracked && c.br.Buffered() < 4 {
		c.beginArrival()
	}
	n, err := c.readSize(limit)
	if err != nil {
		c.endArrival()
		return nil, 0, 0, err
	}
	if tracked && int(n) > c.br.Buffered() {
		c.beginArrival()
	}
	var m *frameMemory
	if pool != nil && n > 0 {
		m = &frameMemory{c: c, pool: pool}
	}
	if apis != nil && apis.streamAbove > 0 && int(n) > apis.streamAbove {
		if head, err := c.streamHead(n, apis, m); head != nil || err != nil {
			if err != nil {
				c.endArrival()
			} // else the body's reads go on counting until it has been read (RawRequest)
			return head, int(n), 0, err
		}
	}
	if n > smallFrame {
		frame, err = readBody(c.br, n, nil, m)
	} else {
		frame, err = readBody(c.br, n, make([]byte, 0, n), m)
	}
	c.endArrival()
	return frame, int(n), 0, err
}

// readSize reads the next frame's size, of at most limit bytes, from the
// read buffer.
func (c *conn) readSize(limit int32) (int32, error) {
	b, err := c.br.Peek(4)
	if err != nil {
		if len(b) > 0 { // as io.ReadFull: EOF within the size is unexpected
			err = noEOF(err)
		}
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(b))
	_, _ = c.br.Discard(4)
	if size < 0 || size > limit {
		return 0, fmt.Errorf("%w: %d (limit %d)", ErrFrameSize, size, limit)
	}
	return size, nil
}

// frameMemory is one frame's reading under a memory pool: readBody asks
// it before the frame's buffer is allocated or grows, and before each read
// that must wait for the peer. Its methods do nothing on a nil
// frameMemory: no pool.
//
// The buffer is taken from the pool as it grows, so a claim costs what was
// sent (at most initialFrameAlloc, then frameSnap times what arrived).
// A frame of at most smallRequestBytes takes its memory without waiting
// (unless its connection pipelines and the host holds some of its
// requests), so that requests that need little are never blocked by large
// claims;
// a larger one waits while the pool is spent (see memoryPool). While the
// frame holds memory, each read that waits for the peer has a deadline of
// Config.RequestStallTimeout: a peer that holds memory and sends nothing
// would stop every connection waiting for it, and is closed
// (connregistry.CloseStalledRequest).
type frameMemory struct {
	c        *conn
	pool     *memoryPool
	deadline time.Time // the stall deadline set; zero while none is
}

// smallRequestBytes is the largest frame that takes memory from the pool
// without waiting (but on a pipelining connection whose earlier requests
// the host holds): ApiVersions, Metadata, heartbeats, commits and most
// other requests but large Produce requests.
const smallRequestBytes = 64 << 10

// take takes the memory for the buffer of a frame of size bytes holding
// have bytes to grow to next bytes, waiting (frames larger than
// smallRequestBytes, and any frame of a pipelining connection whose
// earlier requests the host holds) while the pool is spent, with no turn
// held. It fails when the connection closes meanwhile.
func (m *frameMemory) take(have, next, size int) error {
	if m == nil {
		return nil
	}
	c := m.c
	n := int64(next) - int64(c.held)
	// A small frame waits too on a connection whose earlier requests the
	// host holds (API.Pipeline): else one client could hold a small
	// frame's worth per pipelined request, past the budget. Their answers
	// give memory back, so the wait ends.
	wait := size > smallRequestBytes || c.pipe != nil && c.pipe.holds()
	if wait {
		c.endTurn() // a frame read in a turn is small: it may wait now, holding none
	}
	if !m.pool.take(n, int64(c.held), int64(size-have), wait, c.ctx.Done()) {
		return net.ErrClosed
	}
	c.held = int32(next)
	return nil
}

// reading moves the read deadline before a read of a frame that still
// lacks missing bytes, unless the read buffer holds them already, so that
// the read waits for the peer at most Config.RequestStallTimeout. The
// deadline moves only once an eighth of the timeout has passed, as
// moveWriteDeadline's.
func (m *frameMemory) reading(missing int) {
	if m == nil {
		return
	}
	c := m.c
	stall := c.p.srv.cfg.RequestStallTimeout
	if stall <= 0 || c.br.Buffered() >= missing {
		return
	}
	now := time.Now()
	if m.deadline.IsZero() || m.deadline.Sub(now) < stall-stall/8 {
		m.deadline = now.Add(stall)
		c.moveReadDeadline(m.deadline)
	}
}

// done ends the frame's reading with err: the frame's memory now counts as
// held for its request (frameRead) until releaseMemory. It clears the
// stall deadline (clearReadDeadline, which keeps a wake of Shutdown's: the
// peer watcher may read next, before awaitRequest checks the draining
// flag) and gives a deadline passing its reason.
func (m *frameMemory) done(err error) error {
	if m == nil {
		return err
	}
	c := m.c
	m.pool.frameRead(int64(c.held))
	if m.deadline.IsZero() {
		return err
	}
	c.clearReadDeadline()
	if isDeadline(err) && !c.draining() {
		c.setReason(connregistry.CloseStalledRequest)
		c.p.srv.log.Info("closing connection: its request stalled", "conn_id", c.info().ID,
			"held_bytes", c.held, "stall_timeout", c.p.srv.cfg.RequestStallTimeout, "reason", string(connregistry.CloseStalledRequest))
	}
	return err
}

// releaseMemory gives the request in flight's bytes back to the memory
// pool: the request has been answered, or the connection ends.
func (c *conn) releaseMemory() {
	if c.held > 0 {
		c.p.ls.memory.release(int64(c.held))
		c.held = 0
	}
}

// plain reports whether c reads and writes its socket in the clear: its
// rw is the socket itself, not crypto/tls over it. It asks rw's type, one
// comparison, where comparing rw with nc compares two interfaces through
// the runtime, on every request.
func (c *conn) plain() bool {
	_, isTLS := c.rw.(*tls.Conn)
	return !isTLS
}

func (c *conn) writeFrame(b []byte) error {
	n := len(b)
	if c.turn.Load() {
		var err error
		if b, err = c.writeInTurn(b); err != nil {
			c.writeFailed(err)
			return err
		}
	}
	if len(b) > 0 {
		c.moveWriteDeadline()
		var err error
		if c.plain() {
			_, err = c.writeSocket(b)
		} else {
			_, err = c.rw.Write(b)
		}
		if err != nil {
			c.writeFailed(err)
			return err
		}
	}
	c.wrote(n)
	return nil
}

// turnWriteWait is the longest a plaintext connection's write may wait for
// the client within its turn: the rest of the response is written after
// the turn.
const turnWriteWait = time.Millisecond

// writeInTurn writes the start of a response within the connection's
// turn, then ends the turn, and returns what is left to write. A response
// written after the turn would be work on the scheduler's Ps outside the
// turns (see loop), as much as the request's, so a plaintext connection
// writes within it, as much as the socket takes within turnWriteWait: a
// client that does not read holds the turn that long at most. A TLS
// connection's records must be written whole, so it writes after the
// turn.
func (c *conn) writeInTurn(b []byte) ([]byte, error) {
	defer c.endTurn()
	if !c.plain() {
		return b, nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(turnWriteWait))
	c.writeDeadline = 0 // moveWriteDeadline sets connections.max.idle.ms again
	n, err := c.writeSocket(b)
	if c.p.srv.cfg.ConnectionsMaxIdle > 0 {
		c.moveWriteDeadline()
	} else {
		_ = c.nc.SetWriteDeadline(time.Time{})
	}
	if err != nil && !isDeadline(err) {
		return nil, err
	}
	return b[n:], nil
}

// moveWriteDeadline keeps the write deadline connections.max.idle.ms
// ahead. Moving it on every write costs a timer update a request; it
// moves only once an eighth of it has passed, so a client that stops
// reading is closed after 7/8 to all of connections.max.idle.ms.
func (c *conn) moveWriteDeadline() {
	if idle := c.p.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		if now := time.Since(c.p.srv.epoch); c.writeDeadline-now < idle-idle/8 {
			c.writeDeadline = now + idle
			_ = c.nc.SetWriteDeadline(c.p.srv.epoch.Add(c.writeDeadline))
		}
	}
}

// writeFailed logs a failed write, unless the peer had gone (which
// peerLeft records).
func (c *conn) writeFailed(err error) {
	if !c.peerLeft(err) && !isClosedOrEOF(err) {
		c.p.srv.log.Info("closing connection: write failed", "conn_id", c.info().ID, "err", err)
	}
}

// wrote records a response of n bytes written. Its time comes from
// time.Now, whose wall reading the registry keeps (Info.LastActivity): a
// time made from the epoch and the monotonic clock alone would be off by
// any step of the system's clock since the server started.
func (c *conn) wrote(n int) {
	now := time.Now()
	c.touch(now)
	c.entry.Response(now, n)
}

// noteClientSoftware records KIP-511's client software name and version
// from a valid ApiVersions v3+ request, when they differ from what the
// connection's description names: the same software changes nothing, and
// the requests that follow keep sharing the description's copy
// (connreg.Entry.Shared).
func (c *conn) noteClientSoftware(req *kmsg.ApiVersionsRequest) {
	if req.Version >= 3 && validClientSoftware(req) {
		c.entry.SetClientSoftware([]byte(req.ClientSoftwareName), []byte(req.ClientSoftwareVersion))
	}
}

// info returns the connection's description as it is now. The description
// lives in the connection's registry entry, its only copy: it changes only
// through the entry's setters, and the listings, the hooks and each
// request (Request.Conn) read it from there.
func (c *conn) info() connregistry.Info { return c.entry.Info() }

// draining reports whether the connection drains: Shutdown began, or its
// listener is being removed (RemoveListener).
func (c *conn) draining() bool { return c.p.srv.draining.Load() || c.p.ls.draining.Load() }

// touch records activity at t. Times are kept on the monotonic clock, as
// offsets from the server's epoch: the wall clock may step, and idle
// expiry and least-recently-active choices must not follow it.
func (c *conn) touch(t time.Time)     { c.active.Store(int64(t.Sub(c.p.srv.epoch))) }
func (c *conn) lastActive() time.Time { return c.p.srv.epoch.Add(time.Duration(c.active.Load())) }

// Lingering bounds for closing a drained connection: see lingerClose.
const (
	lingerQuiet = 100 * time.Millisecond
	lingerMax   = 2 * time.Second
)

// lingerClose prepares a drained connection's close so that its last
// responses are not lost. Closing a socket with unread bytes (requests a
// client pipelined behind the last one answered) resets the connection, and
// the kernel then discards the responses it has not yet sent. So the write
// side closes first (the client gets its responses, then EOF) and the
// client's bytes are read and discarded until it closes, sends nothing for
// lingerQuiet, or lingerMax has passed.
func (c *conn) lingerClose() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	buf := make([]byte, 4096)
	end := time.Now().Add(lingerMax)
	for {
		deadline := time.Now().Add(lingerQuiet)
		if deadline.After(end) {
			deadline = end
		}
		_ = c.nc.SetReadDeadline(deadline)
		_, err := c.nc.Read(buf)
		if now := time.Now(); now.After(end) ||
			err != nil && !(isDeadline(err) && now.Before(deadline)) { // Shutdown's drain may move the deadline
			return
		}
	}
}

// maxAgeClose is the reason of a connection closed for its age: set
// before the close, as the connection stops reading requests (aged), and
// told apart by its address.
var maxAgeClose = connregistry.CloseMaxAge

// aged reports whether the connection is past its maximum age and must
// read no further request (Config.ConnectionsMaxAge): its reason is set
// to maxAgeClose, by its goroutine, when it is found past its age after a
// request it read, or on a wake of the processor's between requests.
func (c *conn) aged() bool { return c.reason.Load() == &maxAgeClose }

// ageLimit is when a connection made at connectedAt reaches its maximum
// age: its listener's (ListenerConfig.ConnectionsMaxAge, else
// Config.ConnectionsMaxAge), spread by up to the jitter's fraction of it
// either way, by an amount drawn from connectedAt (so that connections do
// not all leave at once, and the draw needs no field of the connection's).
func (c *conn) ageLimit(connectedAt time.Time) time.Time {
	ls := c.p.ls
	age := ls.maxAge
	if j := ls.maxAgeJitter; j > 0 {
		u := float64(splitmix64(uint64(connectedAt.UnixNano()))>>11) / (1 << 53) // uniform in [0, 1)
		age += time.Duration(float64(age) * j * (2*u - 1))
	}
	return connectedAt.Add(age)
}

// pastAge reports whether the connection has reached its maximum age at
// now; false when there is none. It reads the connection's description:
// the processor's scans and the wakes they cause call it, not each
// request.
func (c *conn) pastAge(now time.Time) bool {
	return c.p.ls.maxAge > 0 && !now.Before(c.ageLimit(c.info().ConnectedAt))
}

// closeForAge marks the connection closed for its age (aged), unless it
// has a close reason already.
func (c *conn) closeForAge() { c.reason.CompareAndSwap(nil, &maxAgeClose) }

// splitmix64 is SplitMix64's output function: it spreads x's bits over
// all of the result's.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// setReason records why the connection closes, unless a reason was given
// already.
func (c *conn) setReason(r connregistry.CloseReason) { c.reason.CompareAndSwap(nil, &r) }

// closeWith closes the connection for reason; the registry's operator
// "kill" and the processor's idle and quota closes use it.
func (c *conn) closeWith(r connregistry.CloseReason) {
	c.setReason(r)
	c.close()
}

// CloseFor is closeWith, as the registry's connreg.Closer: the entry holds
// the connection itself, where a method value would be an allocation of
// its own.
func (c *conn) CloseFor(r connregistry.CloseReason) { c.closeWith(r) }

// close closes the connection once, cancelling its requests' context.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		// Unless a reason was given already (the first one wins):
		switch {
		case c.p.ls.draining.Load():
			c.setReason(connregistry.CloseListenerRemoved)
		case c.p.srv.draining.Load():
			c.setReason(connregistry.CloseServerShutdown)
		}
		c.setReason(connregistry.CloseByClient)
		if reason := c.reason.Load(); reason == &probeClosed {
			c.entry.Forget() // kept out of the history, counted (Stats.ProbesClosed)
			c.p.ls.probes.Add(1)
			c.p.srv.log.Debug("probe closed by its client", "conn_id", c.info().ID, "proxy_local", c.pre.proxyLocal)
		} else {
			c.entry.Remove(time.Now(), *reason)
		}
		c.ctx.end()
		c.cancelReq() // not derived from ctx (newRequestContext)
		c.nc.Close()
		c.p.remove(c)
		c.p.srv.quotas.release(c.p.ls.cfg.Name, c.info().ClientAddr.Addr()) // ClientAddr never changes
	})
}

// probeClosed is the reason of a probe's close (see peerLeft): client
// closed, told apart by its address.
var probeClosed = connregistry.CloseByClient

// peerLeft records that the client went away, if err, the error of a read
// of the connection's, says so (peerGone): the connection then closes as
// closed by its client, whoever closes it (its goroutine, the peer
// watcher, or the host answering a request with CloseConnection once the
// request's context has been cancelled), unless a reason was given
// already. The close is a probe's (a health check's, a port scan's) when
// the client never sent a byte of a request (after its PROXY header and
// TLS handshake, if any; a TLS handshake it began and left is a byte
// sent), or when the connection is the load balancer's own (a PROXY LOCAL
// header): close counts it in Stats.ProbesClosed, logs it at Debug and
// keeps it out of the registry's history; any other departure is logged
// at Debug here, as Kafka logs a disconnection. It reports whether err
// said the client went away. The connection's goroutine calls it, and so
// do the peer watcher and the writers of a pipeline's or RespondRawFrom's
// answers (writeFailed), which run only once pre.heard is set for good.
func (c *conn) peerLeft(err error) bool {
	if !peerGone(err) {
		return false
	}
	if c.pre.proxyLocal || !c.pre.heard {
		c.reason.CompareAndSwap(nil, &probeClosed) // close logs it
		return true
	}
	if r := connregistry.CloseByClient; c.reason.CompareAndSwap(nil, &r) {
		c.p.srv.log.Debug("connection closed by its client", "conn_id", c.info().ID, "err", err, "reason", string(connregistry.CloseByClient)) // as Kafka logs a disconnection
	}
	return true
}

// readFailed handles the error of a read that closes the connection
// while it waits for a request: a client that went away is recorded
// (peerLeft); any other error but the connection's close or a deadline is
// logged.
func (c *conn) readFailed(err error) {
	if !c.peerLeft(err) && !isClosedOrEOF(err) {
		c.p.srv.log.Info("closing connection", "conn_id", c.info().ID, "err", err)
	}
}

// peerGone reports whether err, a read's or a write's, says the peer went
// away: it closed its end (EOF, within a frame too), reset the
// connection, or the network lost it (TCP keepalive or retransmissions
// timed out). However it went, the client closed the connection; a
// protocol error is bytes that break the protocol, never a departure.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT)
}

// isClosedOrEOF reports whether err ends the connection without a fault of
// the client's bytes or the server's: the peer went away (peerGone), the
// connection was closed, or a deadline passed.
func isClosedOrEOF(err error) bool {
	return peerGone(err) || errors.Is(err, net.ErrClosed) || isDeadline(err)
}

// isDeadline reports whether err is a read or write deadline passing.
func isDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
