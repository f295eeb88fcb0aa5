package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// TestMain checks for leaked goroutines and removes the example broker
// built for the tests that run it (exampleproc).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(bindcheck.Wrap(m), goleak.Cleanup(func(code int) {
		exampleproc.Cleanup()
		os.Exit(code)
	}))
}

// The users of every broker's CLIENT listener.
var passwords = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

type (
	cluster       = testkit.ListingCluster
	testBroker    = testkit.ListingBroker
	brokerOptions = testkit.ListingOptions
)

// startCluster starts n brokers (testkit.NewListingCluster) with
// the users above; so that a real consumer (kcat) stays connected, ListOffsets answers offset 0 and Fetch waits and returns nothing. opt, which may be nil, changes broker i's
// options.
func startCluster(t testing.TB, n int, opt func(i int, o *brokerOptions)) *cluster {
	t.Helper()
	return testkit.NewListingCluster(t, n, passwords, func(i int, o *brokerOptions) {
		o.APIs = append(o.APIs,
			socketserver.KmsgAPI(kmsg.ListOffsets, 1, 5),
			socketserver.KmsgAPI(kmsg.Fetch, 4, 11), // by topic name
		)
		o.Handler = socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch body := r.Body.(type) {
			case *kmsg.ListOffsetsRequest:
				_ = r.Respond(listOffsetsResponse(body))
			case *kmsg.FetchRequest:
				wait := min(time.Duration(body.MaxWaitMillis)*time.Millisecond, 500*time.Millisecond)
				select {
				case <-time.After(wait):
				case <-r.Context().Done():
				}
				_ = r.Respond(fetchResponse(body))
			default:
				_ = r.CloseConnection()
			}
		})
		if opt != nil {
			opt(i, o)
		}
	})
}

func listOffsetsResponse(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition, p.Offset, p.Timestamp = rp.Partition, 0, -1
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

func fetchResponse(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// sasl returns the kgo option that logs in as user with mechanism.
func sasl(mechanism, user string) kgo.Opt {
	return socketservertest.KgoSASL(mechanism, user, passwords[user])
}

// connectClient opens a kgo client to one broker's CLIENT listener as user
// (socketservertest.ConnectKgo): it holds one authenticated connection, to
// that broker alone, whose local address it returns with the client.
func connectClient(t testing.TB, b *testBroker, mechanism, user string) (*kgo.Client, string) {
	t.Helper()
	return socketservertest.ConnectKgo(t, b.Client, sasl(mechanism, user))
}

// commandConfig writes a client properties file that logs in as user with
// mechanism, and returns its path.
func commandConfig(t testing.TB, mechanism, user string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), user+".properties")
	content := "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=" + mechanism + "\nsasl.username=" + user + "\nsasl.password=" + passwords[user] + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}
