package socketserver

import (
	"net"
	"sync"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
)

// pipeline holds a connection's pipelined requests (API.Pipeline): those
// the host holds, and those answered whose answers wait for earlier ones,
// oldest first. The connection's goroutine appends (admit) and reads on;
// the goroutine that gives the oldest request's answer writes it, and the
// answers ready behind it (answer), so that answers leave in the order of
// the requests and no goroutine of the server's is woken for them. The
// connection's goroutine writes nothing while the pipeline holds a
// request: a request that does not pipeline waits until it is empty
// (await), so one goroutine writes at a time.
type pipeline struct {
	c       *conn
	mu      sync.Mutex
	queue   []*Request // oldest first
	writing bool       // a goroutine is writing answers
	closed  bool       // the connection has ended: answers are dropped
	// room is signalled (capacity 1) when a request leaves the queue or
	// the writing ends, for the connection's goroutine, its only reader.
	room chan struct{}
	// muteUntil is the end of the latest throttle of an answer written,
	// in nanoseconds since the server's epoch; the connection's goroutine
	// takes it (takeMute) and mutes the connection until then.
	muteUntil int64
}

// pipeEntry is a pipelined request's place in its connection's pipeline,
// from the server's pool (Server.pipeEntries): taken before the host has
// the request, given back once its answer has been written or dropped.
// An answer given after that is not delivered to it (claim refuses a
// second answer; one given after the connection ended finds the pipeline
// closed), so a RawRequest's pointer to it is never followed then.
type pipeEntry struct {
	ready bool   // under the pipeline's mu: answered
	a     answer // under the pipeline's mu: the answer, once ready
	held  int32  // bytes of the request's frame taken from the memory pool, given back with its answer
	q     logged // the request as the request log sees it
}

// pipeline returns the connection's pipeline, made with its first
// pipelined request. Called on the connection's goroutine.
func (c *conn) pipeline() *pipeline {
	if c.pipe == nil {
		c.pipe = &pipeline{c: c, room: make(chan struct{}, 1)}
	}
	return c.pipe
}

// signal wakes the connection's goroutine if it waits for room.
func (p *pipeline) signal() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// holds reports whether the pipeline holds a request, or an answer is
// being written.
func (p *pipeline) holds() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fullLocked(1)
}

// fullLocked reports, with mu held, whether the pipeline holds n requests
// or more; for n = 1, also whether an answer is still being written (the
// pipeline is not yet empty for the connection's own writes).
func (p *pipeline) fullLocked(n int) bool {
	return len(p.queue) >= n || n == 1 && p.writing
}

// await waits, on the connection's goroutine, until the pipeline holds
// fewer than n requests (n = 1: it is empty). It reports false when the
// connection closed meanwhile.
func (p *pipeline) await(n int) bool {
	c := p.c
	p.mu.Lock()
	for p.fullLocked(n) {
		p.mu.Unlock()
		c.endTurn() // the host may take long
		select {
		case <-p.room:
		case <-c.ctx.Done():
			return false
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return true
}

// admit adds r, a request of an API that pipelines up to n requests, to
// the pipeline before the host has it, once there is room; q is r as the
// request log sees it. The memory its frame took from the pool is now
// its own, given back with its answer. It reports false when the
// connection closed meanwhile.
func (p *pipeline) admit(r *Request, q *logged, n int) bool {
	if !p.await(n) {
		return false
	}
	c := p.c
	e, _ := c.p.srv.pipeEntries.Get().(*pipeEntry)
	if e == nil {
		e = new(pipeEntry)
	}
	e.q, e.held = *q, c.held
	c.held = 0
	r.Raw.pipe = e
	p.mu.Lock()
	p.queue = append(p.queue, r)
	p.mu.Unlock()
	return true
}

// answer takes a, the answer to r, a pipelined request. When r is the
// oldest request and no one writes, this goroutine writes a, and the
// answers ready behind it; otherwise a waits, and whoever writes the
// answer before it writes a. After the connection ended, a is dropped
// (and a RespondRawFrom that waits learns it).
func (p *pipeline) answer(r *Request, a answer) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		a.raw.release(ErrConnectionClosed)
		return
	}
	e := r.Raw.pipe
	e.a, e.ready = a, true
	if p.writing || p.queue[0] != r {
		p.mu.Unlock()
		return
	}
	p.writing = true
	for len(p.queue) > 0 && p.queue[0].Raw.pipe.ready && !p.closed && p.c.ctx.Err() == nil {
		next := p.queue[0]
		p.queue = append(p.queue[:0], p.queue[1:]...)
		p.mu.Unlock()
		p.write(next)
		p.signal()
		p.mu.Lock()
	}
	p.writing = false
	if p.closed || p.c.ctx.Err() != nil {
		p.withdrawWaitingLocked()
	}
	p.signal()
	p.mu.Unlock()
}

