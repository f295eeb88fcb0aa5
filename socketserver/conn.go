package socketserver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

// conn is one client connection. Its goroutine, serve, is the whole
// per-request path: read a frame, decode it, queue the request, wait for
// the host's answer, write the response, and only then read the next frame.
type conn struct {
	nc       net.Conn // the TCP connection: closed and given deadlines from any goroutine
	p        *processor
	ctx      context.Context
	cancel   context.CancelFunc
	answers  chan answer
	clientIP netip.Addr // for the connection quotas

	// Owned by serve (and the handshake it runs):
	info         ConnInfo
	rw           io.ReadWriter // nc, or the TLS connection over it
	br           *bufio.Reader
	sizeBuf      [4]byte
	wbuf         []byte
	saslIdentity string

	active    atomic.Int64 // monotonic nanoseconds since the server's epoch of the last complete request or response
	inFlight  atomic.Bool  // a request awaits its answer
	closeOnce sync.Once
	entry     *connregistry.Entry
	reason    atomic.Pointer[connregistry.CloseReason] // the first reason given wins
}

// wbufKeep is the largest write buffer a connection keeps between responses.
const wbufKeep = 64 << 10

// errDraining ends a connection that Shutdown is draining.
var errDraining = errors.New("socketserver: server shutting down")

// serve runs the connection until it closes.
func (c *conn) serve() {
	srv := c.p.srv
	ls := c.p.ls
	log := srv.log
	c.rw = c.nc
	c.br = bufio.NewReaderSize(c.rw, 4096)
	var peer *peerWatcher
	watching := false // peer is reading c.br for the request in flight
	defer func() {
		if !watching && c.draining() {
			c.lingerClose()
		}
		c.close()
		if peer != nil {
			close(peer.start)
			for range peer.done { // until the watcher has ended
			}
		}
	}()
	if err := c.handshake(); err != nil {
		if !isClosedOrEOF(err) && !errors.Is(err, errDraining) {
			log.Info("closing connection during authentication", "conn_id", c.info.ID, "err", err)
		}
		return
	}
	for {
		if watching {
			watching = false
			if err := <-peer.done; err != nil {
				if !isClosedOrEOF(err) {
					log.Info("closing connection", "conn_id", c.info.ID, "err", err)
				}
				return
			}
		}
		if c.draining() {
			return
		}
		frame, err := readFrame(c.br, &c.sizeBuf, srv.cfg.RequestMaxBytes)
		if err != nil {
			if !isClosedOrEOF(err) {
				c.setReason(connregistry.ProtocolError)
				log.Info("closing connection", "conn_id", c.info.ID, "err", err)
			}
			return
		}
		start := time.Now()
		c.touch(start)
		h, body, err := c.decode(frame, start)
		if err != nil {
			c.setReason(connregistry.ProtocolError)
			log.Info("closing connection", "conn_id", c.info.ID, "err", err, "api_key", h.key, "api_version", h.version)
			return
		}
		// After the session's expiry only a SaslHandshake, which starts
		// re-authentication, is served; any other request closes, including
		// those the server answers itself (KIP-368, as Kafka's processor).
		if exp := c.info.SessionExpiry; !exp.IsZero() && start.After(exp) {
			if _, reauth := body.(*kmsg.SASLHandshakeRequest); !reauth {
				c.setReason(connregistry.SessionExpired)
				log.Info("closing connection", "conn_id", c.info.ID, "err", ErrSessionExpired, "principal", c.info.Principal)
				return
			}
		}
		if answered, err := c.answerInServer(h, body); answered || err != nil {
			if err != nil {
				if !isClosedOrEOF(err) {
					log.Info("closing connection", "conn_id", c.info.ID, "err", err)
				}
				return
			}
			c.p.busy.Add(int64(time.Since(start)))
			continue
		}

		r := &Request{
			APIKey: h.key, APIVersion: h.version, CorrelationID: h.correlationID, ClientID: h.clientID,
			Body: body, Conn: c.info, ReceivedAt: start, Size: len(frame), conn: c,
		}
		if av, ok := body.(*kmsg.ApiVersionsRequest); ok {
			c.noteClientSoftware(av) // the request itself carries the earlier values, as in Kafka
		}
		c.inFlight.Store(true)
		select {
		case ls.queue <- r:
		case <-c.ctx.Done():
			return
		}
		c.p.busy.Add(int64(time.Since(start)))
		if c.br.Buffered() == 0 {
			if peer == nil {
				peer = c.watchPeer()
			}
			peer.start <- struct{}{}
			watching = true
		}

		var a answer
		select {
		case a = <-c.answers:
		case <-c.ctx.Done():
			return
		}
		if a.close {
			c.setReason(connregistry.HandlerClosed)
			return
		}
		if a.resp != nil {
			writeStart := time.Now()
			if err := c.write(h.correlationID, a.resp); err != nil {
				return
			}
			c.p.busy.Add(int64(time.Since(writeStart)))
		}
		c.touch(time.Now())
		c.inFlight.Store(false)
	}
}

