package socketserver

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
)

// CloseClientConnectionsAPI returns the API entry that serves
// connregistry's CloseClientConnections under key
// (connregistry.DefaultCloseAPIKey, 1093, unless the host serves another
// API there): an operator closes the connections of a principal, a client
// address or prefix, a listener, or single connections by id, as
// [connregistry.Registry.Close] does in Go. Add it where operators connect,
// typically beside [ListClientConnectionsAPI] on an administration
// listener (a listener's [ListenerConfig.APIs]); the server answers it
// itself, on the connection's goroutine, and the host's handlers never see
// it. The connections close with connregistry.CloseByOperator as their
// reason, and the requesting connection is never among them.
//
// authorize decides who may close: the connection's principal must be
// allowed to ALTER the CLUSTER (connregistry.Action), and a refused
// principal gets CLUSTER_AUTHORIZATION_FAILED. nil lets everyone, as Kafka
// does without an authorizer; [connregistry.SuperUsers] builds one from
// Kafka's super.users.
func CloseClientConnectionsAPI(key int16, authorize connregistry.Authorizer) API {
	return API{
		Key: key, MinVersion: 0, MaxVersion: 0,
		New: func() kmsg.Request { return &connregistry.CloseClientConnectionsRequest{APIKey: key} },
		Inline: HandlerFunc(func(r *Request) {
			req, ok := r.Body.(*connregistry.CloseClientConnectionsRequest)
			if !ok { // another type under this key: a host's New, not ours
				_ = r.CloseConnection()
				return
			}
			h := connregistry.CloseHandler{Registry: r.conn.p.srv.registry, Authorize: authorize}
			resp := h.Handle(r.Context(), r.Conn.Principal, r.Conn.ID, req)
			if len(resp.Connections) > 0 {
				r.conn.p.srv.log.Info("connections closed by an operator", "by", r.Conn.Principal, "conn_id", r.Conn.ID,
					"closed", len(resp.Connections))
			}
			if r.conn.p.srv.audit != nil {
				r.conn.auditConn(AuditConnectionsClosed, func(e *AuditEvent) {
					e.Filter, e.Count = closeFilterText(req), len(resp.Connections)
					if resp.ErrorMessage != nil {
						e.Reason = *resp.ErrorMessage
					}
				})
			}
			if err := r.Respond(resp); err != nil {
				_ = r.CloseConnection()
			}
		}),
		own: true,
	}
}

// closeFilterText is the filter of req as an audit event gives it:
// key=value pairs, in the order of the request's fields, the connection
// ids joined by commas.
func closeFilterText(req *connregistry.CloseClientConnectionsRequest) string {
	var b strings.Builder
	add := func(key string, v *string) {
		if v == nil {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(key + "=" + *v)
	}
	add("principal", req.PrincipalFilter)
	add("client_address", req.ClientAddressFilter)
	add("listener", req.ListenerFilter)
	add("server_name", req.ServerNameFilter)
	if len(req.ConnectionIDs) > 0 {
		ids := strings.Join(req.ConnectionIDs, ",")
		add("connection_ids", &ids)
	}
	return b.String()
}