// withdrawWaitingLocked ends, with mu held, the waits of the
// RespondRawFrom calls whose answers the pipeline holds, once the
// connection has ended: no writer takes them any more. A call that waits
// on the connection's goroutine (an inline handler's) is woken here, not
// by close, which that goroutine would run only after it.
func (p *pipeline) withdrawWaitingLocked() {
	for _, r := range p.queue {
		if e := r.Raw.pipe; e.ready && e.a.raw != nil && e.a.raw.waiting {
			e.a.raw.release(ErrConnectionClosed)
			e.ready, e.a = false, answer{}
		}
	}
}

// write writes the answer of r, a pipelined request taken from the
// queue, with the bookkeeping of an answer the connection's goroutine
// writes (serveRequest): its memory back to the pool, the hooks and the
// request log, and a throttle, which mutes the connection from now on.
// A CloseConnection answer, or a write that fails, closes the connection.
func (p *pipeline) write(r *Request) {
	c := p.c
	e := r.Raw.pipe
	a := e.a
	defer c.p.srv.putPipeEntry(e)
	if e.held > 0 {
		c.p.ls.memory.release(int64(e.held))
		e.held = 0
	}
	e.q.throttle = a.throttle
	writeStart := time.Now()
	if a.close {
		c.setReason(connregistry.CloseByHandler)
		c.close()
		_ = r.Raw.takeBack(false, ErrAlreadyAnswered)
		c.hostDone(&e.q, r, writeStart, 0, true)
		return
	}
	sent, err := c.writeAnswer(r, &a, writeStart)
	a.raw.release(err)
	if err != nil {
		c.close()
		c.hostDone(&e.q, r, writeStart, 0, true)
		return
	}
	c.hostDone(&e.q, r, writeStart, sent, false)
	if a.throttle > 0 {
		until := int64(writeStart.Add(a.throttle).Sub(c.p.srv.epoch))
		p.mu.Lock()
		p.muteUntil = max(p.muteUntil, until)
		p.mu.Unlock()
	}
}

// takeMute returns the end of the latest throttle of an answer written
// since the last call (zero: none), on the connection's goroutine.
func (p *pipeline) takeMute() time.Time {
	p.mu.Lock()
	until := p.muteUntil
	p.muteUntil = 0
	p.mu.Unlock()
	if until == 0 {
		return time.Time{}
	}
	return p.c.p.srv.epoch.Add(time.Duration(until))
}

// awaitBody waits, on the connection's goroutine, until the host has read
// the streamed body of r, a pipelined request, or it has been answered,
// and then drops the rest: the next request's bytes come after it. It
// reports false when the connection closed meanwhile.
func (p *pipeline) awaitBody(r *Request) bool {
	if !r.Raw.streaming() {
		return true
	}
	c := p.c
	c.endTurn()
	t := time.NewTimer(streamWatchAfter)
	defer t.Stop()
	for r.Raw.streaming() {
		if answered, err := r.Raw.drainAnswered(); answered {
			return err == nil // the answer came first: the body's rest is dropped here
		}
		select {
		case <-t.C:
			t.Reset(streamWatchAfter)
		case <-p.room:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}

// close ends the pipeline of a connection that has closed, on its
// goroutine (finish): once an answer being written is, the requests left
// are dropped, as a request in flight is when its connection closes, and
// answers given later are too.
func (p *pipeline) close() {
	p.mu.Lock()
	p.closed = true
	for p.writing { // its write fails or ends soon: the connection is closed
		p.mu.Unlock()
		<-p.room
		p.mu.Lock()
	}
	left := p.queue
	p.queue = nil
	p.mu.Unlock()
	c := p.c
	now := time.Now()
	for _, r := range left {
		e := r.Raw.pipe
		_ = r.Raw.takeBack(false, net.ErrClosed)
		if e.held > 0 {
			c.p.ls.memory.release(int64(e.held))
			e.held = 0
		}
		if e.ready {
			e.a.raw.release(ErrConnectionClosed) // a RespondRawFrom that waits
		}
		c.hostDone(&e.q, r, now, 0, true)
		c.p.srv.putPipeEntry(e)
	}
}

// putPipeEntry gives e back to the pool, keeping nothing of its request.
func (s *Server) putPipeEntry(e *pipeEntry) {
	*e = pipeEntry{}
	s.pipeEntries.Put(e)
}
