package main

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/examples/internal/faults"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// serveBroker runs the example broker's command (run) with args until the
// test ends, when it checks that run returned 0, and waits until it has
// started. It returns what run writes to stderr, and sighup, which sends
// the test process a SIGHUP (skipping the test where that cannot be done).
// The test catches SIGHUP too, so that a signal arriving before run has
// registered its own cannot end the test process.
func serveBroker(t *testing.T, args ...string) (stderr *testkit.SyncBuffer, sighup func()) {
	t.Helper()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout testkit.SyncBuffer
	stderr = &testkit.SyncBuffer{}
	done := make(chan int)
	go func() { done <- run(ctx, args, &stdout, stderr) }()
	t.Cleanup(func() {
		defer signal.Stop(hup)
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, "stderr: %s", stderr)
		case <-time.After(15 * time.Second):
			t.Error("run did not return within 15 s of its context ending")
		}
	})
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "msg=started") }, 10*time.Second, 10*time.Millisecond, "stderr: %s", stderr)
	sighup = func() {
		t.Helper()
		p, err := os.FindProcess(os.Getpid())
		require.NoError(t, err)
		if err := p.Signal(syscall.SIGHUP); err != nil {
			t.Skipf("cannot send SIGHUP here: %v", err)
		}
	}
	return stderr, sighup
}

func TestMain(m *testing.M) {
	// sarama starts a goroutine, never stopped, for its metrics' meters
	// unless go-metrics is told to use no-op metrics; goleak would see it.
	// The fault tests' toxiproxy may leave goroutines of its own blocked
	// (faults.IgnoreToxiproxy).
	metrics.UseNilMetrics = true
	// The broker built for the tests that run it as a process
	// (exampleproc) is removed at the end.
	goleak.VerifyTestMain(bindcheck.Wrap(m), append(faults.IgnoreToxiproxy(), goleak.Cleanup(func(code int) {
		exampleproc.Cleanup()
		os.Exit(code)
	}))...)
}

// testSettings are the built-in KIP-103 listeners on ephemeral loopback
// ports, as -set settings, but with every listener PLAINTEXT (the built-in
// CLIENT speaks SASL_PLAINTEXT; see startDefaultCluster).
var testSettings = []string{
	"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
	"listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
	"inter.broker.listener.name=REPLICATION",
	"control.plane.listener.name=CONTROLLER",
}

// startTestCluster starts n brokers with testSettings and then sets, the
// way -set lays them over each other; they are closed when the test ends.
func startTestCluster(t *testing.T, n int, sets ...string) *cluster {
	t.Helper()
	return startClusterWith(t, n, config.Properties{}, append(testSettings, sets...)...)
}

// startDefaultCluster starts one broker with the built-in settings, its
// listeners moved to ephemeral ports, and then sets.
func startDefaultCluster(t *testing.T, sets ...string) *cluster {
	t.Helper()
	return startClusterWith(t, 1, defaultProperties(), append([]string{
		"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
	}, sets...)...)
}

// startClusterWith starts n brokers with sets laid over props; they are
// closed when the test ends.
func startClusterWith(t *testing.T, n int, props config.Properties, sets ...string) *cluster {
	t.Helper()
	props, err := props.With(sets...)
	require.NoError(t, err)
	c, err := startCluster(context.Background(), props, n, slog.New(slog.NewTextHandler(t.Output(), nil)), nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// addr returns the address broker i of c is bound to on the named listener.
func addr(t *testing.T, c *cluster, i int, name protocolmap.ListenerName) string {
	t.Helper()
	a := c.brokers[i].srv.Addr(name)
	require.NotNil(t, a, "broker %d has no listener %s", i, name)
	return a.String()
}

// newClient returns a kgo client seeded with addr, closed when the test
// ends.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// rawConn speaks the Kafka protocol over one TCP connection, one frame at a
// time, so that tests see exactly what the broker writes.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	corr int32
}

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("test"))

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn}
}

// send writes req, at the version it holds, and returns its correlation id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	_, err := c.conn.Write(formatter.AppendRequest(nil, req, c.corr))
	require.NoError(c.t, err)
	return c.corr
}

// readFrame reads one response frame.
func (c *rawConn) readFrame() ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c.conn, frame)
	return frame, err
}

// read reads the response to the request with correlation id corr into
// resp, whose version must be the request's.
func (c *rawConn) read(resp kmsg.Response, corr int32) {
	c.t.Helper()
	frame, err := c.readFrame()
	require.NoError(c.t, err)
	decode(c.t, frame, resp, corr)
}

func decode(t *testing.T, frame []byte, resp kmsg.Response, corr int32) {
	t.Helper()
	require.GreaterOrEqual(t, len(frame), 4)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "correlation id")
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		body = body[1:] // the response header's empty tag section
	}
	require.NoError(t, resp.ReadFrom(body))
}

// roundTrip sends req and returns its response.
func roundTrip[R kmsg.Response](c *rawConn, req kmsg.Request) R {
	c.t.Helper()
	resp := req.ResponseKind()
	c.read(resp, c.send(req))
	return resp.(R)
}

// requireClosed asserts that the broker closed the connection without
// writing anything, cleanly (EOF, not a reset).
func (c *rawConn) requireClosed() {
	c.t.Helper()
	n, err := c.conn.Read(make([]byte, 1))
	require.Equal(c.t, 0, n, "the broker wrote a response")
	require.ErrorIs(c.t, err, io.EOF)
}

func metadataRequest(version int16, allowAutoCreate bool, topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version, req.AllowAutoTopicCreation = version, allowAutoCreate
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// createTopic creates a topic through conn and requires success.
func createTopic(t *testing.T, conn *rawConn, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, -1
	req.Topics = append(req.Topics, rt)
	resp := roundTrip[*kmsg.CreateTopicsResponse](conn, req)
	require.Len(t, resp.Topics, 1)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode, "create topic %s", name)
}

// produceRequest returns a Produce request (v9, topic names) of one record
// batch holding values to one partition.
func produceRequest(acks int16, topic string, partition int32, values ...string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 9, acks
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, recordBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchRequest returns a Fetch request (v12, topic names, no session) for
// one partition from offset.
func fetchRequest(maxWait time.Duration, topic string, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes = 12, -1, int32(maxWait/time.Millisecond), 1
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// recordBatch encodes values as one uncompressed record batch (magic 2),
// the way a producer does.
func recordBatch(values ...string) []byte {
	var records []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // everything after the one-byte Length of 0
		records = r.AppendTo(records)
	}
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: records,
	}
	b.Length = int32(batchHeaderSize - 12 + len(records))
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// recordValues decodes the values and offsets of uncompressed record
// batches.
func recordValues(t *testing.T, batches []byte) (values []string, offsets []int64) {
	t.Helper()
	for len(batches) > 0 {
		size := 12 + int(binary.BigEndian.Uint32(batches[8:12]))
		var b kmsg.RecordBatch
		require.NoError(t, b.ReadFrom(batches[:size]))
		batches = batches[size:]
		recs := b.Records
		for range b.NumRecords {
			var r kmsg.Record
			n, length := binary.Varint(recs)
			require.Positive(t, length)
			require.NoError(t, r.ReadFrom(recs[:length+int(n)]))
			recs = recs[length+int(n):]
			values = append(values, string(r.Value))
			offsets = append(offsets, b.FirstOffset+int64(r.OffsetDelta))
		}
	}
	return values, offsets
}
