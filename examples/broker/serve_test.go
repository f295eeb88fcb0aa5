package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// consume reads n records of topic from the start with a new client seeded
// with addr and made with opts, failing the test after 30 s.
func consume(t *testing.T, addr, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < n {
		fetches := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", len(got), n)
		for _, err := range fetches.Errors() {
			t.Fatalf("fetch %s[%d]: %v", err.Topic, err.Partition, err.Err)
		}
		got = append(got, fetches.Records()...)
	}
	require.Len(t, got, n)
	return got
}

func TestKgoProducesAndConsumesOnEachDataPlaneListener(t *testing.T) {
	c := startTestCluster(t, 1)
	for _, name := range []string{"CLIENT", "REPLICATION", "INTERNAL"} {
		t.Run(name, func(t *testing.T) {
			topic := "kgo-" + strings.ToLower(name)
			seed := addr(t, c, 0, protocolmap.ListenerName(name))
			// Defaults: acks=all and idempotent writes (InitProducerId).
			producer := newClient(t, seed, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
			records := make([]*kgo.Record, 1000)
			for i := range records {
				records[i] = kgo.StringRecord(fmt.Sprintf("value-%04d", i))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			require.NoError(t, producer.ProduceSync(ctx, records...).FirstErr())

			got := consume(t, seed, topic, len(records))
			for i, r := range got {
				require.Equal(t, int64(i), r.Offset)
				require.Equal(t, fmt.Sprintf("value-%04d", i), string(r.Value))
				require.Equal(t, int32(0), r.Partition)
			}
		})
	}
}

func TestMetadataAdvertisesTheListenerConnectedThrough(t *testing.T) {
	// Two brokers whose listeners all bind 127.0.0.1 but advertise
	// different hosts, with port 0: clients must learn the ports bound.
	c := startTestCluster(t, 2,
		"advertised.listeners=CLIENT://localhost:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.2:0,CONTROLLER://127.0.0.1:0")
	tests := []struct {
		listener string
		host     string
	}{
		{"CLIENT", "localhost"},
		{"REPLICATION", "127.0.0.1"},
		{"INTERNAL", "127.0.0.2"},
		{"CONTROLLER", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.listener, func(t *testing.T) {
			for _, version := range []int16{0, 1, 4, 9, 12, 13} {
				conn := dialRaw(t, addr(t, c, 1, protocolmap.ListenerName(tt.listener)))
				resp := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(version, false))
				require.Len(t, resp.Brokers, 2, "version %d", version)
				for i, b := range resp.Brokers {
					_, port, err := net.SplitHostPort(addr(t, c, i, protocolmap.ListenerName(tt.listener)))
					require.NoError(t, err)
					assert.Equal(t, int32(i), b.NodeID)
					assert.Equal(t, tt.host, b.Host, "version %d", version)
					assert.Equal(t, port, strconv.Itoa(int(b.Port)), "version %d", version)
				}
				if version >= 1 {
					assert.Equal(t, int32(0), resp.ControllerID)
				}
				if version >= 2 {
					require.NotNil(t, resp.ClusterID)
					assert.Equal(t, c.id, *resp.ClusterID)
				}
			}
		})
	}
}

func TestThreeBrokers(t *testing.T) {
	c := startTestCluster(t, 3)
	seed := addr(t, c, 0, "CLIENT")

	// Metadata lists three brokers at distinct addresses that each answer.
	conn := dialRaw(t, seed)
	meta := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false))
	require.Len(t, meta.Brokers, 3)
	seen := map[string]bool{}
	for i, b := range meta.Brokers {
		a := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		assert.Equal(t, int32(i), b.NodeID)
		assert.False(t, seen[a], "address %s advertised twice", a)
		seen[a] = true
		other := roundTrip[*kmsg.MetadataResponse](dialRaw(t, a), metadataRequest(12, false))
		assert.Len(t, other.Brokers, 3, "broker %d", i)
	}

	createTopic(t, conn, "three", 3)
	meta = roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false, "three"))
	require.Len(t, meta.Topics, 1)
	require.Len(t, meta.Topics[0].Partitions, 3)
	for i, p := range meta.Topics[0].Partitions {
		assert.Equal(t, int32(i), p.Partition)
		assert.Equal(t, int32(i), p.Leader, "partition %d is led by broker partition %% 3", i)
	}

	producer := newClient(t, seed, kgo.DefaultProduceTopic("three"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var records []*kgo.Record
	for i := range 300 {
		r := kgo.StringRecord(strconv.Itoa(i))
		r.Partition = int32(i % 3)
		records = append(records, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, producer.ProduceSync(ctx, records...).FirstErr())

	got := consume(t, seed, "three", 300)
	next := map[int32]int64{}
	for _, r := range got {
		require.Equal(t, next[r.Partition], r.Offset, "partition %d", r.Partition)
		next[r.Partition]++
		v, err := strconv.Atoi(string(r.Value))
		require.NoError(t, err)
		require.Equal(t, r.Partition, int32(v%3))
	}
	assert.Equal(t, map[int32]int64{0: 100, 1: 100, 2: 100}, next)
}

func TestPartitionErrors(t *testing.T) {
	c := startTestCluster(t, 2)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "two", 2) // partition 1 is led by broker 1
	tests := []struct {
		name      string
		topic     string
		partition int32
		want      *kerr.Error
	}{
		{"leader", "two", 0, nil},
		{"not the leader", "two", 1, kerr.NotLeaderForPartition},
		{"unknown partition", "two", 2, kerr.UnknownTopicOrPartition},
		{"negative partition", "two", -1, kerr.UnknownTopicOrPartition},
		{"unknown topic", "absent", 0, kerr.UnknownTopicOrPartition},
	}
	want := func(e *kerr.Error) int16 {
		if e == nil {
			return 0
		}
		return e.Code
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			produced := roundTrip[*kmsg.ProduceResponse](conn, produceRequest(1, tt.topic, tt.partition, "x"))
			assert.Equal(t, want(tt.want), produced.Topics[0].Partitions[0].ErrorCode, "produce")

			fetched := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(0, tt.topic, tt.partition, 0))
			assert.Equal(t, want(tt.want), fetched.Topics[0].Partitions[0].ErrorCode, "fetch")

			req := kmsg.NewPtrListOffsetsRequest()
			req.Version = 6
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tt.topic
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = tt.partition, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			listed := roundTrip[*kmsg.ListOffsetsResponse](conn, req)
			assert.Equal(t, want(tt.want), listed.Topics[0].Partitions[0].ErrorCode, "list offsets")
		})
	}

	t.Run("unknown topic id", func(t *testing.T) {
		req := fetchRequest(0, "", 0, 0)
		req.Version = 13
		req.Topics[0].TopicID = [16]byte{1}
		resp := roundTrip[*kmsg.FetchResponse](conn, req)
		assert.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[0].Partitions[0].ErrorCode)
	})
	t.Run("offset out of range", func(t *testing.T) {
		resp := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(0, "two", 0, 1000))
		assert.Equal(t, kerr.OffsetOutOfRange.Code, resp.Topics[0].Partitions[0].ErrorCode)
	})
	t.Run("corrupt batch", func(t *testing.T) {
		req := produceRequest(1, "two", 0, "x")
		req.Topics[0].Partitions[0].Records[30] ^= 1 // inside the CRC's span
		resp := roundTrip[*kmsg.ProduceResponse](conn, req)
		assert.Equal(t, kerr.CorruptMessage.Code, resp.Topics[0].Partitions[0].ErrorCode)
	})
	t.Run("invalid acks", func(t *testing.T) {
		resp := roundTrip[*kmsg.ProduceResponse](conn, produceRequest(2, "two", 0, "x"))
		assert.Equal(t, kerr.InvalidRequiredAcks.Code, resp.Topics[0].Partitions[0].ErrorCode)
	})
}

