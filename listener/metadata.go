package listener

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// UpdateMetadataEndPoints returns eps as the Endpoints of one of the
// LiveBrokers of an UpdateMetadata request, the controller's way of telling
// every broker where the others listen. ListenerName is always filled,
// although only version 3 and later of the request carry it; the caller
// chooses the version.
func UpdateMetadataEndPoints(eps []EndPoint) []kmsg.UpdateMetadataRequestLiveBrokerEndpoint {
	out := make([]kmsg.UpdateMetadataRequestLiveBrokerEndpoint, len(eps))
	for i, ep := range eps {
		e := kmsg.NewUpdateMetadataRequestLiveBrokerEndpoint()
		e.Port = int32(ep.Port)
		e.Host = ep.Host
		e.ListenerName = string(ep.Name)
		e.SecurityProtocol = int16(ep.SecurityProtocol)
		out[i] = e
	}
	return out
}

// RegistrationListeners returns eps as the Listeners of a KRaft
// BrokerRegistration request. Ports are carried as 16-bit unsigned numbers,
// which every endpoint made by [ParseEndPoint] fits.
func RegistrationListeners(eps []EndPoint) []kmsg.BrokerRegistrationRequestListener {
	out := make([]kmsg.BrokerRegistrationRequestListener, len(eps))
	for i, ep := range eps {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name = string(ep.Name)
		l.Host = ep.Host
		l.Port = uint16(ep.Port)
		l.SecurityProtocol = int16(ep.SecurityProtocol)
		out[i] = l
	}
	return out
}

// Broker describes one broker of a cluster the way Metadata and
// DescribeCluster responses need it.
type Broker struct {
	// NodeID is the broker's broker.id (node.id in KRaft).
	NodeID int32
	// Rack is the broker's broker.rack, "" when not set.
	Rack string
	// EndPoints are the broker's advertised endpoints.
	EndPoints []EndPoint
}

// Broker returns the broker with the given id and rack that advertises the
// endpoints of c.
func (c *Config) Broker(nodeID int32, rack string) Broker {
	return Broker{NodeID: nodeID, Rack: rack, EndPoints: c.AdvertisedEndPoints()}
}

// MetadataBrokers returns the Brokers of a Metadata response for a client
// connected through the listener called via: for each broker, in order, the
// host and port it advertises on the listener of that same name. As in
// Kafka, a broker without such a listener is left out, so that a client
// only ever learns addresses that speak the protocol it connected with.
// Host names are passed on as advertised, never resolved. via is compared
// exactly, so it should be upper case, as [protocolmap.ParseListenerName]
// makes it.
func MetadataBrokers(via protocolmap.ListenerName, brokers []Broker) []kmsg.MetadataResponseBroker {
	return brokersOn(via, brokers, func(id int32, ep EndPoint, rack *string) kmsg.MetadataResponseBroker {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = id, ep.Host, int32(ep.Port), rack
		return b
	})
}

// DescribeClusterBrokers is [MetadataBrokers] for the Brokers of a
// DescribeCluster response.
func DescribeClusterBrokers(via protocolmap.ListenerName, brokers []Broker) []kmsg.DescribeClusterResponseBroker {
	return brokersOn(via, brokers, func(id int32, ep EndPoint, rack *string) kmsg.DescribeClusterResponseBroker {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = id, ep.Host, int32(ep.Port), rack
		return b
	})
}

// brokersOn calls build for each broker that has an endpoint named via,
// with that endpoint and the broker's rack (nil when not set).
func brokersOn[T any](via protocolmap.ListenerName, brokers []Broker, build func(id int32, ep EndPoint, rack *string) T) []T {
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
