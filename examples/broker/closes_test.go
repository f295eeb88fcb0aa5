package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/connregistry"
)

// closedOf waits until the connections of client id clientID have all
// closed, at least one of them, and returns them as the broker's history
// of closed connections has them.
func closedOf(t *testing.T, c *cluster, clientID string) []connregistry.Conn {
	t.Helper()
	reg := c.brokers[0].srv.Registry()
	var closed []connregistry.Conn
	require.Eventually(t, func() bool {
		for _, conn := range reg.Snapshot(connregistry.Filter{}) {
			if conn.ClientID == clientID {
				return false
			}
		}
		closed = closed[:0]
		for _, conn := range reg.Closed(connregistry.Filter{}) {
			if conn.ClientID == clientID {
				closed = append(closed, conn)
			}
		}
		return len(closed) > 0
	}, 10*time.Second, 10*time.Millisecond, "the connections of %s are still open, or none closed", clientID)
	return closed
}

// Consumers that go away while their Fetch long poll waits are closed by
// their client, not by the request handler, although the broker's long
// poll, seeing its request's context cancelled, is the one that closes
// the connection: kcat -C -e, which reads to the end of the topic and
// exits, and a kgo consumer closed while its long poll waits.
func TestConsumersLeavingAreClientClosed(t *testing.T) {
	t.Run("kcat -C -e", func(t *testing.T) {
		requireTool(t, "kcat", "apt-get install kcat")
		c := startTestCluster(t, 1)
		bootstrap := addr(t, c, 0, "CLIENT")
		kcat := func(stdin string, args ...string) string {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", bootstrap}, args...)...)
			cmd.Stdin = strings.NewReader(stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			require.NoError(t, cmd.Run(), "kcat %v: %s", args, stderr.String())
			return stdout.String()
		}
		kcat("one\ntwo\nthree\n", "-P", "-t", "leaving", "-X", "client.id=kcat-producer")
		got := kcat("", "-C", "-t", "leaving", "-o", "beginning", "-e", "-X", "client.id=kcat-consumer")
		assert.Equal(t, "one\ntwo\nthree\n", got)
		for _, conn := range closedOf(t, c, "kcat-consumer") {
			assert.Equal(t, connregistry.CloseByClient, conn.CloseReason, "connection %s", conn.ID)
		}
	})
	t.Run("kgo consumer closed during its long poll", func(t *testing.T) {
		c := startTestCluster(t, 1)
		bootstrap := addr(t, c, 0, "CLIENT")
		produce := newClient(t, bootstrap, kgo.DefaultProduceTopic("leaving"), kgo.AllowAutoTopicCreation())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, produce.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr())
		consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("kgo-consumer"), kgo.ConsumeTopics("leaving"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(10*time.Second))
		require.NoError(t, err)
		defer consumer.Close()
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		require.Equal(t, 1, fetches.NumRecords())
		require.Eventually(t, func() bool { return longPolls() == 1 }, 10*time.Second, 10*time.Millisecond, "the consumer's next Fetch waits")
		consumer.Close()
		require.Eventually(t, func() bool { return longPolls() == 0 }, 10*time.Second, 10*time.Millisecond, "the long poll ends")
		closed := closedOf(t, c, "kgo-consumer")
		for _, conn := range closed {
			assert.Equal(t, connregistry.CloseByClient, conn.CloseReason, "connection %s", conn.ID)
		}
	})
}
