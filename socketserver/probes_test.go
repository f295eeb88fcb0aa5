package socketserver_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// closeReasons records the reasons HookConnClosed is given.
type closeReasons struct {
	mu      sync.Mutex
	reasons []connregistry.CloseReason
}

func (r *closeReasons) OnConnClosed(_ connregistry.Info, reason connregistry.CloseReason) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *closeReasons) get() []connregistry.CloseReason {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]connregistry.CloseReason(nil), r.reasons...)
}

// reset closes c with a TCP reset (RST) instead of a FIN.
func reset(t testing.TB, c net.Conn) {
	t.Helper()
	require.NoError(t, c.(*net.TCPConn).SetLinger(0))
	require.NoError(t, c.Close())
}

// A probe, a connection closed by its client before it sent a byte of a
// request (after its PROXY header and TLS handshake, if any), or a load
// balancer's own (a PROXY LOCAL header), however it closes (FIN or RST):
// counted in Stats.ProbesClosed, logged at Debug only, kept out of the
// registry's history. Everything else a client closes is in the history
// as closed by its client, a reset in the middle of a request included
// (not a protocol error), and logged at Debug, never at Info, as Kafka
// logs a disconnection; a failed TLS handshake and a refused PROXY header
// stay as they were, at Info.
func TestProbesKeptOutOfHistory(t *testing.T) {
	pki := newTestPKI(t)
	metadata := requestFrame(metadataReq(9), 1, nil)
	answered := func(t *testing.T, c net.Conn) {
		t.Helper()
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 9
		readResponse(t, c, resp, 1)
	}
	tlsHandshake := func(t *testing.T, c net.Conn) {
		t.Helper()
		require.NoError(t, tls.Client(c, pki.clientConfig()).Handshake())
	}
	fin := func(t testing.TB, c net.Conn) { t.Helper(); require.NoError(t, c.Close()) }
	local := v2Command(t, proxyproto.LOCAL, "203.0.113.9:5000")
	sourced := v2(t, "203.0.113.9:5000")
	const (
		plain    = "PLAINTEXT"
		ssl      = "SSL"
		sasl     = "SASL_PLAINTEXT"
		proxy    = "PROXY"     // PLAINTEXT, requiring the PROXY protocol
		proxyTLS = "PROXY+SSL" // SSL, requiring the PROXY protocol
	)
	cases := []struct {
		name     string
		listener string
		send     func(t *testing.T, c net.Conn) // before the close
		close    func(t testing.TB, c net.Conn)
		probe    bool
		reason   connregistry.CloseReason // in the history, when not a probe
		infoLog  string                   // the one Info line expected, if any
	}{
		{"nothing, FIN", plain, nil, fin, true, "", ""},
		{"nothing, RST", plain, nil, reset, true, "", ""},
		{"nothing, parked, RST", plain, nil, reset, true, "", ""},
		{"two bytes of a request, FIN", plain, func(t *testing.T, c net.Conn) { write(t, c, metadata[:2]) }, fin, false, connregistry.CloseByClient, ""},
		{"half a request, RST", plain, func(t *testing.T, c net.Conn) { write(t, c, metadata[:len(metadata)/2]) }, reset, false, connregistry.CloseByClient, ""},
		{"half a request, FIN", plain, func(t *testing.T, c net.Conn) { write(t, c, metadata[:len(metadata)/2]) }, fin, false, connregistry.CloseByClient, ""},
		{"a request, RST", plain, func(t *testing.T, c net.Conn) { write(t, c, metadata); answered(t, c) }, reset, false, connregistry.CloseByClient, ""},
		{"a frame too large", plain, func(t *testing.T, c net.Conn) { write(t, c, []byte{0x7f, 0, 0, 0}); requireClosedNoResponse(t, c) }, fin, false, connregistry.CloseProtocolError, "closing connection"},

		{"TLS: nothing, RST", ssl, nil, reset, true, "", ""},
		{"TLS: handshake, FIN", ssl, tlsHandshake, fin, true, "", ""},
		{"TLS: handshake, RST", ssl, tlsHandshake, reset, true, "", ""},
		{"TLS: half a record, RST", ssl, func(t *testing.T, c net.Conn) { write(t, c, []byte{0x16, 0x03, 0x01, 0x00, 0xa5, 0x01}) }, reset, false, connregistry.CloseByClient, ""},
		{"TLS: a Kafka request instead", ssl, func(t *testing.T, c net.Conn) { write(t, c, metadata); readUntilClosed(t, c, 5*time.Second) }, fin, false, connregistry.CloseAuthenticationFailed, "closing connection during authentication"},

		{"SASL: nothing, RST", sasl, nil, reset, true, "", ""},
		{"SASL: half a SaslHandshake, RST", sasl, func(t *testing.T, c net.Conn) {
			req := kmsg.NewPtrSASLHandshakeRequest()
			req.Version, req.Mechanism = 1, "PLAIN"
			write(t, c, requestFrame(req, 1, nil)[:8])
		}, reset, false, connregistry.CloseByClient, ""},

		{"PROXY: nothing, RST", proxy, nil, reset, true, "", ""},
		{"PROXY: LOCAL, FIN", proxy, func(t *testing.T, c net.Conn) { write(t, c, local) }, fin, true, "", ""},
		{"PROXY: LOCAL, RST", proxy, func(t *testing.T, c net.Conn) { write(t, c, local) }, reset, true, "", ""},
		{"PROXY: LOCAL and a request, RST", proxy, func(t *testing.T, c net.Conn) { write(t, c, append(local, metadata...)); answered(t, c) }, reset, true, "", ""},
		{"PROXY: v1 UNKNOWN, RST", proxy, func(t *testing.T, c net.Conn) { write(t, c, []byte("PROXY UNKNOWN\r\n")) }, reset, true, "", ""},
		{"PROXY: a client's header, FIN", proxy, func(t *testing.T, c net.Conn) { write(t, c, sourced) }, fin, true, "", ""},
		{"PROXY: a client's header and a request, FIN", proxy, func(t *testing.T, c net.Conn) { write(t, c, append(sourced, metadata...)); answered(t, c) }, fin, false, connregistry.CloseByClient, ""},
		{"PROXY+TLS: a client's header, RST", proxyTLS, func(t *testing.T, c net.Conn) { write(t, c, sourced) }, reset, true, "", ""},
		{"PROXY+TLS: a client's header, handshake, FIN", proxyTLS, func(t *testing.T, c net.Conn) { write(t, c, sourced); tlsHandshake(t, c) }, fin, true, "", ""},
		{"PROXY+TLS: a client's header, half a record, RST", proxyTLS, func(t *testing.T, c net.Conn) {
			write(t, c, append(sourced, 0x16, 0x03, 0x01, 0x00, 0xa5, 0x01))
		}, reset, false, connregistry.CloseByClient, ""},
		{"PROXY: no header", proxy, func(t *testing.T, c net.Conn) { write(t, c, metadata); requireClosedNoResponse(t, c) }, fin, false, connregistry.CloseProxyRefused, "refused connection: PROXY protocol"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs, logger := newLogCapture()
			reasons := &closeReasons{}
			configure := func(c *socketserver.Config) {
				c.Logger = logger
				c.Hooks = append(c.Hooks, reasons)
				c.APIs = allAPIs()
			}
			var srv *socketserver.Server
			l := protocolmap.ListenerName(tc.listener)
			switch tc.listener {
			case plain:
				srv = socketservertest.NewServer(t, nil, configure, answerAll)
			case ssl:
				srv = socketservertest.NewServer(t, merge(pki.props(""), config.Properties{
					"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
				}), configure, answerAll)
			case sasl:
				srv = socketservertest.NewServer(t, saslProps(config.Properties{"connection.failed.authentication.delay.ms": "0"}),
					func(c *socketserver.Config) { withUsers(newUsers(t))(c); configure(c) }, answerAll)
			case proxy:
				srv = proxyServer(t, &proxyRecorder{}, nil, configure)
				l = "PLAINTEXT"
			case proxyTLS:
				srv = socketservertest.NewServer(t, merge(pki.props(""), config.Properties{
					"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
					config.KeyProxyProtocol: "required", config.KeyProxyProtocolTrustedNetworks: "127.0.0.1",
				}), configure, answerAll)
				l = "SSL"
			}
			c := socketservertest.Dial(t, srv, l)
			if tc.name == "nothing, parked, RST" {
				waitFor(t, 5*time.Second, func() bool { return srv.Stats().ParkedConnections == 1 }, "not parked")
			}
			if tc.send != nil {
				tc.send(t, c)
			}
			tc.close(t, c)

			if tc.probe {
				waitFor(t, 5*time.Second, func() bool { return srv.Stats().ProbesClosed[l] == 1 }, "the probe is not counted")
				requireConnCount(t, srv, string(l), 0)
				assert.Empty(t, srv.Registry().Closed(connregistry.Filter{}), "a probe in the history")
			} else {
				waitFor(t, 5*time.Second, func() bool { return len(srv.Registry().Closed(connregistry.Filter{})) == 1 }, "the close is not in the history")
				assert.Equal(t, tc.reason, srv.Registry().Closed(connregistry.Filter{})[0].CloseReason)
				assert.Zero(t, srv.Stats().ProbesClosed[l], "counted as a probe")
			}
			if tc.reason != connregistry.CloseProxyRefused && !(tc.probe && tc.listener == proxy && tc.send == nil) /* a socket pending its header: no connection yet */ {
				// Registered connections: HookConnClosed sees every close, a probe's as the client's.
				want := tc.reason
				if tc.probe {
					want = connregistry.CloseByClient
				}
				waitFor(t, 5*time.Second, func() bool { return len(reasons.get()) == 1 }, "HookConnClosed")
				assert.Equal(t, []connregistry.CloseReason{want}, reasons.get())
			}
			var info []string
			for _, r := range logs.atLeast(slog.LevelInfo) {
				info = append(info, r.msg+" "+r.attrs["err"])
			}
			if tc.infoLog == "" {
				assert.Empty(t, info, "Info lines")
			} else {
				require.Len(t, info, 1, "Info lines")
				assert.Contains(t, info[0], tc.infoLog)
			}
			probeLines, departures := 0, 0
			for _, r := range logs.Records() {
				switch {
				case r.level != slog.LevelDebug:
				case r.msg == "probe closed by its client" || r.msg == "connection closed before its PROXY header":
					probeLines++
				case r.msg == "connection closed by its client":
					departures++
				}
			}
			if tc.probe {
				assert.Equal(t, 1, probeLines, "the probe's Debug line")
				assert.Zero(t, departures, "a probe's departure logged")
			} else if tc.reason == connregistry.CloseByClient {
				assert.Zero(t, probeLines, "a client's close logged as a probe's")
				assert.Equal(t, 1, departures, "the client's departure at Debug")
			}
		})
	}
}

