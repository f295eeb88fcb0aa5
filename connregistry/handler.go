package connregistry

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Action is the question an administrative API asks the host: may a
// principal perform Operation on the resource of type ResourceType named
// ResourceName? It is the question Kafka's Authorizer answers (its Action:
// an AclOperation on a ResourcePattern), in kmsg's values, which are
// Kafka's: [ListHandler] asks for DESCRIBE on the CLUSTER (KIP-1329's
// permission to list connections), [CloseHandler] for ALTER on the CLUSTER,
// as Kafka requires of operations that change the cluster's state. A host
// with ACLs of its own answers from them, in one Authorizer for every API.
type Action struct {
	Operation    kmsg.ACLOperation
	ResourceType kmsg.ACLResourceType
	// ResourceName is the resource's name: ClusterResourceName for the
	// CLUSTER.
	ResourceName string
}

// ClusterResourceName is the name of the CLUSTER resource, Kafka's
// kafka-cluster.
const ClusterResourceName = "kafka-cluster"

// describeCluster and alterCluster are the actions of the listing and the
// close.
var (
	describeCluster = Action{Operation: kmsg.ACLOperationDescribe, ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: ClusterResourceName}
	alterCluster    = Action{Operation: kmsg.ACLOperationAlter, ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: ClusterResourceName}
)

// Authorizer reports whether principal may perform action. Where an
// Authorizer is taken, nil lets everyone, as Kafka does without an
// authorizer (authorizer.class.name unset); [SuperUsers] is Kafka's
// super.users.
type Authorizer func(ctx context.Context, principal Principal, action Action) bool

// ListHandler answers ListClientConnections requests from a Registry. Host
// applications call Handle from their own request loop with the request and
// the principal of the connection it came on.
type ListHandler struct {
	Registry Registry
	// Authorize decides who may list (DESCRIBE on the CLUSTER); nil lets
	// everyone, as Kafka does without an authorizer.
	Authorize Authorizer
}

// Handle answers req from principal: CLUSTER_AUTHORIZATION_FAILED (31) when
// the principal may not describe the cluster, INVALID_REQUEST (42) for a
// filter that does not parse (both with an empty, not null, connection
// list), and for a SortBy that is not a [SortKey] or a negative Limit,
// else the open connections that match every filter (KIP-1329's three and
// the server-name tag), in connection-time order or, with SortBy, in its
// order ([Registry.Top]) and cut to Limit when it is positive, and with
// the IncludeClosed tag the recently closed ones after them, oldest first.
// A request without SortBy and Limit (a client that predates them) gets
// what it got before them.
func (h *ListHandler) Handle(ctx context.Context, principal Principal, req *ListClientConnectionsRequest) *ListClientConnectionsResponse {
	resp := &ListClientConnectionsResponse{APIKey: req.APIKey, Version: req.Version, Connections: []ConnectionRecord{}}
	if h.Authorize != nil && !h.Authorize(ctx, principal, describeCluster) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		msg := "Cluster authorization failed: " + principal.String() + " may not DESCRIBE the CLUSTER"
		resp.ErrorMessage = &msg
		return resp
	}
	f := req.Filter()
	if err := f.Validate(); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp
	}
	if err := validOrder(req); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp
	}
	var conns []Conn
	switch {
	case req.SortBy != "":
		conns = h.Registry.Top(f, req.SortBy, int(req.Limit))
	case req.Limit > 0: // connection time's order, cut
		conns = h.Registry.Top(f, SortByAge, int(req.Limit))
	default:
		conns = h.Registry.Snapshot(f)
	}
	if req.IncludeClosed {
		conns = append(conns, h.Registry.Closed(f)...)
	}
	resp.Connections = make([]ConnectionRecord, len(conns))
	for i, c := range conns {
		resp.Connections[i] = Record(c)
	}
	return resp
}

