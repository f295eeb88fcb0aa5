package socketserver_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// with success for the topics the node has.
func startSingleNode(t *testing.T) *socketserver.Server {
	return socketservertest.NewServerFunc(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{
			socketserver.MustKmsgAPI(kmsg.Metadata, 0, 13),
			socketserver.MustKmsgAPI(kmsg.Produce, 3, 12),
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
