package connregistry_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connregistrytest"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

func sp(s string) *string { return &s }

var t0 = time.Date(2026, 4, 27, 10, 15, 30, 0, time.UTC)

func conn(id, principal, addr, listener string, at time.Time) connregistry.Conn {
	typ, name, _ := cutPrincipal(principal)
	return connregistry.Conn{Info: connregistry.Info{
		ID: id, Principal: connregistry.Principal{Type: typ, Name: name},
		ClientAddr: netip.MustParseAddrPort(addr), Listener: protocolmap.ListenerName(listener), SecurityProtocol: protocolmap.SASLSSL,
		ConnectedAt: at,
	}, State: connregistry.StateReady}
}

func cutPrincipal(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return "", s, false
}

func TestFilter(t *testing.T) {
	alice := conn("a", "User:alice", "10.1.2.3:5000", "CLIENT", t0)
	bob6 := conn("b", "User:bob", "[::1]:6000", "REPLICATION", t0)
	tests := []struct {
		name                         string
		principal, address, listener *string
		matchAlice, matchBob         bool
	}{
		{"no filter", nil, nil, nil, true, true},
		{"principal exact", sp("User:alice"), nil, nil, true, false},
		{"principal name only is not Type:name", sp("User:ali"), nil, nil, false, false},
		{"address", nil, sp("10.1.2.3"), nil, true, false},
		{"IPv6 long form matches ::1", nil, sp("0:0:0:0:0:0:0:1"), nil, false, true},
		{"bracketed IPv6", nil, sp("[::1]"), nil, false, true},
		{"CIDR", nil, sp("10.0.0.0/8"), nil, true, false},
		{"CIDR not masked", nil, sp("10.1.2.99/16"), nil, true, false},
		{"IPv6 CIDR", nil, sp("::/0"), nil, false, true},
		{"listener case-insensitive", nil, nil, sp("replication"), false, true},
		{"all must match", sp("User:alice"), sp("10.0.0.0/8"), sp("REPLICATION"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := connregistry.Filter{Principal: tt.principal, ClientAddress: tt.address, Listener: tt.listener}
			require.NoError(t, f.Validate())
			assert.Equal(t, tt.matchAlice, f.Match(alice))
			assert.Equal(t, tt.matchBob, f.Match(bob6))
		})
	}
	for _, bad := range []struct{ principal, address, listener *string }{
		{sp("alice"), nil, nil}, {nil, sp("10.0.0.300"), nil}, {nil, sp("host.example"), nil},
		{nil, sp("10.0.0.0/33"), nil}, {nil, nil, sp(" ")},
	} {
		f := connregistry.Filter{Principal: bad.principal, ClientAddress: bad.address, Listener: bad.listener}
		assert.ErrorIs(t, f.Validate(), connregistry.ErrInvalidFilter)
		assert.False(t, f.Match(conn("a", "User:alice", "10.1.2.3:5000", " ", t0)), "an invalid filter matches nothing")
	}
}

func TestListHandler(t *testing.T) {
	gone := conn("c", "User:carol", "10.0.0.3:3000", "CLIENT", t0)
	gone.ClosedAt, gone.CloseReason = t0.Add(time.Minute), connregistry.CloseAuthenticationFailed
	r := connregistrytest.NewRegistry(10, conn("a", "User:alice", "10.0.0.1:1000", "CLIENT", t0),
		conn("b", "User:bob", "10.0.0.2:2000", "REPLICATION", t0), gone)

	h := &connregistry.ListHandler{Registry: r, Authorize: connregistry.SuperUsers("User:admin;User:alice")}
	ctx := context.Background()

	resp := h.Handle(ctx, connregistry.Principal{Type: "User", Name: "mallory"}, &connregistry.ListClientConnectionsRequest{})
	assert.Equal(t, kerr.ClusterAuthorizationFailed.Code, resp.ErrorCode)
	assert.NotNil(t, resp.Connections)
	assert.Empty(t, resp.Connections)

	admin := connregistry.Principal{Type: "User", Name: "admin"}
	resp = h.Handle(ctx, admin, &connregistry.ListClientConnectionsRequest{ClientAddressFilter: sp("nonsense")})
	assert.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode)
	assert.NotNil(t, resp.Connections)

	resp = h.Handle(ctx, admin, &connregistry.ListClientConnectionsRequest{ListenerFilter: sp("client")})
	assert.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Connections, 1)
	rec := resp.Connections[0]
	assert.Equal(t, connregistry.ConnectionRecord{
		ConnectionID: "a", Principal: "User:alice", PrincipalType: "User", ClientAddress: "10.0.0.1", ClientPort: 1000, // KIP-1329: Principal is Type:name
		ListenerName: "CLIENT", SecurityProtocol: "SASL_SSL", ConnectedSince: t0.UnixMilli(),
		AuthenticatedAt: -1, SessionExpiry: -1, LastActivity: t0.UnixMilli(), State: "ready",
		Plane: "data", // a connection's plane is typed: the zero value is the data plane
	}, rec)

	resp = h.Handle(ctx, admin, &connregistry.ListClientConnectionsRequest{ListenerFilter: sp("CLIENT"), IncludeClosed: true})
	require.Len(t, resp.Connections, 2)
	assert.Equal(t, "authentication-failed", resp.Connections[1].CloseReason)
	assert.Equal(t, t0.Add(time.Minute).UnixMilli(), resp.Connections[1].ClosedAt)

	open := &connregistry.ListHandler{Registry: r}
	resp = open.Handle(ctx, connregistry.Principal{Type: "User", Name: "ANONYMOUS"}, &connregistry.ListClientConnectionsRequest{})
	assert.Len(t, resp.Connections, 2, "no authorizer: everyone may list")
}

