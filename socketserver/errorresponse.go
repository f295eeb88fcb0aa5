package socketserver

import (
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorResponse returns the response Kafka sends for req when it fails as a
// whole with kerr error e and message msg: what the request's
// AbstractRequest.getErrorResponse builds. The request types clients send
// most are built as Kafka builds them, mirroring the request's topics,
// partitions, groups or coordinator keys, each with the error; for any
// other type whose response has a top-level ErrorCode, that is set (Kafka's
// getErrorResponse of those types sets at least that). It returns nil when
// Kafka sends no response (Produce with acks=0) or when the response has no
// top-level ErrorCode and its type is not one of those built here.
//
// Only the error path uses it: it may allocate and reflect.
func errorResponse(req kmsg.Request, e *kerr.Error, msg string) kmsg.Response {
	code := e.Code
	v := req.GetVersion()
	resp := req.ResponseKind() // with the schema's defaults, as Kafka's response data
	resp.SetVersion(v)
	switch req := req.(type) {
	case *kmsg.ProduceRequest: // ProduceRequest.getErrorResponse
		if req.Acks == 0 {
			return nil
		}
		r := resp.(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			var rt *kmsg.ProduceResponseTopic
			for i := range r.Topics { // one entry per topic, as Kafka's map of partitions
				if r.Topics[i].Topic == t.Topic && r.Topics[i].TopicID == t.TopicID {
					rt = &r.Topics[i]
				}
			}
			if rt == nil {
				nt := kmsg.NewProduceResponseTopic()
				nt.Topic, nt.TopicID = t.Topic, t.TopicID
				r.Topics = append(r.Topics, nt)
				rt = &r.Topics[len(r.Topics)-1]
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, &msg
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
	case *kmsg.FetchRequest: // FetchRequest.getErrorResponse
		r := resp.(*kmsg.FetchResponse)
		r.ErrorCode, r.SessionID = code, req.SessionID
		if v < 13 { // v13+ carries the error at the top only
			for _, t := range req.Topics {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.HighWatermark = p.Partition, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				r.Topics = append(r.Topics, rt)
			}
		}
	case *kmsg.ListOffsetsRequest: // ListOffsetsRequest.getErrorResponse
		r := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.Offset, rp.Timestamp = -1, -1 // v0 sends OldStyleOffsets, empty, instead
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.MetadataRequest: // MetadataRequest.getErrorResponse: per topic, no top-level code
		r := resp.(*kmsg.MetadataResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			rt.Topic, rt.TopicID, rt.ErrorCode = &name, t.TopicID, code
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.OffsetCommitRequest: // OffsetCommitRequest.getErrorResponse
		r := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.OffsetFetchRequest: // OffsetFetchRequest.getErrorResponse
		r := resp.(*kmsg.OffsetFetchResponse)
		switch {
		case v < 2: // no top-level code: each partition asked for
			for _, t := range req.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.Offset = p, code, -1
					empty := ""
					rp.Metadata = &empty
					rt.Partitions = append(rt.Partitions, rp)
				}
				r.Topics = append(r.Topics, rt)
			}
		case v < 8:
			r.ErrorCode = code
		default: // per group
			for _, g := range req.Groups {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, code
				r.Groups = append(r.Groups, rg)
			}
		}
	case *kmsg.FindCoordinatorRequest: // FindCoordinatorRequest.getErrorResponse
		r := resp.(*kmsg.FindCoordinatorResponse)
		desc := e.Description // Kafka's Errors.message()
		if v < 4 {
			r.ErrorCode, r.ErrorMessage, r.NodeID, r.Host, r.Port = code, &desc, -1, "", -1
			break
		}
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = key, code, &desc, -1, "", -1
			r.Coordinators = append(r.Coordinators, c)
		}
	case *kmsg.JoinGroupRequest: // JoinGroupRequest.getErrorResponse
		r := resp.(*kmsg.JoinGroupResponse)
		r.ErrorCode, r.Generation, r.LeaderID, r.MemberID = code, -1, "", ""
		if v < 7 {
			empty := ""
			r.Protocol = &empty
		}
	case *kmsg.SyncGroupRequest: // SyncGroupRequest.getErrorResponse
		r := resp.(*kmsg.SyncGroupResponse)
		r.ErrorCode, r.MemberAssignment = code, []byte{}
	case *kmsg.DescribeGroupsRequest: // DescribeGroupsRequest.getErrorResponse
		r := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			r.Groups = append(r.Groups, rg)
		}
	case *kmsg.CreateTopicsRequest: // CreateTopicsRequest.getErrorResponse
		r := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, &msg
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest: // DeleteTopicsRequest.getErrorResponse
		r := resp.(*kmsg.DeleteTopicsResponse)
		if v < 6 {
			for _, name := range req.TopicNames {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = &name, code
				r.Topics = append(r.Topics, rt)
			}
			break
		}
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			r.Topics = append(r.Topics, rt)
		}
	default:
		f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
		if !f.IsValid() || f.Kind() != reflect.Int16 {
			return nil
		}
		f.SetInt(int64(code))
	}
	return resp
}