func TestProduceAssignsOffsetsAndListOffsets(t *testing.T) {
	c := startTestCluster(t, 1)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "offsets", 1)
	for i, want := range []int64{0, 3, 5} {
		values := []string{"a", "b", "c"}[:3-i]
		resp := roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "offsets", 0, values...))
		require.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)
		assert.Equal(t, want, resp.Topics[0].Partitions[0].BaseOffset)
	}
	fetched := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(0, "offsets", 0, 1))
	p := fetched.Topics[0].Partitions[0]
	assert.Equal(t, int64(6), p.HighWatermark)
	values, offsets := recordValues(t, p.RecordBatches)
	// Offset 1 is inside the first batch, which comes whole.
	assert.Equal(t, []string{"a", "b", "c", "a", "b", "a"}, values)
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5}, offsets)

	for _, tt := range []struct {
		timestamp int64
		want      int64
	}{{-1, 6}, {-2, 0}, {0, 0}, {time.Now().Add(time.Hour).UnixMilli(), -1}} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "offsets"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = tt.timestamp
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := roundTrip[*kmsg.ListOffsetsResponse](conn, req)
		assert.Equal(t, tt.want, resp.Topics[0].Partitions[0].Offset, "timestamp %d", tt.timestamp)
	}
}

func TestCreateTopics(t *testing.T) {
	c := startTestCluster(t, 2, "num.partitions=4")
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "exists", 1)
	tests := []struct {
		name         string
		topic        string
		partitions   int32
		replication  int16
		validateOnly bool
		want         *kerr.Error
		wantParts    int32 // partitions Metadata shows afterwards, 0 for no topic
	}{
		{"explicit partitions", "five", 5, 2, false, nil, 5},
		{"default partitions", "dflt", -1, -1, false, nil, 4},
		{"already exists", "exists", 3, 1, false, kerr.TopicAlreadyExists, 1},
		{"validate only", "dry", 2, 1, true, nil, 0},
		{"zero partitions", "zero", 0, 1, false, kerr.InvalidPartitions, 0},
		{"too many replicas", "rf3", 1, 3, false, kerr.InvalidReplicationFactor, 0},
		{"invalid name", "a/b", 1, 1, false, kerr.InvalidTopicException, 0},
		{"dot", ".", 1, 1, false, kerr.InvalidTopicException, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Version, req.ValidateOnly = 7, tt.validateOnly
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tt.topic, tt.partitions, tt.replication
			req.Topics = append(req.Topics, rt)
			resp := roundTrip[*kmsg.CreateTopicsResponse](conn, req)
			require.Len(t, resp.Topics, 1)
			got := resp.Topics[0]
			if tt.want != nil {
				assert.Equal(t, tt.want.Code, got.ErrorCode)
				assert.NotNil(t, got.ErrorMessage)
			} else {
				assert.Equal(t, int16(0), got.ErrorCode)
			}

			meta := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false, tt.topic))
			mt := meta.Topics[0]
			if tt.wantParts == 0 {
				assert.NotEqual(t, int16(0), mt.ErrorCode, "the topic must not exist")
				return
			}
			require.Equal(t, int16(0), mt.ErrorCode)
			assert.Len(t, mt.Partitions, int(tt.wantParts))
			if tt.want == nil {
				assert.Equal(t, got.TopicID, mt.TopicID)
				assert.Equal(t, tt.wantParts, got.NumPartitions)
			}
		})
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	tests := []struct {
		name       string
		sets       []string
		version    int16
		allow      bool
		wantCode   int16
		wantLength int
	}{
		{"allowed", nil, 12, true, 0, 1},
		{"num.partitions", []string{"num.partitions=3"}, 12, true, 0, 3},
		{"not asked for", nil, 12, false, kerr.UnknownTopicOrPartition.Code, 0},
		{"v3 always asks", nil, 3, false, 0, 1},
		{"disabled", []string{"auto.create.topics.enable=false"}, 12, true, kerr.UnknownTopicOrPartition.Code, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startTestCluster(t, 1, tt.sets...)
			conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
			resp := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(tt.version, tt.allow, "auto"))
			require.Len(t, resp.Topics, 1)
			assert.Equal(t, tt.wantCode, resp.Topics[0].ErrorCode)
			assert.Len(t, resp.Topics[0].Partitions, tt.wantLength)
		})
	}
}

