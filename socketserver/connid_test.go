package socketserver_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// On an IPv6 listener the connection id writes both addresses as Kafka
// does, through Java's InetAddress.getHostAddress
// (ServerConnectionId.generateConnectionId): 0:0:0:0:0:0:0:1, not ::1. The
// client address the registry and a ListClientConnections response report
// stays in Go's compressed form (::1), and the KIP-1329 address filter
// matches either form. Skipped on a machine without IPv6 loopback.
func TestIPv6ConnectionID(t *testing.T) {
	probe, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	probe.Close()

	const listKey = 200
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, config.Properties{"listeners": "PLAINTEXT://[::1]:0"}, func(c *socketserver.Config) {
		withAPIs(c)
		c.APIs = append(c.APIs, socketserver.API{Key: listKey, MaxVersion: 0,
			New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{} }})
	}, queueHandler(seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	serverPort := srv.Addr("PLAINTEXT").(*net.TCPAddr).Port
	clientPort := c.LocalAddr().(*net.TCPAddr).Port

	send(t, c, metadataReq(1), 1)
	r := recv(t, seen)
	wantID := "0:0:0:0:0:0:0:1:" + strconv.Itoa(serverPort) + "-0:0:0:0:0:0:0:1:" + strconv.Itoa(clientPort) + "-0-0"
	assert.Equal(t, wantID, r.Conn.ID)
	assert.Equal(t, "::1", r.Conn.ClientAddr.Addr().String())
	require.NoError(t, respondEmpty(r))
	readRawFrame(t, c)

	list := func(filter *string) []connregistry.ConnectionRecord {
		t.Helper()
		send(t, c, &connregistry.ListClientConnectionsRequest{APIKey: listKey, ClientAddressFilter: filter}, 2)
		r := recv(t, seen)
		h := &connregistry.ListHandler{Registry: srv.Registry()}
		require.NoError(t, r.Respond(h.Handle(r.Context(), r.Conn.Principal, r.Body.(*connregistry.ListClientConnectionsRequest))))
		resp := &connregistry.ListClientConnectionsResponse{APIKey: listKey}
		readResponse(t, c, resp, 2)
		require.Zero(t, resp.ErrorCode)
		return resp.Connections
	}
	for _, filter := range []*string{nil, strp("::1"), strp("0:0:0:0:0:0:0:1"), strp("[::1]"), strp("::1/128")} {
		conns := list(filter)
		require.Len(t, conns, 1, "filter %v", filter)
		assert.Equal(t, wantID, conns[0].ConnectionID)
		assert.Equal(t, "::1", conns[0].ClientAddress, "ClientAddress stays compressed")
		assert.Equal(t, int32(clientPort), conns[0].ClientPort)
	}
	assert.Empty(t, list(strp("127.0.0.1")))
}
