package socketserver_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

// allAPIs enables every API kmsg knows, at every version it knows, which is
// what these tests need of a listener.
func allAPIs() []socketserver.API {
	var apis []socketserver.API
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if key == 18 {
			continue
		}
		if r := kmsg.RequestForKey(key); r != nil {
			apis = append(apis, socketserver.KmsgAPI(kmsg.Key(key), 0, r.MaxVersion()))
		}
	}
	return apis
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))

// send writes req with the given correlation id.
func send(t testing.TB, c net.Conn, req kmsg.Request, corr int32) {
	t.Helper()
	_, err := c.Write(formatter.AppendRequest(nil, req, corr))
	require.NoError(t, err)
}

// readResponse reads one response frame and decodes it into resp, checking
// the correlation id.
func readResponse(t testing.TB, c net.Conn, resp kmsg.Response, corr int32) {
	t.Helper()
	frame := readRawFrame(t, c)
	require.GreaterOrEqual(t, len(frame), 4)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "correlation id")
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		require.Equal(t, byte(0), body[0], "response header tags")
		body = body[1:]
	}
	require.NoError(t, resp.ReadFrom(body))
}

func readRawFrame(t testing.TB, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	_, err := io.ReadFull(c, size[:])
	require.NoError(t, err)
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, frame)
	require.NoError(t, err)
	return frame
}

// requireClosed asserts the server closed c without writing anything.
func requireClosed(t testing.TB, c net.Conn) {
	t.Helper()
	b := make([]byte, 1)
	n, err := c.Read(b)
	require.Equal(t, 0, n, "the server wrote a response")
	require.ErrorIs(t, err, io.EOF)
}

// echoMetadata answers Metadata with an empty response and everything else
// by closing the connection.
var echoMetadata = socketserver.HandlerFunc(func(r *socketserver.Request) {
	if r.APIKey == 3 {
		_ = r.Respond(kmsg.NewPtrMetadataResponse())
		return
	}
	_ = r.CloseConnection()
})

// perListener returns c's ListenerConfig of listener name, adding an empty
// one when c has none.
func perListener(c *socketserver.Config, name protocolmap.ListenerName) *socketserver.ListenerConfig {
	if c.PerListener == nil {
		c.PerListener = map[protocolmap.ListenerName]*socketserver.ListenerConfig{}
	}
	l := c.PerListener[name]
	if l == nil {
		l = &socketserver.ListenerConfig{}
		c.PerListener[name] = l
	}
	return l
}