// Metadata flags Kafka's internal topics as internal (IsInternal), listed
// or asked for by name, existing or not, and no other topic.
func TestMetadataFlagsInternalTopics(t *testing.T) {
	c := startTestCluster(t, 1, "auto.create.topics.enable=false")
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	for _, name := range []string{"__consumer_offsets", "__transaction_state", "orders", "_consumer_offsets"} {
		createTopic(t, conn, name, 1)
	}
	want := map[string]bool{"__consumer_offsets": true, "__transaction_state": true, "orders": false,
		"_consumer_offsets": false, "__share_group_state": true, "absent": false}
	for _, tt := range []struct {
		name string
		req  *kmsg.MetadataRequest
	}{
		{"every topic", metadataRequest(12, false)}, // null topics
		{"every topic, v1", metadataRequest(1, false)},
		{"by name", metadataRequest(12, false, "__consumer_offsets", "__transaction_state", "orders", "_consumer_offsets")},
		{"absent ones", metadataRequest(12, false, "__share_group_state", "absent")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := roundTrip[*kmsg.MetadataResponse](conn, tt.req)
			require.NotEmpty(t, resp.Topics)
			for _, mt := range resp.Topics {
				assert.Equal(t, want[*mt.Topic], mt.IsInternal, *mt.Topic)
			}
		})
	}
}

