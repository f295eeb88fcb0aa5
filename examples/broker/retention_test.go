package main

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
)

func TestReadLogSettings(t *testing.T) {
	const hour = int64(time.Hour / time.Millisecond)
	for _, tc := range []struct {
		name    string
		props   config.Properties
		want    logSettings
		wantKey string
	}{
		{"defaults: 256 MiB, Kafka's 168 hours, 5 minutes, 1048588", nil,
			logSettings{logConfig{256 << 20, 168 * hour, 1048588}, 5 * time.Minute}, ""},
		{"unlimited as in Kafka", config.Properties{"log.retention.bytes": "-1", "log.retention.hours": "-1"},
			logSettings{logConfig{-1, -1, 1048588}, 5 * time.Minute}, ""},
		{"ms before minutes before hours", config.Properties{"log.retention.ms": "1000", "log.retention.minutes": "2", "log.retention.hours": "3"},
			logSettings{logConfig{256 << 20, 1000, 1048588}, 5 * time.Minute}, ""},
		{"minutes before hours", config.Properties{"log.retention.minutes": "2", "log.retention.hours": "3"},
			logSettings{logConfig{256 << 20, 120000, 1048588}, 5 * time.Minute}, ""},
		{"check interval and message size", config.Properties{"log.retention.check.interval.ms": "50", "message.max.bytes": "100"},
			logSettings{logConfig{256 << 20, 168 * hour, 100}, 50 * time.Millisecond}, ""},
		{"bad bytes", config.Properties{"log.retention.bytes": "lots"}, logSettings{}, "log.retention.bytes"},
		{"bad ms", config.Properties{"log.retention.ms": "-2"}, logSettings{}, "log.retention.ms"},
		{"bad check interval", config.Properties{"log.retention.check.interval.ms": "0"}, logSettings{}, "log.retention.check.interval.ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := readBrokerConfig(tc.props)
			require.NoError(t, err)
			got, err := readLogSettings(cfg)
			if tc.wantKey != "" {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.wantKey, ce.Key)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTopicLogConfig(t *testing.T) {
	defaults := logConfig{retentionBytes: 100, retentionMs: 200, maxMessageBytes: 300}
	sp := func(s string) *string { return &s }
	got, err := topicLogConfig(defaults, map[string]*string{"retention.bytes": sp("-1"), "retention.ms": sp(" 5"),
		"max.message.bytes": sp("7"), "cleanup.policy": sp("delete"), "segment.bytes": sp("1048576")})
	require.NoError(t, err)
	assert.Equal(t, logConfig{retentionBytes: -1, retentionMs: 5, maxMessageBytes: 7}, got)
	got, err = topicLogConfig(defaults, map[string]*string{"retention.bytes": sp("-5")}) // any negative: no limit, as in Kafka
	require.NoError(t, err)
	assert.Equal(t, int64(-5), got.retentionBytes)
	for _, bad := range []map[string]*string{{"retention.bytes": sp("x")}, {"retention.ms": sp("-2")}, {"max.message.bytes": sp("-1")},
		{"max.message.bytes": sp("2147483648")}, {"segment.bytes": nil}, {"retention.ms": sp("5"), "unknown.config": sp("1")}} {
		_, err := topicLogConfig(defaults, bad)
		assert.ErrorIs(t, err, kerr.InvalidConfig, "%v", bad)
	}
}

// stored returns a partition holding batches of the given sizes, each of
// one record and with the given MaxTimestamps.
func stored(sizes []int, timestamps []int64) *partition {
	part := &partition{}
	for i, size := range sizes {
		raw := make([]byte, size)
		binary.BigEndian.PutUint64(raw[35:43], uint64(timestamps[i]))
		part.batches = append(part.batches, batch{base: int64(i), next: int64(i) + 1, raw: raw})
		part.size += int64(size)
		part.highWatermark = int64(i) + 1
	}
	return part
}

// Size retention follows Kafka's LogManager/UnifiedLog rule for segments:
// the oldest goes only while what stays still holds retention.bytes; the
// newest is never dropped.
func TestRetentionBytesDropsWholeBatchesFromTheFront(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sizes     []int
		retention int64
		wantStart int64
		wantSize  int64
	}{
		{"under the limit", []int{100, 100, 100}, 300, 0, 300},
		{"one over", []int{100, 100, 100}, 250, 0, 300}, // dropping one would leave 200 < 250
		{"drop one", []int{100, 100, 100}, 200, 1, 200},
		{"drop two", []int{100, 100, 100}, 100, 2, 100},
		{"the newest stays", []int{100, 100, 500}, 100, 2, 500},
		{"unlimited", []int{100, 100}, -1, 0, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := make([]int64, len(tc.sizes))
			part := stored(tc.sizes, ts)
			part.enforceSize(tc.retention)
			assert.Equal(t, tc.wantStart, part.logStart)
			assert.Equal(t, tc.wantSize, part.size)
			assert.Equal(t, tc.wantStart, part.batches[0].base)
			assert.Equal(t, int64(len(tc.sizes)), part.highWatermark, "the high watermark never moves back")
		})
	}
}

func TestRetentionTimeDropsOldBatches(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	part := stored([]int{100, 100, 100, 100}, []int64{1000, 2000, 999_000, 999_500})
	part.enforceTime(5000, now) // cutoff 995,000
	assert.Equal(t, int64(2), part.logStart)
	assert.Equal(t, int64(200), part.size)
	part.enforceTime(-1, now.Add(time.Hour))
	assert.Equal(t, int64(2), part.logStart, "-1 keeps everything")
	part.enforceTime(0, now.Add(time.Hour))
	assert.Equal(t, int64(3), part.logStart, "the newest batch stays")
}

// With retention.bytes, the log start offset moves on: ListOffsets earliest
// returns it, a fetch below it is OFFSET_OUT_OF_RANGE (Kafka's
// UnifiedLog.read), Produce and Fetch report it, and a kgo consumer that
// asks for offset 0 recovers with its reset policy.
func TestRetentionMovesTheLogStart(t *testing.T) {
	c := startTestCluster(t, 1)
	seed := addr(t, c, 0, "CLIENT")
	conn := dialRaw(t, seed)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "short", 1, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "retention.bytes", kmsg.StringPtr("2000")
	rt.Configs = append(rt.Configs, cfg)
	create.Topics = append(create.Topics, rt)
	require.Zero(t, roundTrip[*kmsg.CreateTopicsResponse](conn, create).Topics[0].ErrorCode)

	value := strings.Repeat("v", 200)
	var last *kmsg.ProduceResponse
	for range 50 {
		last = roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "short", 0, value))
		require.Zero(t, last.Topics[0].Partitions[0].ErrorCode)
	}
	logStart := last.Topics[0].Partitions[0].LogStartOffset
	require.Greater(t, logStart, int64(30), "50 batches of ~270 bytes, 2000 kept")
	require.Less(t, logStart, int64(50))

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 6
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "short"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -2
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	assert.Equal(t, logStart, roundTrip[*kmsg.ListOffsetsResponse](conn, lo).Topics[0].Partitions[0].Offset)

	below := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(0, "short", 0, 0)).Topics[0].Partitions[0]
	assert.Equal(t, kerr.OffsetOutOfRange.Code, below.ErrorCode)
	assert.Equal(t, logStart, below.LogStartOffset)
	at := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(0, "short", 0, logStart)).Topics[0].Partitions[0]
	require.Zero(t, at.ErrorCode)
	_, offsets := recordValues(t, at.RecordBatches)
	require.NotEmpty(t, offsets)
	assert.Equal(t, logStart, offsets[0])

	// kgo asks for offset 0, is told it is out of range, resets to the
	// start (its ConsumeResetOffset) and reads from the log start.
	cl := newClient(t, seed, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"short": {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < int(50-logStart) {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d records", len(got))
		got = append(got, fetches.Records()...)
	}
	assert.Equal(t, logStart, got[0].Offset)
	assert.Equal(t, int64(49), got[len(got)-1].Offset)
}

// A record batch larger than the topic's max.message.bytes (or the broker's
// message.max.bytes) is refused with MESSAGE_TOO_LARGE, as Kafka's
// UnifiedLog.analyzeAndValidateRecords refuses it, and nothing is stored.
func TestProduceRefusesBatchesOverMaxMessageBytes(t *testing.T) {
	c := startTestCluster(t, 1, "message.max.bytes=1000")
	seed := addr(t, c, 0, "CLIENT")
	conn := dialRaw(t, seed)
	createTopic(t, conn, "small", 1)
	resp := roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "small", 0, strings.Repeat("x", 2000)))
	assert.Equal(t, kerr.MessageTooLarge.Code, resp.Topics[0].Partitions[0].ErrorCode)
	assert.Zero(t, c.state.highWatermark(c.state.topic("small"), 0))
	ok := roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "small", 0, strings.Repeat("x", 500)))
	assert.Zero(t, ok.Topics[0].Partitions[0].ErrorCode)

	// kgo sees the error as Kafka's.
	cl := newClient(t, seed, kgo.DefaultProduceTopic("small"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("y", 3000))).FirstErr()
	assert.True(t, errors.Is(err, kerr.MessageTooLarge), "%v", err)
}

