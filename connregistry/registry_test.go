package connregistry_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
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
	}, State: connregistry.Ready}
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
			f, err := connregistry.NewFilter(tt.principal, tt.address, tt.listener)
			require.NoError(t, err)
			assert.Equal(t, tt.matchAlice, f.Match(alice))
			assert.Equal(t, tt.matchBob, f.Match(bob6))
		})
	}
	for _, bad := range []struct{ principal, address, listener *string }{
		{sp("alice"), nil, nil}, {nil, sp("10.0.0.300"), nil}, {nil, sp("host.example"), nil},
		{nil, sp("10.0.0.0/33"), nil}, {nil, nil, sp(" ")},
	} {
		_, err := connregistry.NewFilter(bad.principal, bad.address, bad.listener)
		assert.ErrorIs(t, err, connregistry.ErrInvalidFilter)
	}
}

func TestRegistryLifecycle(t *testing.T) {
	r := connregistry.New(2)
	var closedWith []connregistry.CloseReason
	var mu sync.Mutex
	closer := func(reason connregistry.CloseReason) { mu.Lock(); closedWith = append(closedWith, reason); mu.Unlock() }
	a := r.Add(conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), closer)
	b := r.Add(conn("b", "User:bob", "127.0.0.1:2", "CLIENT", t0.Add(time.Second)), closer)
	a.Request(t0.Add(2*time.Second), 100, "kgo")
	a.Response(t0.Add(3*time.Second), 40)
	a.Update(func(c *connregistry.Info) { c.ClientSoftwareName, c.ClientSoftwareVersion = "kgo", "1.22" })

	got := r.Snapshot(connregistry.Filter{})
	require.Len(t, got, 2)
	assert.Equal(t, "a", got[0].ID, "ordered by connection time")
	assert.Equal(t, int64(100), got[0].BytesIn)
	assert.Equal(t, int64(40), got[0].BytesOut)
	assert.Equal(t, int64(1), got[0].Requests)
	assert.Equal(t, "kgo", got[0].ClientID)
	assert.True(t, t0.Add(3*time.Second).Equal(got[0].LastActivity))
	assert.Equal(t, "kgo", got[0].ClientSoftwareName)

	f, _ := connregistry.NewFilter(sp("User:bob"), nil, nil)
	killed := r.Close(f, connregistry.ClosedByOperator)
	require.Len(t, killed, 1)
	assert.Equal(t, "b", killed[0].ID)
	assert.Equal(t, []connregistry.CloseReason{connregistry.ClosedByOperator}, closedWith)

	b.Remove(t0.Add(5*time.Second), connregistry.ClosedByOperator)
	b.Remove(t0.Add(6*time.Second), connregistry.Idle) // only the first counts
	assert.Equal(t, 1, r.Len())
	closed := r.Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, connregistry.ClosedByOperator, closed[0].CloseReason)
	assert.Equal(t, t0.Add(5*time.Second), closed[0].ClosedAt)
	assert.Equal(t, connregistry.Closing, closed[0].State)

	// The history is a ring of 2: the oldest goes.
	for i := range 3 {
		e := r.Add(conn(fmt.Sprint("h", i), "User:x", "127.0.0.1:9", "CLIENT", t0), nil)
		e.Remove(t0.Add(time.Duration(10+i)*time.Second), connregistry.ClientClosed)
	}
	closed = r.Closed(connregistry.Filter{})
	require.Len(t, closed, 2)
	assert.Equal(t, []string{"h1", "h2"}, []string{closed[0].ID, closed[1].ID})
}

// A forgotten connection leaves the open set without a trace in the
// history, and a Remove after it changes nothing; Forget after Remove
// takes nothing out of the history.
func TestRegistryForget(t *testing.T) {
	r := connregistry.New(10)
	probe := r.Add(conn("probe", "User:ANONYMOUS", "127.0.0.1:1", "CLIENT", t0), nil)
	kept := r.Add(conn("kept", "User:alice", "127.0.0.1:2", "CLIENT", t0), nil)
	require.Equal(t, 2, r.Len())
	probe.Forget()
	probe.Remove(t0.Add(time.Second), connregistry.ClientClosed)
	kept.Remove(t0.Add(time.Second), connregistry.ClientClosed)
	kept.Forget()
	assert.Zero(t, r.Len())
	assert.Empty(t, r.Snapshot(connregistry.Filter{}))
	closed := r.Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, "kept", closed[0].ID)
}