func TestProduceAcksZeroWritesNoResponse(t *testing.T) {
	c := startTestCluster(t, 1)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "acks0", 1)

	conn.send(produceRequest(0, "acks0", 0, "fire", "and", "forget"))
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 12
	// The first frame read must answer the Metadata request.
	conn.read(meta, conn.send(metadataRequest(12, false, "acks0")))

	listed := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(0, "acks0", 0, 0))
	values, _ := recordValues(t, listed.Topics[0].Partitions[0].RecordBatches)
	assert.Equal(t, []string{"fire", "and", "forget"}, values, "the records were stored")

	t.Run("an error closes the connection", func(t *testing.T) {
		conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
		conn.send(produceRequest(0, "absent", 0, "x"))
		conn.requireClosed()
	})
}

func TestFetchLongPoll(t *testing.T) {
	c := startTestCluster(t, 1)
	seed := addr(t, c, 0, "CLIENT")
	setup := dialRaw(t, seed)
	createTopic(t, setup, "poll", 1)

	t.Run("answers when records arrive", func(t *testing.T) {
		conn := dialRaw(t, seed)
		start := time.Now()
		corr := conn.send(fetchRequest(5*time.Second, "poll", 0, 0))
		time.Sleep(200 * time.Millisecond)
		produced := roundTrip[*kmsg.ProduceResponse](setup, produceRequest(1, "poll", 0, "wake"))
		require.Equal(t, int16(0), produced.Topics[0].Partitions[0].ErrorCode)

		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		conn.read(resp, corr)
		elapsed := time.Since(start)
		values, _ := recordValues(t, resp.Topics[0].Partitions[0].RecordBatches)
		assert.Equal(t, []string{"wake"}, values)
		assert.Less(t, elapsed, 2*time.Second, "the fetch waited for its MaxWait instead of the records")
		t.Logf("answered %v after the fetch was sent", elapsed)
	})

	t.Run("records for another partition do not answer it", func(t *testing.T) {
		createTopic(t, setup, "other", 1)
		conn := dialRaw(t, seed)
		start := time.Now()
		corr := conn.send(fetchRequest(700*time.Millisecond, "poll", 0, 1))
		time.Sleep(100 * time.Millisecond)
		roundTrip[*kmsg.ProduceResponse](setup, produceRequest(1, "other", 0, "elsewhere"))
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		conn.read(resp, corr)
		assert.Empty(t, resp.Topics[0].Partitions[0].RecordBatches)
		assert.GreaterOrEqual(t, time.Since(start), 650*time.Millisecond)
	})

	t.Run("answers empty after MaxWait", func(t *testing.T) {
		conn := dialRaw(t, seed)
		start := time.Now()
		resp := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(500*time.Millisecond, "poll", 0, 1))
		elapsed := time.Since(start)
		p := resp.Topics[0].Partitions[0]
		assert.Equal(t, int16(0), p.ErrorCode)
		assert.Empty(t, p.RecordBatches)
		assert.Equal(t, int64(1), p.HighWatermark)
		assert.GreaterOrEqual(t, elapsed, 450*time.Millisecond)
		assert.Less(t, elapsed, 3*time.Second)
		t.Logf("answered %v after the fetch was sent (MaxWait 500ms)", elapsed)
	})

	t.Run("stops waiting when the client goes", func(t *testing.T) {
		conn := dialRaw(t, seed)
		conn.send(fetchRequest(time.Minute, "poll", 0, 1))
		require.Eventually(t, func() bool { return longPolls() == 1 }, 5*time.Second, 10*time.Millisecond)
		conn.conn.Close()
		require.Eventually(t, func() bool { return longPolls() == 0 }, 5*time.Second, 10*time.Millisecond)
	})
}

