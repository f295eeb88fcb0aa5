package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// This file forwards requests by their bytes. Every API whose bytes the
// proxy need not change is served raw (socketserver.API.Raw): the request
// goes upstream as the client sent it, header and body, the client's
// correlation id included (an upstream connection is the client
// connection's alone: forward.go), and upstream's answer goes back as it
// came, after the header the socket server writes itself. A large
// Produce's body is streamed from the client's socket to upstream's
// (API.StreamAbove) and a large answer from upstream's socket to the
// client's (Request.RespondRawFrom): on Linux, where neither side is TLS,
// with splice, without passing through a buffer of the proxy's.
//
// The APIs whose answers name brokers are decoded instead (decodedAPIs),
// and so is a Produce answer from version 10 that carries leader hints,
// which do (KIP-951); one without goes back as it came. Fetch is served
// up to version 15: from 16 its answers name brokers too, and rewriting
// them would mean reading every answer whole.

// decodedAPIs are the forwarded APIs whose answers name brokers: the proxy
// decodes them, rewrites the addresses (rewrite.go) and encodes them
// again. Their requests are small.
var decodedAPIs = map[kmsg.Key]bool{
	kmsg.Metadata:         true,
	kmsg.FindCoordinator:  true,
	kmsg.DescribeCluster:  true,
	kmsg.ShareFetch:       true,
	kmsg.ShareAcknowledge: true,
}

// rawVersionCaps bound the versions of raw APIs the proxy serves, where a
// newer version's answer names brokers: Fetch v16 added the leader hints
// of KIP-951 (NodeEndpoints). A client that knows KIP-951 learns of a new
// leader from Metadata instead, as before it.
var rawVersionCaps = map[kmsg.Key]int16{
	kmsg.Fetch: 15,
}

// answerDecodedFrom is, for raw APIs whose answers name brokers from some
// version on, that version: their answers from it are decoded and
// rewritten. Produce v10 added the leader hints of KIP-951 (Brokers).
var answerDecodedFrom = map[kmsg.Key]int16{
	kmsg.Produce: 10,
}

// streamProduceAbove is the size above which a Produce request's body is
// streamed (API.StreamAbove): moved from the client's socket to
// upstream's as it arrives, never held whole by the proxy.
const streamProduceAbove = 64 << 10

// spliceAnswerAbove is the size of an answer's body above which it is
// moved from upstream's socket to the client's (RespondRawFrom: splice
// where neither side is TLS) rather than read into memory and written with
// the header (RespondRaw: one writev).
const spliceAnswerAbove = 64 << 10

// maxHead is the longest head of an answer the proxy reads before its
// body: the size, the correlation id and, for a flexible version, the
// header's tag count.
const maxHead = 9

// readHead reads the head of the answer to the raw request sent last, n
// bytes (headLen), into u.head, with deadline (zero: none). A read that
// times out keeps what it read: readHead then goes on where it stopped.
// The head is read from the socket exactly, so that the body is left
// there for RespondRawFrom, unless u.br holds bytes of it already (an
// answer that followed the proxy's own request closely).
func (u *upConn) readHead(n int, deadline time.Time) error {
	if u.headN >= n {
		return nil
	}
	_ = u.nc.SetReadDeadline(deadline)
	if err := u.fillHead(n); err != nil {
		return err
	}
	if !deadline.IsZero() {
		_ = u.nc.SetReadDeadline(time.Time{})
	}
	return nil
}

// fillHead reads into u.head until it holds n bytes, under the read
// deadline already set; see readHead.
func (u *upConn) fillHead(n int) error {
	if u.headN >= 4 && u.headN < n { // a head linger read: its size against the longer head now wanted
		if size := int32(binary.BigEndian.Uint32(u.head[:])); size < int32(n-4) {
			return fmt.Errorf("%w: a frame of %d bytes", errUpstreamResponse, size)
		}
	}
	for u.headN < n {
		had := u.headN
		var m int
		var err error
		if u.br.Buffered() > 0 {
			m, err = u.br.Read(u.head[u.headN:n])
		} else {
			m, err = u.nc.Read(u.head[u.headN:n])
		}
		u.headN += m
		if had < 4 && u.headN >= 4 { // the size, checked before more is awaited
			if size := int32(binary.BigEndian.Uint32(u.head[:])); size < int32(n-4) || size > maxResponseBytes {
				return fmt.Errorf("%w: a frame of %d bytes", errUpstreamResponse, size)
			}
		}
		if err != nil {
			if u.headN < n {
				return err
			}
			break
		}
	}
	return nil
}

// headLen is the length of the head of the answer to a raw request: its
// size and correlation id, and for a flexible version (whose request
// header has tags: socketserver.RawRequest.Tags) its tag count.
func headLen(raw *socketserver.RawRequest) int {
	if raw.Tags() != nil {
		return 9
	}
	return 8
}

