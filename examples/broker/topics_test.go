package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics accepts every topic config of Kafka 4.x (TopicConfig's names,
// and the throttled-replica lists and internal.segment.bytes of LogConfig)
// and refuses, as Kafka does, with INVALID_CONFIG: a name Kafka does not
// know ("Unknown topic config name"), a null value, and a value that does
// not parse or is out of the config's range. A refused topic is not
// created.
func TestCreateTopicsTopicConfigs(t *testing.T) {
	c := startTestCluster(t, 1)
	adm := kadm.NewClient(newClient(t, addr(t, c, 0, "CLIENT")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sp := func(s string) *string { return &s }

	kafka4 := map[string]string{
		"cleanup.policy":                          "compact,delete",
		"compression.gzip.level":                  "-1",
		"compression.lz4.level":                   "17",
		"compression.type":                        "zstd",
		"compression.zstd.level":                  "-131072",
		"delete.retention.ms":                     "86400000",
		"file.delete.delay.ms":                    "60000",
		"flush.messages":                          "1",
		"flush.ms":                                "0",
		"follower.replication.throttled.replicas": "*",
		"index.interval.bytes":                    "4096",
		"internal.segment.bytes":                  "1024",
		"leader.replication.throttled.replicas":   "0:1, 1:2",
		"local.retention.bytes":                   "-2",
		"local.retention.ms":                      "-2",
		"max.compaction.lag.ms":                   "9223372036854775807",
		"max.message.bytes":                       "2097152",
		"message.downconversion.enable":           "TRUE",
		"message.timestamp.after.max.ms":          "3600000",
		"message.timestamp.before.max.ms":         "0",
		"message.timestamp.type":                  "LogAppendTime",
		"min.cleanable.dirty.ratio":               "0.5",
		"min.compaction.lag.ms":                   "0",
		"min.insync.replicas":                     "1",
		"preallocate":                             "false",
		"remote.copy.lag.bytes":                   "-1",
		"remote.copy.lag.ms":                      "0",
		"remote.log.copy.disable":                 "false",
		"remote.log.delete.on.disable":            "false",
		"remote.storage.enable":                   "false",
		"retention.bytes":                         "-1",
		"retention.ms":                            "604800000",
		"segment.bytes":                           "1048576",
		"segment.index.bytes":                     "10485760",
		"segment.jitter.ms":                       "0",
		"segment.ms":                              "1",
		"unclean.leader.election.enable":          "true",
	}
	for name, value := range kafka4 {
		t.Run("accepts "+name, func(t *testing.T) {
			topic := "cfg-" + name
			resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{name: sp(value)}, topic)
			require.NoError(t, err, "%s=%s: %s", name, value, resp.ErrMessage)
			assert.NotEqual(t, kadm.TopicID{}, resp.ID)
		})
	}
	t.Run("all at once", func(t *testing.T) {
		configs := map[string]*string{}
		for name, value := range kafka4 {
			configs[name] = sp(value)
		}
		resp, err := adm.CreateTopic(ctx, 1, 1, configs, "cfg-all")
		require.NoError(t, err, resp.ErrMessage)
	})

	for _, tc := range []struct {
		name    string
		configs map[string]*string
		message string // in the error message
	}{
		{"kfake's internal flag", map[string]*string{"kfake.is_internal": sp("true")}, "Unknown topic config name: kfake.is_internal"},
		{"a broker key", map[string]*string{"log.retention.ms": sp("1000")}, "Unknown topic config name: log.retention.ms"},
		{"removed in Kafka 4.0", map[string]*string{"message.format.version": sp("3.0")}, "Unknown topic config name: message.format.version"},
		{"unknown among known", map[string]*string{"retention.ms": sp("1000"), "retention.hours": sp("1")}, "Unknown topic config name: retention.hours"},
		{"null value", map[string]*string{"retention.ms": nil, "segment.ms": nil}, "Null value not supported for topic configs: retention.ms,segment.ms"},
		{"not an int", map[string]*string{"segment.bytes": sp("1G")}, "Not a number of type INT"},
		{"beyond an int", map[string]*string{"max.message.bytes": sp("2147483648")}, "Not a number of type INT"},
		{"not a long", map[string]*string{"segment.ms": sp("1.5")}, "Not a number of type LONG"},
		{"below the range", map[string]*string{"segment.bytes": sp("1048575")}, "Value must be at least 1048576"},
		{"above the range", map[string]*string{"compression.lz4.level": sp("18")}, "Value must be no more than 17"},
		{"gzip level 0", map[string]*string{"compression.gzip.level": sp("0")}, "Value must be at least 1"},
		{"not a double", map[string]*string{"min.cleanable.dirty.ratio": sp("half")}, "Not a number of type DOUBLE"},
		{"ratio above 1", map[string]*string{"min.cleanable.dirty.ratio": sp("1.5")}, "Value must be no more than 1"},
		{"not a boolean", map[string]*string{"preallocate": sp("yes")}, "Expected value to be either true or false"},
		{"unknown compression", map[string]*string{"compression.type": sp("brotli")}, "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
		{"unknown timestamp type", map[string]*string{"message.timestamp.type": sp("createtime")}, "String must be one of: CreateTime, LogAppendTime"},
		{"unknown cleanup policy", map[string]*string{"cleanup.policy": sp("delete,forever")}, "String must be one of: compact, delete"},
		{"bad throttled replicas", map[string]*string{"leader.replication.throttled.replicas": sp("0:1,all")}, "[partitionId]:[brokerId]"},
		{"tiered storage", map[string]*string{"remote.storage.enable": sp("true")}, "no tiered storage"},
		{"compaction lags crossed", map[string]*string{"min.compaction.lag.ms": sp("10"), "max.compaction.lag.ms": sp("9")}, "min.compaction.lag.ms 10 is above max.compaction.lag.ms 9"},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			topic := "refused-" + time.Now().Format("150405.000000000")
			resp, err := adm.CreateTopic(ctx, 1, 1, tc.configs, topic)
			require.ErrorIs(t, err, kerr.InvalidConfig)
			assert.Contains(t, resp.ErrMessage, tc.message)
			topics, err := adm.ListTopics(ctx, topic)
			require.NoError(t, err)
			assert.ErrorIs(t, topics[topic].Err, kerr.UnknownTopicOrPartition, "the refused topic was created")
		})
	}
}

// The first FindCoordinator for a group creates __consumer_offsets, as Kafka
// does, with offsets.topic.num.partitions partitions (7 here) and
// offsets.topic.replication.factor replicas (3, Kafka's default): Metadata
// lists it, flagged internal. The coordinator it names leads the partition
// Kafka keeps the group in, abs(hashCode) % 7. Metadata that may create
// topics creates it the same way, and a deleted one comes back.
func TestFindCoordinatorCreatesOffsetsTopic(t *testing.T) {
	c := startTestCluster(t, 3, "offsets.topic.num.partitions=7")
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	offsetsTopic := func() *kmsg.MetadataResponseTopic {
		for _, mt := range roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false)).Topics {
			if *mt.Topic == "__consumer_offsets" {
				return &mt
			}
		}
		return nil
	}
	require.Nil(t, offsetsTopic(), "there before any group")

	// "my-group": Java hash code -1906497762, so partition 1906497762 % 7 = 1.
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.Version, find.CoordinatorKey = 3, "my-group"
	resp := roundTrip[*kmsg.FindCoordinatorResponse](conn, find)
	require.Zero(t, resp.ErrorCode, "%v", resp.ErrorMessage)
	mt := offsetsTopic()
	require.NotNil(t, mt, "FindCoordinator did not create __consumer_offsets")
	assert.True(t, mt.IsInternal)
	require.Len(t, mt.Partitions, 7)
	for _, p := range mt.Partitions {
		assert.Len(t, p.Replicas, 3, "partition %d", p.Partition)
	}
	assert.Equal(t, mt.Partitions[1].Leader, resp.NodeID)
	id := mt.TopicID

	resp = roundTrip[*kmsg.FindCoordinatorResponse](conn, find)
	require.Zero(t, resp.ErrorCode)
	assert.Equal(t, id, offsetsTopic().TopicID, "created again")

	// A deleted __consumer_offsets comes back with the next FindCoordinator.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TopicNames = 5, []string{"__consumer_offsets"}
	require.Zero(t, roundTrip[*kmsg.DeleteTopicsResponse](conn, del).Topics[0].ErrorCode)
	require.Nil(t, offsetsTopic())
	require.Zero(t, roundTrip[*kmsg.FindCoordinatorResponse](conn, find).ErrorCode)
	require.NotNil(t, offsetsTopic())
	assert.NotEqual(t, id, offsetsTopic().TopicID)

	// Metadata that may create topics creates it as FindCoordinator does;
	// a transactional id's FindCoordinator does not create it.
	one := startTestCluster(t, 1)
	conn = dialRaw(t, addr(t, one, 0, "CLIENT"))
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.Version, txn.CoordinatorKey, txn.CoordinatorType = 3, "tx", 1
	require.Equal(t, kerr.InvalidRequest.Code, roundTrip[*kmsg.FindCoordinatorResponse](conn, txn).ErrorCode)
	require.Nil(t, offsetsTopic())
	created := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, true, "__consumer_offsets")).Topics[0]
	require.Zero(t, created.ErrorCode)
	assert.True(t, created.IsInternal)
	assert.Len(t, created.Partitions, 50, "Kafka's default offsets.topic.num.partitions")
	assert.Len(t, created.Partitions[0].Replicas, 1, "one broker: one replica")
}

