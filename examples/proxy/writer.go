package main

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
)

// This file is how a request gets upstream without holding what every
// client shares. The forwarding handler runs inline, on the client
// connection's goroutine, in one of the queued.max.requests slots that
// every client's forwarding shares, so it must not wait on a peer. It
// writes a request upstream itself only when the write can begin at once
// (the session's upstream connection is open and plain TCP, its writer
// idle, no SASL renewal due, the request read whole), and gives the write
// inlineWait at most, as it gives a decoded request's answer (forward.go).
// Everything else is the session's writer's, and so is the rest of a write
// that did not end by then: a goroutine that writes the session's
// requests upstream in order, dialing first, renewing the proxy's SASL
// session when due, and moving a streamed body from the client's socket
// to upstream's as it arrives; once none is left, it waits a while for the
// next (the proxy's answerLinger, as the goroutine that reads the answers
// does), so that a producer's streamed requests, every one the writer's,
// are written by one goroutine rather than by one started for each (which
// costs the goroutine and the growth of its stack, to the depth of a
// splice), then ends. The handler returns as soon as the request is
// handed over.
//
// Deadlines bound what the writer waits for: a request's writing (a
// streamed body's arrival included) ends within upstream.write.timeout.ms
// of its beginning, a dial and a renewal within
// upstream.socket.connection.setup.timeout.ms. One that passes closes the
// client's connection, with a reason that says which (below, and
// upstreamCloseReason for a dial), and drops the upstream connection.
//
// The writer's queue is bounded by the socket server: it holds at most
// pipelineDepth raw requests of a connection at once, and hands a decoded
// one over only once every pipelined one has been answered.

// Why the proxy closes a client connection whose forwarding passed its
// deadline.
const (
	// upstreamTimeoutReason: the upstream broker did not take a request
	// read whole within upstream.write.timeout.ms, or did not finish the
	// proxy's SASL renewal within
	// upstream.socket.connection.setup.timeout.ms.
	upstreamTimeoutReason connregistry.CloseReason = "upstream-timed-out"
	// forwardTimeoutReason: a streamed request (a Produce over 64 KiB)
	// did not get from the client to upstream within
	// upstream.write.timeout.ms: the client sent its body too slowly, or
	// upstream stopped reading it (the bytes go socket to socket: which
	// one stalled is not known).
	forwardTimeoutReason connregistry.CloseReason = "request-forwarding-timed-out"
)

// outgoing is a request on its way upstream.
type outgoing struct {
	r        *socketserver.Request
	corr     int32     // a decoded request's correlation id upstream (prepare)
	begun    bool      // written in part inline: the rest is in the upstream connection's bufs
	deadline time.Time // when its writing must have ended; set when it begins
}

// inline returns the session's upstream connection when r may be written
// on the client connection's goroutine (see above); otherwise it hands r
// to the session's writer and returns nil.
func (s *session) inline(r *socketserver.Request) *upConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked in this order: reauth is the writer's while it runs.
	if up := s.up; !s.writing && up != nil && up.rc != nil && !up.renewDue() && (r.Raw == nil || !r.Raw.Streamed()) {
		return up
	}
	s.handOffLocked(outgoing{r: r})
	return nil
}

// handOffLocked queues o for the session's writer, starting it if it does
// not run and waking it if it waits; s.mu is held.
func (s *session) handOffLocked(o outgoing) {
	s.queue = append(s.queue, o)
	s.writing = true
	if !s.writer {
		s.writer = true
		s.p.work.Add(1) // the caller's is held until this returns
		go s.writeQueued()
		return
	}
	s.wakeWriterLocked()
}

// wakeWriterLocked wakes the session's writer if it waits for a request
// (writeQueued); s.mu is held.
func (s *session) wakeWriterLocked() {
	if !s.writerIdle {
		return
	}
	if s.wake == nil {
		s.wake = make(chan struct{}, 1)
	}
	select {
	case s.wake <- struct{}{}:
	default: // woken already
	}
}

// writeQueued is the session's writer: it forwards the queued requests in
// order and, once none is left, waits answerLinger for the next, then
// ends; it ends at once when the session has.
func (s *session) writeQueued() {
	defer s.p.work.Done()
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	s.mu.Lock()
	for {
		if len(s.queue) == 0 {
			s.writing = false
			if s.ended || !s.awaitQueued(&linger) {
				s.writer = false
				s.mu.Unlock()
				return
			}
			continue
		}
		o := s.queue[0]
		n := copy(s.queue, s.queue[1:])
		s.queue[n] = outgoing{}
		s.queue = s.queue[:n]
		s.mu.Unlock()
		s.forwardQueued(o)
		s.mu.Lock()
	}
}

