package testkit

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// ProxyProtocolListeners are the properties of two PLAINTEXT listeners
// on 127.0.0.1 that require the PROXY protocol: ELSEWHERE trusts only
// 10.0.0.0/8, so that a connection from this machine is refused before a
// byte is read from it (socketserver.ErrProxyUntrusted), and LOOPBACK,
// the inter-broker listener, trusts 127.0.0.0/8, so that a connection
// from this machine must send a header (socketserver.ErrProxyHeader
// without one).
func ProxyProtocolListeners() config.Properties {
	return config.Properties{
		"listeners":                      "ELSEWHERE://127.0.0.1:0,LOOPBACK://127.0.0.1:0",
		"listener.security.protocol.map": "ELSEWHERE:PLAINTEXT,LOOPBACK:PLAINTEXT",
		"inter.broker.listener.name":     "LOOPBACK",
		"kafkanet.proxy.protocol":        "required",
		"listener.name.elsewhere.kafkanet.proxy.protocol.trusted.networks": "10.0.0.0/8",
		"listener.name.loopback.kafkanet.proxy.protocol.trusted.networks":  "127.0.0.0/8",
	}
}

// SendNoProxyHeader connects to srv's listener l, which requires the
// PROXY protocol, writes bytes that are no PROXY header and waits until
// the server closes the connection, failing t after 10 s.
func SendNoProxyHeader(t testing.TB, srv *socketserver.Server, l protocolmap.ListenerName) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr(l).String())
	if err != nil {
		t.Fatalf("testkit: dialing %s: %v", l, err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n")) // refused untrusted, the write may fail
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(c) // EOF, or a reset: the server closed with the bytes unread
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("testkit: listener %s did not close a connection without a PROXY header", l)
	}
}

// DialProxyPending connects to srv's listener l, which requires the PROXY
// protocol, and writes the start of a header, so that the socket waits for
// the rest: pending (socketserver.Stats.PendingProxyHeaders) until the
// handshake timeout. It is closed when the test ends.
func DialProxyPending(t testing.TB, srv *socketserver.Server, l protocolmap.ListenerName) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr(l).String())
	if err != nil {
		t.Fatalf("testkit: dialing %s: %v", l, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("PROXY TCP4 192.0.2.")); err != nil {
		t.Fatalf("testkit: writing to %s: %v", l, err)
	}
	return c
}
