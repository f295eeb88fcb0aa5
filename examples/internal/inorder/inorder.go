// Package inorder is the workload of the maximum connection age tests of
// the example broker and the proxy, and its checks: a kgo
// producer that is not idempotent sends numbered records to one partition
// across several expiries of its connections. Its options (acks=all, one
// Produce request in flight per broker) make a retry keep the order, and
// leave nothing to drop a record written twice, so that an answer lost
// when a connection closes for its age shows as a record twice in the log.
package inorder

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/connregistry"
)

// ProducerOpts are the producer's options besides its seeds and its
// security: records to topic, not idempotent, acks=all, one Produce
// request in flight per broker, uncompressed, 30 s to deliver a record.
func ProducerOpts(topic string) []kgo.Opt {
	return []kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxProduceRequestsInflightPerBroker(1)}
}

// Produce produces records "0", "1", ... with cl, 20 every 10 ms, for d,
// to cl's default topic, which should have one partition (or cl a
// partitioner that keeps to one, as kgo.ManualPartitioner does with
// partition 0). It waits for every answer
// and fails t unless each record was acknowledged exactly once and no
// error reached the application. It returns how many records it produced.
func Produce(t *testing.T, cl *kgo.Client, d time.Duration) int {
	t.Helper()
	var (
		mu     sync.Mutex
		acks   = map[string]int{}
		failed []error
		wg     sync.WaitGroup
	)
	sent := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for range 20 {
			v := strconv.Itoa(sent)
			sent++
			wg.Add(1)
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acks[string(r.Value)]++
			})
		}
	}
	wg.Wait()
	require.Empty(t, failed, "an error reached the application")
	require.Len(t, acks, sent)
	for v, n := range acks {
		require.Equal(t, 1, n, "record %s acknowledged %d times", v, n)
	}
	return sent
}

// CheckLog fails t unless values, a partition's records read from its
// start, are the sent records of Produce, each once and in order.
func CheckLog(t *testing.T, values []string, sent int) {
	t.Helper()
	for i, v := range values {
		require.Equal(t, strconv.Itoa(i), v, "the log's record %d", i)
	}
	require.Len(t, values, sent, "the log holds %d records, %d were produced", len(values), sent)
}

// CheckAged fails t unless at least n of closed (a registry's closed
// connections) were closed for their age, none younger than least (the
// age less its jitter).
func CheckAged(t *testing.T, closed []connregistry.Conn, least time.Duration, n int) {
	t.Helper()
	aged := 0
	for _, conn := range closed {
		if conn.CloseReason == connregistry.CloseMaxAge {
			aged++
			assert.GreaterOrEqual(t, conn.ClosedAt.Sub(conn.ConnectedAt), least, "closed before its age less the jitter")
		}
	}
	assert.GreaterOrEqual(t, aged, n, "not closed for their age several times")
}

// Read reads partition 0 of topic from its start with a kgo consumer
// built from opts (its seeds, its security) until it has at least sent
// records, within 30 s, and checks them with CheckLog.
func Read(t *testing.T, topic string, sent int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})},
		opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	for len(got) < sent {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "the log ends at %d of %d records", len(got), sent)
		require.NoError(t, fetches.Err())
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	CheckLog(t, got, sent)
}