// longPolls counts the goroutines waiting in broker.longPoll.
func longPolls() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte(".(*broker).longPoll("))
}

func TestControlPlane(t *testing.T) {
	c := startTestCluster(t, 2)
	control := addr(t, c, 0, "CONTROLLER")

	conn := dialRaw(t, control)
	meta := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false))
	require.Len(t, meta.Brokers, 2)
	for i, b := range meta.Brokers {
		assert.Equal(t, addr(t, c, i, "CONTROLLER"), net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}

	versions := roundTrip[*kmsg.ApiVersionsResponse](conn, kmsg.NewPtrApiVersionsRequest())
	var keys []int16
	for _, k := range versions.ApiKeys {
		keys = append(keys, k.ApiKey)
	}
	assert.ElementsMatch(t, []int16{int16(kmsg.Metadata), int16(kmsg.ApiVersions), int16(kmsg.SASLHandshake), int16(kmsg.SASLAuthenticate),
		connregistry.DefaultListAPIKey, connregistry.DefaultCloseAPIKey}, keys)

	conn.send(produceRequest(1, "t", 0, "x"))
	conn.requireClosed()
}

func TestDataPlaneApiVersions(t *testing.T) {
	c := startTestCluster(t, 1)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp := roundTrip[*kmsg.ApiVersionsResponse](conn, req)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	// The server adds ApiVersions and the SASL exchange on every listener.
	want := map[int16][2]int16{17: {0, 1}, 18: {0, 4}, 36: {0, 2}, connregistry.DefaultListAPIKey: {0, 0}, connregistry.DefaultCloseAPIKey: {0, 0}}
	for _, api := range dataPlaneAPIs(nil) {
		want[api.Key] = [2]int16{api.MinVersion, api.MaxVersion}
		assert.LessOrEqual(t, api.MaxVersion, kmsg.RequestForKey(api.Key).MaxVersion(), "key %d beyond kmsg", api.Key)
	}
	assert.Equal(t, want, got)
}

func TestDescribeClusterAndInitProducerID(t *testing.T) {
	c := startTestCluster(t, 2, "broker.rack=rack-a")
	conn := dialRaw(t, addr(t, c, 1, "INTERNAL"))

	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	resp := roundTrip[*kmsg.DescribeClusterResponse](conn, req)
	require.Equal(t, int16(0), resp.ErrorCode)
	assert.Equal(t, c.id, resp.ClusterID)
	assert.Equal(t, int32(0), resp.ControllerID)
	require.Len(t, resp.Brokers, 2)
	for i, b := range resp.Brokers {
		assert.Equal(t, addr(t, c, i, "INTERNAL"), net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		if assert.NotNil(t, b.Rack) {
			assert.Equal(t, "rack-a", *b.Rack)
		}
	}
	req.EndpointType = 2 // controllers
	resp = roundTrip[*kmsg.DescribeClusterResponse](conn, req)
	assert.Equal(t, kerr.UnsupportedEndpointType.Code, resp.ErrorCode)

	var last int64
	for range 3 {
		init := kmsg.NewPtrInitProducerIDRequest()
		init.Version = 4
		got := roundTrip[*kmsg.InitProducerIDResponse](conn, init)
		require.Equal(t, int16(0), got.ErrorCode)
		assert.Greater(t, got.ProducerID, last)
		assert.Equal(t, int16(0), got.ProducerEpoch)
		last = got.ProducerID
	}
}

// requireTool skips the test if the named program is missing, unless the
// environment variable CI is set: in CI a missing tool fails the test.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s is not installed (%s); in CI this fails", name, install)
		}
		t.Fatalf("%s is required in CI (%s): %v", name, install, err)
	}
	return path
}

