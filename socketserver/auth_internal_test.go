package socketserver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionLifetime follows Kafka's
// SaslServerAuthenticator.ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs,
// with M = connections.max.reauth.ms: M>0 only → M; expiry only →
// max(0, expiry−now); both → max(0, min(expiry−now, M)); neither → 0 and
// no session expiry.
func TestSessionLifetime(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		expiry    time.Time
		reauthMax time.Duration
		want      time.Duration
		expires   bool
	}{
		{name: "neither", want: 0},
		{name: "negative M is unset", reauthMax: -time.Second, want: 0},
		{name: "M only", reauthMax: time.Minute, want: time.Minute, expires: true},
		{name: "expiry only", expiry: now.Add(90 * time.Second), want: 90 * time.Second, expires: true},
		{name: "expiry only, in the past", expiry: now.Add(-time.Second), want: 0, expires: true},
		{name: "both, expiry first", expiry: now.Add(time.Second), reauthMax: time.Minute, want: time.Second, expires: true},
		{name: "both, M first", expiry: now.Add(time.Hour), reauthMax: time.Minute, want: time.Minute, expires: true},
		{name: "both, expiry past", expiry: now.Add(-time.Hour), reauthMax: time.Minute, want: 0, expires: true},
		{name: "whole milliseconds", expiry: now.Add(1500*time.Microsecond + 300), want: time.Millisecond, expires: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, expires := sessionLifetime(now, tc.expiry, tc.reauthMax)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.expires, expires)
		})
	}
}

// apiName gives Kafka's ApiKeys enum names, which its messages print
// ("Unexpected Kafka request of type METADATA during SASL handshake."); for
// keys Kafka does not have yet, kmsg's names in the same style.
func TestAPIName(t *testing.T) {
	kafka := []string{"PRODUCE", "FETCH", "LIST_OFFSETS", "METADATA", "LEADER_AND_ISR", "STOP_REPLICA", "UPDATE_METADATA",
		"CONTROLLED_SHUTDOWN", "OFFSET_COMMIT", "OFFSET_FETCH", "FIND_COORDINATOR", "JOIN_GROUP", "HEARTBEAT", "LEAVE_GROUP",
		"SYNC_GROUP", "DESCRIBE_GROUPS", "LIST_GROUPS", "SASL_HANDSHAKE", "API_VERSIONS", "CREATE_TOPICS", "DELETE_TOPICS",
		"DELETE_RECORDS", "INIT_PRODUCER_ID", "OFFSET_FOR_LEADER_EPOCH", "ADD_PARTITIONS_TO_TXN", "ADD_OFFSETS_TO_TXN",
		"END_TXN", "WRITE_TXN_MARKERS", "TXN_OFFSET_COMMIT", "DESCRIBE_ACLS", "CREATE_ACLS", "DELETE_ACLS", "DESCRIBE_CONFIGS",
		"ALTER_CONFIGS", "ALTER_REPLICA_LOG_DIRS", "DESCRIBE_LOG_DIRS", "SASL_AUTHENTICATE", "CREATE_PARTITIONS",
		"CREATE_DELEGATION_TOKEN", "RENEW_DELEGATION_TOKEN", "EXPIRE_DELEGATION_TOKEN", "DESCRIBE_DELEGATION_TOKEN",
		"DELETE_GROUPS", "ELECT_LEADERS", "INCREMENTAL_ALTER_CONFIGS", "ALTER_PARTITION_REASSIGNMENTS",
		"LIST_PARTITION_REASSIGNMENTS", "OFFSET_DELETE", "DESCRIBE_CLIENT_QUOTAS", "ALTER_CLIENT_QUOTAS",
		"DESCRIBE_USER_SCRAM_CREDENTIALS", "ALTER_USER_SCRAM_CREDENTIALS", "VOTE", "BEGIN_QUORUM_EPOCH", "END_QUORUM_EPOCH",
		"DESCRIBE_QUORUM", "ALTER_PARTITION", "UPDATE_FEATURES", "ENVELOPE", "FETCH_SNAPSHOT", "DESCRIBE_CLUSTER",
		"DESCRIBE_PRODUCERS", "BROKER_REGISTRATION", "BROKER_HEARTBEAT", "UNREGISTER_BROKER", "DESCRIBE_TRANSACTIONS",
		"LIST_TRANSACTIONS", "ALLOCATE_PRODUCER_IDS", "CONSUMER_GROUP_HEARTBEAT", "CONSUMER_GROUP_DESCRIBE",
		"CONTROLLER_REGISTRATION", "GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY", "ASSIGN_REPLICAS_TO_DIRS",
		"LIST_CONFIG_RESOURCES", "DESCRIBE_TOPIC_PARTITIONS", "SHARE_GROUP_HEARTBEAT", "SHARE_GROUP_DESCRIBE", "SHARE_FETCH",
		"SHARE_ACKNOWLEDGE", "ADD_RAFT_VOTER", "REMOVE_RAFT_VOTER", "UPDATE_RAFT_VOTER", "INITIALIZE_SHARE_GROUP_STATE",
		"READ_SHARE_GROUP_STATE", "WRITE_SHARE_GROUP_STATE", "DELETE_SHARE_GROUP_STATE", "READ_SHARE_GROUP_STATE_SUMMARY",
		"STREAMS_GROUP_HEARTBEAT", "STREAMS_GROUP_DESCRIBE", "DESCRIBE_SHARE_GROUP_OFFSETS", "ALTER_SHARE_GROUP_OFFSETS",
		"DELETE_SHARE_GROUP_OFFSETS"}
	for key, want := range kafka {
		assert.Equal(t, want, apiName(int16(key)), "key %d", key)
	}
	assert.Equal(t, "UNKNOWN(-1)", apiName(-1))
	assert.Equal(t, "UNKNOWN(10000)", apiName(10000))
	for key := int16(len(kafka)); kmsg.RequestForKey(key) != nil; key++ {
		assert.NotContains(t, apiName(key), "UNKNOWN", "key %d", key)
	}
	assert.Equal(t, "STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE", apiName(93))
}

