package socketserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

// ErrAlreadyAnswered is returned by a second Respond, NoResponse or
// CloseConnection on one request, and by a Throttle after the answer.
var ErrAlreadyAnswered = errors.New("socketserver: request already answered")

// Request is one request, decoded (Body) or, for an API served raw, as the
// client sent it (Raw). The host answers it exactly once, from any
// goroutine, with Respond, RespondRaw, RespondRawFrom, NoResponse or
// CloseConnection; until then the connection reads nothing more (one
// request in flight per connection, so responses leave in order), but for
// an API that pipelines (API.Pipeline), whose answers still leave in
// order.
type Request struct {
	// APIKey, APIVersion, CorrelationID and ClientID come from the header.
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      *string
	// Body is the decoded request; its version is APIVersion. Its byte
	// fields (a Produce's record batches) are slices of the request's
	// frame, read once and never reused by the server: a host may keep
	// them, without copying, after it has answered. A kept field keeps its
	// whole frame in memory, and nothing else (not the Request, nor the
	// connection); a host that keeps a small part of a large frame, such
	// as one partition's batch of a Produce for many, may rather copy it.
	// Nil for an API served raw.
	Body kmsg.Request
	// Raw is the request as the client sent it, header and body, for an
	// API served raw (API.Raw); nil for a decoded request.
	//
	// Experimental: proven by one host so far (examples/proxy); it may change
	// or go in a minor release, as CONTRIBUTING.md says.
	Raw *RawRequest
	// Conn describes the connection at the time the request was read:
	// what its registry entry held then. The requests read between two
	// changes of the description (authentication, the client's software)
	// share it, so that a request carries a pointer rather than a copy:
	// read it, never change it (copy it first: info := *r.Conn).
	Conn *connregistry.Info
	// ReceivedAt is when the whole frame had been read; for a streamed
	// raw request (API.StreamAbove), when its header had.
	ReceivedAt time.Time
	// Size is the frame's size in bytes, without the size prefix (a
	// streamed raw request's whole frame, read or not).
	Size int

	conn *conn
	// answered is set, once, by the answer: to when it came, in nanoseconds
	// since the server's epoch, when a HookRequestDone
	// wants it (hooks.timed), else to 1.
	// 0 means not yet answered.
	answered atomic.Int64
	// dequeuedAt is when a worker of Serve took the request, in nanoseconds
	// since the server's epoch, for hooks.timed (0: not recorded).
	dequeuedAt atomic.Int64
	// throttle is the time Throttle set, in nanoseconds; the answer seals
	// it (throttleSealed) as it takes it.
	throttle atomic.Int64
}

// throttleSealed is Request.throttle once the answer has taken it.
const throttleSealed = -1

// maxThrottle is the longest throttle: throttle_time_ms is an int32.
const maxThrottle = math.MaxInt32 * time.Millisecond

// Throttle throttles the request's client for d, as Kafka's client quotas
// do (KIP-219): the answer leaves at once, and then the connection reads
// nothing more until d has passed since the answer (Kafka's
// MUTED_AND_THROTTLED), so that a client that ignores the throttle is held
// all the same. Call it before the answer (Respond, RespondRaw,
// RespondRawFrom or NoResponse); after
// it, it returns [ErrAlreadyAnswered]. A later call replaces the time an
// earlier one set; d ≤ 0 throttles nothing, and d is capped at
// math.MaxInt32 milliseconds.
//
// On Respond, a response with a throttle field (kmsg's responses have
// SetThrottle and Throttle) whose value is 0 gets throttle_time_ms set from
// d, so that a client that knows KIP-219 waits on its side too; a host may
// set it itself; the bytes of RespondRaw and RespondRawFrom are the host's,
// which sets the field in them. With NoResponse (a Produce with acks=0) the connection is
// muted at once, as Kafka mutes it. While muted, a connection holds no
// queue place and no request memory (queued.max.request.bytes): its next
// request stays in the socket. connections.max.idle.ms counts from the
// throttle's end; the listing shows it (connregistry.Conn.ThrottledUntil,
// ThrottleTime); Shutdown closes a muted connection at once, as an idle
// one. A CloseConnection answer ignores the throttle.
func (r *Request) Throttle(d time.Duration) error {
	d = min(max(d, 0), maxThrottle)
	for {
		old := r.throttle.Load()
		if old == throttleSealed || r.answered.Load() != 0 {
			return ErrAlreadyAnswered
		}
		if r.throttle.CompareAndSwap(old, int64(d)) {
			return nil
		}
	}
}

