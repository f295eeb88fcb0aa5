package socketserver

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// SingleNode describes a cluster of one broker, this server, as a host
// that answers Metadata for itself sees it, for [Server.SingleNodeMetadata].
type SingleNode struct {
	// NodeID is the broker's node id; it is the controller too.
	NodeID int32
	// Rack is the broker's rack, empty for none.
	Rack string
	// ClusterID is the cluster id clients see (Kafka's is a UUID in
	// unpadded URL-safe base64); empty sends null, which only v0 to v1
	// clients expect.
	ClusterID string
	// Topics are every topic the host has.
	Topics []MetadataTopic
}

// MetadataTopic is a topic of a [SingleNode]: partitions 0 to
// Partitions-1, each led by the node, its only replica and in-sync
// replica, at leader epoch 0.
type MetadataTopic struct {
	Name string
	// ID is the topic id (KIP-516) that Metadata v10 and later carry, and
	// by which v12 and later may ask for a topic; zero if the host gives
	// its topics none.
	ID         [16]byte
	Partitions int32
}

// IsInternalTopic reports whether topic is one of Kafka's internal topics,
// which Metadata flags as internal (IsInternal) and clients leave out of
// regular-expression subscriptions: __consumer_offsets,
// __transaction_state and __share_group_state, as Kafka's
// Topic.isInternal.
func IsInternalTopic(topic string) bool {
	switch topic {
	case "__consumer_offsets", "__transaction_state", "__share_group_state":
		return true
	}
	return false
}

// SingleNodeMetadata answers a Metadata request, which came through the
// listener called via (Request.Conn.Listener), for a cluster of one
// broker, this server:
//
//   - Brokers is the node, at the address it advertises on via
//     ([Server.Broker], [MetadataBrokers]); ControllerID is the
//     node; ClusterID is node's.
//   - Topics are those asked for: all of node.Topics, sorted by name, when
//     the request asks for every topic (null topics, or none in v0);
//     otherwise each topic asked for by name or, from v10 on, by id, with
//     its partitions, or with UNKNOWN_TOPIC_OR_PARTITION (by name) or
//     UNKNOWN_TOPIC_ID (by id) when the host has no such topic, so that a
//     client that produces to a missing topic gives up after its retries
//     instead of waiting for the topic forever, as it does when the answer
//     leaves a requested topic out. Each topic is flagged internal as
//     [IsInternalTopic] says.
//
// It creates no topic: a host that creates topics on demand
// (auto.create.topics.enable, and the request's AllowAutoTopicCreation
// from v4 on) adds them to node.Topics before it answers. Authorized
// operations are left unset (not requested). The response is a new value,
// which the host may change before it responds.
func (s *Server) SingleNodeMetadata(req *kmsg.MetadataRequest, via protocolmap.ListenerName, node SingleNode) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = MetadataBrokers(via, []Broker{s.Broker(node.NodeID, node.Rack)})
	resp.ControllerID = node.NodeID
	if node.ClusterID != "" {
		resp.ClusterID = kmsg.StringPtr(node.ClusterID)
	}
	if req.Topics == nil || req.Version == 0 && len(req.Topics) == 0 { // every topic
		all := slices.SortedFunc(slices.Values(node.Topics), func(a, b MetadataTopic) int { return strings.Compare(a.Name, b.Name) })
		for _, t := range all {
			resp.Topics = append(resp.Topics, node.topicMetadata(t))
		}
		return resp
	}
	type asked struct {
		name string
		id   [16]byte
	}
	seen := map[asked]bool{}
	for _, rt := range req.Topics {
		var a asked
		if rt.Topic != nil {
			a.name = *rt.Topic
		} else {
			a.id = rt.TopicID
		}
		if seen[a] { // Kafka answers each topic once
			continue
		}
		seen[a] = true
		i := slices.IndexFunc(node.Topics, func(t MetadataTopic) bool {
			if rt.Topic != nil {
				return t.Name == *rt.Topic
			}
			return t.ID != [16]byte{} && t.ID == rt.TopicID
		})
		if i >= 0 {
			resp.Topics = append(resp.Topics, node.topicMetadata(node.Topics[i]))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if rt.Topic == nil {
			mt.ErrorCode = kerr.UnknownTopicID.Code
		} else {
			mt.IsInternal = IsInternalTopic(*rt.Topic)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp
}

func (n SingleNode) topicMetadata(t MetadataTopic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID, mt.IsInternal = kmsg.StringPtr(t.Name), t.ID, IsInternalTopic(t.Name)
	for p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p, n.NodeID, 0
		mp.Replicas, mp.ISR = []int32{n.NodeID}, []int32{n.NodeID}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// Broker describes one broker of a cluster the way Metadata and
// DescribeCluster responses need it; [Server.Broker] gives this server's.
type Broker struct {
	// NodeID is the broker's broker.id (node.id in KRaft).
	NodeID int32
	// Rack is the broker's broker.rack, "" when not set.
	Rack string
	// EndPoints are the broker's advertised endpoints.
	EndPoints []listener.EndPoint
}

// MetadataBrokers returns the Brokers of a Metadata response for a client
// connected through the listener called via: for each broker, in order, the
// host and port it advertises on the listener of that same name. As in
// Kafka, a broker without such a listener is left out, so that a client
// only ever learns addresses that speak the protocol it connected with.
// Host names are passed on as advertised, never resolved. via is compared
// exactly, so it should be upper case, as [protocolmap.ParseListenerName]
// makes it (Request.Conn.Listener is).
func MetadataBrokers(via protocolmap.ListenerName, brokers []Broker) []kmsg.MetadataResponseBroker {
	return brokersOn(via, brokers, func(id int32, ep listener.EndPoint, rack *string) kmsg.MetadataResponseBroker {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = id, ep.Host, int32(ep.Port), rack
		return b
	})
}

// DescribeClusterBrokers is [MetadataBrokers] for the Brokers of a
// DescribeCluster response.
func DescribeClusterBrokers(via protocolmap.ListenerName, brokers []Broker) []kmsg.DescribeClusterResponseBroker {
	return brokersOn(via, brokers, func(id int32, ep listener.EndPoint, rack *string) kmsg.DescribeClusterResponseBroker {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = id, ep.Host, int32(ep.Port), rack
		return b
	})
}

// brokersOn calls build for each broker that has an endpoint named via,
// with that endpoint and the broker's rack (nil when not set).
func brokersOn[T any](via protocolmap.ListenerName, brokers []Broker, build func(id int32, ep listener.EndPoint, rack *string) T) []T {
	var out []T
	for _, b := range brokers {
		for _, ep := range b.EndPoints {
			if ep.Name != via {
				continue
			}
			var rack *string
			if b.Rack != "" {
				rack = kmsg.StringPtr(b.Rack)
			}
			out = append(out, build(b.NodeID, ep, rack))
			break
		}
	}
	return out
}