// A connection without an IP address (served on a host's in-memory or Unix
// listener) is listed with an empty client address and port 0, not the
// zero netip.Addr's "invalid IP".
func TestRecordWithoutIPAddress(t *testing.T) {
	rec := connregistry.Record(connregistry.Conn{Info: connregistry.Info{ID: "pipe-pipe-0-0", Listener: "PLAINTEXT"}})
	assert.Empty(t, rec.ClientAddress)
	assert.Zero(t, rec.ClientPort)
	assert.Equal(t, "10.0.0.1", connregistry.Record(connregistry.Conn{Info: connregistry.Info{ClientAddr: netip.MustParseAddrPort("10.0.0.1:1")}}).ClientAddress)
}

// A connection that came through a load balancer is listed with the
// client's address, from the PROXY header, and the balancer's as
// ProxyAddress; the address filter selects by the client's.
func TestRecordProxyAddress(t *testing.T) {
	c := connregistry.Conn{Info: connregistry.Info{
		ClientAddr: netip.MustParseAddrPort("203.0.113.7:51000"), ProxyAddr: netip.MustParseAddrPort("[fd00::5]:40123"),
	}}
	rec := connregistry.Record(c)
	assert.Equal(t, "203.0.113.7", rec.ClientAddress)
	assert.Equal(t, int32(51000), rec.ClientPort)
	assert.Equal(t, "[fd00::5]:40123", rec.ProxyAddress)
	assert.Empty(t, connregistry.Record(connregistry.Conn{Info: connregistry.Info{ClientAddr: c.ClientAddr}}).ProxyAddress)

	client, balancer := "203.0.113.0/24", "fd00::5"
	f := connregistry.Filter{ClientAddress: &client}
	require.NoError(t, f.Validate())
	assert.True(t, f.Match(c))
	f = connregistry.Filter{ClientAddress: &balancer}
	require.NoError(t, f.Validate())
	assert.False(t, f.Match(c), "the filter is on the client's address, not the balancer's")
}

// The helpers read the PROXY v2 fields that matter: the authority, and the
// cloud endpoint ids in their layouts; a field of the wrong length or
// subtype is not taken for one.
func TestProxyTLVHelpers(t *testing.T) {
	info := connregistry.Info{ProxyTLVs: []connregistry.ProxyTLV{
		{Type: connregistry.ProxyTLVALPN, Value: []byte("kafka")},
		{Type: connregistry.ProxyTLVAuthority, Value: []byte("broker-1.example.com")},
		{Type: connregistry.ProxyTLVAWS, Value: []byte("\x02other")},
		{Type: connregistry.ProxyTLVAWS, Value: append([]byte{0x01}, "vpce-0123abcd"...)},
		{Type: connregistry.ProxyTLVAzure, Value: []byte{0x01, 0x78, 0x56, 0x34, 0x12}},
		{Type: connregistry.ProxyTLVGCP, Value: []byte{0, 0, 0, 0, 0, 0, 1, 2}},
		{Type: connregistry.ProxyTLVAuthority, Value: []byte("second")},
	}}
	v, ok := info.ProxyTLV(connregistry.ProxyTLVALPN)
	assert.True(t, ok)
	assert.Equal(t, "kafka", string(v))
	_, ok = info.ProxyTLV(connregistry.ProxyTLVUniqueID)
	assert.False(t, ok)
	assert.Equal(t, "broker-1.example.com", info.ProxyAuthority(), "the first one")
	assert.Equal(t, "vpce-0123abcd", info.ProxyAWSVPCEndpointID())
	id, ok := info.ProxyAzureLinkID()
	assert.True(t, ok)
	assert.Equal(t, uint32(0x12345678), id)
	psc, ok := info.ProxyGCPConnectionID()
	assert.True(t, ok)
	assert.Equal(t, uint64(0x0102), psc)

	bad := connregistry.Info{ProxyTLVs: []connregistry.ProxyTLV{
		{Type: connregistry.ProxyTLVAWS, Value: []byte{0x01}},
		{Type: connregistry.ProxyTLVAzure, Value: []byte{0x01, 1, 2, 3}},
		{Type: connregistry.ProxyTLVAzure, Value: []byte{0x02, 1, 2, 3, 4}},
		{Type: connregistry.ProxyTLVGCP, Value: []byte{1, 2, 3}},
	}}
	assert.Empty(t, bad.ProxyAuthority())
	assert.Empty(t, bad.ProxyAWSVPCEndpointID())
	_, ok = bad.ProxyAzureLinkID()
	assert.False(t, ok)
	_, ok = bad.ProxyGCPConnectionID()
	assert.False(t, ok)
	assert.Empty(t, connregistry.Info{}.ProxyAuthority())
}