// awaitQueued, with s.mu held, waits until a request is queued, the
// session ends or answerLinger passes (with s.mu held again), and
// reports whether a request is queued.
func (s *session) awaitQueued(linger **time.Timer) bool {
	if s.wake == nil {
		s.wake = make(chan struct{}, 1)
	}
	if *linger == nil {
		*linger = time.NewTimer(s.p.answerLinger)
	} else {
		(*linger).Reset(s.p.answerLinger)
	}
	s.writerIdle = true
	s.mu.Unlock()
	select {
	case <-s.wake:
	case <-(*linger).C:
	}
	s.mu.Lock()
	s.writerIdle = false
	select {
	case <-s.wake: // a wake-up that came as the timer fired
	default:
	}
	return len(s.queue) > 0
}

// forwardQueued forwards o on the writer: it dials upstream on the
// session's first request, renews the SASL session when due, writes the
// request, and goes on as the handler would have (sent).
func (s *session) forwardQueued(o outgoing) {
	r := o.r
	defer s.recoverPanic(r)
	s.mu.Lock()
	gone := s.doomed || s.ended
	s.mu.Unlock()
	if gone { // an earlier request failed, its broker went away, or the client went away
		s.refuse(r, true)
		return
	}
	up, err := s.conn(r.Context(), r.Conn.ServerName)
	if err != nil {
		s.unreachable(r, err)
		return
	}
	if !o.begun {
		if r.Raw == nil || up.renewDue() {
			// A decoded request's answer, and a renewal's exchange, are
			// read here: not by the goroutine that reads the pipelined
			// answers, which may linger in a read.
			up.awaitAnswers()
		}
		if err := up.renew(r.Context()); err != nil {
			if isTimeout(err) {
				s.timedOut(r, up, upstreamTimeoutReason, "the upstream broker did not finish the proxy's SASL renewal within "+keyUpstreamSetupTimeout, err)
			} else {
				s.failed(r, up, err)
			}
			return
		}
		o.corr = up.prepare(r)
		o.deadline = time.Now().Add(s.p.set.writeTimeout)
	}
	if r.Raw != nil && r.Raw.Streamed() {
		if timedOut, err := s.stream(o, up); timedOut {
			s.timedOut(r, up, forwardTimeoutReason, "the client's streamed request did not reach the upstream broker within "+keyUpstreamWriteTimeout, err)
			return
		} else if err != nil {
			s.failed(r, up, err)
			return
		}
	} else if err := up.flush(o.deadline); isTimeout(err) {
		s.timedOut(r, up, upstreamTimeoutReason, "the upstream broker did not take a request within "+keyUpstreamWriteTimeout, err)
		return
	} else if err != nil {
		s.failed(r, up, err)
		return
	}
	s.sent(o, up, false)
}

// stream writes o's request, whose body is streamed, through up: its head,
// then its body from the client's socket as it arrives (socket to socket).
// o's deadline bounds both: when it passes, the client's connection closes
// (forwardTimeoutReason) and up with it, which ends the copy, and stream
// reports timedOut.
func (s *session) stream(o outgoing, up *upConn) (timedOut bool, err error) {
	closed := make(chan struct{})
	t := time.AfterFunc(time.Until(o.deadline), func() {
		defer close(closed)
		s.closeFor(forwardTimeoutReason, up)
	})
	cork(up.rc, true) // the head and the body's first bytes are written apart from the rest
	if err = up.flush(time.Time{}); err == nil {
		_, err = o.r.Raw.WriteTo(up.nc)
	}
	cork(up.rc, false)
	if !t.Stop() {
		<-closed // the reason is given before the request is answered
		return true, err
	}
	return false, err
}

// sent goes on with r, forwarded through up, as its API wants: an acks=0
// Produce is answered at once, the answer to a raw request is read by the
// goroutine that reads up's pipelined answers, and a decoded request's
// answer is awaited here, on the client connection's goroutine (inline)
// for inlineWait at most, then by a goroutine of its own.
func (s *session) sent(o outgoing, up *upConn, inline bool) {
	r := o.r
	if r.Raw != nil && !r.Raw.ExpectsResponse() || r.Body != nil && !expectsResponse(r.Body) {
		s.done()
		_ = r.NoResponse()
		return
	}
	if r.Raw != nil { // pipelined (pipelineDepth): the client's next request is read while upstream answers this one
		s.pipeline(r, up)
		return
	}
	if !inline { // the writer: nothing is queued behind a decoded request
		if err := s.await(r, up, time.Time{}); err != nil {
			s.failed(r, up, err)
			return
		}
		s.answer(r, up, o.corr)
		return
	}
	err := s.await(r, up, time.Now().Add(inlineWait))
	if isTimeout(err) && r.Context().Err() == nil {
		s.p.work.Add(1) // the caller's is held until this returns
		go func() {
			defer s.p.work.Done()
			defer s.recoverPanic(r)
			if err := s.await(r, up, time.Time{}); err != nil {
				s.failed(r, up, err)
				return
			}
			s.answer(r, up, o.corr)
		}()
		return
	}
	if err != nil {
		s.failed(r, up, err)
		return
	}
	s.answer(r, up, o.corr)
}

