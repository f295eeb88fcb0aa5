package connregistry

import (
	"context"
	"encoding/binary"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultCloseAPIKey is the API key CloseClientConnections is served under
// unless a host picks another. Kafka has no such API (KIP-1329 only lists
// connections), so the key is kafkanet's: ListClientConnections' 93 plus
// 1000, far above the keys Kafka has given out. Every type here takes its
// key from its APIKey field, as the listing's do.
const DefaultCloseAPIKey int16 = 1093

// CloseClientConnectionsRequest asks a server to close the client
// connections that match every filter given: the operator's "kill" of
// [Registry.Close] as a request, for incident response. Its version-0
// schema is flexible: the three filters of ListClientConnections (nil means
// no filter), then a list of connection ids (empty means no filter), and
// the server-name filter as a tagged field (tag 1). At least
// one filter must be given: a request without any is refused rather than
// taken to mean every connection.
type CloseClientConnectionsRequest struct {
	APIKey              int16 // 0 means DefaultCloseAPIKey
	Version             int16
	PrincipalFilter     *string
	ClientAddressFilter *string
	ListenerFilter      *string
	ConnectionIDs       []string
	// ServerNameFilter (tag 1) selects by TLS server name; see
	// [Filter.ServerName].
	ServerNameFilter *string
}

// Filter returns the request's filters.
func (r *CloseClientConnectionsRequest) Filter() Filter {
	return Filter{Principal: r.PrincipalFilter, ClientAddress: r.ClientAddressFilter, Listener: r.ListenerFilter,
		ServerName: r.ServerNameFilter, ConnectionIDs: r.ConnectionIDs}
}

// CloseClientConnectionsResponse is the answer: an error, or the
// connections closed, as ListClientConnections describes them (the closing
// connection's record as it was just before it closed).
type CloseClientConnectionsResponse struct {
	APIKey         int16
	Version        int16
	ThrottleTimeMs int32
	ErrorCode      int16
	ErrorMessage   *string
	Connections    []ConnectionRecord
}

func closeKeyOr(k int16) int16 {
	if k == 0 {
		return DefaultCloseAPIKey
	}
	return k
}

// Key returns the API key (DefaultCloseAPIKey unless APIKey is set).
func (r *CloseClientConnectionsRequest) Key() int16 { return closeKeyOr(r.APIKey) }

// SetKey sets the API key, so that a server that decodes the request under
// a key of its choosing answers under the same key.
func (r *CloseClientConnectionsRequest) SetKey(key int16) { r.APIKey = key }

// MaxVersion returns 0, the only version.
func (*CloseClientConnectionsRequest) MaxVersion() int16 { return 0 }

// SetVersion sets the version.
func (r *CloseClientConnectionsRequest) SetVersion(v int16) { r.Version = v }

// GetVersion returns the version.
func (r *CloseClientConnectionsRequest) GetVersion() int16 { return r.Version }

// IsFlexible returns true: version 0 is flexible.
func (*CloseClientConnectionsRequest) IsFlexible() bool { return true }

// ResponseKind returns an empty response with the same key and version.
func (r *CloseClientConnectionsRequest) ResponseKind() kmsg.Response {
	return &CloseClientConnectionsResponse{APIKey: r.APIKey, Version: r.Version}
}

// AppendTo appends the request's encoding.
func (r *CloseClientConnectionsRequest) AppendTo(dst []byte) []byte {
	dst = appendCompactNullableString(dst, r.PrincipalFilter)
	dst = appendCompactNullableString(dst, r.ClientAddressFilter)
	dst = appendCompactNullableString(dst, r.ListenerFilter)
	dst = binary.AppendUvarint(dst, uint64(len(r.ConnectionIDs))+1)
	for _, id := range r.ConnectionIDs {
		dst = appendCompactString(dst, id)
	}
	if r.ServerNameFilter == nil {
		return append(dst, 0) // no tagged fields
	}
	return appendServerNameFilter(append(dst, 1), r.ServerNameFilter)
}

// ReadFrom decodes the request from src.
func (r *CloseClientConnectionsRequest) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.PrincipalFilter = d.compactNullableString()
	r.ClientAddressFilter = d.compactNullableString()
	r.ListenerFilter = d.compactNullableString()
	n := d.compactArrayLen()
	r.ConnectionIDs = nil
	if n > 0 {
		// Each id takes at least a byte: never allocate more than arrived.
		r.ConnectionIDs = make([]string, 0, min(n, len(d.b)))
	}
	for range n {
		if d.err != nil {
			break
		}
		r.ConnectionIDs = append(r.ConnectionIDs, d.compactString())
	}
	r.ServerNameFilter = nil
	d.tags(func(tag uint64, v decoder) error {
		if tag == tagServerNameFilter {
			r.ServerNameFilter = v.compactNullableString()
		}
		return v.err
	})
	return d.done()
}