func TestKcat(t *testing.T) {
	requireTool(t, "kcat", "apt-get install kcat")
	plaintext := startTestCluster(t, 1)
	defaults := startDefaultCluster(t)
	pki := socketservertest.NewPKI(t)
	secured := startClusterWith(t, 1, config.Properties{}, securitySettings(pki)...)
	sasl := func(mech string) []string {
		return []string{"-X", "sasl.mechanisms=" + mech, "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"}
	}
	tests := []struct {
		name string
		seed string
		args []string // -X settings
	}{
		{"PLAINTEXT", addr(t, plaintext, 0, "CLIENT"), nil},
		{"SASL_PLAINTEXT PLAIN", addr(t, defaults, 0, "CLIENT"), append([]string{"-X", "security.protocol=SASL_PLAINTEXT"}, sasl("PLAIN")...)},
		{"SASL_PLAINTEXT SCRAM-SHA-256", addr(t, defaults, 0, "CLIENT"), append([]string{"-X", "security.protocol=SASL_PLAINTEXT"}, sasl("SCRAM-SHA-256")...)},
		{"SASL_PLAINTEXT SCRAM-SHA-512", addr(t, defaults, 0, "CLIENT"), append([]string{"-X", "security.protocol=SASL_PLAINTEXT"}, sasl("SCRAM-SHA-512")...)},
		{"SASL_SSL SCRAM-SHA-256", addr(t, secured, 0, "SASLTLS"),
			append([]string{"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + pki.CAFile}, sasl("SCRAM-SHA-256")...)},
		{"SSL client certificate", addr(t, secured, 0, "TLS"), []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + pki.CAFile,
			"-X", "ssl.certificate.location=" + pki.ClientCertFile, "-X", "ssl.key.location=" + pki.ClientKeyFile}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcat := func(stdin string, args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				all := append(append([]string{"-b", tt.seed}, tt.args...), args...)
				cmd := exec.CommandContext(ctx, "kcat", all...)
				cmd.Stdin = strings.NewReader(stdin)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				require.NoError(t, cmd.Run(), "kcat %v: %s", args, stderr.String())
				return stdout.String()
			}

			listing := kcat("", "-L")
			assert.Contains(t, listing, "broker 0 at "+tt.seed+" (controller)")

			topic := fmt.Sprintf("kcat-%d", i)
			var lines []string
			for i := range 10 {
				lines = append(lines, fmt.Sprintf("line %d", i))
			}
			kcat(strings.Join(lines, "\n")+"\n", "-P", "-t", topic)
			assert.Contains(t, kcat("", "-L", "-t", topic), fmt.Sprintf("topic %q with 1 partitions", topic))
			got := kcat("", "-C", "-t", topic, "-o", "beginning", "-e")
			assert.Equal(t, lines, strings.Split(strings.TrimSuffix(got, "\n"), "\n"))
		})
	}
	t.Run("SASL_PLAINTEXT wrong password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		out, err := exec.CommandContext(ctx, "kcat", "-b", addr(t, defaults, 0, "CLIENT"), "-X", "security.protocol=SASL_PLAINTEXT",
			"-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password=wrong", "-m", "3", "-L").CombinedOutput()
		require.Error(t, err, "kcat: %s", out)
		require.NoError(t, ctx.Err(), "kcat ran into the test's timeout: %s", out)
		assert.Contains(t, string(out), "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
		t.Logf("kcat failed after %v", time.Since(start))
	})
}

func TestShutdownAnswersLongPolls(t *testing.T) {
	c := startTestCluster(t, 1)
	setup := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, setup, "shutdown", 1)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	corr := conn.send(fetchRequest(30*time.Second, "shutdown", 0, 0))
	require.Eventually(t, func() bool { return longPolls() == 1 }, 5*time.Second, 10*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, c.Shutdown(ctx))
	elapsed := time.Since(start)
	assert.Less(t, elapsed, time.Second)
	t.Logf("Shutdown took %v with a long poll waiting", elapsed)

	// The client gets its answer, or a clean close: never a reset.
	frame, err := conn.readFrame()
	if err == nil {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 12
		decode(t, frame, resp, corr)
		assert.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)
		_, err = conn.readFrame()
	}
	require.ErrorIs(t, err, io.EOF)
}

