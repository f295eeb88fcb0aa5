package connregistry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connregistrytest"
)

var (
	_ kmsg.Request  = (*connregistry.CloseClientConnectionsRequest)(nil)
	_ kmsg.Response = (*connregistry.CloseClientConnectionsResponse)(nil)
)

// Golden bytes of the version-0 schema (flexible): three compact nullable
// strings, a compact array of compact strings, tags; and the response's
// throttle, error code, compact nullable message, records, tags.
func TestCloseGolden(t *testing.T) {
	req := &connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("User:bob"), ConnectionIDs: []string{"a", "bc"}}
	golden := []byte{
		0x09, 'U', 's', 'e', 'r', ':', 'b', 'o', 'b', // PrincipalFilter
		0x00,      // ClientAddressFilter null
		0x00,      // ListenerFilter null
		0x03,      // two ids
		0x02, 'a', // "a"
		0x03, 'b', 'c', // "bc"
		0x00, // no tagged fields
	}
	assert.Equal(t, golden, req.AppendTo(nil))
	var back connregistry.CloseClientConnectionsRequest
	require.NoError(t, back.ReadFrom(golden))
	assert.Equal(t, *req, back)

	resp := &connregistry.CloseClientConnectionsResponse{ErrorCode: 42, ErrorMessage: sp("no"), Connections: []connregistry.ConnectionRecord{}}
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 42, 0x03, 'n', 'o', 0x01, 0x00}, resp.AppendTo(nil))
}

func TestCloseRoundTrip(t *testing.T) {
	resp := &connregistry.CloseClientConnectionsResponse{ThrottleTimeMs: 7, Connections: []connregistry.ConnectionRecord{
		{ConnectionID: "x", Principal: "User:bob", PrincipalType: "User", ClientAddress: "10.0.0.1", ClientPort: 5,
			ListenerName: "CLIENT", SecurityProtocol: "SASL_SSL", ConnectedSince: 1, ClientID: "c", State: "ready", Requests: 3},
	}}
	var back connregistry.CloseClientConnectionsResponse
	require.NoError(t, back.ReadFrom(resp.AppendTo(nil)))
	assert.Equal(t, resp.Connections, back.Connections)
	assert.Equal(t, int32(7), back.ThrottleTimeMs)
	assert.Nil(t, back.ErrorMessage)

	req := &connregistry.CloseClientConnectionsRequest{APIKey: 1000}
	assert.Equal(t, int16(1000), req.Key())
	assert.Equal(t, int16(1000), req.ResponseKind().Key(), "the response answers under the request's key")
	assert.Equal(t, connregistry.DefaultCloseAPIKey, (&connregistry.CloseClientConnectionsRequest{}).Key())
}

func TestCloseMalformed(t *testing.T) {
	var req connregistry.CloseClientConnectionsRequest
	for _, b := range [][]byte{nil, {0, 0, 0}, {0, 0, 0, 0x03, 0x02, 'a'}, {0, 0, 0, 0x01, 0x05}} {
		assert.Error(t, req.ReadFrom(b), "%x", b)
	}
	// A peer claiming 2^31 ids in a few bytes costs next to nothing.
	claim := []byte{0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x08}
	assert.Error(t, req.ReadFrom(claim))
	assert.LessOrEqual(t, bytesPerCall(func() { _ = req.ReadFrom(claim) }), uint64(claimBudget))
	var resp connregistry.CloseClientConnectionsResponse
	assert.Error(t, resp.ReadFrom([]byte{0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}))
}

// closeRegistry holds three connections whose closers record the reason.
type closeRegistry struct{ reg connregistry.Registry }

func newCloseRegistry() *closeRegistry {
	return &closeRegistry{reg: connregistrytest.NewRegistry(0,
		conn("admin-conn", "User:admin", "10.0.0.9:1000", "ADMIN", t0),
		conn("bob-1", "User:bob", "10.0.0.1:1001", "CLIENT", t0.Add(time.Second)),
		conn("bob-2", "User:bob", "10.0.0.2:1002", "CLIENT", t0.Add(2*time.Second)),
		conn("alice-1", "User:alice", "10.0.0.1:1003", "CLIENT", t0.Add(3*time.Second)),
	)}
}