// errorResponse builds what Kafka's AbstractRequest.getErrorResponse of
// each request type builds.
func TestErrorResponse(t *testing.T) {
	e := kerr.IllegalSaslState
	const msg = "Unexpected Kafka request of type X during SASL authentication."
	code := e.Code
	str := func(s string) *string { return &s }

	t.Run("Produce acks=0 has none", func(t *testing.T) {
		r := kmsg.NewPtrProduceRequest()
		r.Acks = 0
		assert.Nil(t, errorResponse(r, e, msg))
	})
	t.Run("Fetch before and from v13", func(t *testing.T) {
		req := kmsg.NewPtrFetchRequest()
		req.SessionID = 7
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rt.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		req.Version = 12
		old := errorResponse(req, e, msg).(*kmsg.FetchResponse)
		assert.Equal(t, code, old.ErrorCode)
		assert.Equal(t, int32(7), old.SessionID)
		assert.Equal(t, code, old.Topics[0].Partitions[0].ErrorCode)
		assert.Equal(t, int64(-1), old.Topics[0].Partitions[0].HighWatermark)
		req.Version = 13
		now := errorResponse(req, e, msg).(*kmsg.FetchResponse)
		assert.Equal(t, code, now.ErrorCode)
		assert.Empty(t, now.Topics)
	})
	t.Run("ListOffsets", func(t *testing.T) {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = 3
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		r := errorResponse(req, e, msg).(*kmsg.ListOffsetsResponse)
		got := r.Topics[0].Partitions[0]
		assert.Equal(t, int32(3), got.Partition)
		assert.Equal(t, code, got.ErrorCode)
		assert.Equal(t, int64(-1), got.Offset)
		assert.Equal(t, int64(-1), got.Timestamp)
	})
	t.Run("OffsetCommit", func(t *testing.T) {
		req := kmsg.NewPtrOffsetCommitRequest()
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rt.Partitions = []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1}, {Partition: 2}}
		req.Topics = append(req.Topics, rt)
		r := errorResponse(req, e, msg).(*kmsg.OffsetCommitResponse)
		assert.Equal(t, "t", r.Topics[0].Topic)
		assert.Len(t, r.Topics[0].Partitions, 2)
		assert.Equal(t, code, r.Topics[0].Partitions[1].ErrorCode)
	})
	t.Run("OffsetFetch by version", func(t *testing.T) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{4}}}
		req.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}}
		req.Version = 1
		v1 := errorResponse(req, e, msg).(*kmsg.OffsetFetchResponse)
		assert.Equal(t, code, v1.Topics[0].Partitions[0].ErrorCode)
		assert.Equal(t, int64(-1), v1.Topics[0].Partitions[0].Offset)
		req.Version = 5
		v5 := errorResponse(req, e, msg).(*kmsg.OffsetFetchResponse)
		assert.Equal(t, code, v5.ErrorCode)
		assert.Empty(t, v5.Topics)
		req.Version = 8
		v8 := errorResponse(req, e, msg).(*kmsg.OffsetFetchResponse)
		assert.Equal(t, "g", v8.Groups[0].Group)
		assert.Equal(t, code, v8.Groups[0].ErrorCode)
	})
	t.Run("FindCoordinator before v4", func(t *testing.T) {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version = 3
		r := errorResponse(req, e, msg).(*kmsg.FindCoordinatorResponse)
		assert.Equal(t, code, r.ErrorCode)
		assert.Equal(t, str(e.Description), r.ErrorMessage)
		assert.Equal(t, int32(-1), r.NodeID)
		assert.Equal(t, int32(-1), r.Port)
	})
	t.Run("JoinGroup", func(t *testing.T) {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 6
		r := errorResponse(req, e, msg).(*kmsg.JoinGroupResponse)
		assert.Equal(t, code, r.ErrorCode)
		assert.Equal(t, int32(-1), r.Generation)
		assert.Equal(t, str(""), r.Protocol)
		req.Version = 7
		assert.Nil(t, errorResponse(req, e, msg).(*kmsg.JoinGroupResponse).Protocol)
	})
	t.Run("DescribeGroups", func(t *testing.T) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"a", "b"}
		r := errorResponse(req, e, msg).(*kmsg.DescribeGroupsResponse)
		assert.Len(t, r.Groups, 2)
		assert.Equal(t, code, r.Groups[1].ErrorCode)
		assert.Equal(t, int32(-2147483648), r.Groups[1].AuthorizedOperations, "AUTHORIZED_OPERATIONS_OMITTED")
	})
	t.Run("CreateTopics and DeleteTopics", func(t *testing.T) {
		ct := kmsg.NewPtrCreateTopicsRequest()
		ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a"}}
		r := errorResponse(ct, e, msg).(*kmsg.CreateTopicsResponse)
		assert.Equal(t, code, r.Topics[0].ErrorCode)
		assert.Equal(t, str(msg), r.Topics[0].ErrorMessage)
		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.Version, dt.TopicNames = 5, []string{"a", "b"}
		d := errorResponse(dt, e, msg).(*kmsg.DeleteTopicsResponse)
		assert.Len(t, d.Topics, 2)
		assert.Equal(t, str("b"), d.Topics[1].Topic)
		assert.Equal(t, code, d.Topics[1].ErrorCode)
	})
	t.Run("a top-level error code", func(t *testing.T) {
		for _, req := range []kmsg.Request{kmsg.NewPtrHeartbeatRequest(), kmsg.NewPtrInitProducerIDRequest(),
			kmsg.NewPtrSyncGroupRequest(), kmsg.NewPtrConsumerGroupHeartbeatRequest(), kmsg.NewPtrApiVersionsRequest()} {
			resp := errorResponse(req, e, msg)
			assert.NotNil(t, resp, kmsg.NameForKey(req.Key()))
		}
		assert.Equal(t, code, errorResponse(kmsg.NewPtrHeartbeatRequest(), e, msg).(*kmsg.HeartbeatResponse).ErrorCode)
		ip := errorResponse(kmsg.NewPtrInitProducerIDRequest(), e, msg).(*kmsg.InitProducerIDResponse)
		assert.Equal(t, int64(-1), ip.ProducerID)
	})
	t.Run("no top-level error code and not mirrored", func(t *testing.T) {
		assert.Nil(t, errorResponse(kmsg.NewPtrDescribeConfigsRequest(), e, msg))
	})
}