// serveTestMetrics serves c's metrics (serveMetrics) on a loopback port
// until the test ends, and returns a function that scrapes them.
func serveTestMetrics(t *testing.T, c *cluster) (scrape func() []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metrics := serveMetrics(ln, c.registry)
	t.Cleanup(func() { require.NoError(t, metrics.Shutdown(context.Background())) })
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	return func() []byte {
		t.Helper()
		resp, err := client.Get("http://" + ln.Addr().String() + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return body
	}
}

func TestPrometheusMetrics(t *testing.T) {
	c := startTestCluster(t, 1)
	scrape := serveTestMetrics(t, c)

	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	sent := 0
	for range 3 {
		req := metadataRequest(12, false)
		sent += len(formatter.AppendRequest(nil, req, 0)) - 4 // the size is no part of the frame
		roundTrip[*kmsg.MetadataResponse](conn, req)
	}
	// The server calls a response's hooks after writing it: wait for the
	// last response's (the checks below show the series if it never comes).
	var body []byte
	assert.Eventually(t, func() bool {
		body = scrape()
		return parseMetrics(t, body)[`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",node_id="0",phase="response_send",request="Metadata"}`] == 3
	}, 10*time.Second, 10*time.Millisecond)
	// A scrape reads one metric after another, and may read the total
	// time before the last hook recorded it and the phases (recorded
	// last) after: scraped again now, every hook of the response is in.
	body = scrape()

	tests := []struct {
		series string
		check  func(float64) bool
	}{
		{`kafka_network_request_metrics_requests_total{api_key="3",listener="CLIENT",node_id="0",request="Metadata"}`, func(v float64) bool { return v == 3 }},
		{`kafka_server_socket_server_metrics_connection_count{listener="CLIENT",node_id="0"}`, func(v float64) bool { return v == 1 }},
		{`kafka_server_socket_server_metrics_connection_count{listener="REPLICATION",node_id="0"}`, func(v float64) bool { return v == 0 }},
		{`kafka_server_socket_server_metrics_connection_creation_total{listener="CLIENT",node_id="0"}`, func(v float64) bool { return v == 1 }},
		{`kafka_server_socket_server_metrics_incoming_byte_total{listener="CLIENT",node_id="0"}`, func(v float64) bool { return v == float64(sent) }},
		{`kafka_server_socket_server_metrics_outgoing_byte_total{listener="CLIENT",node_id="0"}`, func(v float64) bool { return v > 3*20 }},
		{`kafka_network_request_channel_request_queue_size{node_id="0",plane="data"}`, func(v float64) bool { return v == 0 }},
		{`kafka_network_request_channel_request_queue_size{node_id="0",plane="control"}`, func(v float64) bool { return v == 0 }},
		{`kafka_network_processor_idle_ratio{node_id="0",processor="0"}`, func(v float64) bool { return v >= 0 && v <= 1 }},
		{`kafka_network_processor_busy_seconds_total{node_id="0",processor="0"}`, func(v float64) bool { return v >= 0 }},
		{`kafkanet_parked_connections{node_id="0"}`, func(v float64) bool { return v >= 0 && v <= 1 }},
		{`kafka_network_request_metrics_total_time_seconds_count{api_key="3",listener="CLIENT",node_id="0",request="Metadata"}`, func(v float64) bool { return v == 3 }},
		{`kafka_network_request_metrics_total_time_seconds_sum{api_key="3",listener="CLIENT",node_id="0",request="Metadata"}`, func(v float64) bool { return v > 0 }},
		{`kafka_network_request_metrics_phase_time_seconds_count{listener="CLIENT",node_id="0",phase="local",request="Metadata"}`, func(v float64) bool { return v == 3 }},
	}
	values := parseMetrics(t, body)
	for _, tt := range tests {
		v, ok := values[tt.series]
		if assert.True(t, ok, "no series %s in:\n%s", tt.series, body) {
			assert.True(t, tt.check(v), "%s = %v", tt.series, v)
		}
	}
}

// The authentication counters: a SASL login, and a failed one, on the
// built-in SASL_PLAINTEXT listener CLIENT.
func TestPrometheusAuthenticationMetrics(t *testing.T) {
	c := startDefaultCluster(t, "connection.failed.authentication.delay.ms=0")
	scrape := serveTestMetrics(t, c)

	require.NoError(t, login(t, addr(t, c, 0, "CLIENT"), 10*time.Second, kgo.SASL(saslMechanism("PLAIN", "alice", "alice-secret"))))
	require.Error(t, login(t, addr(t, c, 0, "CLIENT"), 10*time.Second, kgo.SASL(saslMechanism("SCRAM-SHA-256", "alice", "wrong"))))

	body := scrape()
	values := parseMetrics(t, body)
	for series, check := range map[string]func(float64) bool{
		`kafka_server_socket_server_metrics_successful_authentication_total{listener="CLIENT",mechanism="PLAIN",node_id="0"}`: func(v float64) bool { return v >= 1 },
		`kafka_server_socket_server_metrics_failed_authentication_total{listener="CLIENT",node_id="0"}`:                       func(v float64) bool { return v >= 1 },
	} {
		v, ok := values[series]
		if assert.True(t, ok, "no series %s in:\n%s", series, body) {
			assert.True(t, check(v), "%s = %v", series, v)
		}
	}
}

// parseMetrics reads Prometheus's text format into series → value.
func parseMetrics(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	line := regexp.MustCompile(`^(\S+(?:\{[^}]*\})?) (\S+)$`)
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err, sc.Text())
		out[m[1]] = v
	}
	return out
}

