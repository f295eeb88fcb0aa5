package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/examples/internal/clientprops"
	"github.com/kafkanet/kafkanet/socketserver"
)

// This file is the proxy's client side: connections to the upstream
// brokers, authenticated with the proxy's own credentials (and renewing
// them, KIP-368), that carry the proxy's own requests and its clients'
// decoded ones with the proxy's correlation ids, and raw ones with the
// client's (raw.go).

// Errors of an upstream connection. Each one ends the connection.
var (
	// errUpstreamResponse: the upstream broker sent bytes that are not the
	// response to the request (a wrong correlation id, a frame that does
	// not decode, a frame larger than maxResponseBytes).
	errUpstreamResponse = errors.New("proxy: bad response from the upstream broker")
	// errUpstreamAuth: the upstream broker refused the proxy's
	// credentials.
	errUpstreamAuth = errors.New("proxy: upstream authentication failed")
)

// maxResponseBytes bounds a response frame from upstream. Kafka bounds
// what a broker sends by the client's fetch.max.bytes (50 MiB by default)
// and message.max.bytes; this leaves room for every client's settings.
// Nothing is allocated for a frame beyond what has arrived.
const maxResponseBytes = 1 << 30

// upReadBuf is an upstream connection's read buffer: most responses
// (Metadata, Produce, group requests) arrive whole in one read with their
// size; a larger body is read past it, straight into its frame.
const upReadBuf = 512

// upstreamClient dials authenticated connections to upstream brokers.
type upstreamClient struct {
	sec         clientprops.Security
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	dialTimeout time.Duration
	clientID    string // for the proxy's own requests
}

// upConn is one connection to an upstream broker. Its owner (a client
// connection's session, or a broker's watch) is the only one to use it: a
// session writes its requests one at a time, on the client connection's
// goroutine or its writer's (writer.go), and reads their answers in order
// (pipeline.go).
type upConn struct {
	c      *upstreamClient
	addr   string
	nc     net.Conn
	rc     syscall.RawConn // nc's socket when nc is plain TCP (cork); nil with TLS
	br     *bufio.Reader   // over nc: a small response and its size in one read
	corr   int32
	buf    []byte    // the request being written (the proxy's own, a decoded one, a raw one over TLS)
	reauth time.Time // when to authenticate again (KIP-368); zero: never

	// A raw request's answer: its head, read exactly (readHead), and its
	// body, moved to the client (raw.go).
	size  [4]byte     // a raw request's size prefix
	iov   [3][]byte   // a raw request's size, header and body; or buf
	bufs  net.Buffers // over iov, for one writev: what is left to write (prepare, flush)
	head  [maxHead]byte
	headN int // bytes of head read so far

	// Pipelined raw requests (pipeline.go), forwarded and awaiting their
	// answers, oldest first, and whether a goroutine reads them.
	mu        sync.Mutex
	idle      sync.Cond // over mu: reading has become false
	queued    sync.Cond // over mu: pending has grown
	pending   []*socketserver.Request
	reading   bool
	lingering bool // the reading goroutine awaits a head no request awaits yet (linger)
	stop      bool // awaitAnswers waits: the reading goroutine is not to linger
	closed    bool // close was called: a linger waiting for a request ends
}

// connect dials addr, with TLS and SASL as the upstream keys say.
func (c *upstreamClient) connect(ctx context.Context, addr string) (*upConn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	defer cancel()
	nc, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
		_ = tcp.SetKeepAlivePeriod(30 * time.Second)
	}
	if c.sec.TLS != nil {
		cfg := c.sec.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		nc = tc
	}
	u := &upConn{c: c, addr: addr, nc: nc, br: bufio.NewReaderSize(nc, upReadBuf)}
	if tcp, ok := nc.(*net.TCPConn); ok {
		u.rc, _ = tcp.SyscallConn() // once: each call makes one
	}
	u.idle.L = &u.mu
	u.queued.L = &u.mu
	if c.sec.SASL != nil {
		stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
		err := u.authenticate(ctx)
		if !stop() {
			err = errors.Join(err, ctx.Err())
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		_ = nc.SetDeadline(time.Time{})
	}
	return u, nil
}

// close closes u's socket, and ends a wait for a request (linger) of the
// goroutine that reads its answers.
func (u *upConn) close() {
	u.nc.Close()
	u.mu.Lock()
	u.closed = true
	u.queued.Broadcast()
	u.mu.Unlock()
}

// authenticate runs the SASL exchange on u (SaslHandshake v1, then
// SaslAuthenticate v1 until the mechanism is done) and notes when the
// session must be renewed, as kgo does: before 95% of the lifetime the
// broker gave.
func (u *upConn) authenticate(ctx context.Context) error {
	mech := u.c.sec.SASL
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	raw, err := u.roundTrip(hs, u.c.clientID, true)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(raw.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return fmt.Errorf("%w: %s: SaslHandshake %s: %w", errUpstreamAuth, u.addr, mech.Name(), err)
	}
	host, _, _ := net.SplitHostPort(u.addr)
	session, write, err := mech.Authenticate(ctx, host)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errUpstreamAuth, u.addr, err)
	}
	start := time.Now()
	var lifetime int64
	for done := false; !done || len(write) > 0; {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, write
		raw, err := u.roundTrip(req, u.c.clientID, true)
		if err != nil {
			return err
		}
		resp := raw.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("%w: %s: %w%s", errUpstreamAuth, u.addr, err, msg)
		}
		write, lifetime = nil, resp.SessionLifetimeMillis
		if !done {
			if done, write, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return fmt.Errorf("%w: %s: %w", errUpstreamAuth, u.addr, err)
			}
		}
	}
	u.reauth = time.Time{}
	if lifetime > 0 {
		lifetime = min(lifetime, int64(365*24*time.Hour/time.Millisecond))
		u.reauth = start.Add(time.Duration(lifetime) * time.Millisecond * 95 / 100)
	}
	return nil
}

