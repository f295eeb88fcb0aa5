package socketservertest_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// NewServerFunc hands newHandler the started server, with every listener
// bound, and its handler serves both planes.
func TestNewServerFuncBuildsTheHandlerFromTheServer(t *testing.T) {
	var built *socketserver.Server
	srv := socketservertest.NewServerFunc(t, config.Properties{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"control.plane.listener.name":    "CONTROLLER",
	}, metadataAPIs, func(srv *socketserver.Server) socketserver.Handler {
		require.Nil(t, built, "newHandler is called once")
		built = srv
		require.NotNil(t, srv.Addr("PLAINTEXT"), "the server is started")
		self := []socketserver.Broker{srv.Broker(7, "")}
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			resp := r.Body.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
			resp.Brokers = socketserver.MetadataBrokers(r.Conn.Listener, self)
			_ = r.Respond(resp)
		})
	})
	require.Same(t, srv, built)
	for _, name := range []protocolmap.ListenerName{"PLAINTEXT", "CONTROLLER"} {
		cl, _ := socketservertest.ConnectKgo(t, srv.Addr(name).String())
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
		require.NoError(t, err, name)
		require.Len(t, resp.Brokers, 1, name)
		require.Equal(t, int32(7), resp.Brokers[0].NodeID, name)
		require.Equal(t, int32(srv.Addr(name).(*net.TCPAddr).Port), resp.Brokers[0].Port, name)
	}
}

// A nil handler from newHandler is an error, and the server is closed.
func TestStartFuncNilHandler(t *testing.T) {
	_, _, err := socketservertest.StartFunc(nil, nil, func(*socketserver.Server) socketserver.Handler { return nil })
	require.ErrorContains(t, err, "nil Handler")
}

// The PROXY protocol helpers: both listeners refuse a connection without
// a header (one before reading it, untrusted), and a header cut short
// leaves its socket pending.
func TestProxyProtocolHelpers(t *testing.T) {
	srv := socketservertest.NewServer(t, testkit.ProxyProtocolListeners(), nil, socketserver.HandlerFunc(func(r *socketserver.Request) {
		_ = r.CloseConnection()
	}))
	testkit.SendNoProxyHeader(t, srv, "ELSEWHERE")
	testkit.SendNoProxyHeader(t, srv, "LOOPBACK")
	require.Eventually(t, func() bool {
		refused := 0
		for _, c := range srv.Registry().Closed(connregistry.Filter{}) {
			if c.CloseReason == connregistry.CloseProxyRefused {
				refused++
			}
		}
		return refused == 2
	}, 10*time.Second, 5*time.Millisecond, "both connections listed as refused")
	testkit.DialProxyPending(t, srv, "LOOPBACK")
	require.Eventually(t, func() bool { return srv.Stats().PendingProxyHeaders["LOOPBACK"] == 1 }, 10*time.Second, 5*time.Millisecond)
}

// ServerNameListeners's SSL listener serves each named key store to the
// clients asking for its name, in the order given, and the default to the
// others.
func TestServerNameListeners(t *testing.T) {
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	a := socketservertest.NewServerCert(t, "a.example.com")
	b := socketservertest.NewServerCert(t, "*.b.example.com")
	srv := socketservertest.NewServer(t, testkit.ServerNameListeners(def.KeyStoreFile,
		testkit.ServerNameKeyStore{Name: "a.example.com", KeyStoreFile: a.KeyStoreFile},
		testkit.ServerNameKeyStore{Name: "*.b.example.com", KeyStoreFile: b.KeyStoreFile}), metadataAPIs,
		socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.CloseConnection() }))
	for _, tc := range []struct {
		ask  string
		cert *socketservertest.ServerCert
	}{{"a.example.com", a}, {"broker-1.b.example.com", b}, {"", def}} {
		c := tls.Client(socketservertest.Dial(t, srv, "SSL"), &tls.Config{ServerName: tc.ask, RootCAs: tc.cert.Roots, InsecureSkipVerify: tc.ask == ""})
		require.NoError(t, c.Handshake(), "asking for %q", tc.ask)
		require.Equal(t, tc.cert.Leaf.Raw, c.ConnectionState().PeerCertificates[0].Raw, "asking for %q", tc.ask)
	}
	require.Equal(t, []string{"CN=127.0.0.1", "CN=a.example.com", "CN=*.b.example.com"}, subjects(srv.TLSConfig("SSL")), "in the order given")
	require.Nil(t, srv.TLSConfig("PLAIN"))
}

func subjects(cfg *tls.Config) []string {
	var out []string
	for _, c := range cfg.Certificates {
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		out = append(out, leaf.Subject.String())
	}
	return out
}
