package socketserver_test

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// A client that sends its requests and then half-closes its socket gets
// every response, in order, and then the close. Kafka mutes a connection
// while its request is handled, so it reads the client's EOF only once the
// responses to the requests before it have gone
// (SocketServerTest.testGracefulClose: requests pipelined, then a close,
// are all processed). Requests the host answers and requests the server
// answers itself (ApiVersions) alike, over plaintext and TLS. The host
// still learns of the EOF: the context of a request it holds is cancelled,
// and the answer it gives then is written.
func TestHalfCloseDeliversResponses(t *testing.T) {
	pki := newTestPKI(t)
	props := merge(pki.props(""), map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"security.inter.broker.protocol": "PLAINTEXT",
	})
	metadata := func() kmsg.Request { return metadataReq(1) }
	versions := func() kmsg.Request { return apiVersionsReq(3, "test", "1") }
	for _, tc := range []struct {
		name     string
		requests []func() kmsg.Request
		// waitForCancel: the handler answers only once the request's
		// context is cancelled, which the client's EOF does.
		waitForCancel bool
	}{
		{"one request the host answers", []func() kmsg.Request{metadata}, true},
		{"one request the server answers", []func() kmsg.Request{versions}, false},
		{"pipelined requests the host answers", []func() kmsg.Request{metadata, metadata, metadata, metadata, metadata}, false},
		{"pipelined requests the server answers", []func() kmsg.Request{versions, versions, versions, versions, versions}, false},
		{"pipelined, both kinds", []func() kmsg.Request{versions, metadata, versions, metadata, metadata}, false},
	} {
		for _, l := range []string{"PLAINTEXT", "SSL"} {
			t.Run(tc.name+"/"+l, func(t *testing.T) {
				h := socketserver.HandlerFunc(func(r *socketserver.Request) {
					if tc.waitForCancel {
						select {
						case <-r.Context().Done():
						case <-time.After(10 * time.Second):
							t.Error("the request's context was not cancelled by the client's EOF")
						}
					}
					_ = respondEmpty(r)
				})
				srv := socketservertest.NewServer(t, props, withAPIs, h)
				raw := socketservertest.Dial(t, srv, protocolmap.ListenerName(l)).(*net.TCPConn)
				c := net.Conn(raw)
				var tlsConn *tls.Conn
				if l == "SSL" {
					tlsConn = tls.Client(raw, pki.clientConfig())
					require.NoError(t, tlsConn.Handshake())
					c = tlsConn
				}
				var b []byte
				var corrs []int32
				for i, req := range tc.requests {
					corr := int32(100 + i)
					b = append(b, formatter.AppendRequest(nil, req(), corr)...)
					corrs = append(corrs, corr)
				}
				write(t, c, b)
				if tlsConn != nil {
					require.NoError(t, tlsConn.CloseWrite()) // close_notify
				}
				require.NoError(t, raw.CloseWrite()) // FIN
				readResponsesThenEOF(t, c, corrs...)
				requireConnCount(t, srv, l, 0)
			})
		}
	}
}