// Time retention runs every log.retention.check.interval.ms.
func TestRetentionTimeRunsOnSchedule(t *testing.T) {
	c := startTestCluster(t, 1, "log.retention.ms=1", "log.retention.check.interval.ms=20")
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "old", 1)
	for range 3 {
		require.Zero(t, roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "old", 0, "v")).Topics[0].Partitions[0].ErrorCode)
	}
	tp := c.state.topic("old")
	require.Eventually(t, func() bool { return c.state.logStart(tp, 0) == 2 }, 5*time.Second, 10*time.Millisecond,
		"all but the newest batch expire")
}

// The example broker bounds the requests in hand by default, at twice
// socket.request.max.bytes (Kafka sets no limit); the key overrides it,
// -1 included.
func TestDefaultRequestMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		props config.Properties
		want  int
	}{
		{config.Properties{}, 2 * 104857600},
		{config.Properties{"socket.request.max.bytes": "1048576"}, 2 * 1048576},
		{config.Properties{"queued.max.request.bytes": "-1"}, -1},
		{config.Properties{"queued.max.request.bytes": "209715201"}, 209715201},
	} {
		scfg := brokerSocketConfig(t, tc.props)
		assert.Equal(t, tc.want, scfg.QueuedMaxRequestBytes, "%v", tc.props)
	}
}

