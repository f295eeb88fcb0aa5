package connadmin_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The users of every broker's CLIENT listener.
var passwords = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

type (
	cluster       = socketservertest.ListingCluster
	testBroker    = socketservertest.ListingBroker
	brokerOptions = socketservertest.ListingOptions
)

// startCluster starts n brokers (socketservertest.NewListingCluster) with
// the users above. opt, which may be nil, changes broker i's
// options.
func startCluster(t testing.TB, n int, opt func(i int, o *brokerOptions)) *cluster {
	t.Helper()
	return socketservertest.NewListingCluster(t, n, passwords, func(i int, o *brokerOptions) {
		if opt != nil {
			opt(i, o)
		}
	})
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
	cl := newClient(t, b.Client, sasl(mechanism, user), kgo.Dialer(d.dial), kgo.ConnIdleTimeout(time.Minute))
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
func adminClient(t testing.TB, c *cluster, key int16, opts ...kgo.Opt) *connadmin.Client {
	t.Helper()
	cl := newClient(t, c.Brokers[0].Client, append([]kgo.Opt{sasl("PLAIN", "admin"), connadmin.VersionsOpt(key)}, opts...)...)
	return connadmin.New(cl, key)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func strp(s string) *string { return &s }

func newMetadata() *kmsg.MetadataRequest { return kmsg.NewPtrMetadataRequest() }