// unreachable ends r, for which no upstream connection could be had
// (err): the client's connection closes, for upstreamCloseReason when the
// broker could not be reached in time or refused, so that the client
// reconnects and refreshes its metadata.
func (s *session) unreachable(r *socketserver.Request, err error) {
	if r.Context().Err() == nil {
		level := slog.LevelInfo
		if errors.Is(err, errNodeDown) { // said once, when its watch lost it
			level = slog.LevelDebug
		}
		s.p.log.Log(r.Context(), level, "cannot reach the upstream broker; closing the client connection", "conn_id", s.id,
			"server_name", r.Conn.ServerName, "node", s.target, "err", err)
	}
	if errors.Is(err, errNoCluster) && r.Context().Err() == nil {
		s.p.auditRefused(r.Conn, err)
	}
	if errors.Is(err, errNoCluster) || r.Context().Err() != nil {
		s.drop(nil)
	} else {
		s.closeFor(upstreamCloseReason, nil)
	}
	_ = r.CloseConnection()
}

// timedOut ends r, whose forwarding through up passed its deadline (what
// says which, err how it showed): the client's connection closes for
// reason (if it has not yet), and up is dropped.
func (s *session) timedOut(r *socketserver.Request, up *upConn, reason connregistry.CloseReason, what string, err error) {
	s.p.log.Info("forwarding timed out; closing the client connection", "conn_id", s.id, "upstream", up.addr,
		"api_key", r.APIKey, "api_version", r.APIVersion, "reason", string(reason), "why", what, "err", err)
	s.closeFor(reason, up)
	_ = r.CloseConnection()
}

// closeFor closes the session's client connection for reason, through the
// server's registry (the first reason given is the one listed), and drops
// up (nil: the current upstream connection).
func (s *session) closeFor(reason connregistry.CloseReason, up *upConn) {
	s.p.srv.Registry().Close(connregistry.Filter{ConnectionIDs: []string{s.id}}, reason)
	s.drop(up)
}

// prepare sets u.bufs to what flush writes of r: its whole frame, or for
// a streamed request its size and header (its body follows from the
// client's socket). A decoded request is encoded with the next
// correlation id of u's, which prepare returns.
func (u *upConn) prepare(r *socketserver.Request) int32 {
	if r.Raw == nil {
		u.corr++
		u.buf = appendRequest(u.buf[:0], r.Body, u.corr, r.ClientID)
		u.iov[0] = u.buf
		u.bufs = u.iov[:1]
		return u.corr
	}
	raw := r.Raw
	binary.BigEndian.PutUint32(u.size[:], uint32(r.Size))
	if u.rc != nil { // plain TCP: one writev, the bytes where they are
		u.iov = [3][]byte{u.size[:], raw.Header(), raw.Body()}
		u.bufs = u.iov[:] // WriteTo consumes bufs, not iov
		return 0
	}
	// TLS: one record.
	u.buf = append(append(append(u.buf[:0], u.size[:]...), raw.Header()...), raw.Body()...)
	u.iov[0] = u.buf
	u.bufs = u.iov[:1]
	return 0
}

// flush writes u.bufs (prepare), by deadline (zero: none). A write that
// times out (isTimeout) leaves in u.bufs what it did not write, and flush
// may be called again to write the rest; any other error leaves u
// unusable. Once all is written, u keeps none of the client's bytes.
func (u *upConn) flush(deadline time.Time) error {
	_ = u.nc.SetWriteDeadline(deadline)
	var err error
	if tc, ok := u.nc.(*net.TCPConn); ok {
		_, err = u.bufs.WriteTo(tc)
	} else {
		for len(u.bufs) > 0 && err == nil {
			var n int
			n, err = u.nc.Write(u.bufs[0])
			if u.bufs[0] = u.bufs[0][n:]; len(u.bufs[0]) == 0 {
				u.bufs = u.bufs[1:]
			}
		}
	}
	if err != nil {
		return err
	}
	u.iov, u.bufs = [3][]byte{}, nil
	if cap(u.buf) > 64<<10 { // a large request: do not keep its buffer
		u.buf = nil
	}
	return nil
}
