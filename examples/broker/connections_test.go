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

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
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

	list := func(user, password, listenerName string, f connregistry.Filter) []connadmin.BrokerResult {
		t.Helper()
		cl := newClient(t, addr(t, c, 0, protocolmap.ListenerName(listenerName)), connadmin.VersionsOpt(connregistry.DefaultListAPIKey),
			kgo.SASL(saslMechanism("PLAIN", user, password)))
		res, err := connadmin.New(cl, 0, 0).List(ctx, f, false)
		require.NoError(t, err)
		return res
	}
	bobFilter := "User:bob"
	res := list("alice", "alice-secret", "CLIENT", connregistry.Filter{Principal: &bobFilter})
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)
	require.NotEmpty(t, res[0].Connections)
	for _, conn := range res[0].Connections {
		assert.Equal(t, "User:bob", conn.Principal)
		assert.Equal(t, "User", conn.PrincipalType)
		assert.Equal(t, "CLIENT", conn.ListenerName)
		assert.Equal(t, "SASL_PLAINTEXT", conn.SecurityProtocol)
		assert.Equal(t, "kgo", conn.SoftwareName)
		assert.Equal(t, "SCRAM-SHA-256", conn.SASLMechanism)
		assert.Equal(t, "127.0.0.1", conn.ClientAddress)
		assert.InDelta(t, time.Now().UnixMilli(), conn.ConnectedSince, float64(time.Minute.Milliseconds()))
	}

	// bob is not a super user: CLUSTER_AUTHORIZATION_FAILED.
	res = list("bob", "bob-secret", "CLIENT", connregistry.Filter{})
	require.Len(t, res, 1)
	assert.ErrorIs(t, res[0].Err, kerr.ClusterAuthorizationFailed)
}

// With 3 brokers and mixed security protocols (SASL_PLAINTEXT, SASL_SSL,
// SSL with a client certificate, PLAINTEXT), each broker lists only its own
// connections, and connadmin asks every broker.
func TestListClientConnectionsThreeBrokersMixedProtocols(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	c := startClusterWith(t, 3, config.Properties{}, securitySettings(pki, "super.users=User:alice")...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(broker int, l string, opts ...kgo.Opt) {
		t.Helper()
		cl := newClient(t, addr(t, c, broker, protocolmap.ListenerName(l)), opts...)
		_, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
		require.NoError(t, err)
	}
	connect(0, "SASL", kgo.SASL(saslMechanism("PLAIN", "bob", "bob-secret")))
	connect(1, "SASLTLS", kgo.SASL(saslMechanism("SCRAM-SHA-512", "bob", "bob-secret")), kgo.DialTLSConfig(pki.ClientTLS(false)))
	connect(2, "TLS", kgo.DialTLSConfig(pki.ClientTLS(true)))
	connect(2, "REPLICATION")

	admin := newClient(t, addr(t, c, 0, "SASL"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey),
		kgo.SASL(saslMechanism("PLAIN", "alice", "alice-secret")))
	res, err := connadmin.New(admin, 0, 0).List(ctx, connregistry.Filter{}, false)
	require.NoError(t, err)
	require.Len(t, res, 3)
	seen := map[int32]map[string]string{} // broker -> listener -> principal
	for _, r := range res {
		require.NoError(t, r.Err, "broker %d", r.NodeID)
		seen[r.NodeID] = map[string]string{}
		for _, conn := range r.Connections {
			if conn.Principal != "User:alice" { // the admin client's own connections
				seen[r.NodeID][conn.ListenerName] = conn.Principal + " " + conn.SecurityProtocol
			}
		}
	}
	assert.Equal(t, "User:bob SASL_PLAINTEXT", seen[0]["SASL"])
	assert.Equal(t, "User:bob SASL_SSL", seen[1]["SASLTLS"])
	assert.Contains(t, seen[2]["TLS"], " SSL")
	assert.NotEqual(t, "User:ANONYMOUS SSL", seen[2]["TLS"], "a client certificate gives a principal of its own")
	assert.Equal(t, "User:ANONYMOUS PLAINTEXT", seen[2]["REPLICATION"])
	assert.NotContains(t, seen[0], "TLS", "broker 0 lists only its own connections")
}
