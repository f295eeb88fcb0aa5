package connadmin_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Two brokers; alice sends 30 Metadata requests to broker 1, bob 15 to
// broker 0 (more than the admin client sends on any connection). The
// cluster's top connection by requests is alice's, on broker 1, though
// broker 0 is asked first; each broker's answer is its own first n, in
// order, with its rates.
func TestListTopAcrossBrokers(t *testing.T) {
	c := startCluster(t, 2, nil)
	alice, aliceAddr := connectClient(t, c.Brokers[1], "PLAIN", "alice")
	bob, bobAddr := connectClient(t, c.Brokers[0], "PLAIN", "bob")
	ctx := ctxTimeout(t, 30*time.Second)
	for range 30 {
		_, err := alice.SeedBrokers()[0].Request(ctx, newMetadata())
		require.NoError(t, err)
	}
	for range 15 {
		_, err := bob.SeedBrokers()[0].Request(ctx, newMetadata())
		require.NoError(t, err)
	}
	admin := adminClient(t, c, 0)

	results, err := admin.ListTop(ctx, connregistry.Filter{Principal: strp("User:alice")}, connregistry.SortByRequests, 1)
	require.NoError(t, err)
	require.Len(t, results, 2)
	require.NoError(t, results[1].Err)
	require.Len(t, results[1].Connections, 1, "the broker cuts to the limit")
	assert.Equal(t, aliceAddr, addr(results[1].Connections[0]))

	results, err = admin.ListTop(ctx, connregistry.Filter{}, connregistry.SortByRequests, 2)
	require.NoError(t, err)
	for _, r := range results {
		require.NoError(t, r.Err)
		assert.LessOrEqual(t, len(r.Connections), 2)
		for i := 1; i < len(r.Connections); i++ {
			assert.GreaterOrEqual(t, r.Connections[i-1].RequestRate, r.Connections[i].RequestRate)
		}
	}
	top := connadmin.Top(results, connregistry.SortByRequests, 2)
	require.Len(t, top, 2)
	assert.Equal(t, int32(1), top[0].NodeID)
	assert.Equal(t, aliceAddr, addr(top[0].ConnectionRecord), "alice's connection, the busiest, first")
	assert.Equal(t, int32(0), top[1].NodeID)
	assert.Equal(t, bobAddr, addr(top[1].ConnectionRecord), "then bob's")
	// 30 requests (and the client's own: ApiVersions, SASL) within the
	// last seconds: about a sixtieth of them per second.
	assert.Greater(t, top[0].RequestRate, 30.0/60*0.9)
	assert.Greater(t, top[0].RequestRate, top[1].RequestRate)
	assert.Positive(t, top[0].BytesInRate)
	assert.Positive(t, top[0].BytesOutRate)

	_, err = admin.ListTop(ctx, connregistry.Filter{}, "busiest", 1)
	assert.ErrorIs(t, err, connregistry.ErrInvalidFilter)
}

// Top merges the brokers' answers into the cluster's first n; an older
// broker's answer, all its connections in connection-time order without
// rates, ranks as rates of zero do: last, by connection time.
func TestTopMerges(t *testing.T) {
	rec := func(id string, rate float64, since int64) connregistry.ConnectionRecord {
		return connregistry.ConnectionRecord{ConnectionID: id, RequestRate: rate, ConnectedSince: since, LastActivity: 1000 - since}
	}
	results := []connadmin.BrokerResult{
		{NodeID: 0, Connections: []connregistry.ConnectionRecord{rec("a", 5, 1), rec("b", 1, 2)}},
		{NodeID: 1, Err: assert.AnError},
		{NodeID: 2, Connections: []connregistry.ConnectionRecord{rec("c", 9, 3), rec("d", 5, 0)}},
		{NodeID: 3, Connections: []connregistry.ConnectionRecord{rec("old-2", 0, 5), rec("old-1", 0, 4)}},
	}
	names := func(rs []connadmin.Ranked) (out []string) {
		for _, r := range rs {
			out = append(out, r.ConnectionID)
		}
		return out
	}
	assert.Equal(t, []string{"c", "d", "a"}, names(connadmin.Top(results, connregistry.SortByRequests, 3)), "a tie goes to the earlier connection")
	assert.Equal(t, []string{"c", "d", "a", "b", "old-1", "old-2"}, names(connadmin.Top(results, connregistry.SortByRequests, 0)))
	assert.Equal(t, []string{"d", "a"}, names(connadmin.Top(results, connregistry.SortByAge, 2)))
	assert.Equal(t, []string{"old-2", "old-1"}, names(connadmin.Top(results, connregistry.SortByIdle, 2)), "the oldest last activity first")
	top := connadmin.Top(results, connregistry.SortByRequests, 1)
	require.Len(t, top, 1)
	assert.Equal(t, int32(2), top[0].NodeID)
	assert.Nil(t, connadmin.Top(results, "nope", 1))
	assert.Empty(t, connadmin.Top(nil, connregistry.SortByAge, 3))
}

