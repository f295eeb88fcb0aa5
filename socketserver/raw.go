package socketserver

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
)

// ErrConnectionClosed is returned by Request.RespondRawFrom when the
// request's connection closed before the response was begun: nothing was
// read from the source, which is as it was.
var ErrConnectionClosed = errors.New("socketserver: the request's connection has closed")

const produceKey = 0

// RawRequest is a request of an API served raw (API.Raw), as the client
// sent it: its header, whose fields the Request carries decoded as well
// (APIKey, APIVersion, CorrelationID, ClientID), and its body, undecoded.
// A proxy forwards it as it is, and answers with its upstream's response
// ([Request.RespondRawFrom]):
//
//	raw := r.Raw
//	size := binary.BigEndian.AppendUint32(nil, uint32(r.Size))
//	hdr := raw.Header() // the correlation id is hdr[4:8], to rewrite if need be
//	bufs := net.Buffers{size, hdr, raw.Body()} // Body is nil when streamed
//	_, err := bufs.WriteTo(upstream)
//	if err == nil && raw.Streamed() {
//		_, err = io.Copy(upstream, raw) // socket to socket (splice) on Linux
//	}
//
// The header's and body's bytes are the frame's, read once and never
// reused by the server: the host may keep them, or change them (the
// correlation id), as its own, after it has answered too.
//
// A RawRequest is an io.Reader and an io.WriterTo over the body. A body
// read whole is in memory (Body) and stays readable after the answer.
// A streamed body (API.StreamAbove) is in the connection's socket, but for
// the bytes read with the header: the host reads it (Read, WriteTo) as it
// moves it, while the connection waits for the answer. WriteTo, which
// io.Copy calls, moves it from the client's socket to w without a copy
// through user space (splice, on Linux) when the client's connection is
// plaintext TCP and w is a *net.TCPConn, through a pooled buffer
// otherwise. Reads are serialised, and end with the answer: reading after
// it fails with ErrAlreadyAnswered. The host may read the body on any
// goroutine, after its handler (an inline one too) has returned. The
// connection's next request is read only after the body, as soon as it
// has been read whole (for a pipelined request, API.Pipeline, while the
// host still holds it): when the host answers before reading it all, the
// server reads the rest and drops it. A read of the connection that fails
// (the client closed, sent too little, or Shutdown drained the connection,
// as it ends a frame still arriving) closes the connection, and the host's
// answer is dropped; the bytes the failure leaves unread, or lost between
// the sockets of a WriteTo, are never read as a request. While the host
// reads, the reads watch the client (a client that goes away fails them);
// once the body has been read whole, Request.Context is cancelled when
// the client goes away, as for any request. A streamed body takes no
// request memory (queued.max.request.bytes) but for what was read with the
// header: a host that gathers it bounds its own.
//
// A streamed body is the rest of its frame for connections.max.idle.ms:
// its bytes keep the connection active while they arrive at the server's
// floor (Config.RequestMinByteRate) or faster, read or spliced; a body
// that arrives slower is closed at the limit, failing the host's read,
// with the reason connregistry.CloseSlowRequest. The host may tighten this
// with SetReadDeadline, never loosen it.
//
// Experimental: proven by one host so far (examples/proxy); it may change
// or go in a minor release, as CONTRIBUTING.md says.
type RawRequest struct {
	frame   []byte // the header, then the body's bytes read with it: the whole body, or a streamed body's first bytes
	tagsAt  int    // where the header's tagged fields begin; hdrLen when the header has none
	hdrLen  int
	bodyLen int // the whole body's length
	pos     int // the body's bytes read (Read, WriteTo) or drained

	// A streamed body: the rest is read from the connection's read buffer
	// and socket on the host's goroutine while the connection's goroutine
	// waits for the answer, under mu; the connection takes the read side
	// back (takeBack) before any read of its own.
	c        *conn         // nil when the body is in memory
	mu       sync.Mutex    // held by each read of the connection for the body, and by takeBack
	closed   error         // under mu: why the body can no longer be read; nil while it can
	deadline time.Duration // under mu: the host's deadline for the body (SetReadDeadline), from the server's epoch; 0 for none

	expects  bool         // a response is expected: not a Produce with acks=0
	flexible bool         // the response header has a tag section (v1)
	failed   bool         // under mu: a read of the connection failed (closed is its error): the connection closes
	done     atomic.Bool  // the body has been read whole, or can no longer be: the connection's reads no longer wait on the host's
	answered atomic.Bool  // the request has been answered: the host's reads fail
	stage    atomic.Int32 // RespondRawFrom's handover: rawHeld, rawInline, ...

	// answer is RespondRaw's and RespondRawFrom's bytes; its lr and wo
	// serve WriteTo before the answer too (the answer's writing begins
	// with takeBack, after any WriteTo).
	answer rawAnswer

	pipe *pipeEntry // the request's place in its connection's pipeline (API.Pipeline); nil when not pipelined
}