// TestSocketBufferDefaults checks that the example broker leaves SO_SNDBUF
// and SO_RCVBUF to the operating system (-1) unless a property sets them.
func TestSocketBufferDefaults(t *testing.T) {
	for _, tc := range []struct {
		props              config.Properties
		wantSend, wantRecv int
	}{
		{config.Properties{}, -1, -1},
		{config.Properties{"socket.send.buffer.bytes": "102400"}, 102400, -1},
		{config.Properties{"socket.receive.buffer.bytes": "65536"}, -1, 65536},
		{config.Properties{"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "1048576"}, -1, 1048576},
	} {
		scfg := brokerSocketConfig(t, tc.props)
		assert.Equal(t, tc.wantSend, scfg.SendBufferBytes, "send, %v", tc.props)
		assert.Equal(t, tc.wantRecv, scfg.ReceiveBufferBytes, "receive, %v", tc.props)
	}
}

// TestInlineAPIs checks which of the data plane's APIs the broker answers
// on the connection's goroutine: the log's and Metadata, and only with a
// handler to answer them.
func TestInlineAPIs(t *testing.T) {
	h := &broker{}
	inline := map[int16]bool{}
	for _, api := range dataPlaneAPIs(h) {
		if api.Inline != nil {
			assert.Same(t, h, api.Inline, "key %d", api.Key)
			inline[api.Key] = true
		}
	}
	assert.Equal(t, map[int16]bool{
		kmsg.Produce.Int16(): true, kmsg.Fetch.Int16(): true, kmsg.ListOffsets.Int16(): true, kmsg.Metadata.Int16(): true,
	}, inline)
	for _, api := range dataPlaneAPIs(nil) {
		assert.Nil(t, api.Inline, "key %d with no handler", api.Key)
	}
}

// brokerSocketConfig is the socket server configuration the example
// broker makes of props.
func brokerSocketConfig(t *testing.T, props config.Properties) socketserver.Config {
	t.Helper()
	cfg, err := readBrokerConfig(props)
	require.NoError(t, err)
	set, err := readSettings(cfg)
	require.NoError(t, err)
	scfg, err := socketServerConfig(cfg, set, nil)
	require.NoError(t, err)
	return scfg
}
