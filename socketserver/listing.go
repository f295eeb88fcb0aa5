package socketserver

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

// ListClientConnectionsAPI returns the API entry that serves KIP-1329's
// ListClientConnections under key (connregistry.DefaultListAPIKey, 93, unless
// the host serves another API there) from the server's own registry. Add
// it to [Config.APIs] (or to a listener's [ListenerConfig.APIs]); the
// server then answers the request itself, on the connection's goroutine
// (see [API.Inline]), and the host's handlers never see it.
//
// authorize decides who may list: the connection's principal must be
// allowed to DESCRIBE the CLUSTER (KIP-1329; connregistry.Action), and a
// refused principal gets
// CLUSTER_AUTHORIZATION_FAILED. nil lets everyone list, as Kafka does
// without an authorizer; [connregistry.SuperUsers] builds one from Kafka's
// super.users.
func ListClientConnectionsAPI(key int16, authorize connregistry.Authorizer) API {
	return API{
		Key: key, MinVersion: 0, MaxVersion: 0,
		New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{APIKey: key} },
		Inline: HandlerFunc(func(r *Request) {
			req, ok := r.Body.(*connregistry.ListClientConnectionsRequest)
			if !ok { // another type under this key: a host's New, not ours
				_ = r.CloseConnection()
				return
			}
			h := connregistry.ListHandler{Registry: r.conn.p.srv.registry, Authorize: authorize}
			if err := r.Respond(h.Handle(r.Context(), r.Conn.Principal, req)); err != nil {
				_ = r.CloseConnection()
			}
		}),
		own: true,
	}
}
