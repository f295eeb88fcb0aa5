package listener_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// metaCluster has three brokers; broker 3 has no REPLICATION listener.
var metaCluster = []listener.Broker{
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
			for _, b := range listener.MetadataBrokers(tt.via, metaCluster) {
				assert.Zero(t, b.UnknownTags.Len())
				meta = append(meta, metaBroker{b.NodeID, b.Host, b.Port, b.Rack})
			}
			assert.Equal(t, tt.want, meta, "Metadata")

			var describe []metaBroker
			for _, b := range listener.DescribeClusterBrokers(tt.via, metaCluster) {
				assert.False(t, b.IsFenced)
				describe = append(describe, metaBroker{b.NodeID, b.Host, b.Port, b.Rack})
			}
			assert.Equal(t, tt.want, describe, "DescribeCluster")
		})
	}

	t.Run("no brokers", func(t *testing.T) {
		assert.Empty(t, listener.MetadataBrokers("CLIENT", nil))
		assert.Empty(t, listener.DescribeClusterBrokers("CLIENT", nil))
	})

	t.Run("racks are not shared between responses", func(t *testing.T) {
		a := listener.MetadataBrokers("CLIENT", metaCluster)
		b := listener.MetadataBrokers("CLIENT", metaCluster)
		*a[0].Rack = "changed"
		assert.Equal(t, "r1", *b[0].Rack)
		assert.Equal(t, "r1", metaCluster[0].Rack)
	})

	t.Run("the response encodes and decodes", func(t *testing.T) {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		resp.Brokers = listener.MetadataBrokers("REPLICATION", metaCluster)
		back := kmsg.NewPtrMetadataResponse()
		back.Version = 12
		require.NoError(t, back.ReadFrom(resp.AppendTo(nil)))
		assert.Equal(t, resp.Brokers, back.Brokers)
	})
}

func TestUpdateMetadataEndPoints(t *testing.T) {
	got := listener.UpdateMetadataEndPoints(metaCluster[1].EndPoints)
	assert.Equal(t, []kmsg.UpdateMetadataRequestLiveBrokerEndpoint{
		{Port: 9093, Host: "fd00::2", ListenerName: "REPLICATION", SecurityProtocol: 1},
		{Port: 9092, Host: "kafka-2.example.com", ListenerName: "CLIENT", SecurityProtocol: 3},
	}, got)
	assert.Empty(t, listener.UpdateMetadataEndPoints(nil))

	wildcard := listener.UpdateMetadataEndPoints([]listener.EndPoint{regEndPoint("PLAINTEXT", "", 9092, protocolmap.Plaintext), regEndPoint("SASL", "h", 1, protocolmap.SASLPlaintext)})
	assert.Equal(t, "", wildcard[0].Host)
	assert.Equal(t, int16(0), wildcard[0].SecurityProtocol)
	assert.Equal(t, int16(2), wildcard[1].SecurityProtocol)

	t.Run("the request round-trips at v3, which carries listener names", func(t *testing.T) {
		req := kmsg.NewPtrUpdateMetadataRequest()
		req.Version = 3
		broker := kmsg.NewUpdateMetadataRequestLiveBroker()
		broker.ID = 2
		broker.Endpoints = got
		req.LiveBrokers = []kmsg.UpdateMetadataRequestLiveBroker{broker}
		back := kmsg.NewPtrUpdateMetadataRequest()
		back.Version = 3
		require.NoError(t, back.ReadFrom(req.AppendTo(nil)))
		assert.Equal(t, got, back.LiveBrokers[0].Endpoints)
	})
}

func TestRegistrationListeners(t *testing.T) {
	got := listener.RegistrationListeners([]listener.EndPoint{
		regEndPoint("CLIENT", "kafka-1.example.com", 65535, protocolmap.SASLSSL),
		regEndPoint("PLAINTEXT", "", 0, protocolmap.Plaintext),
		regEndPoint("X", "::1", 9092, protocolmap.SSL),
	})
	assert.Equal(t, []kmsg.BrokerRegistrationRequestListener{
		{Name: "CLIENT", Host: "kafka-1.example.com", Port: 65535, SecurityProtocol: 3},
		{Name: "PLAINTEXT", Host: "", Port: 0, SecurityProtocol: 0},
		{Name: "X", Host: "::1", Port: 9092, SecurityProtocol: 1},
	}, got)
	assert.Empty(t, listener.RegistrationListeners(nil))
}

func TestConfigBroker(t *testing.T) {
	c, err := listener.Resolve(listener.Properties{
		"listeners":                      "CLIENT://:9092,REPLICATION://:9093",
		"advertised.listeners":           "CLIENT://localhost:9092,REPLICATION://10.0.0.1:9093",
		"listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:SSL",
		"inter.broker.listener.name":     "REPLICATION",
	})
	require.NoError(t, err)
	b := c.Broker(7, "rack-7")
	assert.Equal(t, listener.Broker{NodeID: 7, Rack: "rack-7", EndPoints: []listener.EndPoint{
		regEndPoint("CLIENT", "localhost", 9092, protocolmap.SASLSSL),
		regEndPoint("REPLICATION", "10.0.0.1", 9093, protocolmap.SSL),
	}}, b)

	b.EndPoints[0].Host = "changed"
	assert.Equal(t, "localhost", c.Broker(7, "").EndPoints[0].Host, "the broker must not share the config's endpoints")

	brokers := listener.MetadataBrokers("CLIENT", []listener.Broker{c.Broker(7, "")})
	require.Len(t, brokers, 1)
	assert.Equal(t, "localhost", brokers[0].Host)
	assert.Nil(t, brokers[0].Rack)
}

func ExampleMetadataBrokers() {
	protocols, err := protocolmap.Parse("CLIENT:SASL_SSL,REPLICATION:SSL")
	if err != nil {
		panic(err)
	}
	var brokers []listener.Broker
	for i, advertised := range []string{
		"CLIENT://kafka-1.example.com:9092,REPLICATION://10.0.0.1:9093",
		"CLIENT://kafka-2.example.com:9092,REPLICATION://10.0.0.2:9093",
		"CLIENT://kafka-3.example.com:9092", // not yet given a REPLICATION listener
	} {
		eps, err := listener.ParseEndPoints(listener.KeyAdvertisedListeners, advertised, protocols)
		if err != nil {
			panic(err)
		}
		brokers = append(brokers, listener.Broker{NodeID: int32(i + 1), Rack: "rack-a", EndPoints: eps})
	}

	for _, via := range []protocolmap.ListenerName{"CLIENT", "REPLICATION"} {
		fmt.Println("via", via)
		for _, b := range listener.MetadataBrokers(via, brokers) {
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
