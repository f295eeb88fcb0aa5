package socketserver_test

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func withAPIs(c *socketserver.Config) { c.APIs = allAPIs() }

func TestApiVersionsAndKgo(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)

	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	send(t, c, req, 7)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	readResponse(t, c, resp, 7)
	assert.Equal(t, int16(0), resp.ErrorCode)
	assert.Greater(t, len(resp.ApiKeys), 50)

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)
}

// New holds a listener configuration built in code to config.Listeners's
// rules: two listeners on one port are refused before anything binds, and
// the error names the key whose rule broke.
func TestNewValidatesListenersBuiltInCode(t *testing.T) {
	ep := func(name string, port int) listener.Listener {
		e := listener.EndPoint{Name: protocolmap.ListenerName(name), Host: "127.0.0.1", Port: port}
		return listener.Listener{Name: e.Name, Bind: e, Advertised: e}
	}
	a, b := ep("PLAINTEXT", 19092), ep("OTHER", 19092)
	a.InterBroker = true
	_, err := socketserver.New(socketserver.Config{Listeners: &listener.Set{
		All: []listener.Listener{a, b}, InterBrokerListener: "PLAINTEXT"}})
	require.ErrorIs(t, err, listener.ErrDuplicatePort)
	var ce *config.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "listeners", ce.Key)

	b.Bind.Port, b.Advertised.Port = 0, 0
	srv, err := socketserver.New(socketserver.Config{Listeners: &listener.Set{
		All: []listener.Listener{a, b}, InterBrokerListener: "PLAINTEXT"}})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
}

// New refuses negative counts and sizes of a Config built in code, as
// Config's rule says (negative turns a feature off only where it can be
// off): a negative NetworkThreads quietly became the default.
func TestNewRefusesNegativeCounts(t *testing.T) {
	set, err := config.Listeners(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		configure func(*socketserver.Config)
		want      string
	}{
		{"NetworkThreads", func(c *socketserver.Config) {
			c.PerListener = map[protocolmap.ListenerName]*socketserver.ListenerConfig{"PLAINTEXT": {NetworkThreads: -5}}
		}, "NetworkThreads (-5)"},
		{"IOThreads", func(c *socketserver.Config) { c.IOThreads = -1 }, "IOThreads (-1)"},
		{"QueuedMaxRequests", func(c *socketserver.Config) { c.QueuedMaxRequests = -1 }, "QueuedMaxRequests (-1)"},
		{"RequestMaxBytes", func(c *socketserver.Config) { c.RequestMaxBytes = -1 }, "RequestMaxBytes (-1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := socketserver.Config{Listeners: set}
			tc.configure(&c)
			_, err := socketserver.New(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Broker advertises what clients can reach: the port bound for an
// advertised port 0, and the host name for an empty advertised host. B is
// configured on every interface, as a broker's listener often is, but
// handed a loopback socket, so that the test binds no wildcard address.
func TestServerBrokerAdvertisesBoundPorts(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "A://127.0.0.1:0,B://:0",
		"listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
		"inter.broker.listener.name":     "A",
	}, func(c *socketserver.Config) {
		c.Listen = func(ctx context.Context, l listener.Listener) (net.Listener, error) {
			if l.Name == "B" {
				require.Empty(t, l.Bind.Host, "B's configured host")
				var lc net.ListenConfig
				return lc.Listen(ctx, "tcp", "127.0.0.1:0")
			}
			return socketserver.ListenTCP(ctx, l)
		}
	}, answerAll)
	b := srv.Broker(7, "rack-1")
	assert.Equal(t, int32(7), b.NodeID)
	assert.Equal(t, "rack-1", b.Rack)
	require.Len(t, b.EndPoints, 2)
	assert.Equal(t, srv.Addr("A").String(), b.EndPoints[0].Address())
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, host, b.EndPoints[1].Host)
	assert.Equal(t, srv.Addr("B").(*net.TCPAddr).Port, b.EndPoints[1].Port)
}