// decode parses a request frame: header, API lookup on the listener,
// version check, header tags and body. A too-new ApiVersions request is not
// decoded: it comes back with a nil body, to be answered in the v0 layout.
// An error means the connection must close without a response.
func (c *conn) decode(frame []byte, received time.Time) (header, kmsg.Request, error) {
	apis := c.p.ls.apis
	h, rest, err := parseHeaderPrefix(frame)
	if err != nil {
		return h, nil, err
	}
	clientID := ""
	if h.clientID != nil {
		clientID = *h.clientID
	}
	c.entry.Request(received, len(frame), clientID)
	api, ok := apis.lookup(h.key)
	if !ok {
		return h, nil, ErrUnknownAPI
	}
	c.p.srv.cfg.Metrics.Request(c.info.Listener, h.key, len(frame))
	if h.key == apiVersionsKey && h.version > api.MaxVersion {
		return h, nil, nil
	}
	if h.version < api.MinVersion || h.version > api.MaxVersion {
		return h, nil, ErrUnsupportedVersion
	}
	body := api.New()
	if ks, ok := body.(KeySetter); ok {
		ks.SetKey(h.key)
	}
	body.SetVersion(h.version)
	if body.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return h, nil, err
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("%w: %w", ErrMalformedBody, err)
	}
	return h, body, nil
}

// answerInServer answers the requests the server owns: ApiVersions (unless
// the host took it over) and, after authentication, SaslHandshake and
// SaslAuthenticate. It reports whether it answered; an error means the
// connection must close.
func (c *conn) answerInServer(h header, body kmsg.Request) (bool, error) {
	apis := c.p.ls.apis
	switch b := body.(type) {
	case nil: // a too-new ApiVersions request
		return true, c.write(h.correlationID, apis.apiVersionsResponse(nil, true))
	case *kmsg.ApiVersionsRequest:
		if !apis.serverAnswersAPIVersions {
			return false, nil
		}
		resp := apis.apiVersionsResponse(b, false)
		c.noteClientSoftware(b)
		return true, c.write(h.correlationID, resp)
	case *kmsg.SASLHandshakeRequest, *kmsg.SASLAuthenticateRequest:
		return true, c.answerSASLAfterAuthentication(h, body)
	}
	return false, nil
}

// peerWatcher is a connection's second goroutine: while a request is in
// flight it waits for the peer's next bytes, so that a client that goes
// away cancels the request's context (the host can stop working for it)
// instead of going unnoticed until the response is written. It reads into
// serve's bufio.Reader, which serve leaves alone from a send on start until
// it has received the read's error from done (nil when the next request has
// begun to arrive). Closing start ends it; it then closes done.
type peerWatcher struct {
	start chan struct{}
	done  chan error
}

func (c *conn) watchPeer() *peerWatcher {
	br := c.br
	w := &peerWatcher{start: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		defer close(w.done)
		for range w.start {
			_, err := br.Peek(1)
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) { // a deadline is Shutdown's drain, not the peer
				c.close() // and a write blocked on a peer that no longer reads ends now
			}
			w.done <- err
		}
	}()
	return w
}

// write encodes resp and writes it, under a write deadline of
// connections.max.idle.ms so that a client that stops reading is closed.
func (c *conn) write(correlationID int32, resp kmsg.Response) error {
	c.wbuf = appendResponse(c.wbuf[:0], correlationID, resp)
	if err := c.writeFrame(c.wbuf); err != nil {
		return err
	}
	c.p.srv.cfg.Metrics.Response(c.info.Listener, resp.Key(), len(c.wbuf))
	if cap(c.wbuf) > wbufKeep {
		c.wbuf = nil
	}
	return nil
}

