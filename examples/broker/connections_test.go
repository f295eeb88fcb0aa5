package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
)

// The broker serves ListClientConnections (KIP-1329), super.users deciding
// who may list: a super user sees bob's authenticated connection with its
// principal, listener, protocol, mechanism and software; bob may not list.
func TestListClientConnections(t *testing.T) {
	c := startDefaultCluster(t, "super.users=User:alice", "advertised.listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
	clientAddr := addr(t, c, 0, "CLIENT")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// bob produces nothing but connects and authenticates with SCRAM.
	bob := newClient(t, clientAddr, kgo.SASL(saslMechanism("SCRAM-SHA-256", "bob", "bob-secret")))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, bob)
	require.NoError(t, err)

	list := func(user, password, listenerName string, f connadmin.Filters) []connadmin.BrokerResult {
		t.Helper()
		cl := newClient(t, addr(t, c, 0, listenerName), connadmin.VersionsOpt(connregistry.DefaultAPIKey),
			kgo.SASL(saslMechanism("PLAIN", user, password)))
		res, err := connadmin.New(cl, 0).List(ctx, f)
		require.NoError(t, err)
		return res
	}
	bobFilter := "User:bob"
	res := list("alice", "alice-secret", "CLIENT", connadmin.Filters{Principal: &bobFilter})
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)
	require.NotEmpty(t, res[0].Connections)
	for _, conn := range res[0].Connections {
		assert.Equal(t, "bob", conn.Principal)
		assert.Equal(t, "User", conn.PrincipalType)
		assert.Equal(t, "CLIENT", conn.ListenerName)
		assert.Equal(t, "SASL_PLAINTEXT", conn.SecurityProtocol)
		assert.Equal(t, "kgo", conn.SoftwareName)
		assert.Equal(t, "SCRAM-SHA-256", conn.SASLMechanism)
		assert.Equal(t, "127.0.0.1", conn.ClientAddress)
		assert.InDelta(t, time.Now().UnixMilli(), conn.ConnectedSince, float64(time.Minute.Milliseconds()))
	}

	// bob is not a super user: CLUSTER_AUTHORIZATION_FAILED.
	res = list("bob", "bob-secret", "CLIENT", connadmin.Filters{})
	require.Len(t, res, 1)
	assert.ErrorIs(t, res[0].Err, kerr.ClusterAuthorizationFailed)
}
