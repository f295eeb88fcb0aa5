package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
)

// adminAPIs are what the admin listener serves, all answered by the proxy
// itself: Metadata naming the proxy as the only broker (so that a tool
// such as kafka-client-connections asks the proxy alone), and the proxy's
// ListClientConnections and CloseClientConnections, behind super.users
// (everyone may call them when it is unset, as in Kafka without an
// authorizer).
func (p *proxy) adminAPIs() []socketserver.API {
	var authorize connregistry.Authorizer // unset super.users: no authorizer, everyone may
	if p.set.superUsers != "" {
		authorize = connregistry.SuperUsers(p.set.superUsers)
	}
	meta := socketserver.KmsgAPI(kmsg.Metadata, 0, kmsg.NewPtrMetadataRequest().MaxVersion())
	meta.Inline = socketserver.HandlerFunc(p.adminMetadata)
	return []socketserver.API{
		meta,
		socketserver.ListClientConnectionsAPI(p.set.listKey, authorize),
		socketserver.CloseClientConnectionsAPI(p.set.closeKey, authorize),
	}
}

// adminMetadata answers Metadata on the admin listener: the proxy is the
// cluster's only broker and controller, and there are no topics.
func (p *proxy) adminMetadata(r *socketserver.Request) {
	req, ok := r.Body.(*kmsg.MetadataRequest)
	if !ok {
		_ = r.CloseConnection()
		return
	}
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers = socketserver.MetadataBrokers(r.Conn.Listener, []socketserver.Broker{p.srv.Broker(p.set.nodeID, "")})
	resp.ControllerID = p.set.nodeID
	resp.ClusterID = kmsg.StringPtr("kafkanet-proxy")
	for _, rt := range req.Topics {
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = rt.Topic, rt.TopicID, kerr.UnknownTopicOrPartition.Code
		resp.Topics = append(resp.Topics, t)
	}
	_ = r.Respond(resp)
}
