package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer side of the client quotas: consumer_byte_rate holds a
// consumer to the quota, and a throttled Fetch keeps the zero-copy path.

// fetchRecordSize is the value size of the records the consumers read.
const fetchRecordSize = 10 << 10

// fetchBatchSize bounds the batches the consumers read and what a
// consumer asks for per partition: 128 KiB, as the producer tests' batches.
// A Fetch as large as the quota lets through in one go (one window of it
// with quota.window.num=2) would hold a consumer well below its quota:
// each throttled Fetch is answered empty, as in Kafka, and the next one
// may be throttled again before the rate has come down by a whole Fetch.
const fetchBatchSize = 128 << 10

// produceForConsumers fills partition 0 of a new one-partition topic with
// at least size bytes of fetchRecordSize records in batches of at most
// fetchBatchSize, from a client id without a quota, and closes its
// producer.
func produceForConsumers(t *testing.T, bootstrap, topic string, size int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ClientID("quota-filler"), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(fetchBatchSize))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	value := make([]byte, fetchRecordSize)
	for sent := int64(0); sent < size; {
		var recs []*kgo.Record
		for range 64 {
			recs = append(recs, &kgo.Record{Value: value})
			sent += fetchRecordSize
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
}

// consumerBytes is how much a consumer test fills its topic with: more
// than the run can consume at the quota, burst included.
func consumerBytes(run time.Duration) int64 {
	return (int64(run/time.Second) + 3) * quotaRate
}

// A kgo consumer whose client id has a consumer_byte_rate quota, set with
// kadm's AlterClientQuotas, consumes a filled topic at the quota, and its
// Fetch responses carry throttle times (HookBrokerThrottle).
//
// Unlike a producer's, a consumer's rate is measured from its first Fetch,
// burst included: a throttled Fetch is answered empty and its bytes are
// taken back, so the consumer never gets ahead of its quota, and the
// first window's burst is the share of the rate's shortest span (one
// window with quota.window.num=2), not bytes on top of the rate.
func TestClientQuotaKgoConsumer(t *testing.T) {
	c := startTestCluster(t, 1, quotaWindows...)
	bootstrap := addr(t, c, 0, "CLIENT")
	run := quotaRunDuration(t)
	const clientID, topic = "quota-kgo-consumer", "quota-kgo-consume"
	produceForConsumers(t, bootstrap, topic, consumerBytes(run))

	ctx, cancel := context.WithTimeout(context.Background(), run+time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, bootstrap))
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr(clientID)}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: quotaRate}}}})
	require.NoError(t, err)
	require.Len(t, altered, 1)
	require.NoError(t, altered[0].Err, altered[0].ErrMessage)

	throttles := &throttleHook{}
	consumer := newClient(t, bootstrap, kgo.ClientID(clientID), kgo.WithHooks(throttles), kgo.FetchMaxPartitionBytes(fetchBatchSize),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	start := time.Now()
	var consumed int64
	var last time.Duration
	for time.Since(start) < run {
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		for _, err := range fetches.Errors() {
			require.NoError(t, err.Err, "%s/%d", err.Topic, err.Partition)
		}
		if n := fetches.NumRecords(); n > 0 {
			fetches.EachRecord(func(r *kgo.Record) { consumed += int64(len(r.Value)) })
			last = time.Since(start)
		}
	}
	t.Logf("kgo consumer: %d bytes consumed in %v, %d throttled responses, %v of throttle in all", consumed, last.Round(time.Millisecond), throttles.count.Load(), time.Duration(throttles.total.Load()).Round(time.Millisecond))
	require.Less(t, consumed, consumerBytes(run), "the consumer reached the end of the topic: it was not held")
	requireRate(t, "kgo consumer", consumed, last)
	assert.Positive(t, throttles.count.Load(), "no Fetch response carried a throttle time")
}

// kcat (librdkafka) consuming as a client id with a consumer_byte_rate
// quota from kafkanet.client.quotas is held to it: it reads the topic to
// its end (-e) at the quota (from its start, as the kgo consumer).
func TestClientQuotaKcatConsumer(t *testing.T) {
	requireTool(t, "kcat", "apt-get install kcat")
	const clientID, topic = "quota-kcat-consumer", "quota-kcat-consume"
	c := startTestCluster(t, 1, append(quotaWindows, clientQuotasProperty+"=clients/"+clientID+":consumer_byte_rate="+strconv.Itoa(quotaRate))...)
	bootstrap := addr(t, c, 0, "CLIENT")
	run := quotaRunDuration(t)
	size := int64(run/time.Second+1) * quotaRate
	produceForConsumers(t, bootstrap, topic, size)
	ctx, cancel := context.WithTimeout(context.Background(), run+time.Minute)
	defer cancel()
	// -f %S prints each record's value size, so the test sees that kcat
	// read everything.
	cmd := exec.CommandContext(ctx, "kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
		"-f", `%S\n`, "-X", "client.id="+clientID, "-X", "max.partition.fetch.bytes="+strconv.Itoa(fetchBatchSize))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, cmd.Start())
	var consumed int64
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		n, err := strconv.ParseInt(lines.Text(), 10, 64)
		require.NoError(t, err, "kcat printed %q", lines.Text())
		consumed += n
	}
	require.NoError(t, cmd.Wait(), "%s", stderr.String())
	elapsed := time.Since(start)
	require.GreaterOrEqual(t, consumed, size, "kcat read less than the topic holds")
	requireRate(t, "kcat consumer", consumed, elapsed)
}