// throttled is the interface of kmsg's responses that carry
// throttle_time_ms.
type throttled interface {
	SetThrottle(int32)
	Throttle() (int32, bool)
}

// Context returns the context of the request's connection: derived from
// Config.BaseContext and Config.ConnContext (context.Background() without
// them), and cancelled when the connection closes, or when its client
// shuts down its sending side (EOF), so that work for a client that has
// gone can stop. A client that only half-closed may still read: the answer
// given after the cancellation is written, as Kafka writes the responses to
// the requests it read before the EOF. A host may as well close the
// connection (CloseConnection): after the client's EOF, the close is the
// client's (connregistry.CloseByClient), not the host's.
func (r *Request) Context() context.Context { return r.conn.requestContext() }

// Respond sends resp as the answer. resp's version is set to the request's.
// It returns an error, and leaves the request unanswered, when resp is of
// another API than the request, or is a [FetchResponse] whose Records do
// not fit its partitions. A FetchResponse's records are written from where
// the host keeps them, without a copy.
func (r *Request) Respond(resp kmsg.Response) error {
	if resp == nil || resp.Key() != r.APIKey {
		return fmt.Errorf("socketserver: response for API key %d cannot answer API key %d", keyOf(resp), r.APIKey)
	}
	if f, ok := resp.(*FetchResponse); ok {
		if f.FetchResponse == nil {
			return fmt.Errorf("%w: a FetchResponse without its kmsg.FetchResponse", ErrFetchRecords)
		}
		if err := f.check(); err != nil {
			return err
		}
	}
	resp.SetVersion(r.APIVersion)
	return r.answer(answer{resp: resp})
}

// NoResponse lets the connection read its next request without writing
// anything (a produce request with acks=0); after a Throttle, once the
// throttle has passed.
func (r *Request) NoResponse() error { return r.answer(answer{}) }

// CloseConnection closes the connection instead of answering. The
// registry records it as closed by the request handler
// (connregistry.CloseByHandler), or as closed by its client
// (connregistry.CloseByClient) when the client had gone already: its EOF,
// which cancels the request's context, came first.
func (r *Request) CloseConnection() error { return r.answer(answer{close: true}) }

func (r *Request) answer(a answer) error {
	if !r.claim() {
		return ErrAlreadyAnswered
	}
	r.seal(&a)
	r.deliver(a)
	return nil
}

// deliver hands a, r's claimed and sealed answer, to the connection: to
// its pipeline for a pipelined request, else to its goroutine, which
// waits for it.
func (r *Request) deliver(a answer) {
	if rr := r.Raw; rr != nil && rr.pipe != nil {
		r.conn.pipe.answer(r, a)
		return
	}
	r.conn.answers <- a // capacity 1 and one answer per request: never blocks
}

// claim marks the request answered, once: it reports false when it was
// already. The answer's time is recorded when a hook wants it.
func (r *Request) claim() bool {
	at := int64(1)
	if srv := r.conn.p.srv; srv.hooks.timed() {
		at = max(int64(time.Since(srv.epoch)), 1)
	}
	if !r.answered.CompareAndSwap(0, at) {
		return false
	}
	if r.Raw != nil {
		r.Raw.answered.Store(true) // reads of a streamed body end
	}
	return true
}

// seal completes a claimed answer: it takes the throttle Throttle set,
// setting a kmsg response's throttle_time_ms from it when the host left
// it 0.
func (r *Request) seal(a *answer) {
	if d := r.throttle.Swap(throttleSealed); d > 0 && !a.close {
		a.throttle = time.Duration(d)
		if t, ok := a.resp.(throttled); ok {
			if ms, _ := t.Throttle(); ms == 0 {
				t.SetThrottle(int32(a.throttle / time.Millisecond))
			}
		}
	}
	a.req = r
}

func keyOf(resp kmsg.Response) int16 {
	if resp == nil {
		return -1
	}
	return resp.Key()
}

// answer is what the host did with a request.
type answer struct {
	req      *Request
	resp     kmsg.Response
	raw      *rawAnswer // RespondRaw, RespondRawFrom: the host's bytes
	close    bool
	throttle time.Duration // mute the connection this long after the answer (Request.Throttle)
}
