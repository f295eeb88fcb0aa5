package socketserver_test

import (
	"crypto/tls"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// serverNameHook records the server name of each authenticated connection
// and of each logged request, by connection id.
type serverNameHook struct {
	mu            sync.Mutex
	authenticated map[string]string
	logged        map[string]string
}

func (h *serverNameHook) OnAuthenticated(info connregistry.Info, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.authenticated[info.ID] = info.ServerName
}

func (h *serverNameHook) OnRequestDone(r *socketserver.RequestDone) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logged[r.Conn.ID] = r.Conn.ServerName
}

// seen returns what the hooks saw of connection id; ok is false until a
// request of it has been logged.
func (h *serverNameHook) seen(id string) (authenticated, logged string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	logged, ok = h.logged[id]
	return h.authenticated[id], logged, ok
}

// One SSL listener serves two server names with certificates of their own
// (kafkanet.ssl.server.names) and the default to the others: Go's TLS
// client, trusting only the CA of the name it asks for, gets that name's
// certificate; a client asking for no name (it dialed an IP address) or an
// unlisted one gets the default. The name a client asked for is in its
// connection's description (Request.Conn, the hooks, the request log) and
// in ListClientConnections, whose server-name filter selects by it.
func TestServerNames(t *testing.T) {
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	a := socketservertest.NewServerCert(t, "a.example.com")
	b := socketservertest.NewServerCert(t, "*.b.example.com")
	props := testkit.ServerNameListeners(def.KeyStoreFile,
		testkit.ServerNameKeyStore{Name: "a.example.com", KeyStoreFile: a.KeyStoreFile},
		testkit.ServerNameKeyStore{Name: "*.b.example.com", KeyStoreFile: b.KeyStoreFile})
	hook := &serverNameHook{authenticated: map[string]string{}, logged: map[string]string{}}
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, props, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12), socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil)}
		c.Hooks = []socketserver.Hook{hook}
	}, queueHandler(seen))

	ids := map[string]string{} // the name asked for -> connection id
	outer := t                 // the connections stay open for the listing
	for _, tc := range []struct {
		ask    string // the server name the client sends
		client *tls.Config
		want   *socketservertest.ServerCert
	}{
		{"a.example.com", &tls.Config{ServerName: "a.example.com", RootCAs: a.Roots}, a},
		{"broker-1.b.example.com", &tls.Config{ServerName: "broker-1.b.example.com", RootCAs: b.Roots}, b},
		// An IP address as the server name: Go sends none.
		{"", &tls.Config{ServerName: "127.0.0.1", RootCAs: def.Roots}, def},
		{"c.example.com", &tls.Config{ServerName: "c.example.com", InsecureSkipVerify: true}, def},
	} {
		t.Run("ask "+tc.ask, func(t *testing.T) {
			c := tls.Client(socketservertest.Dial(outer, srv, "SSL"), tc.client)
			require.NoError(t, c.Handshake())
			assert.Equal(t, tc.want.Leaf.Raw, c.ConnectionState().PeerCertificates[0].Raw, "served %s", c.ConnectionState().PeerCertificates[0].Subject)
			send(t, c, metadataReq(9), 1)
			r := recv(t, seen)
			require.NoError(t, respondEmpty(r))
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 9
			readResponse(t, c, resp, 1)
			assert.Equal(t, tc.ask, r.Conn.ServerName, "Request.Conn")
			ids[tc.ask] = r.Conn.ID
			// The request is logged once its response has been written.
			require.Eventually(t, func() bool {
				_, _, ok := hook.seen(r.Conn.ID)
				return ok
			}, 10*time.Second, time.Millisecond, "HookRequestDone")
			authenticated, logged, _ := hook.seen(r.Conn.ID)
			assert.Equal(t, tc.ask, authenticated, "HookAuthenticated")
			assert.Equal(t, tc.ask, logged, "HookRequestDone")
		})
	}

	admin := socketservertest.Dial(t, srv, "PLAIN")
	list := func(filter *string) map[string]string {
		t.Helper()
		send(t, admin, &connregistry.ListClientConnectionsRequest{ServerNameFilter: filter, ListenerFilter: strp("SSL")}, 2)
		resp := &connregistry.ListClientConnectionsResponse{}
		readResponse(t, admin, resp, 2)
		require.Zero(t, resp.ErrorCode)
		got := map[string]string{}
		for _, c := range resp.Connections {
			got[c.ConnectionID] = c.ServerName
		}
		return got
	}
	assert.Equal(t, map[string]string{ids["a.example.com"]: "a.example.com", ids["broker-1.b.example.com"]: "broker-1.b.example.com",
		ids[""]: "", ids["c.example.com"]: "c.example.com"}, list(nil), "every connection with its name")
	assert.Equal(t, map[string]string{ids["a.example.com"]: "a.example.com"}, list(strp("A.example.com")))
	assert.Equal(t, map[string]string{ids["broker-1.b.example.com"]: "broker-1.b.example.com"}, list(strp("*.b.example.com")))
	assert.Equal(t, map[string]string{ids["a.example.com"]: "a.example.com", ids["broker-1.b.example.com"]: "broker-1.b.example.com",
		ids["c.example.com"]: "c.example.com"}, list(strp("*.example.com")))
	assert.Equal(t, map[string]string{ids[""]: ""}, list(strp("")), "the connections without a name")
}