// The requests of a connection share one copy of its description until it
// changes (Update) or the connection rests (Idle): each request carries
// the description it found, never a later one.
func TestRequestsShareTheDescriptionTheyFound(t *testing.T) {
	r := connregistry.New(0)
	e := r.Add(conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), nil)
	request := func() *connregistry.Info {
		info, _ := e.Request(t0, 10, "kgo")
		return info
	}
	first := request()
	assert.Equal(t, "User:alice", first.Principal.String())
	assert.Same(t, first, request(), "no change: the same copy")

	e.Update(func(i *connregistry.Info) { i.Principal = connregistry.Principal{Type: "User", Name: "bob"} })
	second := request()
	assert.NotSame(t, first, second)
	assert.Equal(t, "User:alice", first.Principal.String(), "an earlier request keeps what it found")
	assert.Equal(t, "User:bob", second.Principal.String())
	assert.Equal(t, "User:bob", e.Info().Principal.String())

	e.Idle()
	third := request()
	assert.NotSame(t, second, third, "a rest lets go of the copy")
	assert.Equal(t, *second, *third)
	assert.Same(t, third, request())
}

// Request returns the entry's copy of the client id, which shares no
// memory with the caller's (a request frame's, which the server reuses),
// made once per change of the connection's client id.
func TestRequestCopiesTheClientID(t *testing.T) {
	r := connregistry.New(0)
	e := r.Add(conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), nil)
	frame := []byte("kgo")
	_, id := e.Request(t0, 10, unsafe.String(&frame[0], len(frame)))
	copy(frame, "xyz") // the frame's memory, reused
	assert.Equal(t, "kgo", id)
	_, again := e.Request(t0, 10, "kgo")
	assert.Same(t, unsafe.StringData(id), unsafe.StringData(again), "the same client id: the same copy")
}

// Snapshots taken in a loop while thousands of connections open, change
// and close: no race (under -race), no torn record (the fields written
// together are seen together), and the count returns to zero.
func TestRegistryConcurrentSnapshots(t *testing.T) {
	r := connregistry.New(100)
	stop := make(chan struct{})
	var snaps sync.WaitGroup
	snaps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, c := range r.Snapshot(connregistry.Filter{}) {
				// Update writes name and version together.
				if c.ClientSoftwareName != "" && c.ClientSoftwareVersion != c.ClientSoftwareName+"-v" {
					t.Errorf("torn record: %q %q", c.ClientSoftwareName, c.ClientSoftwareVersion)
					return
				}
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				e := r.Add(conn(fmt.Sprint(w, "-", i), "User:u", "127.0.0.1:1", "CLIENT", time.Now()), nil)
				name := fmt.Sprint("sw", i)
				e.Update(func(c *connregistry.Info) { c.ClientSoftwareName, c.ClientSoftwareVersion = name, name+"-v" })
				e.Request(time.Now(), 10, "c")
				e.Remove(time.Now(), connregistry.ClientClosed)
			}
		})
	}
	wg.Wait()
	close(stop)
	snaps.Wait()
	assert.Zero(t, r.Len())
	assert.Len(t, r.Closed(connregistry.Filter{}), 100)
}