// A host that closes a connection (CloseConnection) once the request's
// context tells it the client has gone, as the example broker's Fetch long
// poll does, closes it for the client: whoever notices first, a client
// that goes away, with a FIN or a reset, is "client-closed". A host that
// closes a connection whose client is still there is "closed by the
// request handler".
func TestHostClosesAfterClientLeft(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leave  func(testing.TB, net.Conn) // nil: the client stays
		reason connregistry.CloseReason
	}{
		{"FIN", func(t testing.TB, c net.Conn) { require.NoError(t, c.(*net.TCPConn).CloseWrite()) }, connregistry.CloseByClient},
		{"half-closed, then closed", func(t testing.TB, c net.Conn) { require.NoError(t, c.Close()) }, connregistry.CloseByClient},
		{"RST", reset, connregistry.CloseByClient},
		{"the client stays", nil, connregistry.CloseByHandler},
	} {
		t.Run(tc.name, func(t *testing.T) {
			held := make(chan *socketserver.Request, 1)
			srv := socketservertest.NewServer(t, nil, withAPIs, socketserver.HandlerFunc(func(r *socketserver.Request) {
				held <- r
				if tc.leave != nil {
					select {
					case <-r.Context().Done():
					case <-time.After(10 * time.Second):
						t.Error("the request's context was not cancelled")
					}
				}
				_ = r.CloseConnection()
			}))
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			write(t, c, requestFrame(metadataReq(9), 1, nil))
			recv(t, held)
			if tc.leave != nil {
				tc.leave(t, c)
			}
			waitFor(t, 5*time.Second, func() bool { return len(srv.Registry().Closed(connregistry.Filter{})) == 1 }, "not closed")
			assert.Equal(t, tc.reason, srv.Registry().Closed(connregistry.Filter{})[0].CloseReason)
		})
	}
}

// Probes count per listener, in the Stats of a server that has several,
// and Stats lists every listener, with 0 before any probe.
func TestProbesClosedPerListener(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "A://127.0.0.1:0,B://127.0.0.1:0",
		"listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
		"inter.broker.listener.name":     "A",
	}, withAPIs, answerAll)
	assert.Equal(t, map[protocolmap.ListenerName]int64{"A": 0, "B": 0}, srv.Stats().ProbesClosed)
	for range 3 {
		reset(t, socketservertest.Dial(t, srv, "B"))
	}
	require.NoError(t, socketservertest.Dial(t, srv, "A").Close())
	waitFor(t, 5*time.Second, func() bool {
		p := srv.Stats().ProbesClosed
		return p["A"] == 1 && p["B"] == 3
	}, "probes per listener")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	assert.Empty(t, srv.Registry().Closed(connregistry.Filter{}))
}
