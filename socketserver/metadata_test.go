package socketserver_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

var ordersID = [16]byte{1, 2, 3}

// singleNode is a one-broker cluster with a topic and an internal topic.
var singleNode = socketserver.SingleNode{NodeID: 3, ClusterID: "single", Topics: []socketserver.MetadataTopic{
	{Name: "orders", ID: ordersID, Partitions: 3},
	{Name: "__consumer_offsets", Partitions: 2},
}}

// startSingleNode serves Metadata with SingleNodeMetadata, and Produce
// with success for the topics the node has; configure, if any, adds to
// its configuration.
func startSingleNode(t *testing.T, configure ...func(*socketserver.Config)) *socketserver.Server {
	return socketservertest.NewServerFunc(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{
			socketserver.KmsgAPI(kmsg.Metadata, 0, 13),
			socketserver.KmsgAPI(kmsg.Produce, 3, 12),
		}
		for _, f := range configure {
			f(c)
		}
	}, func(srv *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch req := r.Body.(type) {
			case *kmsg.MetadataRequest:
				_ = r.Respond(srv.SingleNodeMetadata(req, r.Conn.Listener, singleNode))
			case *kmsg.ProduceRequest:
				resp := req.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic = rt.Topic
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition = rp.Partition
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				_ = r.Respond(resp)
			default:
				_ = r.CloseConnection()
			}
		})
	})
}

type topicAnswer struct {
	name       string // "" for null
	errorCode  int16
	internal   bool
	partitions int
}

func answers(resp *kmsg.MetadataResponse) []topicAnswer {
	var out []topicAnswer
	for _, t := range resp.Topics {
		a := topicAnswer{errorCode: t.ErrorCode, internal: t.IsInternal, partitions: len(t.Partitions)}
		if t.Topic != nil {
			a.name = *t.Topic
		}
		for _, p := range t.Partitions {
			if p.Leader != 3 || len(p.Replicas) != 1 || p.Replicas[0] != 3 || len(p.ISR) != 1 || p.ISR[0] != 3 {
				a.partitions = -1 // not led by the node alone
			}
		}
		out = append(out, a)
	}
	return out
}

// SingleNodeMetadata, asked through a kgo client: the node on the
// listener the client came through, as controller, the cluster id, and
// the topics asked for, or an error for each topic the node lacks.
func TestSingleNodeMetadata(t *testing.T) {
	srv := startSingleNode(t)
	cl, _ := socketservertest.ConnectKgo(t, srv.Addr("PLAINTEXT").String())
	topic := func(name string) kmsg.MetadataRequestTopic {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		return rt
	}
	byID := func(id [16]byte) kmsg.MetadataRequestTopic {
		rt := kmsg.NewMetadataRequestTopic()
		rt.TopicID = id
		return rt
	}
	offsets := topicAnswer{name: "__consumer_offsets", internal: true, partitions: 2}
	orders := topicAnswer{name: "orders", partitions: 3}
	for _, tc := range []struct {
		name   string
		topics []kmsg.MetadataRequestTopic
		want   []topicAnswer
	}{
		{name: "every topic", topics: nil, want: []topicAnswer{offsets, orders}},
		{name: "no topic", topics: []kmsg.MetadataRequestTopic{}, want: nil},
		{name: "by name", topics: []kmsg.MetadataRequestTopic{topic("orders"), topic("missing"), topic("orders"), topic("__consumer_offsets")},
			want: []topicAnswer{orders, {name: "missing", errorCode: kerr.UnknownTopicOrPartition.Code}, offsets}},
		{name: "an internal topic the node lacks", topics: []kmsg.MetadataRequestTopic{topic("__transaction_state")},
			want: []topicAnswer{{name: "__transaction_state", errorCode: kerr.UnknownTopicOrPartition.Code, internal: true}}},
		{name: "by id", topics: []kmsg.MetadataRequestTopic{byID(ordersID), byID([16]byte{9})},
			want: []topicAnswer{orders, {errorCode: kerr.UnknownTopicID.Code}}},
		{name: "the zero id names no topic", topics: []kmsg.MetadataRequestTopic{byID([16]byte{})},
			want: []topicAnswer{{errorCode: kerr.UnknownTopicID.Code}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = tc.topics
			resp, err := req.RequestWith(t.Context(), cl)
			require.NoError(t, err)
			require.Equal(t, int16(13), resp.Version)
			assert.Equal(t, tc.want, answers(resp))
			require.Len(t, resp.Brokers, 1)
			b := resp.Brokers[0]
			assert.Equal(t, int32(3), b.NodeID)
			assert.Equal(t, srv.Addr("PLAINTEXT").String(), net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
			assert.Equal(t, int32(3), resp.ControllerID)
			require.NotNil(t, resp.ClusterID)
			assert.Equal(t, "single", *resp.ClusterID)
			if len(tc.want) > 0 && tc.want[0] == orders {
				assert.Equal(t, ordersID, resp.Topics[0].TopicID)
			}
		})
	}

	// v0 has no null topics: an empty list asks for every topic.
	v0 := kmsg.NewPtrMetadataRequest()
	v0.Version = 0
	v0.Topics = []kmsg.MetadataRequestTopic{}
	assert.Equal(t, []topicAnswer{offsets, orders}, answers(srv.SingleNodeMetadata(v0, "PLAINTEXT", singleNode)))
	// No cluster id sends null.
	assert.Nil(t, srv.SingleNodeMetadata(v0, "PLAINTEXT", socketserver.SingleNode{}).ClusterID)
}

// A kgo producer writes to a topic the node has, and gives up on one it
// lacks, with UNKNOWN_TOPIC_OR_PARTITION, instead of waiting for the
// topic forever.
func TestSingleNodeMetadataServesAProducer(t *testing.T) {
	srv := startSingleNode(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()), kgo.UnknownTopicRetries(1))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr())
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "missing", Value: []byte("v")}).FirstErr()
	require.True(t, errors.Is(err, kerr.UnknownTopicOrPartition), "got %v", err)
	require.NoError(t, ctx.Err(), "the producer gave up before the deadline")
}