// DeleteTopics, through kadm and at every version: a topic goes with its
// records (the log's memory is given back), the offsets groups committed
// for it, and a fetch waiting on it, which answers at once with
// UNKNOWN_TOPIC_OR_PARTITION; produce and Metadata then find no such topic,
// and one created again with the name starts empty under a new id. Unknown
// names and ids, and topics named twice, are refused as Kafka refuses them.
func TestDeleteTopics(t *testing.T) {
	c := startTestCluster(t, 1, groupSets...)
	seed := addr(t, c, 0, "CLIENT")
	adm := kadm.NewClient(newClient(t, seed))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created, err := adm.CreateTopics(ctx, 2, 1, nil, "a", "b")
	require.NoError(t, err)
	require.NoError(t, created.Error())
	producer := newClient(t, seed, kgo.DefaultProduceTopic("a"))
	for range 10 {
		require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Value: []byte("value")}).FirstErr())
	}
	require.Positive(t, c.state.stored.Load())
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "a", Partition: 0, At: 5, LeaderEpoch: -1})
	offsets.Add(kadm.Offset{Topic: "b", Partition: 1, At: 7, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, "g", offsets)
	require.NoError(t, err)
	require.NoError(t, committed.Error())

	// A fetch of a's end waits (up to a minute) for records.
	fetcher := dialRaw(t, seed)
	hw := roundTrip[*kmsg.FetchResponse](fetcher, fetchRequest(0, "a", 0, 0)).Topics[0].Partitions[0].HighWatermark
	waiting := fetcher.send(fetchRequest(time.Minute, "a", 0, hw))

	deleted, err := adm.DeleteTopics(ctx, "a", "missing")
	require.NoError(t, err)
	require.NoError(t, deleted["a"].Err)
	assert.Equal(t, created["a"].ID, deleted["a"].ID)
	assert.ErrorIs(t, deleted["missing"].Err, kerr.UnknownTopicOrPartition)

	answered := kmsg.NewPtrFetchResponse()
	answered.Version = 12
	fetcher.read(answered, waiting) // within the connection's 30 s deadline, not the minute
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, answered.Topics[0].Partitions[0].ErrorCode)
	assert.Zero(t, c.state.stored.Load(), "the deleted records' memory is still counted")

	conn := dialRaw(t, seed)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false, "a")).Topics[0].ErrorCode)
	assert.Equal(t, kerr.UnknownTopicOrPartition.Code, roundTrip[*kmsg.ProduceResponse](conn, produceRequest(-1, "a", 0, "v")).Topics[0].Partitions[0].ErrorCode)
	fetched, err := adm.FetchOffsets(ctx, "g")
	require.NoError(t, err)
	_, kept := fetched.Lookup("a", 0)
	assert.False(t, kept, "a's committed offset outlived the topic")
	b1, kept := fetched.Lookup("b", 1)
	require.True(t, kept)
	assert.Equal(t, int64(7), b1.At)

	again, err := adm.CreateTopic(ctx, 2, 1, nil, "a")
	require.NoError(t, err)
	assert.NotEqual(t, created["a"].ID, again.ID)
	ends, err := adm.ListEndOffsets(ctx, "a")
	require.NoError(t, err)
	end, _ := ends.Lookup("a", 0)
	assert.Zero(t, end.Offset, "the new topic has the old one's records")

	t.Run("by id", func(t *testing.T) {
		unknown := [16]byte{1, 2, 3}
		for _, tc := range []struct {
			name  string
			topic *string
			id    [16]byte
			code  int16
			gone  bool
		}{
			{"b by id", nil, created["b"].ID, 0, true},
			{"unknown id", nil, unknown, kerr.UnknownTopicID.Code, false},
			{"name and id", kmsg.StringPtr("a"), again.ID, kerr.InvalidRequest.Code, false},
			{"neither", nil, [16]byte{}, kerr.InvalidRequest.Code, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := kmsg.NewPtrDeleteTopicsRequest()
				req.Version = 6
				rt := kmsg.NewDeleteTopicsRequestTopic()
				rt.Topic, rt.TopicID = tc.topic, tc.id
				req.Topics = append(req.Topics, rt)
				resp := roundTrip[*kmsg.DeleteTopicsResponse](conn, req)
				require.Len(t, resp.Topics, 1)
				st := resp.Topics[0]
				require.Equal(t, tc.code, st.ErrorCode, "%v", st.ErrorMessage)
				assert.Equal(t, tc.id, st.TopicID)
				if tc.gone {
					require.NotNil(t, st.Topic)
					assert.Equal(t, "b", *st.Topic)
					assert.Nil(t, c.state.topicByID(tc.id))
				}
			})
		}
	})

	t.Run("named twice", func(t *testing.T) {
		id := c.state.topic("a").id
		for _, refs := range [][]kmsg.DeleteTopicsRequestTopic{
			{{Topic: kmsg.StringPtr("a")}, {Topic: kmsg.StringPtr("a")}},
			{{Topic: kmsg.StringPtr("a")}, {TopicID: id}},
			{{TopicID: id}, {TopicID: id}, {TopicID: id}},
		} {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version, req.Topics = 6, refs
			resp := roundTrip[*kmsg.DeleteTopicsResponse](conn, req)
			require.Len(t, resp.Topics, 1, "one answer for the topic")
			assert.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].ErrorCode)
			assert.NotNil(t, c.state.topic("a"), "a topic named twice was deleted")
		}
	})

	t.Run("every version by name", func(t *testing.T) {
		for version := int16(0); version <= 6; version++ {
			name := "v" + string(rune('0'+version))
			createTopic(t, conn, name, 1)
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.Version, req.TopicNames = version, []string{name}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
			resp := roundTrip[*kmsg.DeleteTopicsResponse](conn, req)
			require.Len(t, resp.Topics, 1, "v%d", version)
			assert.Zero(t, resp.Topics[0].ErrorCode, "v%d", version)
			assert.Equal(t, name, *resp.Topics[0].Topic, "v%d", version)
			assert.Nil(t, c.state.topic(name), "v%d", version)
		}
	})
}

// With delete.topic.enable=false DeleteTopics deletes nothing:
// TOPIC_DELETION_DISABLED from v3, INVALID_REQUEST before, as in Kafka.
func TestDeleteTopicsDisabled(t *testing.T) {
	c := startTestCluster(t, 1, "delete.topic.enable=false")
	conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
	createTopic(t, conn, "kept", 1)
	for version, code := range map[int16]int16{2: kerr.InvalidRequest.Code, 3: kerr.TopicDeletionDisabled.Code, 6: kerr.TopicDeletionDisabled.Code} {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.Version, req.TopicNames = version, []string{"kept"}
		req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("kept")}}
		resp := roundTrip[*kmsg.DeleteTopicsResponse](conn, req)
		require.Len(t, resp.Topics, 1)
		assert.Equal(t, code, resp.Topics[0].ErrorCode, "v%d", version)
	}
	assert.NotNil(t, c.state.topic("kept"))
}