// oldBrokers serves ListClientConnections as a broker that predates the
// order would: it does not know the request's SortBy and Limit tags, nor
// the records' rate tags, so it answers every request with all its
// connections in connection-time order, without rates. It notes what each
// broker was asked and how many records it sent.
type oldBrokers struct {
	mu     sync.Mutex
	regs   []connregistry.Registry
	sortBy []connregistry.SortKey
	limits []int32
	sent   []int
}

func (o *oldBrokers) api(i int) socketserver.API {
	key := connregistry.DefaultListAPIKey
	return socketserver.API{Key: key,
		New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{APIKey: key} },
		Inline: socketserver.HandlerFunc(func(r *socketserver.Request) {
			req := r.Body.(*connregistry.ListClientConnectionsRequest)
			o.mu.Lock()
			defer o.mu.Unlock()
			o.sortBy[i], o.limits[i] = req.SortBy, req.Limit
			req.SortBy, req.Limit = "", 0 // unknown tags: skipped
			h := connregistry.ListHandler{Registry: o.regs[i]}
			resp := h.Handle(r.Context(), r.Conn.Principal, req)
			for j := range resp.Connections {
				c := &resp.Connections[j]
				c.RequestRate, c.BytesInRate, c.BytesOutRate = 0, 0, 0
			}
			o.sent[i] = len(resp.Connections)
			_ = r.Respond(resp)
		}),
	}
}

// Against brokers that predate the order (they ignore SortBy and Limit
// and send no rates), ListTop still returns each broker's first n in the
// key's order: it orders and cuts their whole listings itself. On each of
// two brokers three clients connect one after the other and then send a
// request each in the reverse order, so that the connection idle the
// longest is the last one to have connected.
func TestListTopOldBrokers(t *testing.T) {
	const n = 2
	old := &oldBrokers{regs: make([]connregistry.Registry, n), sortBy: make([]connregistry.SortKey, n),
		limits: make([]int32, n), sent: make([]int, n)}
	c := startCluster(t, n, func(i int, o *brokerOptions) {
		o.APIKey = 201 // the server's own listing, out of the way
		o.APIs = []socketserver.API{old.api(i)}
	})
	old.mu.Lock()
	for i, b := range c.Brokers {
		old.regs[i] = b.Registry
	}
	old.mu.Unlock()

	ctx := ctxTimeout(t, 30*time.Second)
	clients := make([][]*kgo.Client, n)
	addrs := make([][]string, n)
	for i, b := range c.Brokers {
		for _, user := range []string{"alice", "bob", "alice"} {
			cl, a := connectClient(t, b, "PLAIN", user)
			clients[i], addrs[i] = append(clients[i], cl), append(addrs[i], a)
			time.Sleep(5 * time.Millisecond) // the records' times are in milliseconds
		}
	}
	for j := 2; j >= 0; j-- {
		for i := range c.Brokers {
			_, err := clients[i][j].SeedBrokers()[0].Request(ctx, newMetadata())
			require.NoError(t, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	admin := adminClient(t, c, 0)

	for _, tc := range []struct {
		by   connregistry.SortKey
		want []int // the clients of each broker, by their index, in order
	}{
		{connregistry.SortByIdle, []int{2, 1}},     // the oldest last activity first
		{connregistry.SortByRequests, []int{0, 1}}, // no rates: all ties, by connection time
	} {
		results, err := admin.ListTop(ctx, connregistry.Filter{}, tc.by, n)
		require.NoError(t, err)
		require.Len(t, results, n)
		for i, r := range results {
			require.NoError(t, r.Err)
			old.mu.Lock()
			sortBy, limit, sent := old.sortBy[i], old.limits[i], old.sent[i]
			old.mu.Unlock()
			assert.Equal(t, tc.by, sortBy, "broker %d: the client asked for the order", i)
			assert.Equal(t, int32(n), limit, "broker %d: and the limit", i)
			require.Greater(t, sent, n, "broker %d sent all its connections", i)
			require.Len(t, r.Connections, n, "%s, broker %d: cut by the client", tc.by, i)
			for k, j := range tc.want {
				assert.Equal(t, addrs[i][j], addr(r.Connections[k]), "%s, broker %d, #%d", tc.by, i, k)
				assert.Zero(t, r.Connections[k].RequestRate)
			}
		}
	}
}