// regEndPoint is an endpoint named name at host:port speaking p.
func regEndPoint(name, host string, port int, p protocolmap.SecurityProtocol) listener.EndPoint {
	return listener.EndPoint{Name: protocolmap.ListenerName(name), Host: host, Port: port, SecurityProtocol: p}
}

// metaCluster has three brokers; broker 3 has no REPLICATION listener.
var metaCluster = []socketserver.Broker{
	{NodeID: 1, Rack: "r1", EndPoints: []listener.EndPoint{
		regEndPoint("CLIENT", "localhost", 9092, protocolmap.SASLSSL),
		regEndPoint("REPLICATION", "10.0.0.1", 9093, protocolmap.SSL),
	}},
	{NodeID: 2, EndPoints: []listener.EndPoint{
		regEndPoint("REPLICATION", "fd00::2", 9093, protocolmap.SSL),
		regEndPoint("CLIENT", "kafka-2.example.com", 9092, protocolmap.SASLSSL),
	}},
	{NodeID: 3, Rack: "r3", EndPoints: []listener.EndPoint{
		regEndPoint("CLIENT", "kafka-3.example.com", 19092, protocolmap.SASLSSL),
	}},
}

// metaBroker is what both Metadata and DescribeCluster say of a broker.
type metaBroker struct {
	NodeID int32
	Host   string
	Port   int32
	Rack   *string
}

func TestMetadataBrokers(t *testing.T) {
	tests := []struct {
		via  protocolmap.ListenerName
		want []metaBroker
	}{
		{"CLIENT", []metaBroker{
			{1, "localhost", 9092, kmsg.StringPtr("r1")},
			{2, "kafka-2.example.com", 9092, nil},
			{3, "kafka-3.example.com", 19092, kmsg.StringPtr("r3")},
		}},
		{"REPLICATION", []metaBroker{
			{1, "10.0.0.1", 9093, kmsg.StringPtr("r1")},
			{2, "fd00::2", 9093, nil},
		}},
		{"UNKNOWN", nil},
		{"client", nil}, // via is compared exactly; callers pass normalised names
	}
	for _, tt := range tests {
		t.Run(string(tt.via), func(t *testing.T) {
			var meta []metaBroker
			for _, b := range socketserver.MetadataBrokers(tt.via, metaCluster) {
				assert.Zero(t, b.UnknownTags.Len())
				meta = append(meta, metaBroker{b.NodeID, b.Host, b.Port, b.Rack})
			}
			assert.Equal(t, tt.want, meta, "Metadata")

			var describe []metaBroker
			for _, b := range socketserver.DescribeClusterBrokers(tt.via, metaCluster) {
				assert.False(t, b.IsFenced)
				describe = append(describe, metaBroker{b.NodeID, b.Host, b.Port, b.Rack})
			}
			assert.Equal(t, tt.want, describe, "DescribeCluster")
		})
	}

	t.Run("no brokers", func(t *testing.T) {
		assert.Empty(t, socketserver.MetadataBrokers("CLIENT", nil))
		assert.Empty(t, socketserver.DescribeClusterBrokers("CLIENT", nil))
	})

	t.Run("racks are not shared between responses", func(t *testing.T) {
		a := socketserver.MetadataBrokers("CLIENT", metaCluster)
		b := socketserver.MetadataBrokers("CLIENT", metaCluster)
		*a[0].Rack = "changed"
		assert.Equal(t, "r1", *b[0].Rack)
		assert.Equal(t, "r1", metaCluster[0].Rack)
	})

	t.Run("the response encodes and decodes", func(t *testing.T) {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		resp.Brokers = socketserver.MetadataBrokers("REPLICATION", metaCluster)
		back := kmsg.NewPtrMetadataResponse()
		back.Version = 12
		require.NoError(t, back.ReadFrom(resp.AppendTo(nil)))
		assert.Equal(t, resp.Brokers, back.Brokers)
	})
}