// rawRequestBuf holds a raw request, its undecoded part and its client
// id in one allocation: the frame (or a streamed frame's head) is the
// request's only other allocation.
type rawRequestBuf struct {
	req      Request
	raw      RawRequest
	clientID string
}

// States of RawRequest.stage: how a RespondRawFrom hands its source to
// the connection.
const (
	rawHeld      int32 = iota // the host holds the request; the connection waits for the answer, or will
	rawInline                 // its inline handler runs on the connection's goroutine
	rawWriting                // RespondRawFrom writes the answer on the inline handler's behalf
	rawOffered                // RespondRawFrom handed its source to the connection and waits
	rawAbandoned              // the connection stopped waiting: it closed
)

// init fills in a raw request read from frame, the header (whose tagged
// fields begin at tagsAt and which ends at hdrLen) and the body's bytes
// read with it, of a frame of size bytes: a streamed body's rest is in c.
func (b *RawRequest) init(c *conn, frame []byte, size int, h *header, hdrLen int, api *API) {
	b.frame, b.hdrLen, b.bodyLen = frame, hdrLen, size-hdrLen
	b.tagsAt = hdrLen
	if h.tagsAt > 0 {
		b.tagsAt = int(h.tagsAt)
	}
	b.flexible = h.version >= api.flexible && h.key != apiVersionsKey
	b.expects = true
	if h.key == produceKey {
		if acks, _, ok := produceAcks(h.version, frame[hdrLen:]); ok && acks == 0 {
			b.expects = false
		}
	}
	if len(frame) < size {
		b.c = c
	}
}

// Header returns the request header as the client sent it: API key,
// version, correlation id, client id (absent from ControlledShutdown v0),
// and for a flexible version (KIP-482, request header v2) its tagged
// fields.
func (b *RawRequest) Header() []byte { return b.frame[:b.hdrLen:b.hdrLen] }

// Tags returns the header's tagged fields as sent (their count, then
// each field) for a flexible version; nil for another.
func (b *RawRequest) Tags() []byte {
	if b.tagsAt == b.hdrLen {
		return nil
	}
	return b.frame[b.tagsAt:b.hdrLen:b.hdrLen]
}

// Body returns the body, what follows the header, when it was read
// whole; nil when it is streamed (read it with Read or WriteTo).
func (b *RawRequest) Body() []byte {
	if b.c != nil {
		return nil
	}
	return b.frame[b.hdrLen:]
}

// BodyLen is the body's length in bytes, streamed or not: the frame's size
// (Request.Size) less the header's.
func (b *RawRequest) BodyLen() int { return b.bodyLen }

// Streamed reports whether the body is streamed (API.StreamAbove): still
// in the client's socket, to be read with Read or WriteTo.
func (b *RawRequest) Streamed() bool { return b.c != nil }

// ExpectsResponse reports whether the client waits for a response: false
// for a Produce with acks=0, which is answered with NoResponse.
func (b *RawRequest) ExpectsResponse() bool { return b.expects }

// Read reads the body's next bytes; io.EOF after the last.
func (b *RawRequest) Read(p []byte) (int, error) {
	if b.c == nil {
		body := b.frame[b.hdrLen:]
		if b.pos >= len(body) {
			return 0, io.EOF
		}
		n := copy(p, body[b.pos:])
		b.pos += n
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return 0, b.closed
	}
	if b.answered.Load() {
		return 0, ErrAlreadyAnswered
	}
	if mem := b.frame[b.hdrLen:]; b.pos < len(mem) {
		n := copy(p, mem[b.pos:])
		b.advance(n)
		return n, nil
	}
	return b.readSocket(p)
}