// A reload holds a server name's certificate to Kafka's rules as it holds
// the default: renewed (same subject and names) it is taken; with another
// subject DN it is refused until ssl.allow.dn.changes allows it, and the
// certificate in force stays; a server name added needs both allow keys.
func TestReloadTLSServerNames(t *testing.T) {
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	a := socketservertest.NewServerCert(t, "a.example.com")
	props := testkit.ServerNameListeners(def.KeyStoreFile,
		testkit.ServerNameKeyStore{Name: "a.example.com", KeyStoreFile: a.KeyStoreFile})
	srv := socketservertest.NewServer(t, props, withAPIs, echoMetadata)
	reload := func(p config.Properties) error {
		t.Helper()
		cfg, err := config.Server(p)
		require.NoError(t, err)
		return srv.ReloadTLSFrom(cfg)
	}
	// served reports the subject of the certificate a client asking for
	// a.example.com and trusting only cert's CA is given (a handshake
	// with another CA's fails).
	served := func(cert *socketservertest.ServerCert) string {
		t.Helper()
		c := dialTLS(t, srv, "SSL", &tls.Config{ServerName: "a.example.com", RootCAs: cert.Roots})
		return c.c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	// rotate writes next's key store where a's is read.
	rotate := func(next *socketservertest.ServerCert) {
		t.Helper()
		data, err := os.ReadFile(next.KeyStoreFile)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(a.KeyStoreFile, data, 0o600))
	}

	renewed := socketservertest.NewServerCert(t, "a.example.com")
	rotate(renewed)
	require.NoError(t, reload(props))
	assert.Equal(t, "a.example.com", served(renewed))

	rotate(socketservertest.NewServerCert(t, "tenant-a", "a.example.com"))
	err := reload(props)
	requireConfigError(t, err, "ssl.allow.dn.changes", security.ErrCertificateChange)
	assert.ErrorContains(t, err, "server-name certificate 1's subject DN CN=tenant-a")
	assert.Equal(t, "a.example.com", served(renewed), "the certificate in force stays")

	allowDN := merge(props, config.Properties{"listener.name.ssl.ssl.allow.dn.changes": "true"})
	moved := socketservertest.NewServerCert(t, "tenant-a", "a.example.com")
	rotate(moved)
	require.NoError(t, reload(allowDN))
	assert.Equal(t, "tenant-a", served(moved))

	b := socketservertest.NewServerCert(t, "b.example.com")
	withB := merge(allowDN, testkit.ServerNameListeners(def.KeyStoreFile,
		testkit.ServerNameKeyStore{Name: "a.example.com", KeyStoreFile: a.KeyStoreFile},
		testkit.ServerNameKeyStore{Name: "b.example.com", KeyStoreFile: b.KeyStoreFile}))
	err = reload(withB)
	requireConfigError(t, err, "ssl.allow.san.changes", security.ErrCertificateChange)
	assert.ErrorContains(t, err, "the new configuration has 3 certificates where the current one has 2")
	require.NoError(t, reload(merge(withB, config.Properties{"listener.name.ssl.ssl.allow.san.changes": "true"})))
	c := dialTLS(t, srv, "SSL", &tls.Config{ServerName: "b.example.com", RootCAs: b.Roots})
	assert.Equal(t, "b.example.com", c.c.ConnectionState().PeerCertificates[0].Subject.CommonName)
}