// parseHead reads the head of a raw request's answer (headLen): its size,
// its correlation id, which must be corr, and for a flexible version its
// header's tag count. It returns the length of what follows the head, and
// whether the header has tagged fields (Kafka defines none); an error
// wrapping errUpstreamResponse for another correlation id, or a size
// below the head's or above maxResponseBytes.
func parseHead(head []byte, corr int32) (body int64, tagged bool, err error) {
	size := int64(int32(binary.BigEndian.Uint32(head)))
	if got := int32(binary.BigEndian.Uint32(head[4:])); got != corr {
		return 0, false, fmt.Errorf("%w: correlation id %d, want %d", errUpstreamResponse, got, corr)
	}
	if size < int64(len(head)-4) || size > maxResponseBytes {
		return 0, false, fmt.Errorf("%w: a frame of %d bytes", errUpstreamResponse, size)
	}
	return size - int64(len(head)-4), len(head) == maxHead && head[8] != 0, nil
}

// answerRaw reads upstream's answer to r, a raw request, whose head
// readHead has read, and answers r with it: its body as it came (moved
// socket to socket when large), or decoded and rewritten when it names
// brokers (answerDecodedFrom).
func (s *session) answerRaw(r *socketserver.Request, up *upConn) {
	body, tagged, err := parseHead(up.head[:headLen(r.Raw)], r.CorrelationID)
	if err != nil {
		s.failed(r, up, err)
		return
	}
	if v, ok := answerDecodedFrom[kmsg.Key(r.APIKey)]; ok && r.APIVersion >= v {
		s.answerDecoded(r, up, body, tagged)
		return
	}
	if tagged {
		s.answerTagged(r, up, body)
		return
	}
	if body > spliceAnswerAbove && up.br.Buffered() == 0 {
		// Done once the answer is written, not when it is handed over:
		// RespondRawFrom moves it socket to socket and returns when the
		// whole has gone, which may take longer than a close for a broker
		// gone away waits after an answer (answerGrace).
		err := r.RespondRawFrom(up.nc, body)
		s.done()
		if err != nil {
			// The client went away, or either side failed: how much of the
			// answer was read is unknown, or it is still to read.
			s.drop(up)
			if !errors.Is(err, socketserver.ErrConnectionClosed) {
				s.p.log.Info("forwarding an answer failed; closing the client connection", "conn_id", s.id, "upstream", up.addr,
					"api_key", r.APIKey, "api_version", r.APIVersion, "err", err)
			}
		}
		return
	}
	b, err := up.readBody(body)
	if err != nil {
		s.failed(r, up, err)
		return
	}
	s.done()
	if err := r.RespondRaw(b); err != nil {
		s.p.log.Error("cannot answer a forwarded request", "conn_id", s.id, "api_key", r.APIKey, "err", err)
		_ = r.CloseConnection()
	}
}

// readBody reads an answer's body of n bytes into memory, a slice of its
// own: the socket server may write it after RespondRaw returns (when an
// earlier answer is being written), while the next answer is read.
func (u *upConn) readBody(n int64) ([]byte, error) {
	return readGrowing(u.br, nil, int(n))
}

// answerDecoded answers r, a raw request whose answer may name brokers,
// with the answer decoded and rewritten; body is the length of what
// follows the head, and tagged says whether the answer's header has tags.
// A Produce answer without leader hints goes back as it came
// (produceAnswerNamesBrokers).
func (s *session) answerDecoded(r *socketserver.Request, up *upConn, body int64, tagged bool) {
	n := headLen(r.Raw)
	frame, err := readGrowing(up.br, up.head[4:n], n-4+int(body)) // the frame but its size: correlation id, tags, body
	if err != nil {
		s.failed(r, up, err)
		return
	}
	if kmsg.Key(r.APIKey) == kmsg.Produce && !tagged {
		if hints, err := produceAnswerNamesBrokers(frame[n-4:], r.APIVersion); err == nil && !hints {
			s.done()
			if err := r.RespondRaw(frame[n-4:]); err != nil {
				s.p.log.Error("cannot answer a forwarded request", "conn_id", s.id, "api_key", r.APIKey, "err", err)
				_ = r.CloseConnection()
			}
			return
		}
	}
	req := kmsg.RequestForKey(r.APIKey)
	req.SetVersion(r.APIVersion)
	resp, err := decodeResponse(req, r.CorrelationID, frame)
	if err != nil {
		s.failed(r, up, err)
		return
	}
	s.respond(r, resp)
}

// answerTagged answers r with an answer whose header has tagged fields,
// which the proxy drops (the socket server writes a header without): the
// rest of the header and the body are read into memory.
func (s *session) answerTagged(r *socketserver.Request, up *upConn, body int64) {
	rest, err := readGrowing(up.br, up.head[8:9], 1+int(body)) // the tag count again, the tags, the body
	if err != nil {
		s.failed(r, up, err)
		return
	}
	skip, err := skipTags(rest)
	if err != nil {
		s.failed(r, up, fmt.Errorf("%w: %s v%d header: %w", errUpstreamResponse, kmsg.NameForKey(r.APIKey), r.APIVersion, err))
		return
	}
	s.done()
	if err := r.RespondRaw(rest[skip:]); err != nil {
		s.p.log.Error("cannot answer a forwarded request", "conn_id", s.id, "api_key", r.APIKey, "err", err)
		_ = r.CloseConnection()
	}
}