// closedIDs returns the reasons the connections closed, by id.
func (r *closeRegistry) closedIDs() map[string]connregistry.CloseReason {
	out := map[string]connregistry.CloseReason{}
	for _, c := range r.reg.Closed(connregistry.Filter{}) {
		out[c.ID] = c.CloseReason
	}
	return out
}

func TestCloseHandler(t *testing.T) {
	admin := connregistry.Principal{Type: "User", Name: "admin"}
	tests := []struct {
		name      string
		caller    connregistry.Principal
		req       connregistry.CloseClientConnectionsRequest
		wantCode  *kerr.Error
		wantClose []string
	}{
		{"by principal", admin, connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("User:bob")}, nil, []string{"bob-1", "bob-2"}},
		{"by address", admin, connregistry.CloseClientConnectionsRequest{ClientAddressFilter: sp("10.0.0.1")}, nil, []string{"bob-1", "alice-1"}},
		{"by CIDR and principal", admin, connregistry.CloseClientConnectionsRequest{ClientAddressFilter: sp("10.0.0.0/24"), PrincipalFilter: sp("User:bob")}, nil, []string{"bob-1", "bob-2"}},
		{"by id", admin, connregistry.CloseClientConnectionsRequest{ConnectionIDs: []string{"bob-2", "nobody"}}, nil, []string{"bob-2"}},
		{"never the caller's own connection", admin, connregistry.CloseClientConnectionsRequest{ListenerFilter: sp("admin")}, nil, nil},
		{"nothing matches", admin, connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("User:carol")}, nil, nil},
		{"no filter is refused", admin, connregistry.CloseClientConnectionsRequest{}, kerr.InvalidRequest, nil},
		{"bad filter", admin, connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("bob")}, kerr.InvalidRequest, nil},
		{"not authorized", connregistry.Principal{Type: "User", Name: "bob"}, connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("User:alice")}, kerr.ClusterAuthorizationFailed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newCloseRegistry()
			h := &connregistry.CloseHandler{Registry: r.reg, Authorize: connregistry.SuperUsers("User:admin")}
			resp := h.Handle(context.Background(), tt.caller, "admin-conn", &tt.req)
			require.NotNil(t, resp.Connections, "an empty list, never null")
			var got []string
			for _, c := range resp.Connections {
				got = append(got, c.ConnectionID)
			}
			if tt.wantCode != nil {
				assert.Equal(t, tt.wantCode.Code, resp.ErrorCode)
				require.NotNil(t, resp.ErrorMessage)
				assert.Empty(t, r.closedIDs(), "a refused request closes nothing")
				return
			}
			assert.Zero(t, resp.ErrorCode)
			assert.ElementsMatch(t, tt.wantClose, got)
			closed := r.closedIDs()
			assert.Len(t, closed, len(tt.wantClose))
			for _, id := range tt.wantClose {
				assert.Equal(t, connregistry.CloseByOperator, closed[id], id)
			}
			assert.NotContains(t, closed, "admin-conn")
			assert.Equal(t, 4-len(tt.wantClose), r.reg.Len())
		})
	}
}

func TestFilterWithConnectionIDs(t *testing.T) {
	a := conn("a", "User:alice", "10.1.2.3:5000", "CLIENT", t0)
	b := conn("b", "User:alice", "10.1.2.3:5001", "CLIENT", t0)
	f := connregistry.Filter{ConnectionIDs: []string{"b"}}
	assert.False(t, f.Match(a))
	assert.True(t, f.Match(b))
	assert.False(t, connregistry.Filter{ConnectionIDs: []string{}}.Match(a), "no ids match nothing")
	alice := connregistry.Filter{Principal: sp("User:bob")}
	require.NoError(t, alice.Validate())
	alice.ConnectionIDs = []string{"b"}
	assert.False(t, alice.Match(b), "the ids narrow the other filters")
}