// Key returns the API key.
func (r *CloseClientConnectionsResponse) Key() int16 { return closeKeyOr(r.APIKey) }

// MaxVersion returns 0.
func (*CloseClientConnectionsResponse) MaxVersion() int16 { return 0 }

// SetVersion sets the version.
func (r *CloseClientConnectionsResponse) SetVersion(v int16) { r.Version = v }

// GetVersion returns the version.
func (r *CloseClientConnectionsResponse) GetVersion() int16 { return r.Version }

// IsFlexible returns true.
func (*CloseClientConnectionsResponse) IsFlexible() bool { return true }

// RequestKind returns an empty request with the same key and version.
func (r *CloseClientConnectionsResponse) RequestKind() kmsg.Request {
	return &CloseClientConnectionsRequest{APIKey: r.APIKey, Version: r.Version}
}

// Throttle returns the throttle time and that it applies after the
// response.
func (r *CloseClientConnectionsResponse) Throttle() (int32, bool) { return r.ThrottleTimeMs, true }

// AppendTo appends the response's encoding.
func (r *CloseClientConnectionsResponse) AppendTo(dst []byte) []byte {
	size := 16
	if r.ErrorMessage != nil {
		size += len(*r.ErrorMessage) + 5
	}
	for i := range r.Connections {
		size += r.Connections[i].maxSize()
	}
	dst = slices.Grow(dst, size)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.ThrottleTimeMs))
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.ErrorCode))
	dst = appendCompactNullableString(dst, r.ErrorMessage)
	dst = binary.AppendUvarint(dst, uint64(len(r.Connections))+1)
	for i := range r.Connections {
		dst = r.Connections[i].appendTo(dst)
	}
	return append(dst, 0) // no tagged fields
}

// ReadFrom decodes the response from src.
func (r *CloseClientConnectionsResponse) ReadFrom(src []byte) error {
	d := decoder{b: src}
	r.ThrottleTimeMs = d.int32()
	r.ErrorCode = d.int16()
	r.ErrorMessage = d.compactNullableString()
	r.Connections = d.connectionRecords()
	d.tags(func(_ uint64, v decoder) error { return v.err })
	return d.done()
}

// CloseHandler answers CloseClientConnections requests from a Registry.
// Host applications call Handle from their own request loop with the
// request, the principal of the connection it came on and that
// connection's id, as they call [ListHandler.Handle].
// socketserver.CloseClientConnectionsAPI does it for a socketserver host.
type CloseHandler struct {
	Registry Registry
	// Authorize decides who may close connections: the principal must be
	// allowed to ALTER the CLUSTER, as Kafka requires of operations that
	// change the cluster's state. nil lets everyone, as Kafka does without
	// an authorizer.
	Authorize Authorizer
}

// Handle answers req from principal on the connection whose id is self,
// which it never closes, so that it gets its answer (empty names no
// connection):
// CLUSTER_AUTHORIZATION_FAILED (31) when the principal may not alter the
// cluster, INVALID_REQUEST (42) for a request without any filter or with
// one that does not parse (each with an empty connection list), else it
// closes the open connections that match every filter, giving
// CloseByOperator as the reason, and lists them. The requesting
// connection is never closed, so that it gets its answer.
func (h *CloseHandler) Handle(ctx context.Context, principal Principal, self string, req *CloseClientConnectionsRequest) *CloseClientConnectionsResponse {
	resp := &CloseClientConnectionsResponse{APIKey: req.APIKey, Version: req.Version, Connections: []ConnectionRecord{}}
	fail := func(code *kerr.Error, msg string) *CloseClientConnectionsResponse {
		resp.ErrorCode, resp.ErrorMessage = code.Code, &msg
		return resp
	}
	if h.Authorize != nil && !h.Authorize(ctx, principal, alterCluster) {
		return fail(kerr.ClusterAuthorizationFailed, "Cluster authorization failed: "+principal.String()+" may not ALTER the CLUSTER")
	}
	if req.PrincipalFilter == nil && req.ClientAddressFilter == nil && req.ListenerFilter == nil && len(req.ConnectionIDs) == 0 &&
		req.ServerNameFilter == nil {
		return fail(kerr.InvalidRequest, "a filter is required: give a principal, a client address, a listener, a server name or connection ids")
	}
	f := req.Filter()
	if len(f.ConnectionIDs) == 0 {
		f.ConnectionIDs = nil // the wire's empty list is no filter
	}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error())
	}
	var ids []string
	for _, c := range h.Registry.Snapshot(f) {
		if c.ID != self {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) == 0 {
		return resp
	}
	f.ConnectionIDs = ids
	for _, c := range h.Registry.Close(f, CloseByOperator) {
		resp.Connections = append(resp.Connections, Record(c))
	}
	return resp
}
