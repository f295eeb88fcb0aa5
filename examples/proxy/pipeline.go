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
	}
	up.mu.Unlock()
}

// readAnswers reads up's answers, in order, and answers the pipelined
// requests they are for, until none is awaited. An answer's writing to the
// client happens here, in RespondRaw or RespondRawFrom (the socket server
// writes a pipelined request's answer on the goroutine that gives it when
// the answers before it have been written), so the next answer is read
// once the last has gone. A failure closes the client's connection and
// up; the requests still awaited then fail at once, on up's closed socket.
func (s *session) readAnswers(up *upConn) {
	defer s.p.work.Done()
	for {
		up.mu.Lock()
		if len(up.pending) == 0 {
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
		up.mu.Unlock()
	}
}

// answerPipelined awaits and forwards the answer to r, a pipelined request.
func (s *session) answerPipelined(r *socketserver.Request, up *upConn) {
	defer s.recoverPanic(r)
	up.headN = 0 // the head of this answer is yet to read
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

// awaitAnswers waits until no pipelined request's answer is awaited on u,
// so that a round trip of the proxy's own (a renewal) reads its own answer.
func (u *upConn) awaitAnswers() {
	u.mu.Lock()
	for u.reading {
		u.idle.Wait()
	}
	u.mu.Unlock()
}
