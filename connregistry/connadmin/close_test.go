package connadmin_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Close asks every broker: bob's connections close on the two brokers
// that hold them, each broker lists what it closed, the admin's own
// connections stay, a principal that may not alter the cluster is refused
// by every broker, and a broker that does not serve the key is never sent
// it.
func TestCloseEveryBroker(t *testing.T) {
	c := startCluster(t, 3, func(i int, o *brokerOptions) {
		if i < 2 { // broker 2 does not serve CloseClientConnections
			o.APIs = append(o.APIs, socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, connregistry.SuperUsers("User:admin")))
		}
	})
	_, bob0 := connectClient(t, c.Brokers[0], "PLAIN", "bob")
	_, bob1 := connectClient(t, c.Brokers[1], "SCRAM-SHA-256", "bob")
	_, alice1 := connectClient(t, c.Brokers[1], "PLAIN", "alice")
	_, bob2 := connectClient(t, c.Brokers[2], "PLAIN", "bob")
	key := connregistry.DefaultCloseAPIKey
	admin := connadmin.New(newClient(t, c.Brokers[0].Client, sasl("PLAIN", "admin"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey, key)), 0, 0)

	results, err := admin.CloseConnections(ctxTimeout(t, 20*time.Second), connregistry.Filter{Principal: strp("User:bob")})
	require.NoError(t, err)
	require.Len(t, results, 3)
	for i, want := range []string{bob0, bob1} {
		r := results[i]
		require.NoError(t, r.Err, "broker %d", i)
		require.Len(t, r.Connections, 1, "broker %d", i)
		assert.Equal(t, want, addr(r.Connections[0]), "broker %d closed bob's connection", i)
		assert.Equal(t, "User:bob", r.Connections[0].Principal)
	}
	assert.ErrorIs(t, results[2].Err, connadmin.ErrNotAdvertised)
	assert.Contains(t, results[2].Err.Error(), "CloseClientConnections")
	for i, gone := range []string{bob0, bob1} {
		require.Eventually(t, func() bool {
			_, open := byAddr(recordsOf(c.Brokers[i].Registry.Snapshot(connregistry.Filter{})), gone)
			return !open
		}, 5*time.Second, 5*time.Millisecond, "bob's connection to broker %d is still open", i)
	}
	_, stillOpen := byAddr(recordsOf(c.Brokers[1].Registry.Snapshot(connregistry.Filter{})), alice1)
	assert.True(t, stillOpen, "alice's connection was closed")
	_, stillOpen = byAddr(recordsOf(c.Brokers[2].Registry.Snapshot(connregistry.Filter{})), bob2)
	assert.True(t, stillOpen, "broker 2 does not serve the API, so bob's connection there stays")

	// The admin client is still served: its connections were not closed.
	again, err := admin.CloseConnections(ctxTimeout(t, 20*time.Second), connregistry.Filter{ConnectionIDs: []string{"none"}})
	require.NoError(t, err)
	require.NoError(t, again[0].Err)
	assert.Empty(t, again[0].Connections)

	alice := connadmin.New(newClient(t, c.Brokers[0].Client, sasl("PLAIN", "alice"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey, key)), 0, 0)
	refused, err := alice.CloseConnections(ctxTimeout(t, 20*time.Second), connregistry.Filter{Principal: strp("User:bob")})
	require.NoError(t, err)
	for _, r := range refused[:2] {
		assert.ErrorIs(t, r.Err, kerr.ClusterAuthorizationFailed, "broker %d", r.NodeID)
		assert.Contains(t, r.Err.Error(), "ALTER the CLUSTER")
	}
	_, stillOpen = byAddr(recordsOf(c.Brokers[1].Registry.Snapshot(connregistry.Filter{})), alice1)
	assert.True(t, stillOpen)
}

func recordsOf(conns []connregistry.Conn) []connregistry.ConnectionRecord {
	out := make([]connregistry.ConnectionRecord, len(conns))
	for i, c := range conns {
		out[i] = connregistry.Record(c)
	}
	return out
}
