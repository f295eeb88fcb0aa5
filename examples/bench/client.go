package main

// This file is the client side shared by the scenarios: dialing from many
// source addresses, raw request frames, and latency percentiles.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

// sourceAddrs is how many loopback source addresses (127.0.0.2 and up) the
// client spreads its connections over, so that its ephemeral ports (about
// 28,000 per source address) do not run out with 100,000 connections plus
// those in TIME_WAIT.
const sourceAddrs = 64

// dialer opens connections from the loopback source addresses in turn.
type dialer struct {
	next  atomic.Uint64
	addrs []*net.TCPAddr
	tls   *tls.Config // used by dialTLS
}

// newDialer returns a dialer over sourceAddrs source addresses; tlsConfig
// is the client configuration of TLS connections.
func newDialer(tlsConfig *tls.Config) *dialer {
	d := &dialer{tls: tlsConfig}
	for i := range sourceAddrs {
		d.addrs = append(d.addrs, &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))})
	}
	return d
}

// netDialer returns a net.Dialer bound to the next source address.
func (d *dialer) netDialer() *net.Dialer {
	i := d.next.Add(1)
	return &net.Dialer{LocalAddr: d.addrs[i%uint64(len(d.addrs))], Timeout: 10 * time.Second}
}

// dial opens a plaintext connection to addr.
func (d *dialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	return d.netDialer().DialContext(ctx, "tcp", addr)
}

// dialTLS opens a TLS connection to addr and completes the handshake.
func (d *dialer) dialTLS(ctx context.Context, addr string) (net.Conn, error) {
	td := tls.Dialer{NetDialer: d.netDialer(), Config: d.tls}
	return td.DialContext(ctx, "tcp", addr)
}

// dialFor returns how a client reaches c's listener: dialTLS when it
// speaks TLS, else dial.
func (d *dialer) dialFor(c *child) func(context.Context, string) (net.Conn, error) {
	if c.tls {
		return d.dialTLS
	}
	return d.dial
}

// clientID is the client id of the bench's raw requests.
const clientID = "bench"

// requestFrame encodes req as a whole request frame with correlation id 0.
func requestFrame(req kmsg.Request) []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	return f.AppendRequest(nil, req, 0)
}

// apiVersionsV0Frame is an ApiVersions v0 request: 19 bytes.
func apiVersionsV0Frame() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return requestFrame(req)
}

// metadataV1Frame is a Metadata v1 request naming no topic.
func metadataV1Frame() []byte {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 1
	req.Topics = []kmsg.MetadataRequestTopic{}
	return requestFrame(req)
}

// listConnectionsFrame is a ListClientConnections v0 request under
// connregistry.DefaultListAPIKey, without filters.
func listConnectionsFrame() []byte {
	return requestFrame(&connregistry.ListClientConnectionsRequest{APIKey: connregistry.DefaultListAPIKey})
}

// topConnectionsFrame is a ListClientConnections request for the n
// connections with the highest request rates.
func topConnectionsFrame(n int) []byte {
	return requestFrame(&connregistry.ListClientConnectionsRequest{APIKey: connregistry.DefaultListAPIKey,
		SortBy: connregistry.SortByRequests, Limit: int32(n)})
}

// errCorrelation is a response whose correlation id is not the request's.
var errCorrelation = errors.New("response correlation id does not match the request's")

// rawConn sends one pre-encoded request at a time on a connection and
// reads the response, allocating nothing per round trip.
type rawConn struct {
	c     net.Conn
	br    *bufio.Reader
	frame []byte // the request; its correlation id is set per send
	corr  int32
	size  [4]byte
	body  []byte // the last response, without its size
}

// newRawConn wraps c to send frame.
func newRawConn(c net.Conn, frame []byte) *rawConn {
	return &rawConn{c: c, br: bufio.NewReaderSize(c, 4096), frame: slices.Clone(frame), body: make([]byte, 0, 512)}
}

// send writes the request with the next correlation id.
func (rc *rawConn) send() error {
	rc.corr++
	binary.BigEndian.PutUint32(rc.frame[8:], uint32(rc.corr))
	_, err := rc.c.Write(rc.frame)
	return err
}

// receive reads one response into rc.body and checks its correlation id.
func (rc *rawConn) receive() error {
	if _, err := io.ReadFull(rc.br, rc.size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(rc.size[:]))
	if n < 4 {
		return fmt.Errorf("response of %d bytes", n)
	}
	if n > cap(rc.body) {
		rc.body = make([]byte, n)
	}
	rc.body = rc.body[:n]
	if _, err := io.ReadFull(rc.br, rc.body); err != nil {
		return err
	}
	if int32(binary.BigEndian.Uint32(rc.body)) != rc.corr {
		return errCorrelation
	}
	return nil
}

// roundTrip sends the request and reads its response.
func (rc *rawConn) roundTrip() error {
	if err := rc.send(); err != nil {
		return err
	}
	return rc.receive()
}

// apiVersionsOK checks the last response as an ApiVersions v0 response
// without an error.
func (rc *rawConn) apiVersionsOK() error {
	if len(rc.body) < 6 {
		return fmt.Errorf("ApiVersions response of %d bytes", len(rc.body))
	}
	if code := int16(binary.BigEndian.Uint16(rc.body[4:])); code != 0 {
		return fmt.Errorf("ApiVersions error code %d", code)
	}
	return nil
}

// helloRoundTrip does one ApiVersions v0 round trip on a new connection.
func helloRoundTrip(c net.Conn) error {
	rc := newRawConn(c, apiVersionsV0Frame())
	if err := rc.roundTrip(); err != nil {
		return err
	}
	return rc.apiVersionsOK()
}

// connSet holds open connections.
type connSet struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
}

func (s *connSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// closeAll closes every connection with a reset (SO_LINGER 0), so that
// none lingers in TIME_WAIT holding a source port.
func (s *connSet) closeAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
}

// openIdle grows s to n connections to addr, with parallel dialers, each
// connection after one ApiVersions v0 round trip.
func openIdle(ctx context.Context, dial func(context.Context, string) (net.Conn, error), addr string, s *connSet, n, parallel int) error {
	need := int64(n - s.len())
	if need <= 0 {
		return nil
	}
	var left atomic.Int64
	left.Store(need)
	var wg sync.WaitGroup
	errs := make(chan error, parallel)
	for range parallel {
		wg.Go(func() {
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				c, err := dial(ctx, addr)
				if err == nil {
					err = helloRoundTrip(c)
					if err != nil {
						c.Close()
					}
				}
				if err != nil {
					errs <- fmt.Errorf("after %d of %d connections: %w", s.len(), n, err)
					left.Store(-1 << 62)
					return
				}
				s.add(c)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps float error (99.9/100*1000 is 999.0000000000001)
	// from moving the rank up by one.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// micros returns d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// latencySamples adds the p50, p99 and p99.9 of sorted latencies, in
// microseconds, to out under the case c.
func latencySamples(out []sample, c string, sorted []time.Duration) []sample {
	return append(out,
		sample{Case: c, Metric: "p50 µs", Value: micros(percentile(sorted, 50))},
		sample{Case: c, Metric: "p99 µs", Value: micros(percentile(sorted, 99))},
		sample{Case: c, Metric: "p99.9 µs", Value: micros(percentile(sorted, 99.9))},
	)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