// The broker a server describes advertises the endpoints of its listener
// configuration, in the order of its listeners, and shares none of
// them. (It was listener.Config.Broker, since removed; Server.Broker computes it now.)
func TestConfigBroker(t *testing.T) {
	c, err := config.Listeners(config.Properties{
		"listeners":                      "CLIENT://:9092,REPLICATION://:9093",
		"advertised.listeners":           "CLIENT://localhost:9092,REPLICATION://10.0.0.1:9093",
		"listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL",
		"inter.broker.listener.name":     "REPLICATION",
	})
	require.NoError(t, err)
	srv, err := socketserver.New(socketserver.Config{Listeners: c, Credentials: newUsers(t), PerListener: map[protocolmap.ListenerName]*socketserver.ListenerConfig{
		"CLIENT":      {Security: security.Settings{TLS: &tls.Config{}, EnabledMechanisms: []string{"PLAIN"}}},
		"REPLICATION": {Security: security.Settings{TLS: &tls.Config{}}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	b := srv.Broker(7, "rack-7")
	assert.Equal(t, socketserver.Broker{NodeID: 7, Rack: "rack-7", EndPoints: []listener.EndPoint{
		regEndPoint("CLIENT", "localhost", 9092, protocolmap.SASLSSL),
		regEndPoint("REPLICATION", "10.0.0.1", 9093, protocolmap.SSL),
	}}, b)

	b.EndPoints[0].Host = "changed"
	assert.Equal(t, "localhost", srv.Broker(7, "").EndPoints[0].Host, "the broker must not share the config's endpoints")

	brokers := socketserver.MetadataBrokers("CLIENT", []socketserver.Broker{srv.Broker(7, "")})
	require.Len(t, brokers, 1)
	assert.Equal(t, "localhost", brokers[0].Host)
	assert.Nil(t, brokers[0].Rack)
}
func ExampleMetadataBrokers() {
	protocols, err := protocolmap.Parse("CLIENT:SASL_SSL,REPLICATION:SSL")
	if err != nil {
		panic(err)
	}
	var brokers []socketserver.Broker
	for i, advertised := range []string{
		"CLIENT://kafka-1.example.com:9092,REPLICATION://10.0.0.1:9093",
		"CLIENT://kafka-2.example.com:9092,REPLICATION://10.0.0.2:9093",
		"CLIENT://kafka-3.example.com:9092", // not yet given a REPLICATION listener
	} {
		eps, err := listener.ParseEndPoints(config.KeyAdvertisedListeners, advertised, protocols)
		if err != nil {
			panic(err)
		}
		brokers = append(brokers, socketserver.Broker{NodeID: int32(i + 1), Rack: "rack-a", EndPoints: eps})
	}

	for _, via := range []protocolmap.ListenerName{"CLIENT", "REPLICATION"} {
		fmt.Println("via", via)
		for _, b := range socketserver.MetadataBrokers(via, brokers) {
			fmt.Printf("  node %d at %s:%d in %s\n", b.NodeID, b.Host, b.Port, *b.Rack)
		}
	}
	// Output:
	// via CLIENT
	//   node 1 at kafka-1.example.com:9092 in rack-a
	//   node 2 at kafka-2.example.com:9092 in rack-a
	//   node 3 at kafka-3.example.com:9092 in rack-a
	// via REPLICATION
	//   node 1 at 10.0.0.1:9093 in rack-a
	//   node 2 at 10.0.0.2:9093 in rack-a
}
