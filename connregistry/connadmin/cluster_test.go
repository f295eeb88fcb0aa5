package connadmin_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

// The users of every broker's CLIENT listener.
var passwords = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

type (
	cluster       = testkit.ListingCluster
	testBroker    = testkit.ListingBroker
	brokerOptions = testkit.ListingOptions
)

// startCluster starts n brokers (testkit.NewListingCluster) with
// the users above. opt, which may be nil, changes broker i's
// options.
func startCluster(t testing.TB, n int, opt func(i int, o *brokerOptions)) *cluster {
	t.Helper()
	return testkit.NewListingCluster(t, n, passwords, func(i int, o *brokerOptions) {
		if opt != nil {
			opt(i, o)
		}
	})
}

// sasl returns the kgo option that logs in as user with mechanism.
func sasl(mechanism, user string) kgo.Opt {
	return socketservertest.KgoSASL(mechanism, user, passwords[user])
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

// connectClient opens a kgo client to one broker's CLIENT listener as user
// (socketservertest.ConnectKgo): it holds one authenticated connection, to
// that broker alone, whose local address it returns with the client.
func connectClient(t testing.TB, b *testBroker, mechanism, user string) (*kgo.Client, string) {
	t.Helper()
	return socketservertest.ConnectKgo(t, b.Client, sasl(mechanism, user))
}

// adminClient returns a connadmin client that lists as admin over CLIENT
// (SASL PLAIN), seeded with broker 0.
func adminClient(t testing.TB, c *cluster, key int16, opts ...kgo.Opt) *connadmin.Client {
	t.Helper()
	cl := newClient(t, c.Brokers[0].Client, append([]kgo.Opt{sasl("PLAIN", "admin"), connadmin.VersionsOpt(key)}, opts...)...)
	return connadmin.New(cl, key, 0)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func strp(s string) *string { return &s }

func newMetadata() *kmsg.MetadataRequest { return kmsg.NewPtrMetadataRequest() }