// renew renews a SASL session near its end (KIP-368), within the setup
// timeout (upstream.socket.connection.setup.timeout.ms), as a login is.
// The answers of pipelined requests are all in (awaitAnswers): the
// exchange reads its own. An error is a timeout (isTimeout) when the
// timeout passed; any error leaves u unusable.
func (u *upConn) renew(ctx context.Context) error {
	if !u.renewDue() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, u.c.dialTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_ = u.nc.SetDeadline(deadline) // the exchange's reads and writes
	if err := u.authenticate(ctx); err != nil {
		return fmt.Errorf("re-authenticating: %w", err)
	}
	_ = u.nc.SetDeadline(time.Time{})
	return nil
}

// await waits until the answer to the request sent last begins to arrive,
// until deadline at the latest (zero: no limit). When deadline passes
// first it returns an error whose Timeout is true, and u is as it was:
// await may be called again.
func (u *upConn) await(deadline time.Time) error {
	if u.br.Buffered() > 0 {
		return nil
	}
	_ = u.nc.SetReadDeadline(deadline)
	_, err := u.br.Peek(1)
	if err == nil && !deadline.IsZero() {
		_ = u.nc.SetReadDeadline(time.Time{})
	}
	return err
}

// answer reads the answer to req, sent with correlation id corr, decoded at
// req's version.
func (u *upConn) answer(req kmsg.Request, corr int32) (kmsg.Response, error) {
	frame, err := readFrame(u.br, maxResponseBytes)
	if err != nil {
		return nil, err
	}
	return decodeResponse(req, corr, frame)
}

// expectsResponse reports whether a request is answered: all are but a
// Produce with acks=0.
func expectsResponse(req kmsg.Request) bool {
	p, ok := req.(*kmsg.ProduceRequest)
	return !ok || p.Acks != 0
}

// roundTrip sends one of the proxy's own requests and, if answered, reads
// its answer.
func (u *upConn) roundTrip(req kmsg.Request, clientID string, answered bool) (kmsg.Response, error) {
	corr, err := u.write(req, &clientID)
	if err != nil || !answered {
		return nil, err
	}
	return u.answer(req, corr)
}

// write writes req with the next correlation id, which it returns.
func (u *upConn) write(req kmsg.Request, clientID *string) (int32, error) {
	u.corr++
	u.buf = appendRequest(u.buf[:0], req, u.corr, clientID)
	_, err := u.nc.Write(u.buf)
	if cap(u.buf) > 64<<10 { // a large produce request: do not keep its buffer
		u.buf = nil
	}
	return u.corr, err
}

// appendRequest appends req's frame: size, header (v1, or v2 with an empty
// tag section for flexible versions) and body.
func appendRequest(dst []byte, req kmsg.Request, corr int32, clientID *string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if clientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*clientID)))
		dst = append(dst, *clientID...)
	}
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// readFrame reads one size-prefixed frame of at most limit bytes. The
// buffer grows with what arrives, so a peer that announces a large frame
// and sends little costs little.
func readFrame(r io.Reader, limit int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int(int32(binary.BigEndian.Uint32(size[:])))
	if n < 4 || n > limit {
		return nil, fmt.Errorf("%w: a frame of %d bytes", errUpstreamResponse, n)
	}
	return readGrowing(r, nil, n)
}

// readGrowing reads n bytes, the first of which are prefix, growing its
// buffer with what arrives.
func readGrowing(r io.Reader, prefix []byte, n int) ([]byte, error) {
	const step = 1 << 20
	frame := append(make([]byte, 0, min(n, step)), prefix...)
	for len(frame) < n {
		next := min(n, max(len(frame)*2, step))
		if next > cap(frame) {
			grown := make([]byte, len(frame), next)
			copy(grown, frame)
			frame = grown
		}
		if _, err := io.ReadFull(r, frame[len(frame):next]); err != nil {
			return nil, err
		}
		frame = frame[:next]
	}
	return frame, nil
}

// decodeResponse decodes the response frame to req, whose correlation id
// was corr: the header (with a tag section for flexible versions but
// ApiVersions'), then the body at req's version. The frame's size is not
// part of it.
func decodeResponse(req kmsg.Request, corr int32, frame []byte) (kmsg.Response, error) {
	if got := int32(binary.BigEndian.Uint32(frame)); got != corr {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", errUpstreamResponse, got, corr)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		n, err := skipTags(body)
		if err != nil {
			return nil, fmt.Errorf("%w: %s v%d header: %w", errUpstreamResponse, kmsg.NameForKey(req.Key()), req.GetVersion(), err)
		}
		body = body[n:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %w", errUpstreamResponse, kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// skipTags returns the length of the tagged-field section at the start of
// b.
func skipTags(b []byte) (int, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, errors.New("bad tag count")
	}
	off := n
	for range count {
		_, n := binary.Uvarint(b[off:])
		if n <= 0 {
			return 0, errors.New("bad tag")
		}
		off += n
		size, n := binary.Uvarint(b[off:])
		if n <= 0 || size > uint64(len(b)-off-n) {
			return 0, errors.New("bad tag size")
		}
		off += n + int(size)
	}
	return off, nil
}