// WriteTo writes the body's unread bytes to w (io.Copy calls it). A
// streamed body goes from the client's socket to w: socket to socket
// (splice) when the client's connection is plaintext TCP and w a
// *net.TCPConn (or an *os.File), through a pooled buffer otherwise. An
// error of w's leaves the body's unread bytes readable, but from a splice,
// which cannot tell the sockets' errors apart: the connection then closes.
func (b *RawRequest) WriteTo(w io.Writer) (int64, error) {
	if b.c == nil {
		body := b.frame[b.hdrLen:]
		if b.pos >= len(body) {
			return 0, nil
		}
		n, err := w.Write(body[b.pos:])
		b.pos += n
		return int64(n), err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return 0, b.closed
	}
	if b.answered.Load() {
		return 0, ErrAlreadyAnswered
	}
	var total int64
	if mem := b.frame[b.hdrLen:]; b.pos < len(mem) {
		n, err := w.Write(mem[b.pos:])
		b.advance(n)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if b.pos == b.bodyLen { // read whole: the read buffer is the connection's again
		return total, nil
	}
	c := b.c
	if k := min(c.br.Buffered(), b.bodyLen-b.pos); k > 0 { // what the read buffer holds
		buf, _ := c.br.Peek(k)
		n, err := w.Write(buf)
		_, _ = c.br.Discard(n)
		b.advance(n)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if b.pos == b.bodyLen {
		return total, nil
	}
	if rf := zeroCopyDest(w); rf != nil {
		if tc := c.spliceSource(); tc != nil { // the rest straight from the socket
			n, err := b.splice(rf, tc)
			return total + n, err
		}
	}
	bw := copyBufs.Get().(*bufio.Writer)
	wo := &b.answer.wo
	wo.Writer = w
	bw.Reset(wo) // hides a ReaderFrom of w's, which would copy with a buffer of its own
	defer func() {
		bw.Reset(nil)
		copyBufs.Put(bw)
		wo.Writer = nil
	}()
	n, err := bw.ReadFrom((*bodySocket)(b))
	if err == nil {
		err = bw.Flush()
	}
	return total + n - int64(bw.Buffered()), err
}

// splice moves a streamed body's unread bytes from the client's socket
// tc to rf, socket to socket (WriteTo, mu held). A splice shows the bytes
// it moves only when it returns, so that the body's arrival counts as
// activity (arrival.go), it waits for the client in steps of a quarter of
// connections.max.idle.ms: each ends on a read deadline, and the splice
// goes on with the bytes it moved counted. The host's deadline
// (SetReadDeadline) bounds the steps. A failure closes the connection
// (fail).
func (b *RawRequest) splice(rf io.ReaderFrom, tc *net.TCPConn) (int64, error) {
	c := b.c
	epoch := c.p.srv.epoch
	step := time.Duration(0)
	if idle := c.p.srv.cfg.ConnectionsMaxIdle; idle > 0 && c.pace.Load() != 0 {
		step = idle / 4
	}
	lr := &b.answer.lr
	var total int64
	for {
		until := b.deadline
		if step > 0 && (until == 0 || time.Since(epoch)+step < until) {
			until = time.Since(epoch) + step
		}
		if until > 0 {
			c.limitRead(epoch.Add(until))
		}
		*lr = io.LimitedReader{R: tc, N: int64(b.bodyLen - b.pos)}
		n, err := rf.ReadFrom(lr)
		lr.R = nil
		if n > 0 && c.pace.Load() != 0 {
			c.arrived(int(n))
		}
		b.advance(int(n))
		total += n
		if err == nil && b.pos < b.bodyLen {
			err = io.ErrUnexpectedEOF // the client closed
		}
		if err == nil {
			if until > 0 && b.deadline == 0 { // a step's (the host's went with the body: finish)
				c.clearReadDeadline()
			}
			return total, nil
		}
		// A step that ended on its deadline goes on. (A deadline of w's
		// cannot be told from it; one that passed with the step's loses
		// the bytes in the splice's pipe, and the next step fails on it.)
		if now := time.Since(epoch); isDeadline(err) && until != b.deadline && now >= until && !c.draining() {
			continue
		}
		return total, b.fail(err)
	}
}

// advance moves the body's read position by n bytes. The body read whole,
// the connection's goroutine, which waits for it when the request is
// pipelined (pipeline.awaitBody), reads on at once (finish): a host may
// read the body on a goroutine of its own after its inline handler has
// returned.
func (b *RawRequest) advance(n int) {
	b.pos += n
	if b.pos == b.bodyLen {
		b.finish()
	}
}

// finish ends a streamed body's reading of the connection (mu held): it
// has been read whole, failed, or been taken back. Its arrival no longer
// counts, and the host's deadline goes.
func (b *RawRequest) finish() {
	c := b.c
	c.endArrival()
	if b.deadline != 0 {
		b.deadline = 0
		c.clearReadDeadline()
	}
	b.done.Store(true)
	if b.pipe != nil {
		c.pipe.signal()
	}
}

// readSocket reads a streamed body's next bytes from the connection, with
// mu held; the connection's socketReader counts those read from the socket
// as activity (arrival.go). A failure closes the connection (fail).
func (b *RawRequest) readSocket(p []byte) (int, error) {
	left := b.bodyLen - b.pos
	if left == 0 {
		return 0, io.EOF
	}
	if len(p) > left {
		p = p[:left]
	}
	n, err := b.c.br.Read(p)
	if n > 0 {
		b.advance(n)
	}
	if err != nil && b.pos < b.bodyLen {
		return n, b.fail(err)
	}
	return n, nil
}

// fail ends a streamed body whose read of the connection failed with err:
// the rest of the frame cannot be read, so the connection closes (with
// mu held). A deadline that is not Shutdown's wake is the host's
// (SetReadDeadline): the body came too slowly for it.
func (b *RawRequest) fail(err error) error {
	err = noEOF(err)
	c := b.c
	tooSlow := b.deadline != 0 && isDeadline(err) && !c.draining()
	b.failed, b.closed = true, err
	b.finish()
	switch {
	case tooSlow:
		c.setReason(connregistry.CloseSlowRequest)
		c.p.srv.log.Info("closing connection: its streamed request body did not arrive by the host's deadline",
			"conn_id", c.info().ID, "unread_bytes", b.bodyLen-b.pos)
	case !isClosedOrEOF(err):
		c.p.srv.log.Info("closing connection: reading a streamed request body failed", "conn_id", c.info().ID, "err", err)
	}
	c.close()
	return err
}

// SetReadDeadline sets a deadline for a streamed body's arrival: a read
// of the body (Read, WriteTo, or the server's, which drops the bytes the
// host left unread once it has answered) that has to wait for the client
// past t fails with an error that wraps os.ErrDeadlineExceeded, and the
// connection closes, with the reason connregistry.CloseSlowRequest, as the
// rest of its frame can no longer be read. It only tightens what the
// server enforces: connections.max.idle.ms and the floor of
// Config.RequestMinByteRate go on applying to the body's arrival whatever
// t is, so a later t keeps no connection open longer. A host that wants a
// rate gives the deadline the rate implies, such as
// time.Now().Add(grace + time.Duration(r.BodyLen())*time.Second/rate).
// A zero t removes the host's deadline. It does nothing for a body read
// whole (not streamed, or read to its end), and fails with
// ErrAlreadyAnswered once the request has been answered.
func (b *RawRequest) SetReadDeadline(t time.Time) error {
	if b.c == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed != nil {
		return b.closed
	}
	if b.answered.Load() {
		return ErrAlreadyAnswered
	}
	c := b.c
	switch {
	case b.pos == b.bodyLen:
	case t.IsZero():
		if b.deadline != 0 {
			b.deadline = 0
			c.clearReadDeadline()
		}
	default:
		b.deadline = max(t.Sub(c.p.srv.epoch), 1) // 0 is "none"
		c.limitRead(t)
	}
	return nil
}

// streaming reports whether the host may be reading a streamed body from
// the connection: the peer watcher must not read meanwhile.
func (b *RawRequest) streaming() bool { return b != nil && b.c != nil && !b.done.Load() }

// takeBack ends the host's reading of a streamed body (the answer, or the
// connection closing: why): the connection reads its socket again. With
// drain, the body's unread bytes are read and dropped. An error means the
// connection must close. It does nothing for a body in memory.
func (b *RawRequest) takeBack(drain bool, why error) error {
	if b == nil || b.c == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed {
		return b.closed
	}
	if b.closed == nil {
		b.closed = why
	}
	if drain && b.pos < b.bodyLen {
		b.pos = max(b.pos, len(b.frame)-b.hdrLen)
		if _, err := io.Copy(io.Discard, (*bodySocket)(b)); err != nil {
			return err
		}
	}
	b.finish()
	return nil
}

// stopReading ends the host's reading of a streamed body that was
// answered (why) while its bytes may still be coming, without reading
// them: the connection's goroutine drops them (drainAnswered), so that a
// goroutine writing the answer of a pipelined request does not wait for
// the body's bytes (only for a read of the host's in progress, which
// holds mu). Nil-safe.
func (b *RawRequest) stopReading(why error) {
	if b == nil || b.c == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed == nil {
		b.closed = why
	}
	if b.pos == b.bodyLen {
		b.done.Store(true)
	}
}

// drainAnswered reads and drops, on the connection's goroutine, the
// unread bytes of a streamed body whose reading stopReading ended. It
// reports whether it did (the body is then done), and an error when the
// connection must close.
func (b *RawRequest) drainAnswered() (bool, error) {
	b.mu.Lock()
	stopped := b.closed != nil && !b.failed
	b.mu.Unlock()
	if !stopped {
		return false, nil
	}
	return true, b.takeBack(true, ErrAlreadyAnswered)
}

// bodySocket reads a streamed body's next bytes from the connection, for
// takeBack's drain and WriteTo's buffered copy (mu held).
type bodySocket RawRequest

func (s *bodySocket) Read(p []byte) (int, error) { return (*RawRequest)(s).readSocket(p) }

// writerOnly hides all methods of a writer but Write.
type writerOnly struct{ io.Writer }

// enterInline notes that the request's inline handler runs on the
// connection's goroutine (see RespondRawFrom). Nil-safe.
func (b *RawRequest) enterInline() {
	if b != nil {
		b.stage.Store(rawInline)
	}
}

// leaveInline notes that the inline handler has returned. It reports
// false when a RespondRawFrom writes the answer on the handler's behalf:
// the connection's goroutine then touches nothing of the connection's
// until that answer arrives. Nil-safe.
func (b *RawRequest) leaveInline() bool {
	return b == nil || b.stage.CompareAndSwap(rawInline, rawHeld)
}

// abandon ends a raw request whose connection closed while the host held
// it: a streamed body's reading ends, and a RespondRawFrom that handed its
// source over, or will, gets ErrConnectionClosed. Nil-safe.
func (b *RawRequest) abandon(c *conn) {
	if b == nil {
		return
	}
	_ = b.takeBack(false, net.ErrClosed)
	if !b.stage.CompareAndSwap(rawHeld, rawAbandoned) && b.stage.Load() == rawOffered {
		a := <-c.answers // sent right after the offer
		a.raw.release(ErrConnectionClosed)
	}
}

// rawAnswer is a raw answer: the host's bytes (RespondRaw) or source
// (RespondRawFrom), with the frame's size and response header the server
// writes before them, and what became of a RespondRawFrom.
type rawAnswer struct {
	hdr [9]byte // the frame's size, the correlation id and, flexible, the header's empty tag section

	// RespondRawFrom's outcome.
	waiting bool // RespondRawFrom waits on done
	began   bool // src has been read from
	written bool // the writing was RespondRawFrom's own (see there); sent and start are set

	iov  [1 + rawInlineParts][]byte // the header, then the host's slices
	bufs net.Buffers                // what a vectored write writes: iov's, or a longer list
	size int64                      // the body's bytes
	src  io.Reader
	lr   io.LimitedReader // src, limited to size (or, before the answer, the client's socket: RawRequest.WriteTo)
	wo   writerOnly

	done  sync.WaitGroup // released by release
	err   error
	sent  int   // bytes written, size prefix included
	start int64 // when the writing began: nanoseconds since the server's epoch
}

// rawInlineParts is how many slices of RespondRaw's a rawAnswer holds
// without an allocation.
const rawInlineParts = 2

// maxRawBody is the largest body a raw answer may have: a frame's size is
// an int32, and holds the correlation id and a tag section.
const maxRawBody = math.MaxInt32 - 5

// release tells a waiting RespondRawFrom its outcome, err: as it is once
// src has been read from; ErrConnectionClosed before. Nil-safe.
func (ra *rawAnswer) release(err error) {
	if ra == nil || !ra.waiting {
		return
	}
	if err != nil && !ra.began && !errors.Is(err, ErrConnectionClosed) {
		err = fmt.Errorf("%w: %w", ErrConnectionClosed, err)
	}
	ra.err = err
	ra.done.Done()
}

// rawAnswer returns the storage of the request's raw answer: the raw
// request's, or a new one for a decoded request.
func (r *Request) rawAnswer() *rawAnswer {
	if r.Raw != nil {
		return &r.Raw.answer
	}
	return new(rawAnswer)
}

// RespondRaw answers with body, the response's bytes after its header,
// as they are: the concatenation of the slices given, which may be none.
// The server writes the frame's size and the response header itself: the
// request's correlation id and, for a flexible version (as kmsg's
// response type of the API says, but for ApiVersions, whose response
// header is always v0), an empty tag section. So body is what kmsg's
// AppendTo writes for the response, or the rest of an upstream broker's
// response frame after its header. The slices are written without a copy,
// in one vectored write (writev) on a plaintext listener, as a
// [FetchResponse]'s records; the host must not change them until the
// response has been written (RespondRaw returns before that: treat them
// as the server's until the connection's next request is read, or never
// change them; for a pipelined request, API.Pipeline, until an answer
// given after this one has been written). For a decoded request it allocates a little; for a raw
// one nothing. It returns an error, and leaves the request unanswered,
// for a body over 2 GiB.
//
// Experimental: proven by one host so far (examples/proxy); it may change
// or go in a minor release, as CONTRIBUTING.md says.
func (r *Request) RespondRaw(body ...[]byte) error {
	var size int64
	for _, b := range body {
		size += int64(len(b))
	}
	if size > maxRawBody {
		return fmt.Errorf("socketserver: RespondRaw: a response body of %d bytes: the frame is limited to 2 GiB", size)
	}
	if !r.claim() {
		return ErrAlreadyAnswered
	}
	ra := r.rawAnswer()
	ra.size = size
	if len(body) < len(ra.iov) {
		ra.bufs = ra.iov[:1+copy(ra.iov[1:], body)]
	} else {
		ra.bufs = make(net.Buffers, 1+len(body))
		copy(ra.bufs[1:], body)
	}
	a := answer{raw: ra}
	r.seal(&a)
	r.deliver(a)
	return nil
}

// RespondRawFrom answers a request of an API served raw with n bytes read
// from src, the response's bytes after its header (as RespondRaw's body),
// such as an upstream broker's response whose size and header the host has
// read: the server writes the frame's size and response header, then
// copies n bytes from src to the client, on Linux without a copy through
// user space (splice) when src is a *net.TCPConn and the listener
// plaintext (sendfile for an *os.File), through a pooled buffer otherwise.
//
// Unlike Respond, it returns only once src has been read: with nil when
// all n bytes were read and written. An error says why not: the client's
// connection failed, src failed or ended early, or, wrapping
// [ErrConnectionClosed], the connection closed before the response was
// begun, and nothing was read from src. But with ErrConnectionClosed, how
// much of src was read is unknown: a host that shares src (an upstream
// connection several clients' requests are in flight on) closes it. The
// client's connection closes whenever its response was not written whole.
//
// The connection's goroutine reads src: a source that stops sending holds
// it until src fails, past the connection's close (Server.Close and
// Shutdown wait for it), as a handler that never returns would. Give a
// source that may stall a deadline (net.Conn.SetReadDeadline).
//
// It may be called from any goroutine, an inline handler's too: called
// while the request's inline handler runs, it writes the response itself,
// on the goroutine it is called from; the connection's goroutine waits for
// it. For a pipelined request (API.Pipeline) it writes the response when
// the answers of the earlier requests have been written: itself, when it
// gives the oldest answer still to write, or else on the goroutine that
// writes the answer before it, while it waits; once the connection has
// closed, it returns ErrConnectionClosed when the earlier requests have
// been answered (an inline handler that calls it waits on the
// connection's goroutine, so the host answers those requests, as it must
// every request, even after the close). It returns an error, and leaves the request unanswered, for a
// decoded request (answer it with RespondRaw), a nil src, or n negative
// or over 2 GiB.
//
// Experimental: proven by one host so far (examples/proxy); it may change
// or go in a minor release, as CONTRIBUTING.md says.
func (r *Request) RespondRawFrom(src io.Reader, n int64) error {
	rr := r.Raw
	switch {
	case rr == nil:
		return fmt.Errorf("socketserver: RespondRawFrom answers a request of an API served raw (API.Raw); API key %d is decoded: answer with RespondRaw", r.APIKey)
	case src == nil:
		return errors.New("socketserver: RespondRawFrom: a nil source")
	case n < 0 || n > maxRawBody:
		return fmt.Errorf("socketserver: RespondRawFrom: %d bytes: want 0 to %d", n, maxRawBody)
	}
	if !r.claim() {
		return ErrAlreadyAnswered
	}
	ra := &rr.answer
	ra.src, ra.size = src, n
	a := answer{raw: ra}
	r.seal(&a)
	if rr.pipe != nil { // written in the pipeline's order, here or by the goroutine that writes the answer before it
		ra.waiting = true
		ra.done.Add(1)
		r.conn.pipe.answer(r, a)
		if rr.stage.Load() == rawInline { // the inline handler waits for an earlier answer: with no turn
			r.conn.endTurn()
		}
		ra.done.Wait()
		return ra.err
	}
	for {
		switch rr.stage.Load() {
		case rawInline:
			// The inline handler runs on the connection's goroutine, which
			// may be this one: it waits for the handler, and then, seeing
			// rawWriting, for this answer, touching nothing of the
			// connection's meanwhile. So the writing is done here.
			if rr.stage.CompareAndSwap(rawInline, rawWriting) {
				epoch := r.conn.p.srv.epoch
				start := time.Now()
				ra.start = int64(start.Sub(epoch))
				ra.sent, ra.err = r.conn.writeAnswer(r, &a, start)
				ra.written = true
				err := ra.err
				if err != nil && !ra.began {
					err = fmt.Errorf("%w: %w", ErrConnectionClosed, err)
				}
				r.conn.answers <- a
				return err
			}
		case rawHeld:
			ra.waiting = true
			ra.done.Add(1)
			if rr.stage.CompareAndSwap(rawHeld, rawOffered) {
				r.conn.answers <- a
				ra.done.Wait()
				return ra.err
			}
			ra.waiting = false
			ra.done.Add(-1)
		default: // rawAbandoned
			return ErrConnectionClosed
		}
	}
}

// rawFlexible reports whether the response to r has a flexible header (a
// tag section): the request's version is flexible, but for ApiVersions.
func (r *Request) rawFlexible() bool {
	if r.Raw != nil {
		return r.Raw.flexible
	}
	return r.Body != nil && r.Body.IsFlexible() && r.APIKey != apiVersionsKey
}

// writeRaw writes ra, a raw answer to r: the frame's size and the
// response header, then the host's bytes, from memory in one vectored
// write (writev) on a plaintext TCP connection, or from a source with the
// zero-copy paths of net.TCPConn.ReadFrom (splice from a TCP connection,
// sendfile from a file); through a pooled buffer on TLS, and from other
// sources. It returns the bytes written, size prefix included, or an
// error: the connection must close.
func (c *conn) writeRaw(r *Request, ra *rawAnswer) (int, error) {
	c.endTurn() // the client may not be reading
	hdr := ra.hdr[:8]
	if r.rawFlexible() {
		hdr = ra.hdr[:9]
		hdr[8] = 0 // no tagged fields
	}
	size := int64(len(hdr)) - 4 + ra.size
	binary.BigEndian.PutUint32(hdr, uint32(size))
	binary.BigEndian.PutUint32(hdr[4:], uint32(r.CorrelationID))
	c.moveWriteDeadline()
	var err error
	if tc, ok := c.rw.(*net.TCPConn); ok && ra.src == nil {
		ra.bufs[0] = hdr
		err = c.writeBuffers(tc, ra.bufs)
	} else {
		err = c.writeRawCopying(tc, hdr, ra)
	}
	ra.bufs, ra.src, ra.lr.R, ra.wo.Writer = nil, nil, nil, nil // keep none of the host's memory
	if err != nil {
		c.writeFailed(err)
		return 0, err
	}
	n := int(size) + 4
	c.wrote(n)
	c.responseSent(r.APIKey, n)
	return n, nil
}

// writeBuffers writes bufs to a plaintext TCP connection, whose socket is
// tc, in one vectored write when the socket takes it.
func (c *conn) writeBuffers(tc *net.TCPConn, bufs net.Buffers) error {
	w, err := c.vecWriter(tc)
	if err != nil {
		return err
	}
	defer w.done()
	for _, b := range bufs {
		if err := w.add(b); err != nil {
			return err
		}
	}
	return w.flush()
}

// writeRawCopying writes a raw answer's header and bytes through a pooled
// buffer (TLS, and connections that are not TCP), but for a source a
// plaintext TCP connection (tc) moves itself: a TCP or Unix connection
// (splice) or a file (sendfile).
func (c *conn) writeRawCopying(tc *net.TCPConn, hdr []byte, ra *rawAnswer) error {
	if tc != nil && zeroCopySource(ra.src) {
		if _, err := tc.Write(hdr); err != nil {
			return err
		}
		ra.began = true
		ra.lr = io.LimitedReader{R: ra.src, N: ra.size}
		if _, err := tc.ReadFrom(&ra.lr); err != nil {
			return err
		}
		if ra.lr.N > 0 {
			return fmt.Errorf("%w: the response's source ended %d bytes short", io.ErrUnexpectedEOF, ra.lr.N)
		}
		return nil
	}
	bw := copyBufs.Get().(*bufio.Writer)
	ra.wo.Writer = c.rw
	bw.Reset(&ra.wo) // hides a ReaderFrom, which would copy with a buffer of its own
	defer func() {
		bw.Reset(nil)
		copyBufs.Put(bw)
	}()
	if _, err := bw.Write(hdr); err != nil {
		return err
	}
	if ra.src == nil {
		for _, b := range ra.bufs[1:] {
			if _, err := bw.Write(b); err != nil {
				return err
			}
		}
		return bw.Flush()
	}
	ra.began = true
	ra.lr = io.LimitedReader{R: ra.src, N: ra.size}
	if _, err := bw.ReadFrom(&ra.lr); err != nil {
		return err
	}
	if ra.lr.N > 0 {
		return fmt.Errorf("%w: the response's source ended %d bytes short", io.ErrUnexpectedEOF, ra.lr.N)
	}
	return bw.Flush()
}

// zeroCopySource reports whether net.TCPConn.ReadFrom moves src's bytes
// without copying them through the process: a TCP or Unix connection
// (splice) or a file (sendfile). From any other source it would copy with
// a buffer it allocates.
func zeroCopySource(src io.Reader) bool {
	switch src.(type) {
	case *net.TCPConn, *net.UnixConn, *os.File:
		return true
	}
	return false
}

// zeroCopyDest returns w as an io.ReaderFrom when it moves a TCP
// connection's bytes without copying them through the process: a TCP
// connection or a file (splice). Other writers get a streamed body through
// a pooled buffer, as their own ReadFrom may copy with a buffer it
// allocates.
func zeroCopyDest(w io.Writer) io.ReaderFrom {
	switch w := w.(type) {
	case *net.TCPConn:
		return w
	case *os.File:
		return w
	}
	return nil
}

// spliceSource returns the connection's socket when a streamed body's
// unread bytes may be read from it directly (WriteTo): a plaintext TCP
// connection whose read buffer, and the bytes its parked goroutine read,
// are empty.
func (c *conn) spliceSource() *net.TCPConn {
	if !c.plain() || c.pre.n > 0 || c.br.Buffered() > 0 {
		return nil
	}
	tc, _ := c.nc.(*net.TCPConn)
	return tc
}

// streamHead reads the head of a frame of size bytes whose API streams it
// (API.StreamAbove): its header, and of a Produce its body up to acks
// (rawHeadLen), into a slice of their size; the rest of the body stays in
// the socket, for the host (RawRequest). It returns nil, having read
// nothing, when the frame is to be read whole: its API does not stream a
// frame of that size, or its head does not fit the read buffer or does
// not parse (decode then says why).
func (c *conn) streamHead(size int32, apis *apiTable, m *frameMemory) ([]byte, error) {
	want := min(int(size), c.br.Size())
	// The head is small and most often in the read buffer already, with
	// the frame's size: it is parsed from there, without a read for more.
	b, _ := c.br.Peek(min(want, c.br.Buffered()))
	for {
		if len(b) >= 2 {
			api, ok := apis.lookup(int16(binary.BigEndian.Uint16(b)))
			if !ok || api.StreamAbove == 0 || int(size) <= api.StreamAbove {
				return nil, nil
			}
			if n, ok := rawHeadLen(b, api.flexible); ok {
				return c.takeHead(n, m)
			}
		}
		if len(b) == want { // the head does not fit the read buffer, or does not parse
			return nil, nil
		}
		// Read what has come, at least a byte more: not want bytes, which
		// may be more than the client sends before it hears back (a head
		// after the size alone, as a parked connection reads it).
		if _, err := c.br.Peek(len(b) + 1); err != nil {
			return nil, noEOF(err)
		}
		b, _ = c.br.Peek(min(want, c.br.Buffered()))
	}
}

// takeHead takes the n bytes of a streamed frame's head from the read
// buffer into a slice of their own, with their memory from the pool.
func (c *conn) takeHead(n int, m *frameMemory) ([]byte, error) {
	if err := m.take(0, n, n); err != nil {
		return nil, err
	}
	b, _ := c.br.Peek(n) // buffered already
	head := make([]byte, n)
	copy(head, b)
	_, _ = c.br.Discard(n)
	return head, m.done(nil)
}

// rawHeadLen returns the length of a streamed frame's head, from b, its
// first bytes: the request header (with its tagged fields from version
// flexible on) and of a Produce the body up to and with acks, so that
// RawRequest.ExpectsResponse needs no read of the host's. ok is false when
// b does not hold them whole, or they do not parse.
func rawHeadLen(b []byte, flexible int16) (n int, ok bool) {
	h, rest, err := parseHeaderPrefix(b)
	if err != nil {
		return 0, false
	}
	if h.version >= flexible {
		if rest, err = skipTags(rest); err != nil {
			return 0, false
		}
	}
	n = len(b) - len(rest)
	if h.key == produceKey {
		_, m, ok := produceAcks(h.version, rest)
		if !ok {
			return 0, false
		}
		n += m
	}
	return n, true
}

// produceAcks reads acks from the start of a Produce body of the given
// version, which comes after the transactional id from v3 on (a compact
// string from v9, the first flexible version), and returns it with the
// bytes up to and with it. ok is false when body does not hold them.
func produceAcks(version int16, body []byte) (acks int16, n int, ok bool) {
	i := 0
	switch {
	case version >= 9: // compact nullable string: length+1 as an unsigned varint, 0 for null
		l, s := binary.Uvarint(body)
		if s <= 0 || l > uint64(len(body)-s)+1 {
			return 0, 0, false
		}
		i = s + int(max(l, 1)-1)
	case version >= 3: // nullable string: int16 length, negative for null (as Kafka and kmsg read it)
		if len(body) < 2 {
			return 0, 0, false
		}
		l := max(int(int16(binary.BigEndian.Uint16(body))), 0)
		if l > len(body)-2 {
			return 0, 0, false
		}
		i = 2 + l
	}
	if len(body)-i < 2 {
		return 0, 0, false
	}
	return int16(binary.BigEndian.Uint16(body[i:])), i + 2, true
}