func TestListHandler(t *testing.T) {
	r := connregistry.New(10)
	r.Add(conn("a", "User:alice", "10.0.0.1:1000", "CLIENT", t0), nil)
	r.Add(conn("b", "User:bob", "10.0.0.2:2000", "REPLICATION", t0), nil)
	gone := r.Add(conn("c", "User:carol", "10.0.0.3:3000", "CLIENT", t0), nil)
	gone.Remove(t0.Add(time.Minute), connregistry.AuthenticationFailed)

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
	assert.Equal(t, "authentication failed", resp.Connections[1].CloseReason)
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

// A throttle shows in the listing while it runs (ThrottledUntil) and adds
// the time it lasted to ThrottleTime when it ends: at its end, earlier
// when it is cut short, and at the close of a connection closed while
// muted.
func TestRegistryThrottle(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name      string
		from      time.Time
		until     time.Time
		end       func(e *connregistry.Entry)
		wantTotal time.Duration
	}{
		{"ends at its time", now.Add(-3 * time.Second), now.Add(-time.Second),
			func(e *connregistry.Entry) { e.EndThrottle(now) }, 2 * time.Second},
		{"ends early", now.Add(-3 * time.Second), now.Add(time.Hour),
			func(e *connregistry.Entry) { e.EndThrottle(now.Add(-2 * time.Second)) }, time.Second},
		{"a new throttle ends the running one", now.Add(-3 * time.Second), now.Add(time.Hour),
			func(e *connregistry.Entry) {
				e.Throttle(now.Add(-2*time.Second), now.Add(-time.Second))
				e.EndThrottle(now)
			}, 2 * time.Second},
		{"the connection closes while muted", now.Add(-3 * time.Second), now.Add(time.Hour),
			func(e *connregistry.Entry) { e.Remove(now.Add(-time.Second), connregistry.ClientClosed) }, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := connregistry.New(1)
			e := r.Add(conn("a", "User:alice", "127.0.0.1:1", "CLIENT", t0), nil)
			assert.Zero(t, r.Snapshot(connregistry.Filter{})[0].ThrottledUntil)

			e.Throttle(tc.from, tc.until)
			got := r.Snapshot(connregistry.Filter{})[0]
			assert.True(t, tc.until.Equal(got.ThrottledUntil), "listed as throttled until %s: %s", tc.until, got.ThrottledUntil)
			assert.Positive(t, got.ThrottleTime, "the running throttle counts")
			rec := connregistry.Record(got)
			assert.Equal(t, tc.until.UnixMilli(), rec.ThrottledUntil)
			assert.Equal(t, got.ThrottleTime.Milliseconds(), rec.ThrottleTimeMs)

			tc.end(e)
			var after connregistry.Conn
			if open := r.Snapshot(connregistry.Filter{}); len(open) == 1 {
				after = open[0]
			} else {
				after = r.Closed(connregistry.Filter{})[0]
			}
			assert.Zero(t, after.ThrottledUntil, "no longer throttled")
			assert.Equal(t, tc.wantTotal, after.ThrottleTime)
			assert.Zero(t, connregistry.Record(after).ThrottledUntil)
		})
	}
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
	f, err := connregistry.NewFilter(nil, &client, nil)
	require.NoError(t, err)
	assert.True(t, f.Match(c))
	f, err = connregistry.NewFilter(nil, &balancer, nil)
	require.NoError(t, err)
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
			f := connregistry.Filter{}.WithServerName(tt.filter)
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
	bob, err := connregistry.NewFilter(sp("User:bob"), nil, nil)
	require.NoError(t, err)
	assert.False(t, bob.WithServerName("a.example.com").Match(conns[0]))
	all, err := connregistry.NewFilter(nil, nil, sp("client"))
	require.NoError(t, err)
	assert.True(t, all.WithServerName("a.example.com").Match(conns[0]))
	assert.True(t, all.Match(conns[4]), "no server-name filter: every name matches")

	// Through the handlers.
	r := connregistry.New(10)
	closed := map[string]connregistry.CloseReason{}
	var mu sync.Mutex
	for _, c := range conns {
		r.Add(c, func(reason connregistry.CloseReason) {
			mu.Lock()
			closed[c.ID] = reason
			mu.Unlock()
		})
	}
	ctx := context.Background()
	resp := (&connregistry.ListHandler{Registry: r}).Handle(ctx, connregistry.Anonymous,
		&connregistry.ListClientConnectionsRequest{ServerNameFilter: sp("*.a.example.com")})
	require.Zero(t, resp.ErrorCode)
	var names []string
	for _, rec := range resp.Connections {
		names = append(names, rec.ServerName)
	}
	assert.ElementsMatch(t, []string{"Broker-0.A.example.com", "x.broker-1.a.example.com"}, names)

	// A server name alone is enough of a filter to close by.
	cresp := (&connregistry.CloseHandler{Registry: r}).Handle(ctx, connregistry.Anonymous,
		&connregistry.CloseClientConnectionsRequest{ServerNameFilter: sp("b.example.com")})
	require.Zero(t, cresp.ErrorCode, "%v", cresp.ErrorMessage)
	require.Len(t, cresp.Connections, 1)
	assert.Equal(t, "b", cresp.Connections[0].ConnectionID)
	assert.Equal(t, map[string]connregistry.CloseReason{"b": connregistry.ClosedByOperator}, closed)
}