// The handlers ask the host's authorizer Kafka's question: the principal,
// the operation (DESCRIBE to list, ALTER to close) and the resource (the
// CLUSTER, kafka-cluster), so that a host's ACLs plug in once.
func TestAuthorizerIsAskedKafkasQuestion(t *testing.T) {
	var asked []connregistry.Action
	var who []connregistry.Principal
	authorize := func(_ context.Context, p connregistry.Principal, a connregistry.Action) bool {
		asked, who = append(asked, a), append(who, p)
		return a.Operation == kmsg.ACLOperationDescribe // may list, may not close
	}
	r := newCloseRegistry()
	bob := connregistry.Principal{Type: "User", Name: "bob"}
	ctx := context.Background()
	lresp := (&connregistry.ListHandler{Registry: r.reg, Authorize: authorize}).Handle(ctx, bob, &connregistry.ListClientConnectionsRequest{})
	assert.Zero(t, lresp.ErrorCode)
	assert.Len(t, lresp.Connections, 4)
	cresp := (&connregistry.CloseHandler{Registry: r.reg, Authorize: authorize}).Handle(ctx, bob, "",
		&connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("User:alice")})
	assert.Equal(t, kerr.ClusterAuthorizationFailed.Code, cresp.ErrorCode)
	assert.Empty(t, r.closedIDs())
	cluster := func(op kmsg.ACLOperation) connregistry.Action {
		return connregistry.Action{Operation: op, ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: "kafka-cluster"}
	}
	assert.Equal(t, []connregistry.Action{cluster(kmsg.ACLOperationDescribe), cluster(kmsg.ACLOperationAlter)}, asked)
	assert.Equal(t, []connregistry.Principal{bob, bob}, who)
}

// An empty super.users names no super user: nobody may, as with Kafka's
// authorizers; letting everyone is a nil Authorizer (Kafka without one).
func TestSuperUsersEmptyLetsNoOneIn(t *testing.T) {
	ctx := context.Background()
	for _, value := range []string{"", " ", ";"} {
		authorize := connregistry.SuperUsers(value)
		require.NotNil(t, authorize, "%q", value)
		assert.False(t, authorize(ctx, connregistry.Anonymous(), connregistry.Action{}), "%q", value)
		resp := (&connregistry.ListHandler{Registry: newCloseRegistry().reg, Authorize: authorize}).Handle(ctx,
			connregistry.Principal{Type: "User", Name: "admin"}, &connregistry.ListClientConnectionsRequest{})
		assert.Equal(t, kerr.ClusterAuthorizationFailed.Code, resp.ErrorCode, "%q", value)
	}
	admins := connregistry.SuperUsers(" User:admin ; User:ops")
	assert.True(t, admins(ctx, connregistry.Principal{Type: "User", Name: "ops"}, connregistry.Action{}))
	assert.False(t, admins(ctx, connregistry.Principal{Type: "User", Name: "bob"}, connregistry.Action{}))
	resp := (&connregistry.ListHandler{Registry: newCloseRegistry().reg}).Handle(ctx, connregistry.Anonymous(), &connregistry.ListClientConnectionsRequest{})
	assert.Zero(t, resp.ErrorCode, "no authorizer: everyone")
}

// A request's filters are a Filter, the one shape: the wire fields map to
// its fields one to one.
func TestRequestFilter(t *testing.T) {
	l := connregistry.ListClientConnectionsRequest{PrincipalFilter: sp("User:a"), ClientAddressFilter: sp("10.0.0.0/8"),
		ListenerFilter: sp("CLIENT"), ServerNameFilter: sp("*.example.com"), IncludeClosed: true}
	assert.Equal(t, connregistry.Filter{Principal: sp("User:a"), ClientAddress: sp("10.0.0.0/8"), Listener: sp("CLIENT"),
		ServerName: sp("*.example.com")}, l.Filter())
	c := connregistry.CloseClientConnectionsRequest{PrincipalFilter: sp("User:a"), ConnectionIDs: []string{"x"}, ServerNameFilter: sp("")}
	assert.Equal(t, connregistry.Filter{Principal: sp("User:a"), ConnectionIDs: []string{"x"}, ServerName: sp("")}, c.Filter())
}
