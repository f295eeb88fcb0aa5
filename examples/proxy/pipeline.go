package main

import (
	"time"

	"github.com/kafkanet/kafkanet/socketserver"
)

// pipelineDepth is how many raw requests of a client connection the proxy
// holds at once (socketserver's API.Pipeline): Kafka's clients keep up to
// max.in.flight.requests.per.connection in flight, 5 by default, and an
// idempotent producer no more.
const pipelineDepth = 5

// defaultAnswerLinger is how long the goroutine that reads an upstream
// connection's answers waits for the next one once none is awaited: a
// client that keeps sending (a producer, a consumer's fetches) has its
// answers read by one goroutine, already waiting in the socket's read when
// the answer comes, rather than by one started for each request.
const defaultAnswerLinger = 500 * time.Millisecond

// lingerHead is the head read while no request awaits an answer: its size
// and correlation id, the part every answer's head has (headLen).
const lingerHead = 8

// pipeline queues r, a raw request written upstream through up whose
// answer is awaited, and starts the goroutine that reads up's answers if
// none runs. The client connection's goroutine goes on reading the
// client's next request meanwhile.
func (s *session) pipeline(r *socketserver.Request, up *upConn) {
	up.mu.Lock()
	up.pending = append(up.pending, r)
	if !up.reading {
		up.reading = true
		s.p.work.Add(1) // the caller's is held until this returns
		go s.readAnswers(up)
	} else {
		up.queued.Signal() // a head read while none was awaited is this answer's
	}
	up.mu.Unlock()
}

// readAnswers reads up's answers, in order, and answers the pipelined
// requests they are for. An answer's writing to the client happens here,
// in RespondRaw or RespondRawFrom (the socket server writes a pipelined
// request's answer on the goroutine that gives it when the answers before
// it have been written), so the next answer is read once the last has
// gone. When none is awaited it waits a while for the next (linger), then
// ends. A failure closes the client's connection and up; the requests
// still awaited then fail at once, on up's closed socket.
func (s *session) readAnswers(up *upConn) {
	defer s.p.work.Done()
	for {
		up.mu.Lock()
		if len(up.pending) == 0 && !s.linger(up) {
			up.reading = false
			up.idle.Broadcast()
			up.mu.Unlock()
			return
		}
		r := up.pending[0]
		up.mu.Unlock()
		s.answerPipelined(r, up)
		up.mu.Lock()
		up.pending[0] = nil
		up.pending = up.pending[1:]
		up.headN = 0 // the next answer's head is yet to read
		up.mu.Unlock()
	}
}

// linger, with up.mu held and no answer awaited, waits the proxy's
// answerLinger for the head of the next answer and reports whether a
// request awaits one (with up.mu held again). It reports false when none
// came, when awaitAnswers stops it (the proxy reads the next answer
// itself), and when up fails or sends bytes no request awaits: then up is
// closed, and a request queued meanwhile fails on it.
func (s *session) linger(up *upConn) bool {
	if up.stop {
		return false
	}
	// Deadlines are set with up.mu held, so that awaitAnswers' comes after
	// them.
	_ = up.nc.SetReadDeadline(time.Now().Add(s.p.answerLinger))
	up.lingering = true
	extended := false
	var err error
	for {
		up.mu.Unlock()
		err = up.fillHead(lingerHead)
		up.mu.Lock()
		if err == nil || !isTimeout(err) || up.headN == 0 {
			break
		}
		// Part of a head has come.
		if len(up.pending) > 0 { // the answer of a request queued since: read its head whole
			_ = up.nc.SetReadDeadline(time.Time{})
			continue
		}
		if !up.stop && !extended { // its request may be being queued: a while more
			extended = true
			_ = up.nc.SetReadDeadline(time.Now().Add(s.p.answerLinger))
			continue
		}
		break // no request awaits it
	}
	up.lingering = false
	if err == nil {
		_ = up.nc.SetReadDeadline(time.Time{})
		for len(up.pending) == 0 && !up.stop && !up.closed {
			up.queued.Wait() // its request is being queued (pipeline)
		}
	}
	if err == nil && len(up.pending) > 0 || err != nil && up.headN == 0 {
		// An answer to read, or none came (its request may have been
		// queued since: its answer is read without a deadline), or up
		// failed between answers (the request fails on it).
		_ = up.nc.SetReadDeadline(time.Time{})
		return len(up.pending) > 0
	}
	// Bytes no request awaits (the client's requests were all answered
	// when awaitAnswers stopped the wait, or none was sent), or an
	// answer's head cut short.
	up.mu.Unlock()
	s.drop(up)
	up.mu.Lock()
	up.headN = 0 // a request queued meanwhile reads from the closed socket, not these bytes
	return len(up.pending) > 0
}

// answerPipelined awaits and forwards the answer to r, a pipelined
// request, whose head linger may have begun to read.
func (s *session) answerPipelined(r *socketserver.Request, up *upConn) {
	defer s.recoverPanic(r)
	if err := s.await(r, up, time.Time{}); err != nil {
		s.failed(r, up, err)
		return
	}
	s.answer(r, up, 0)
}

// renewDue reports whether u's SASL session is to be renewed before the
// next request (KIP-368).
func (u *upConn) renewDue() bool {
	return !u.reauth.IsZero() && time.Now().After(u.reauth)
}

// awaitAnswers waits until no pipelined request's answer is awaited on u
// and no goroutine reads u (one lingering in a read is stopped), so that
// a request of the proxy's own (a renewal) or a decoded one reads its own
// answer.
func (u *upConn) awaitAnswers() {
	u.mu.Lock()
	if u.reading {
		u.stop = true
		if u.lingering {
			_ = u.nc.SetReadDeadline(time.Unix(1, 0)) // the lingering read returns at once
		}
		u.queued.Broadcast()
		for u.reading {
			u.idle.Wait()
		}
		u.stop = false
	}
	u.mu.Unlock()
}
