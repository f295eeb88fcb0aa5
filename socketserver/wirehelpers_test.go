package socketserver_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

// frame prefixes payload with its 4-byte big-endian size.
func frame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// headerBytes writes a request header by hand: key, version, correlation
// id, a nullable (never compact) client id and, when tags is non-nil, the
// header v2 tag section tags (count and fields, already encoded).
func headerBytes(key, version int16, corr int32, clientID *string, tags []byte) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if clientID == nil {
		b = binary.BigEndian.AppendUint16(b, 0xffff)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(*clientID)))
		b = append(b, *clientID...)
	}
	return append(b, tags...)
}

// requestFrame returns req as a whole frame with a hand-written header
// carrying clientID and, for flexible versions, an empty tag section.
func requestFrame(req kmsg.Request, corr int32, clientID *string) []byte {
	var tags []byte
	if req.IsFlexible() {
		tags = []byte{0}
	}
	return frame(req.AppendTo(headerBytes(req.Key(), req.GetVersion(), corr, clientID, tags)))
}

func metadataReq(version int16) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = version
	return r
}

func write(t testing.TB, c net.Conn, b []byte) {
	t.Helper()
	_, err := c.Write(b)
	require.NoError(t, err)
}

// requireClosedNoResponse asserts that the server closes c, within a
// generous bound, without writing a byte. A server closing with unread bytes
// in its receive buffer resets the connection, so a reset counts as closed.
func requireClosedNoResponse(t testing.TB, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	b := make([]byte, 64)
	n, err := c.Read(b)
	require.Equal(t, 0, n, "the server wrote %x", b[:n])
	requireClosedErr(t, err)
}

func requireClosedErr(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("want the connection closed by the server, got %v", err)
	}
}

// requireOpen asserts the server neither wrote to nor closed c during d.
func requireOpen(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	b := make([]byte, 1)
	n, err := c.Read(b)
	require.Equal(t, 0, n, "unexpected byte from the server")
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a read timeout (connection open), got %v", err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
}

// metadataRoundTrip sends a Metadata request and checks its answer arrives.
func metadataRoundTrip(t testing.TB, c net.Conn, version int16, corr int32) {
	t.Helper()
	send(t, c, metadataReq(version), corr)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = version
	readResponse(t, c, resp, corr)
}

// queueHandler hands every request to a channel, for the test to answer.
func queueHandler(ch chan<- *socketserver.Request) socketserver.Handler {
	return socketserver.HandlerFunc(func(r *socketserver.Request) { ch <- r })
}

// recv waits for a request from ch.
func recv(t testing.TB, ch <-chan *socketserver.Request) *socketserver.Request {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the handler")
		return nil
	}
}

// respondEmpty answers r with an empty response of its own API.
func respondEmpty(r *socketserver.Request) error {
	return r.Respond(r.Body.ResponseKind())
}

// gate is a latch that handlers wait on until the test opens it. Tests
// `defer g.open()` so that no handler is left blocked: deferred calls run
// before the server's cleanup, which waits for the handlers.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }
func (g *gate) wait() { <-g.ch }

func strp(s string) *string { return &s }
