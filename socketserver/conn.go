package socketserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// conn is one client connection. Its goroutine, serve, is the whole
// per-request path: read a frame, decode it, queue the request, wait for
// the host's answer, write the response, and only then read the next frame.
type conn struct {
	nc      net.Conn
	p       *processor
	info    ConnInfo // written only by serve (after register)
	ctx     context.Context
	cancel  context.CancelFunc
	answers chan answer

	active    atomic.Int64 // unix nanoseconds of the last complete request or response
	inFlight  atomic.Bool  // a request awaits its answer
	closeOnce sync.Once
}

// wbufKeep is the largest write buffer a connection keeps between responses.
const wbufKeep = 64 << 10

// serve runs the connection until it closes.
func (c *conn) serve() {
	srv := c.p.srv
	ls := c.p.ls
	log := srv.log
	br := bufio.NewReaderSize(c.nc, 4096)
	var sizeBuf [4]byte
	var wbuf []byte
	var peer *peerWatcher
	watching := false // peer is reading br for the request in flight
	defer func() {
		c.close()
		if peer != nil {
			close(peer.start)
			for range peer.done { // until the watcher has ended
			}
		}
	}()
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
		if srv.draining.Load() {
			return
		}
		frame, err := readFrame(br, &sizeBuf, srv.cfg.RequestMaxBytes)
		if err != nil {
			if !isClosedOrEOF(err) {
				log.Info("closing connection", "conn_id", c.info.ID, "err", err)
			}
			return
		}
		start := time.Now()
		c.touch(start)

		h, rest, err := parseHeaderPrefix(frame)
		if err != nil {
			log.Info("closing connection", "conn_id", c.info.ID, "err", err)
			return
		}
		api, ok := ls.apis.lookup(h.key)
		if !ok {
			log.Info("closing connection", "conn_id", c.info.ID, "err", ErrUnknownAPI, "api_key", h.key, "api_version", h.version)
			return
		}
		srv.cfg.Metrics.Request(ls.cfg.Name, h.key, len(frame))
		if h.key == apiVersionsKey && h.version > api.MaxVersion {
			// Too new to parse: answer in the v0 layout so any client can read it.
			resp := ls.apis.apiVersionsResponse(nil, true)
			if wbuf, err = c.write(wbuf, h.correlationID, resp); err != nil {
				return
			}
			c.p.busy.Add(int64(time.Since(start)))
			continue
		}
		if h.version < api.MinVersion || h.version > api.MaxVersion {
			log.Info("closing connection", "conn_id", c.info.ID, "err", ErrUnsupportedVersion, "api_key", h.key, "api_version", h.version)
			return
		}
		body := api.New()
		body.SetVersion(h.version)
		if body.IsFlexible() {
			if rest, err = skipTags(rest); err != nil {
				log.Info("closing connection", "conn_id", c.info.ID, "err", err)
				return
			}
		}
		if err := body.ReadFrom(rest); err != nil {
			log.Info("closing connection", "conn_id", c.info.ID, "err", ErrMalformedBody, "api_key", h.key, "api_version", h.version, "detail", err)
			return
		}

		av, isAPIVersions := body.(*kmsg.ApiVersionsRequest)
		if isAPIVersions && ls.apis.serverAnswersAPIVersions {
			resp := ls.apis.apiVersionsResponse(av, false)
			c.noteClientSoftware(av)
			if wbuf, err = c.write(wbuf, h.correlationID, resp); err != nil {
				return
			}
			c.p.busy.Add(int64(time.Since(start)))
			continue
		}

		r := &Request{
			APIKey: h.key, APIVersion: h.version, CorrelationID: h.correlationID, ClientID: h.clientID,
			Body: body, Conn: c.info, ReceivedAt: start, Size: len(frame), conn: c,
		}
		if isAPIVersions {
			c.noteClientSoftware(av) // the request itself carries the earlier values, as in Kafka
		}
		c.inFlight.Store(true)
		select {
		case ls.queue <- r:
		case <-c.ctx.Done():
			return
		}
		c.p.busy.Add(int64(time.Since(start)))
		if br.Buffered() == 0 {
			if peer == nil {
				peer = c.watchPeer(br)
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
			return
		}
		if a.resp != nil {
			writeStart := time.Now()
			if wbuf, err = c.write(wbuf, h.correlationID, a.resp); err != nil {
				return
			}
			c.p.busy.Add(int64(time.Since(writeStart)))
		}
		c.touch(time.Now())
		c.inFlight.Store(false)
	}
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

func (c *conn) watchPeer(br *bufio.Reader) *peerWatcher {
	w := &peerWatcher{start: make(chan struct{}, 1), done: make(chan error, 1)}
	go func() {
		defer close(w.done)
		for range w.start {
			_, err := br.Peek(1)
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) { // a deadline is Shutdown's drain, not the peer
				c.cancel()
			}
			w.done <- err
		}
	}()
	return w
}

// write encodes resp into buf and writes it, under a write deadline of
// connections.max.idle.ms so that a client that stops reading is closed.
func (c *conn) write(buf []byte, correlationID int32, resp kmsg.Response) ([]byte, error) {
	buf = appendResponse(buf[:0], correlationID, resp)
	if idle := c.p.srv.cfg.ConnectionsMaxIdle; idle > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(idle))
	}
	_, err := c.nc.Write(buf)
	if err != nil {
		if !isClosedOrEOF(err) {
			c.p.srv.log.Info("closing connection: write failed", "conn_id", c.info.ID, "err", err)
		}
		return nil, err
	}
	c.p.srv.cfg.Metrics.Response(c.info.Listener, resp.Key(), len(buf))
	c.touch(time.Now())
	if cap(buf) > wbufKeep {
		buf = nil
	}
	return buf, nil
}

// noteClientSoftware records KIP-511's client software name and version
// from a valid ApiVersions v3+ request.
func (c *conn) noteClientSoftware(req *kmsg.ApiVersionsRequest) {
	if req.Version >= 3 && validClientSoftware(req) {
		c.info.ClientSoftwareName = req.ClientSoftwareName
		c.info.ClientSoftwareVersion = req.ClientSoftwareVersion
	}
}

func (c *conn) touch(t time.Time)     { c.active.Store(t.UnixNano()) }
func (c *conn) lastActive() time.Time { return time.Unix(0, c.active.Load()) }

// drain makes a connection that is waiting for its next request stop
// waiting; one serving a request finishes it first (serve checks draining
// before each read).
func (c *conn) drain() { _ = c.nc.SetReadDeadline(time.Now()) }

// close closes the connection once, cancelling its requests' context.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
		c.p.remove(c)
		c.p.srv.cfg.Metrics.ConnectionClosed(c.info.Listener)
	})
}

func isClosedOrEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, os.ErrDeadlineExceeded)
}
