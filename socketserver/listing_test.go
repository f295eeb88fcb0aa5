package socketserver_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// ListClientConnectionsAPI serves KIP-1329 from the server's registry under
// the key it is given, asks the authorizer about the connection's
// principal, and never hands the request to the host's handlers.
func TestListClientConnectionsAPI(t *testing.T) {
	for _, tc := range []struct {
		name      string
		key       int16
		authorize connregistry.Authorizer
		wantCode  int16
		wantConns int
	}{
		{"default key, no authorizer", connregistry.DefaultListAPIKey, nil, 0, 1},
		{"another key", 1000, nil, 0, 1},
		{"anonymous is a super user", connregistry.DefaultListAPIKey, connregistry.SuperUsers("User:ANONYMOUS"), 0, 1},
		{"anonymous is refused", connregistry.DefaultListAPIKey, connregistry.SuperUsers("User:admin"),
			kerr.ClusterAuthorizationFailed.Code, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostSaw := make(chan int16, 1)
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = []socketserver.API{socketserver.ListClientConnectionsAPI(tc.key, tc.authorize)}
			}, socketserver.HandlerFunc(func(r *socketserver.Request) {
				hostSaw <- r.APIKey
				_ = r.CloseConnection()
			}))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			send(t, c, &connregistry.ListClientConnectionsRequest{APIKey: tc.key}, 7)
			resp := &connregistry.ListClientConnectionsResponse{APIKey: tc.key}
			readResponse(t, c, resp, 7)
			assert.Equal(t, tc.wantCode, resp.ErrorCode)
			require.Len(t, resp.Connections, tc.wantConns)
			if tc.wantConns > 0 {
				assert.Equal(t, c.LocalAddr().String(),
					net.JoinHostPort(resp.Connections[0].ClientAddress, strconv.Itoa(int(resp.Connections[0].ClientPort))),
					"the listing shows the connection itself")
			}
			select {
			case k := <-hostSaw:
				t.Fatalf("the host's handler got a request of key %d", k)
			default:
			}
		})
	}
}

// A request of an API with its own Handler is answered on the connection's
// goroutine even while the plane's queue is full and every handler worker
// is blocked: it takes no place in the queue.
func TestAPIHandlerBypassesTheQueue(t *testing.T) {
	block := newGate()
	defer block.open()
	srv := socketservertest.NewServer(t, config.Properties{"queued.max.requests": "1", "num.io.threads": "1"},
		func(c *socketserver.Config) {
			c.APIs = []socketserver.API{mustKmsgAPI(kmsg.Metadata), socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil)}
		}, socketserver.HandlerFunc(func(r *socketserver.Request) {
			block.wait()
			_ = respondEmpty(r)
		}))
	// One Metadata request blocks the only worker, another fills the queue.
	for i := range 2 {
		send(t, socketservertest.Dial(t, srv, "PLAINTEXT"), metadataReq(1), int32(i))
	}
	waitFor(t, 5*time.Second, func() bool { return srv.Stats().RequestQueueSize[protocolmap.DataPlane] == 1 },
		"one request queued behind the blocked one")

	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	send(t, c, &connregistry.ListClientConnectionsRequest{APIKey: connregistry.DefaultListAPIKey}, 9)
	resp := &connregistry.ListClientConnectionsResponse{APIKey: connregistry.DefaultListAPIKey}
	readResponse(t, c, resp, 9)
	assert.Len(t, resp.Connections, 3)
}

// An inline handler (API.Inline) may answer later from another goroutine, and one that
// panics closes only its connection.
func TestAPIHandlerAnswersLaterOrPanics(t *testing.T) {
	const laterKey, panicKey = 1001, 1002
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{
			{Key: laterKey, New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{} },
				Inline: socketserver.HandlerFunc(func(r *socketserver.Request) {
					go func() {
						time.Sleep(10 * time.Millisecond)
						_ = r.Respond(&connregistry.ListClientConnectionsResponse{APIKey: laterKey, Connections: []connregistry.ConnectionRecord{}})
					}()
				})},
			{Key: panicKey, New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{} },
				Inline: socketserver.HandlerFunc(func(*socketserver.Request) { panic("boom") })},
		}
	}, answerAll)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	for corr := range int32(3) {
		send(t, c, &connregistry.ListClientConnectionsRequest{APIKey: laterKey}, corr)
		readResponse(t, c, &connregistry.ListClientConnectionsResponse{APIKey: laterKey}, corr)
	}
	p := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, p, &connregistry.ListClientConnectionsRequest{APIKey: panicKey}, 1)
	requireClosed(t, p)
	// The first connection is still served.
	send(t, c, &connregistry.ListClientConnectionsRequest{APIKey: laterKey}, 4)
	readResponse(t, c, &connregistry.ListClientConnectionsResponse{APIKey: laterKey}, 4)
}

// mustKmsgAPI enables key at every version kmsg knows.
func mustKmsgAPI(key kmsg.Key) socketserver.API {
	return socketserver.KmsgAPI(key, 0, kmsg.RequestForKey(key.Int16()).MaxVersion())
}

// The inline mode keeps the queue's bound: with queued.max.requests=2, at
// most two inline handlers run at once; a third connection's request waits
// for a slot and is handled when one returns. A request the handler hands
// on, to answer later, holds no slot.
func TestInlineHandlersKeepTheQueueBound(t *testing.T) {
	running := make(chan *socketserver.Request, 5)
	release := make(chan struct{})
	later := make(chan *socketserver.Request, 5)
	srv := socketservertest.NewServer(t, config.Properties{"queued.max.requests": "2"}, func(c *socketserver.Config) {
		c.APIs = socketserver.Inline(socketserver.HandlerFunc(func(r *socketserver.Request) {
			if r.CorrelationID >= 100 { // handed on: answered later, from another goroutine
				later <- r
				return
			}
			running <- r
			<-release
			_ = respondEmpty(r)
		}), mustKmsgAPI(kmsg.Metadata))
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		t.Errorf("the queue's handler got API key %d", r.APIKey)
		_ = r.CloseConnection()
	}))
	// Three requests handed on hold no slot ...
	for i := range 3 {
		send(t, socketservertest.Dial(t, srv, "PLAINTEXT"), metadataReq(9), int32(100+i))
	}
	var handedOn []*socketserver.Request
	for range 3 {
		handedOn = append(handedOn, recv(t, later))
	}
	// ... so two handlers may run, and a third waits for one to return.
	conns := make([]net.Conn, 3)
	for i := range conns {
		conns[i] = socketservertest.Dial(t, srv, "PLAINTEXT")
		send(t, conns[i], metadataReq(9), int32(i))
	}
	recv(t, running)
	recv(t, running)
	select {
	case r := <-running:
		t.Fatalf("a third handler (%s) ran while two were running", r.Conn.ID)
	case <-time.After(200 * time.Millisecond):
	}
	release <- struct{}{}
	recv(t, running)
	close(release)
	for i, c := range conns {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 9
		readResponse(t, c, resp, int32(i))
	}
	for _, r := range handedOn {
		require.NoError(t, respondEmpty(r))
	}
}
