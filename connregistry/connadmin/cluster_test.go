package connadmin_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The users of every broker's CLIENT listener.
var passwords = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

// defaultSuperUsers may list connections unless a test says otherwise.
const defaultSuperUsers = "User:admin;User:ANONYMOUS"

// brokerOptions configure one broker of a test cluster.
type brokerOptions struct {
	superUsers string // super.users; defaultSuperUsers unless set
	apiKey     int16  // the key ListClientConnections is served under; DefaultAPIKey unless set
}

// testBroker is one in-process broker: a socket server with a SASL
// listener for clients (CLIENT) and a PLAINTEXT one between brokers
// (PLAIN).
type testBroker struct {
	id     int32
	srv    *socketserver.Server
	reg    *connregistry.Registry
	client string // CLIENT's bound address
	plain  string // PLAIN's bound address
}

type cluster struct {
	brokers []*testBroker

	mu       sync.RWMutex
	metadata []listener.Broker // every broker's bound endpoints, for Metadata
}

// startCluster starts n brokers with node ids 0..n-1. Each answers
// Metadata, listing every broker on the listener the request came through,
// and ListClientConnections from its own registry through
// connregistry.Handler. opt, which may be nil, changes broker i's options.
func startCluster(t testing.TB, n int, opt func(i int, o *brokerOptions)) *cluster {
	t.Helper()
	users, err := listener.NewUsers(passwords)
	require.NoError(t, err)
	c := &cluster{}
	for i := range n {
		o := brokerOptions{superUsers: defaultSuperUsers, apiKey: connregistry.DefaultAPIKey}
		if opt != nil {
			opt(i, &o)
		}
		reg := connregistry.New(0)
		lcc := &connregistry.Handler{Registry: reg, Authorize: connregistry.SuperUsers(o.superUsers)}
		metadataAPI, ok := socketserver.KmsgAPI(3, 0, kmsg.NewPtrMetadataRequest().MaxVersion())
		require.True(t, ok)
		key := o.apiKey
		apis := []socketserver.API{metadataAPI, {Key: key, MinVersion: 0, MaxVersion: 0,
			New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{APIKey: key} }}}
		srv := socketservertest.NewServer(t, listener.Properties{
			"listeners":                      "CLIENT://127.0.0.1:0,PLAIN://127.0.0.1:0",
			"listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,PLAIN:PLAINTEXT",
			"inter.broker.listener.name":     "PLAIN",
			"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256",
		}, func(cfg *socketserver.Config) {
			cfg.APIs = apis
			cfg.Credentials = users
			cfg.Registry = reg
		}, socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch body := r.Body.(type) {
			case *kmsg.MetadataRequest:
				_ = r.Respond(c.metadataResponse(body, r.Conn.Listener))
			case *connregistry.ListClientConnectionsRequest:
				resp := lcc.Handle(r.Context(), connregistry.Principal(r.Conn.Principal), body)
				resp.APIKey, resp.Version = r.APIKey, r.APIVersion
				_ = r.Respond(resp)
			default:
				_ = r.CloseConnection()
			}
		}))
		b := &testBroker{id: int32(i), srv: srv, reg: reg, client: srv.Addr("CLIENT").String(), plain: srv.Addr("PLAIN").String()}
		c.brokers = append(c.brokers, b)
	}
	c.mu.Lock()
	for _, b := range c.brokers {
		c.metadata = append(c.metadata, listener.Broker{NodeID: b.id, EndPoints: []listener.EndPoint{
			endPoint(t, "CLIENT", b.client, protocolmap.SASLPlaintext),
			endPoint(t, "PLAIN", b.plain, protocolmap.Plaintext),
		}})
	}
	c.mu.Unlock()
	return c
}

func endPoint(t testing.TB, name, addr string, protocol protocolmap.SecurityProtocol) listener.EndPoint {
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	return listener.EndPoint{Name: protocolmap.ListenerName(name), Host: host, Port: p, SecurityProtocol: protocol}
}

func (c *cluster) metadataResponse(req *kmsg.MetadataRequest, via protocolmap.ListenerName) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	c.mu.RLock()
	resp.Brokers = listener.MetadataBrokers(via, c.metadata)
	c.mu.RUnlock()
	resp.ClusterID = kmsg.StringPtr("connadmin-test")
	resp.ControllerID = 0
	return resp
}

// recordingDialer dials TCP and remembers the local address of every
// connection, so a test can find the client's sockets in a listing.
type recordingDialer struct {
	mu    sync.Mutex
	local []string
}

func (d *recordingDialer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.mu.Lock()
		d.local = append(d.local, c.LocalAddr().String())
		d.mu.Unlock()
	}
	return c, err
}

func (d *recordingDialer) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.local...)
}

// sasl returns the kgo option that logs in as user with mechanism.
func sasl(mechanism, user string) kgo.Opt {
	switch mechanism {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: passwords[user]}.AsMechanism())
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: passwords[user]}.AsSha256Mechanism())
	}
	panic("unknown mechanism " + mechanism)
}

// newClient returns a kgo client seeded with addr, closed when the test
// ends.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.RequestRetries(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// connectClient opens a client to one broker's CLIENT listener as user and
// makes it send a request there, so that it holds one authenticated
// connection to that broker alone. It returns the client and the local
// address of its connection.
func connectClient(t testing.TB, b *testBroker, mechanism, user string) (*kgo.Client, string) {
	t.Helper()
	d := &recordingDialer{}
	cl := newClient(t, b.client, sasl(mechanism, user), kgo.Dialer(d.dial), kgo.ConnIdleTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	require.NoError(t, err)
	addrs := d.addrs()
	require.Len(t, addrs, 1, "the client should hold exactly one connection")
	return cl, addrs[0]
}

// adminClient returns a connadmin client that lists as admin over CLIENT
// (SASL PLAIN), seeded with broker 0.
func (c *cluster) adminClient(t testing.TB, key int16, opts ...kgo.Opt) *connadmin.Client {
	t.Helper()
	cl := newClient(t, c.brokers[0].client, append([]kgo.Opt{sasl("PLAIN", "admin"), connadmin.VersionsOpt(key)}, opts...)...)
	return connadmin.New(cl, key)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func strp(s string) *string { return &s }

func newMetadata() *kmsg.MetadataRequest { return kmsg.NewPtrMetadataRequest() }