// writeRaw writes a size-prefixed raw token (SaslHandshake v0's SASL
// exchange).
func (c *conn) writeRaw(token []byte) error {
	c.wbuf = binary.BigEndian.AppendUint32(c.wbuf[:0], uint32(len(token)))
	c.wbuf = append(c.wbuf, token...)
	return c.writeFrame(c.wbuf)
}

func (c *conn) writeFrame(b []byte) error {
	if idle := c.p.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(idle))
	}
	if _, err := c.rw.Write(b); err != nil {
		if !isClosedOrEOF(err) {
			c.p.srv.log.Info("closing connection: write failed", "conn_id", c.info.ID, "err", err)
		}
		return err
	}
	now := time.Now()
	c.touch(now)
	c.entry.Response(now, len(b))
	return nil
}

// noteClientSoftware records KIP-511's client software name and version
// from a valid ApiVersions v3+ request.
func (c *conn) noteClientSoftware(req *kmsg.ApiVersionsRequest) {
	if req.Version >= 3 && validClientSoftware(req) {
		c.info.ClientSoftwareName = req.ClientSoftwareName
		c.info.ClientSoftwareVersion = req.ClientSoftwareVersion
		c.entry.Update(func(rc *connregistry.Conn) {
			rc.SoftwareName, rc.SoftwareVersion = req.ClientSoftwareName, req.ClientSoftwareVersion
		})
	}
}

func (c *conn) draining() bool { return c.p.srv.draining.Load() }

// touch records activity at t. Times are kept on the monotonic clock, as
// offsets from the server's epoch: the wall clock may step, and idle
// expiry and least-recently-active choices must not follow it.
func (c *conn) touch(t time.Time)     { c.active.Store(int64(t.Sub(c.p.srv.epoch))) }
func (c *conn) lastActive() time.Time { return c.p.srv.epoch.Add(time.Duration(c.active.Load())) }

// drain makes a connection that is waiting for its next request stop
// waiting; one serving a request finishes it first (serve checks draining
// before each read).
func (c *conn) drain() { _ = c.nc.SetReadDeadline(time.Now()) }

// Lingering bounds for closing a drained connection: see lingerClose.
const (
	lingerQuiet = 100 * time.Millisecond
	lingerMax   = 2 * time.Second
)

// lingerClose prepares a drained connection's close so that its last
// responses are not lost. Closing a socket with unread bytes (requests a
// client pipelined behind the last one answered) resets the connection, and
// the kernel then discards the responses it has not yet sent. So the write
// side closes first (the client gets its responses, then EOF) and the
// client's bytes are read and discarded until it closes, sends nothing for
// lingerQuiet, or lingerMax has passed.
func (c *conn) lingerClose() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	buf := make([]byte, 4096)
	end := time.Now().Add(lingerMax)
	for {
		deadline := time.Now().Add(lingerQuiet)
		if deadline.After(end) {
			deadline = end
		}
		_ = c.nc.SetReadDeadline(deadline)
		_, err := c.nc.Read(buf)
		if now := time.Now(); now.After(end) ||
			err != nil && !(errors.Is(err, os.ErrDeadlineExceeded) && now.Before(deadline)) { // Shutdown's drain may move the deadline
			return
		}
	}
}

// setReason records why the connection closes, unless a reason was given
// already.
func (c *conn) setReason(r connregistry.CloseReason) { c.reason.CompareAndSwap(nil, &r) }

// closeWith closes the connection for reason; the registry's operator
// "kill" and the processor's idle and quota closes use it.
func (c *conn) closeWith(r connregistry.CloseReason) {
	c.setReason(r)
	c.close()
}

// close closes the connection once, cancelling its requests' context.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		// Unless a reason was given already (the first one wins):
		if c.p.srv.draining.Load() {
			c.setReason(connregistry.ServerShutdown)
		}
		c.setReason(connregistry.ClientClosed)
		c.entry.Remove(time.Now(), *c.reason.Load())
		c.cancel()
		c.nc.Close()
		c.p.remove(c)
		c.p.srv.quotas.release(c.p.ls.cfg.Name, c.clientIP)
		c.p.srv.cfg.Metrics.ConnectionClosed(c.info.Listener)
	})
}

func isClosedOrEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, os.ErrDeadlineExceeded)
}