// A throttled Fetch keeps the zero-copy path: the broker answers a
// consumer held to its consumer_byte_rate with socketserver.FetchResponse,
// whose records the server writes from the log, whether the answer is
// throttled (empty) or not. Consuming under the quota therefore allocates
// a small fraction of the bytes fetched, in the whole process; a broker
// that copied the records (kmsg encoding them into the write buffer)
// allocates more than it sends. The client is a raw one that drops what
// it reads into one buffer and ignores the throttle times: the muted
// connection holds it.
func TestClientQuotaFetchThrottleKeepsZeroCopy(t *testing.T) {
	const clientID, topic = "quota-raw-consumer", "quota-raw-consume"
	const fetched = 3 * quotaRate // throttled after the first window's share
	c := startTestCluster(t, 1, append(quotaWindows, clientQuotasProperty+"=clients/"+clientID+":consumer_byte_rate="+strconv.Itoa(quotaRate))...)
	bootstrap := addr(t, c, 0, "CLIENT")
	produceForConsumers(t, bootstrap, topic, fetched+quotaRate)

	conn, err := net.DialTimeout("tcp", bootstrap, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(time.Minute)))
	format := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	req := fetchRequest(0, topic, 0, 0)
	frame := make([]byte, 4<<20)
	var wire []byte
	var throttled, answered, offset, total int64
	var corr int32

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	for total < fetched {
		corr++
		req.Topics[0].Partitions[0].FetchOffset = offset
		wire = format.AppendRequest(wire[:0], req, corr)
		_, err := conn.Write(wire)
		require.NoError(t, err)
		var size [4]byte
		_, err = io.ReadFull(conn, size[:])
		require.NoError(t, err)
		n := int(binary.BigEndian.Uint32(size[:]))
		require.LessOrEqual(t, n, len(frame), "a Fetch answer beyond MaxBytes")
		_, err = io.ReadFull(conn, frame[:n])
		require.NoError(t, err)
		// v12: correlation id, the header's empty tag section, then
		// throttle_time_ms, error_code, session_id and the topics.
		require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)))
		throttle := int32(binary.BigEndian.Uint32(frame[5:]))
		batches := fetchedBatches(t, frame[5:n])
		if throttle > 0 {
			throttled++
			require.Empty(t, batches, "a throttled Fetch answer holds records")
			continue
		}
		answered++
		total += int64(len(batches))
		offset = nextFetchOffset(t, batches)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes of records in %d answers and %d throttled ones in %v: %d KiB allocated", total, answered, throttled, elapsed.Round(time.Millisecond), allocated>>10)
	assert.Positive(t, throttled, "no Fetch was throttled")
	assert.Less(t, float64(total)/elapsed.Seconds(), quotaRate*(1+quotaTolerance), "the client that ignores the throttle times was not held")
	assert.Less(t, allocated, uint64(total/16), "records were copied under the quota")
}

// fetchedBatches returns the record batches of a Fetch v12 response body
// of one partition (from throttle_time_ms on), without copying them.
func fetchedBatches(t *testing.T, body []byte) []byte {
	t.Helper()
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	require.NoError(t, resp.ReadFrom(body))
	require.Zero(t, resp.ErrorCode)
	var batches []byte
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			require.Zero(t, rp.ErrorCode)
			batches = rp.RecordBatches
		}
	}
	return batches
}

// nextFetchOffset returns the offset after the last of batches.
func nextFetchOffset(t *testing.T, batches []byte) int64 {
	t.Helper()
	require.NotEmpty(t, batches)
	var next int64
	for len(batches) > 0 {
		require.GreaterOrEqual(t, len(batches), 61, "a truncated record batch")
		base := int64(binary.BigEndian.Uint64(batches))
		length := int(binary.BigEndian.Uint32(batches[8:]))
		lastDelta := int32(binary.BigEndian.Uint32(batches[23:]))
		next = base + int64(lastDelta) + 1
		batches = batches[min(12+length, len(batches)):]
	}
	return next
}
