package socketserver

import (
	"math"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
)

// A request still arriving is not idle. connections.max.idle.ms counts
// from the connection's last activity: a complete request, a response's
// write, and, while a frame arrives, the bytes of the frame. Kafka's
// Selector counts any byte read; here the bytes of a frame count as long
// as they keep a pace of Config.RequestMinByteRate (the floor), so that a
// frame that trickles slower, a slowloris, is still closed at the limit,
// with a reason of its own (connregistry.CloseSlowRequest).
//
// The pace is a credit of time: when the frame's reading first has to wait
// for the socket (beginArrival, in nextFrame: a frame that came whole with
// an earlier read never does), the credit is set to now, and the
// connection is active; each read of the socket that brings bytes of the
// frame adds a second for every floor's worth of them (arrived), but
// never past connections.max.idle.ms ahead of now. A read that finds the
// credit at or ahead of now keeps the connection active (as touch, at most
// every eighth of the limit); one that finds it behind does not, and
// marks the frame behind: expired at the limit, the connection is closed
// as too slow (expiryReason). A frame that stops arriving altogether is
// closed at the limit as idle, as before. So a frame that averages the
// floor or more since its first wait is never idle, and no more than the
// limit's worth of credit from a fast start carries a frame that then
// slows down. The reads counted are the socket's (socketReader): over TLS
// a record's bytes count as they arrive.
//
// Over TLS, the first bytes of a request come inside a record that
// awaitRequest's read waits for whole: a TLS connection waiting for a
// request marks its pace paceAwaiting (awaitArrival), so that the first
// bytes its socket brings begin the arrival.
//
// A streamed body (API.StreamAbove) is the rest of its frame: its reads,
// on the host's goroutine, count the same way until it has been read
// whole (RawRequest), and the host may tighten them with a deadline
// (RawRequest.SetReadDeadline), never loosen them.
//
// conn.pace holds the credit, in nanoseconds since the server's epoch:
// positive when the frame kept its pace at its last read, negated when it
// fell behind, 0 while no frame is tracked (paceAwaiting: see above). Only the reader of the
// connection writes it (the connection's goroutine, or the host's reading
// a streamed body); the processor reads it when it expires the
// connection.

// paceAwaiting is conn.pace while a TLS connection waits for a request:
// the next bytes its socket brings begin the request's arrival.
const paceAwaiting = math.MaxInt64

// beginArrival starts counting the arrival of the frame being read, whose
// reading has to wait for the socket: its first bytes are activity. It
// does nothing without an idle limit, or when the frame is tracked
// already.
func (c *conn) beginArrival() {
	if c.p.srv.cfg.ConnectionsMaxIdle > 0 {
		if p := c.pace.Load(); p == 0 || p == paceAwaiting {
			c.startArrival()
		}
	}
}

// startArrival sets the credit to now and records the activity.
func (c *conn) startArrival() {
	now := max(int64(time.Since(c.p.srv.epoch)), 1) // 0 is "none"
	c.pace.Store(now)
	if now > c.active.Load() { // a mute's activity may lie ahead (see mute)
		c.active.Store(now)
	}
}

// awaitArrival marks a TLS connection that is about to wait for its next
// request (see above).
func (c *conn) awaitArrival() {
	if c.p.srv.cfg.ConnectionsMaxIdle > 0 && c.pace.Load() == 0 {
		c.pace.Store(paceAwaiting)
	}
}

// endArrival ends the count: the frame has been read whole, or can no
// longer be, or the wait for one has ended without it.
func (c *conn) endArrival() {
	if c.pace.Load() != 0 {
		c.pace.Store(0)
	}
}

// arrived counts n bytes of the frame being read, just read from the
// socket (see above).
func (c *conn) arrived(n int) {
	credit := c.pace.Load()
	if credit == paceAwaiting {
		c.startArrival()
		return
	}
	srv := c.p.srv
	now := int64(time.Since(srv.epoch))
	idle := int64(srv.cfg.ConnectionsMaxIdle)
	if credit < 0 {
		credit = -credit
	}
	if rate := srv.cfg.RequestMinByteRate; rate > 0 {
		credit = min(credit+int64(n)*int64(time.Second)/int64(rate), now+idle)
	} else { // no floor: every byte counts, as in Kafka
		credit = now
	}
	if credit < now {
		c.pace.Store(-credit)
		return
	}
	c.pace.Store(credit)
	if now-c.active.Load() >= idle/8 {
		c.active.Store(now)
	}
}

// expiryReason is why the processor closes a connection it found idle:
// CloseSlowRequest when the frame it was reading had fallen behind the floor
// at its last read, CloseIdle otherwise.
func (c *conn) expiryReason() connregistry.CloseReason {
	if c.pace.Load() < 0 {
		return connregistry.CloseSlowRequest
	}
	return connregistry.CloseIdle
}
