package socketserver_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// CloseClientConnectionsAPI closes the connections a filter selects, with
// the operator's reason, answers with what it closed, keeps the requesting
// connection open, asks the authorizer, and never hands the request to the
// host's handlers.
func TestCloseClientConnectionsAPI(t *testing.T) {
	for _, tc := range []struct {
		name      string
		authorize connregistry.Authorizer
		listener  *string
		wantCode  int16
		wantClose bool
	}{
		{"closes the listener's connections but the caller's", nil, closeFilter("plaintext"), 0, true},
		{"nothing matches", nil, closeFilter("OTHER"), 0, false},
		{"anonymous is refused", connregistry.SuperUsers("User:admin"), closeFilter("PLAINTEXT"), kerr.ClusterAuthorizationFailed.Code, false},
		{"no filter is refused", nil, nil, kerr.InvalidRequest.Code, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostSaw := make(chan int16, 1)
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = []socketserver.API{socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, tc.authorize)}
			}, socketserver.HandlerFunc(func(r *socketserver.Request) {
				hostSaw <- r.APIKey
				_ = r.CloseConnection()
			}))
			victims := []net.Conn{socketservertest.Dial(t, srv, "PLAINTEXT"), socketservertest.Dial(t, srv, "PLAINTEXT")}
			require.Eventually(t, func() bool { return srv.Registry().Len() == 2 }, 5*time.Second, 5*time.Millisecond)
			admin := socketservertest.Dial(t, srv, "PLAINTEXT")

			send(t, admin, &connregistry.CloseClientConnectionsRequest{ListenerFilter: tc.listener}, 9)
			resp := &connregistry.CloseClientConnectionsResponse{}
			readResponse(t, admin, resp, 9)
			assert.Equal(t, tc.wantCode, resp.ErrorCode)
			if !tc.wantClose {
				assert.Empty(t, resp.Connections)
				assert.Equal(t, 3, srv.Registry().Len())
				return
			}
			require.Len(t, resp.Connections, 2)
			for _, c := range victims {
				require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
				_, err := c.Read(make([]byte, 1))
				assert.ErrorIs(t, err, io.EOF, "a closed connection")
			}
			closed := srv.Registry().Closed(connregistry.Filter{})
			require.Len(t, closed, 2)
			for _, c := range closed {
				assert.Equal(t, connregistry.CloseByOperator, c.CloseReason)
			}
			// The caller's connection is still served.
			send(t, admin, &connregistry.CloseClientConnectionsRequest{ListenerFilter: tc.listener}, 10)
			again := &connregistry.CloseClientConnectionsResponse{}
			readResponse(t, admin, again, 10)
			assert.Empty(t, again.Connections)
			select {
			case k := <-hostSaw:
				t.Fatalf("the host's handler got a request of key %d", k)
			default:
			}
		})
	}
}

func closeFilter(s string) *string { return &s }
