package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn speaks the Kafka protocol over one TCP connection, one frame at a
// time, so that a test sees exactly what the proxy writes.
type rawConn struct {
	net.Conn
	corr int32
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c}
}

// send writes req at the version it holds and returns its correlation id.
func (c *rawConn) send(t *testing.T, req kmsg.Request) int32 {
	t.Helper()
	c.corr++
	require.NoError(t, c.SetWriteDeadline(time.Now().Add(10*time.Second)))
	_, err := c.Write(formatter.AppendRequest(nil, req, c.corr))
	require.NoError(t, err)
	return c.corr
}

// read reads the response to corr into resp, at resp's version.
func (c *rawConn) read(t *testing.T, resp kmsg.Response, corr int32) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	frame, err := readFrame(c, 64<<20)
	require.NoError(t, err)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "correlation id")
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		n, err := skipTags(body)
		require.NoError(t, err)
		body = body[n:]
	}
	require.NoError(t, resp.ReadFrom(body))
}

// roundTrip sends req and returns its response.
func (c *rawConn) roundTrip(t *testing.T, req kmsg.Request) kmsg.Response {
	t.Helper()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	c.read(t, resp, c.send(t, req))
	return resp
}

// requireClosed asserts that the peer closes the connection within d
// without writing anything, cleanly (EOF, not a reset).
func (c *rawConn) requireClosed(t *testing.T, d time.Duration) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	n, err := c.Read(make([]byte, 1))
	require.Equal(t, 0, n, "the proxy wrote something")
	require.ErrorIs(t, err, io.EOF)
}

func metadataRequest(version int16, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// nodeAddr returns the address the proxy serves upstream node id on, on
// listener name.
func (tp *testProxy) nodeAddr(t *testing.T, name string, id int32) string {
	t.Helper()
	tp.mu.Lock()
	ps := tp.listeners[protocolName(name)]
	tp.mu.Unlock()
	require.NotNil(t, ps, "no listener %s", name)
	port, ok := ps.open(id)
	require.True(t, ok, "the proxy serves no port for node %d", id)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// requireRefused asserts that the peer closes the connection within d
// without writing anything: cleanly or with a reset, as a server that
// refuses a connection with a request unread does.
func (c *rawConn) requireRefused(t *testing.T, d time.Duration) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	n, err := c.Read(make([]byte, 1))
	require.Equal(t, 0, n, "the proxy wrote something")
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the connection is still open")
}