// The server-name filter: exact names without regard to case or a
// trailing dot, "*." for every name below a domain, "" for the
// connections without a name; it adds to the other filters, and the
// listing and the close requests carry it.
func TestServerNameFilter(t *testing.T) {
	named := func(id, name string) connregistry.Conn {
		c := conn(id, "User:alice", "10.0.0.1:1000", "CLIENT", t0)
		c.ServerName = name
		return c
	}
	conns := []connregistry.Conn{
		named("bootstrap-a", "a.example.com"), named("broker-a", "Broker-0.A.example.com"), named("deep-a", "x.broker-1.a.example.com"),
		named("b", "b.example.com"), named("none", ""),
	}
	tests := []struct {
		filter string
		want   []string
	}{
		{"a.example.com", []string{"bootstrap-a"}},
		{"A.EXAMPLE.COM.", []string{"bootstrap-a"}},
		{"broker-0.a.example.com", []string{"broker-a"}},
		{"*.a.example.com", []string{"broker-a", "deep-a"}},
		{"*.example.com", []string{"bootstrap-a", "broker-a", "deep-a", "b"}},
		{"example.com", nil},
		{"", []string{"none"}},
		{"*", nil}, // not a wildcard: no connection is named *
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			f := connregistry.Filter{ServerName: new(tt.filter)}
			var got []string
			for _, c := range conns {
				if f.Match(c) {
					got = append(got, c.ID)
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
	// It narrows the other filters and they narrow it.
	bob := connregistry.Filter{Principal: sp("User:bob")}
	require.NoError(t, bob.Validate())
	bob.ServerName = sp("a.example.com")
	assert.False(t, bob.Match(conns[0]))
	all := connregistry.Filter{Listener: sp("client")}
	require.NoError(t, all.Validate())
	assert.True(t, all.Match(conns[4]), "no server-name filter: every name matches")
	all.ServerName = sp("a.example.com")
	assert.True(t, all.Match(conns[0]))

	// Through the handlers.
	r := connregistrytest.NewRegistry(10, conns...)
	ctx := context.Background()
	resp := (&connregistry.ListHandler{Registry: r}).Handle(ctx, connregistry.Anonymous(),
		&connregistry.ListClientConnectionsRequest{ServerNameFilter: sp("*.a.example.com")})
	require.Zero(t, resp.ErrorCode)
	var names []string
	for _, rec := range resp.Connections {
		names = append(names, rec.ServerName)
	}
	assert.ElementsMatch(t, []string{"Broker-0.A.example.com", "x.broker-1.a.example.com"}, names)

	// A server name alone is enough of a filter to close by.
	cresp := (&connregistry.CloseHandler{Registry: r}).Handle(ctx, connregistry.Anonymous(), "",
		&connregistry.CloseClientConnectionsRequest{ServerNameFilter: sp("b.example.com")})
	require.Zero(t, cresp.ErrorCode, "%v", cresp.ErrorMessage)
	require.Len(t, cresp.Connections, 1)
	assert.Equal(t, "b", cresp.Connections[0].ConnectionID)
	closed := map[string]connregistry.CloseReason{}
	for _, c := range r.Closed(connregistry.Filter{}) {
		closed[c.ID] = c.CloseReason
	}
	assert.Equal(t, map[string]connregistry.CloseReason{"b": connregistry.CloseByOperator}, closed)
}