// kafkaAPINames are the names Kafka gives API keys in its messages: the
// constants of its ApiKeys enum, indexed by key.
var kafkaAPINames = [...]string{
	"PRODUCE", "FETCH", "LIST_OFFSETS", "METADATA", "LEADER_AND_ISR", "STOP_REPLICA",
	"UPDATE_METADATA", "CONTROLLED_SHUTDOWN", "OFFSET_COMMIT", "OFFSET_FETCH", "FIND_COORDINATOR",
	"JOIN_GROUP", "HEARTBEAT", "LEAVE_GROUP", "SYNC_GROUP", "DESCRIBE_GROUPS", "LIST_GROUPS",
	"SASL_HANDSHAKE", "API_VERSIONS", "CREATE_TOPICS", "DELETE_TOPICS", "DELETE_RECORDS",
	"INIT_PRODUCER_ID", "OFFSET_FOR_LEADER_EPOCH", "ADD_PARTITIONS_TO_TXN", "ADD_OFFSETS_TO_TXN",
	"END_TXN", "WRITE_TXN_MARKERS", "TXN_OFFSET_COMMIT", "DESCRIBE_ACLS", "CREATE_ACLS",
	"DELETE_ACLS", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALTER_REPLICA_LOG_DIRS", "DESCRIBE_LOG_DIRS",
	"SASL_AUTHENTICATE", "CREATE_PARTITIONS", "CREATE_DELEGATION_TOKEN", "RENEW_DELEGATION_TOKEN",
	"EXPIRE_DELEGATION_TOKEN", "DESCRIBE_DELEGATION_TOKEN", "DELETE_GROUPS", "ELECT_LEADERS",
	"INCREMENTAL_ALTER_CONFIGS", "ALTER_PARTITION_REASSIGNMENTS", "LIST_PARTITION_REASSIGNMENTS",
	"OFFSET_DELETE", "DESCRIBE_CLIENT_QUOTAS", "ALTER_CLIENT_QUOTAS",
	"DESCRIBE_USER_SCRAM_CREDENTIALS", "ALTER_USER_SCRAM_CREDENTIALS", "VOTE", "BEGIN_QUORUM_EPOCH",
	"END_QUORUM_EPOCH", "DESCRIBE_QUORUM", "ALTER_PARTITION", "UPDATE_FEATURES", "ENVELOPE",
	"FETCH_SNAPSHOT", "DESCRIBE_CLUSTER", "DESCRIBE_PRODUCERS", "BROKER_REGISTRATION",
	"BROKER_HEARTBEAT", "UNREGISTER_BROKER", "DESCRIBE_TRANSACTIONS", "LIST_TRANSACTIONS",
	"ALLOCATE_PRODUCER_IDS", "CONSUMER_GROUP_HEARTBEAT", "CONSUMER_GROUP_DESCRIBE",
	"CONTROLLER_REGISTRATION", "GET_TELEMETRY_SUBSCRIPTIONS", "PUSH_TELEMETRY",
	"ASSIGN_REPLICAS_TO_DIRS", "LIST_CONFIG_RESOURCES", "DESCRIBE_TOPIC_PARTITIONS",
	"SHARE_GROUP_HEARTBEAT", "SHARE_GROUP_DESCRIBE", "SHARE_FETCH", "SHARE_ACKNOWLEDGE",
	"ADD_RAFT_VOTER", "REMOVE_RAFT_VOTER", "UPDATE_RAFT_VOTER", "INITIALIZE_SHARE_GROUP_STATE",
	"READ_SHARE_GROUP_STATE", "WRITE_SHARE_GROUP_STATE", "DELETE_SHARE_GROUP_STATE",
	"READ_SHARE_GROUP_STATE_SUMMARY", "STREAMS_GROUP_HEARTBEAT", "STREAMS_GROUP_DESCRIBE",
	"DESCRIBE_SHARE_GROUP_OFFSETS", "ALTER_SHARE_GROUP_OFFSETS", "DELETE_SHARE_GROUP_OFFSETS",
}

// apiName returns the name Kafka gives an API key in its messages
// ("Unexpected Kafka request of type METADATA during SASL handshake."):
// the ApiKeys constant; for a key newer than the table, kmsg's name in
// Kafka's style; for an unknown key, UNKNOWN(<key>).
func apiName(key int16) string {
	if key >= 0 && int(key) < len(kafkaAPINames) {
		return kafkaAPINames[key]
	}
	name := kmsg.NameForKey(key)
	if kmsg.RequestForKey(key) == nil {
		return "UNKNOWN(" + strconv.Itoa(int(key)) + ")"
	}
	var b strings.Builder
	r := []rune(name)
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			// A plural s after an acronym (ACLs, IDs) belongs to it.
			plural := nextLower && r[i+1] == 's' && (i+2 == len(r) || unicode.IsUpper(r[i+2]))
			if unicode.IsLower(prev) || unicode.IsUpper(prev) && nextLower && !plural {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}