// validOrder returns an error wrapping [ErrInvalidFilter] for a SortBy
// that is not a [SortKey] and for a negative Limit.
func validOrder(req *ListClientConnectionsRequest) error {
	if req.SortBy != "" {
		if err := req.SortBy.Validate(); err != nil {
			return err
		}
	}
	if req.Limit < 0 {
		return fmt.Errorf("%w: limit %d: expected 0 (no limit) or more", ErrInvalidFilter, req.Limit)
	}
	return nil
}

// clientAddress is a's text in a record: empty for a connection without
// an IP address (one of a host's own listeners may be any kind).
func clientAddress(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// Record converts a connection to its wire form.
func Record(c Conn) ConnectionRecord {
	return ConnectionRecord{
		ConnectionID:     c.ID,
		Principal:        c.Principal.String(),
		PrincipalType:    c.Principal.Type,
		ClientAddress:    clientAddress(c.ClientAddr.Addr()),
		ClientPort:       int32(c.ClientAddr.Port()),
		ListenerName:     string(c.Listener),
		SecurityProtocol: c.SecurityProtocol.String(),
		SoftwareName:     c.ClientSoftwareName,
		SoftwareVersion:  c.ClientSoftwareVersion,
		ConnectedSince:   millis(c.ConnectedAt),
		ClientID:         c.ClientID,
		SASLMechanism:    c.SASLMechanism,
		TLSVersion:       tlsName(c.TLSVersion, tls.VersionName),
		CipherSuite:      tlsName(c.CipherSuite, tls.CipherSuiteName),
		AuthenticatedAt:  millis(c.AuthenticatedAt),
		SessionExpiry:    millis(c.SessionExpiry),
		LastActivity:     millis(c.LastActivity),
		BytesIn:          c.BytesIn,
		BytesOut:         c.BytesOut,
		Requests:         c.Requests,
		State:            c.State.String(),
		Plane:            c.Plane.String(),
		ClosedAt:         millisOrZero(c.ClosedAt),
		CloseReason:      string(c.CloseReason),
		ThrottledUntil:   millisOrZero(c.ThrottledUntil),
		ThrottleTimeMs:   c.ThrottleTime.Milliseconds(),
		ProxyAddress:     proxyAddress(c.ProxyAddr),
		ServerName:       c.ServerName,
		RequestRate:      c.RequestRate,
		BytesInRate:      c.BytesInRate,
		BytesOutRate:     c.BytesOutRate,
	}
}

// proxyAddress is a load balancer's address in a record: host:port, or
// empty without one.
func proxyAddress(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// tlsName is a TLS parameter's name in a record: empty without TLS (zero),
// else as name gives it (tls.VersionName: "TLS 1.3").
func tlsName(v uint16, name func(uint16) string) string {
	if v == 0 {
		return ""
	}
	return name(v)
}

// millis is epoch milliseconds, -1 for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

func millisOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// SuperUsers returns an Authorizer that allows the principals listed in
// Kafka's super.users format ("User:alice;User:bob", separated by
// semicolons) every action, and refuses everyone else.
//
// An empty list names no super user, so the Authorizer refuses everyone:
// as Kafka's authorizers (StandardAuthorizer, AclAuthorizer) do for the
// cluster's administrative operations when no super user and no ACL allows
// them (allow.everyone.if.no.acl.found=false). Kafka without an authorizer
// (authorizer.class.name unset) lets everyone, super.users or not: that is
// a nil Authorizer, which a host gives on purpose (the example broker and
// proxy do when super.users is unset).
func SuperUsers(value string) Authorizer {
	allowed := map[Principal]bool{}
	for _, s := range strings.Split(value, ";") {
		if typ, name, ok := strings.Cut(strings.TrimSpace(s), ":"); ok {
			allowed[Principal{Type: typ, Name: name}] = true
		}
	}
	return func(_ context.Context, p Principal, _ Action) bool { return allowed[p] }
}
