package main

import (
	"context"
	"errors"
	"io"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// This file is the per-request path: a client's request goes to its
// session's upstream connection, and upstream's answer back to the client.
// Each client connection has an upstream connection of its own; sharing
// upstream connections among clients was weighed and left out
// (docs/proxy.md, "Upstream connections").
//
// A request is written upstream on the client connection's own goroutine
// (the inline handler) when that can be done at once, and otherwise by
// the session's writer (writer.go), so that the handler never holds its
// inline slot (one of queued.max.requests) while a peer stalls. The APIs
// forwarded raw are pipelined (socketserver's API.Pipeline,
// pipelineDepth): the handler returns once the request is upstream or
// handed to the writer, the socket server reads the client's next one,
// and a goroutine of the upstream connection's reads the answers as they
// come, in order, and hands each to the socket server, which writes it to
// the client on that goroutine (pipeline.go); it waits a while for the
// next before it ends. So a client that keeps requests in flight, a
// producer above all, has them forwarded as it sends them, as a TCP relay
// would, and upstream's answers go back as they come. An acks=0 Produce
// has no answer: it is answered at once.
//
// The decoded APIs (those whose answers name brokers) are served one at a
// time: the socket server hands one over only once every pipelined
// request has been answered. Its answer is awaited on the client
// connection's goroutine, for inlineWait at most: most come sooner, and are
// read and written by the same goroutine, with no other woken for them.
// An answer that has not begun by then (a JoinGroup waiting for its group,
// a stalled broker) is awaited by a goroutine of its own, so that the
// connection's inline slot (one of queued.max.requests) is given back while
// upstream holds the request.

// forward is the Handler of every forwarded API. It runs on the client
// connection's goroutine (API.Inline).
func (p *proxy) forward(r *socketserver.Request) {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	if s == nil { // not a data listener: not reached, the admin listener forwards nothing
		_ = r.CloseConnection()
		return
	}
	s.mu.Lock()
	if s.doomed || s.ended {
		s.mu.Unlock()
		s.refuse(r, false)
		return
	}
	s.inFlight++
	if !s.watched {
		s.watched = true
		context.AfterFunc(r.Context(), s.end)
	}
	s.mu.Unlock()
	p.mu.Lock()
	stopped := p.stopped
	if !stopped {
		p.work.Add(1)
	}
	p.mu.Unlock()
	if stopped {
		_ = r.CloseConnection()
		return
	}
	defer p.work.Done()
	s.serve(r)
}

// inlineWait is how long the client connection's goroutine may spend on
// a request: writing it upstream (the writer writes the rest: writer.go),
// and waiting for the first bytes of a decoded request's answer (then a
// goroutine of its own waits).
const inlineWait = 10 * time.Millisecond

// serve forwards r: written upstream at once on the client connection's
// goroutine when it can be (inline), or by the session's writer, which
// the rest of an inline write that did not end within inlineWait is
// handed to too; then answered (sent). Whatever goes wrong upstream (the
// broker cannot be reached, goes away, stalls, or sends what does not
// decode), the client's connection is closed, so that the client
// reconnects and refreshes its metadata: a response is never invented,
// and one that was not read whole is never answered.
func (s *session) serve(r *socketserver.Request) {
	defer s.recoverPanic(r)
	up := s.inline(r)
	if up == nil { // the writer's
		return
	}
	if r.Raw == nil {
		up.awaitAnswers() // the goroutine that read the pipelined answers may linger in a read
	}
	o := outgoing{r: r, corr: up.prepare(r), deadline: time.Now().Add(s.p.set.writeTimeout)}
	wait := time.Now().Add(inlineWait)
	if o.deadline.Before(wait) {
		wait = o.deadline
	}
	if err := up.flush(wait); isTimeout(err) { // upstream takes it slowly: the writer goes on
		o.begun = true
		s.mu.Lock()
		s.handOffLocked(o)
		s.mu.Unlock()
		return
	} else if err != nil {
		s.failed(r, up, err)
		return
	}
	s.sent(o, up, true)
}

// await waits until upstream's answer to r begins to arrive, until
// deadline at the latest (zero: no limit); a deadline that passes leaves
// an error whose Timeout is true, and await may be called again. For a
// raw request it reads the answer's head.
func (s *session) await(r *socketserver.Request, up *upConn, deadline time.Time) error {
	if r.Raw != nil {
		return up.readHead(headLen(r.Raw), deadline)
	}
	return up.await(deadline)
}

// answer reads upstream's answer to r and answers r with it: for a
// decoded request, whose correlation id upstream was corr, the answer
// decoded and its broker addresses rewritten.
func (s *session) answer(r *socketserver.Request, up *upConn, corr int32) {
	if r.Raw != nil {
		s.answerRaw(r, up)
		return
	}
	resp, err := up.answer(r.Body, corr)
	if err != nil {
		s.failed(r, up, err)
		return
	}
	s.respond(r, resp)
}

// respond answers r with resp, a decoded answer from upstream, once its
// broker addresses are rewritten.
func (s *session) respond(r *socketserver.Request, resp kmsg.Response) {
	rewrite(resp, s.l, &s.cluster().book)
	s.done()
	if err := r.Respond(resp); err != nil {
		s.p.log.Error("cannot answer a forwarded request", "conn_id", s.id, "api_key", r.APIKey, "err", err)
		_ = r.CloseConnection()
	}
}

// done notes that the session's request has been answered. The last
// request in flight of a session whose broker went away (closeIdle) is
// followed by its connection's close, once the answer has had
// answerGrace to reach the client.
func (s *session) done() {
	s.mu.Lock()
	s.inFlight = max(s.inFlight-1, 0)
	s.answered = time.Now()
	closeAfter := s.brokerDown && s.inFlight == 0 && !s.ended
	s.mu.Unlock()
	if closeAfter {
		s.p.closeIdleAfterGrace([]*session{s})
	}
}

// failed ends r, whose forwarding through up failed with err: up is
// dropped and the client's connection closed, for upstreamCloseReason
// when its broker went away or the connection to it was lost (the
// client reconnects and refreshes its metadata), else as the handler's
// close (an answer that is not what was asked for, say).
func (s *session) failed(r *socketserver.Request, up *upConn, err error) {
	if r.Context().Err() != nil { // the client went away: its close is the reason
		s.drop(up)
		_ = r.CloseConnection()
		return
	}
	s.p.log.Info("the upstream connection failed; closing the client connection", "conn_id", s.id, "upstream", up.addr,
		"api_key", r.APIKey, "api_version", r.APIVersion, "err", err)
	s.mu.Lock()
	down := s.brokerDown
	s.mu.Unlock()
	if down || upstreamLost(err) {
		s.closeFor(upstreamCloseReason, up)
	} else {
		s.drop(up)
	}
	_ = r.CloseConnection()
}

// refuse answers r, a request of a session that is doomed or has ended,
// by closing the connection, without forwarding it (counted: r is among
// the session's inFlight). When its broker went away (closeIdle), the
// close is for upstreamCloseReason, as the listings promise: at once when
// no answer is on its way to the client; else r is held until the
// connection closes (end), which the last answer brings about (done), or,
// when the last answer has just been handed over, a close after its grace
// (closeIdleAfterGrace), so that the answers before r reach the client
// first, as they would ahead of a close.
func (s *session) refuse(r *socketserver.Request, counted bool) {
	s.mu.Lock()
	if counted {
		s.inFlight = max(s.inFlight-1, 0)
	}
	down := s.brokerDown && !s.ended
	if down && s.watched && (s.inFlight > 0 || time.Since(s.answered) <= answerGrace) {
		s.held = append(s.held, r)
		answeredAll := s.inFlight == 0 // no later done will close it
		s.mu.Unlock()
		if answeredAll {
			s.p.closeIdleAfterGrace([]*session{s})
		}
		return
	}
	s.mu.Unlock()
	if down {
		s.closeFor(upstreamCloseReason, nil)
	}
	_ = r.CloseConnection()
}

// upstreamLost reports whether err says that the upstream connection was
// lost: the broker closed it (EOF) or reset it, or a write found it gone.
// The proxy's own close of the connection (net.ErrClosed) is not.
func upstreamLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// recoverPanic, deferred, closes r's connection after a panic in its
// forwarding, which it logs.
func (s *session) recoverPanic(r *socketserver.Request) {
	if v := recover(); v != nil {
		s.p.log.Error("forwarding panicked; closing the client connection", "conn_id", s.id, "api_key", r.APIKey,
			"api_version", r.APIVersion, "panic", v, "stack", string(debug.Stack()))
		s.drop(nil)
		_ = r.CloseConnection()
	}
}