func TestRunServesUntilCancelled(t *testing.T) {
	args := []string{"-brokers", "2", "-metrics-addr", "127.0.0.1:0"}
	for _, s := range testSettings {
		args = append(args, "-set", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testkit.SyncBuffer
	done := make(chan int)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()

	listening := regexp.MustCompile(`msg="listener started" broker=(\d) listener=(\w+) bind=(\S+) advertised=(\S+) protocol=PLAINTEXT plane=(data|control)`)
	var lines [][]string
	require.Eventually(t, func() bool {
		lines = listening.FindAllStringSubmatch(stderr.String(), -1)
		return len(lines) == 8
	}, 10*time.Second, 10*time.Millisecond, "stderr: %s", &stderr)
	for _, l := range lines {
		assert.Equal(t, l[3], l[4], "bind and advertised addresses")
		conn := dialRaw(t, l[4])
		meta := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false))
		assert.Len(t, meta.Brokers, 2, "broker %s listener %s", l[1], l[2])
	}
	assert.True(t, strings.HasPrefix(stdout.String(), "BROKER  LISTENER "), "the table of both brokers comes first: %s", &stdout)

	metricsURL := regexp.MustCompile(`msg="serving metrics" url=(\S+)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, metricsURL, "stderr: %s", &stderr)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Get(metricsURL[1])
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), `kafka_server_socket_server_metrics_connection_creation_total{listener="CLIENT",node_id="1"}`)

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "stderr: %s", &stderr)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return within 10 s of its context ending")
	}
	assert.Contains(t, stderr.String(), `msg=stopped`)
}

func TestRunFailsToBind(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-set", "listeners=PLAINTEXT://" + taken.Addr().String()}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "cannot start")
	assert.Contains(t, stderr.String(), taken.Addr().String())
}

// TestAnswersWhileStopping checks that a cluster that has begun to stop,
// after it was ready, still answers requests, inline (Metadata) and queued
// (DescribeCluster) alike, rather than closing their connections.
func TestAnswersWhileStopping(t *testing.T) {
	c := startTestCluster(t, 1)
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	c.stop() // long polls answer now; the servers still serve
	for i := range 20 {
		resp := roundTrip[*kmsg.MetadataResponse](conn, kmsg.NewPtrMetadataRequest())
		require.Len(t, resp.Brokers, 1, "Metadata %d while stopping", i)
		dc := roundTrip[*kmsg.DescribeClusterResponse](conn, kmsg.NewPtrDescribeClusterRequest())
		require.Zero(t, dc.ErrorCode, "DescribeCluster %d while stopping", i)
	}
}
