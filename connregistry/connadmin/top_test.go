package connadmin_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
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
