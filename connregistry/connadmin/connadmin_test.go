package connadmin_test

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/internal/testkit"
)

// addr is a record's client address and port as net.Conn.LocalAddr
// writes it.
func addr(c connregistry.ConnectionRecord) string {
	return net.JoinHostPort(c.ClientAddress, strconv.Itoa(int(c.ClientPort)))
}

func byAddr(conns []connregistry.ConnectionRecord, a string) (connregistry.ConnectionRecord, bool) {
	i := slices.IndexFunc(conns, func(c connregistry.ConnectionRecord) bool { return addr(c) == a })
	if i < 0 {
		return connregistry.ConnectionRecord{}, false
	}
	return conns[i], true
}

func ids(conns []connregistry.ConnectionRecord) []string {
	out := make([]string, len(conns))
	for i, c := range conns {
		out[i] = c.ConnectionID
	}
	slices.Sort(out)
	return out
}

func principals(conns []connregistry.ConnectionRecord) []string {
	var out []string
	for _, c := range conns {
		out = append(out, c.Principal)
	}
	return out
}

// Three brokers, each knowing only its own connections: alice (PLAIN) on
// broker 0, an anonymous client on broker 1's PLAINTEXT listener, bob
// (SCRAM-SHA-256) on broker 2. A listing finds each on its broker, with
// the socket the client holds, and every filter narrows it.
func TestListEveryBroker(t *testing.T) {
	c := startCluster(t, 3, nil)
	start := time.Now()
	_, aliceAddr := connectClient(t, c.Brokers[0], "PLAIN", "alice")
	anonDialer := &testkit.RecordingDialer{}
	anon := newClient(t, c.Brokers[1].Plain, kgo.Dialer(anonDialer.Dial), kgo.ConnIdleTimeout(time.Minute))
	_, err := anon.SeedBrokers()[0].Request(ctxTimeout(t, 10*time.Second), newMetadata())
	require.NoError(t, err)
	require.Len(t, anonDialer.Addrs(), 1)
	anonAddr := anonDialer.Addrs()[0]
	_, bobAddr := connectClient(t, c.Brokers[2], "SCRAM-SHA-256", "bob")
	admin := adminClient(t, c, 0)

	results, err := admin.List(ctxTimeout(t, 20*time.Second), connregistry.Filter{}, false)
	end := time.Now()
	require.NoError(t, err)
	require.Len(t, results, 3)
	for i, r := range results {
		require.NoError(t, r.Err, "broker %d", i)
		assert.Equal(t, int32(i), r.NodeID)
		assert.Equal(t, c.Brokers[i].Client, net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port))), "brokers are found on the listener the admin client used")
		assert.Contains(t, principals(r.Connections), "User:admin", "broker %d lists the admin's own connection", i)
		for _, rec := range r.Connections {
			assert.Equal(t, "127.0.0.1", rec.ClientAddress)
			assert.Equal(t, "data", rec.Plane)
			assert.Equal(t, "ready", rec.State)
			assert.Zero(t, rec.ClosedAt)
			assert.Empty(t, rec.CloseReason)
		}
	}

	alice, ok := byAddr(results[0].Connections, aliceAddr)
	require.True(t, ok, "alice's connection %s is not listed on broker 0: %+v", aliceAddr, results[0].Connections)
	assert.Equal(t, "User:alice", alice.Principal, "KIP-1329: Principal is Type:name")
	assert.Equal(t, "User", alice.PrincipalType)
	assert.Equal(t, "CLIENT", alice.ListenerName)
	assert.Equal(t, "SASL_PLAINTEXT", alice.SecurityProtocol)
	assert.Equal(t, "PLAIN", alice.SASLMechanism)
	assert.Equal(t, "kgo", alice.SoftwareName)
	assert.NotEmpty(t, alice.SoftwareVersion)
	assert.Equal(t, "kgo", alice.ClientID)
	assert.GreaterOrEqual(t, alice.ConnectedSince, start.UnixMilli())
	assert.LessOrEqual(t, alice.ConnectedSince, end.UnixMilli())
	assert.GreaterOrEqual(t, alice.AuthenticatedAt, alice.ConnectedSince)
	assert.Equal(t, int64(-1), alice.SessionExpiry)
	assert.Greater(t, alice.Requests, int64(2), "ApiVersions, SaslHandshake, SaslAuthenticate, Metadata")
	assert.Greater(t, alice.BytesIn, int64(0))
	assert.Greater(t, alice.BytesOut, int64(0))
	// alice's connection ID is Kafka's local-remote form, naming her port.
	assert.Contains(t, alice.ConnectionID, "-"+aliceAddr+"-")

	anonRec, ok := byAddr(results[1].Connections, anonAddr)
	require.True(t, ok, "the anonymous connection %s is not listed on broker 1", anonAddr)
	assert.Equal(t, "User:ANONYMOUS", anonRec.Principal)
	assert.Equal(t, "User", anonRec.PrincipalType)
	assert.Equal(t, "PLAIN", anonRec.ListenerName)
	assert.Equal(t, "PLAINTEXT", anonRec.SecurityProtocol)
	assert.Empty(t, anonRec.SASLMechanism)
	assert.Equal(t, int64(-1), anonRec.AuthenticatedAt)
	assert.Equal(t, "kgo", anonRec.SoftwareName)

	bob, ok := byAddr(results[2].Connections, bobAddr)
	require.True(t, ok, "bob's connection %s is not listed on broker 2", bobAddr)
	assert.Equal(t, "User:bob", bob.Principal)
	assert.Equal(t, "CLIENT", bob.ListenerName)
	assert.Equal(t, "SASL_PLAINTEXT", bob.SecurityProtocol)
	assert.Equal(t, "SCRAM-SHA-256", bob.SASLMechanism)
	assert.Equal(t, "kgo", bob.SoftwareName)
	assert.GreaterOrEqual(t, bob.ConnectedSince, start.UnixMilli())
	assert.LessOrEqual(t, bob.ConnectedSince, end.UnixMilli())

	// Each broker knows only its own connections.
	assert.NotContains(t, principals(results[1].Connections), "User:alice")
	assert.NotContains(t, principals(results[2].Connections), "User:alice")
	assert.NotContains(t, principals(results[0].Connections), "User:bob")
	assert.NotContains(t, principals(results[1].Connections), "User:bob")
	assert.NotContains(t, principals(results[0].Connections), "User:ANONYMOUS")

	list := func(f connregistry.Filter) []connadmin.BrokerResult {
		t.Helper()
		rs, err := admin.List(ctxTimeout(t, 20*time.Second), f, false)
		require.NoError(t, err)
		require.Len(t, rs, 3)
		for i, r := range rs {
			require.NoError(t, r.Err, "broker %d", i)
		}
		return rs
	}

	t.Run("principal", func(t *testing.T) {
		rs := list(connregistry.Filter{Principal: strp("User:bob")})
		assert.Empty(t, rs[0].Connections)
		assert.Empty(t, rs[1].Connections)
		require.Len(t, rs[2].Connections, 1)
		assert.Equal(t, bobAddr, addr(rs[2].Connections[0]))
		// The principal matches exactly: the type counts, and so does case.
		for _, p := range []string{"Group:bob", "User:Bob", "User:bo"} {
			for _, r := range list(connregistry.Filter{Principal: strp(p)}) {
				assert.Empty(t, r.Connections, "%s on broker %d", p, r.NodeID)
			}
		}
	})
	t.Run("client address", func(t *testing.T) {
		all := list(connregistry.Filter{})
		for _, a := range []string{"127.0.0.1", "127.0.0.0/8", "::ffff:127.0.0.1", " 127.0.0.1 "} {
			rs := list(connregistry.Filter{ClientAddress: strp(a)})
			for i := range rs {
				assert.Equal(t, ids(all[i].Connections), ids(rs[i].Connections), "%q on broker %d", a, i)
			}
		}
		for _, a := range []string{"::1", "0:0:0:0:0:0:0:1", "::/0", "10.0.0.0/8", "127.0.0.2"} {
			for _, r := range list(connregistry.Filter{ClientAddress: strp(a)}) {
				assert.Empty(t, r.Connections, "%q on broker %d", a, r.NodeID)
			}
		}
	})
	t.Run("listener", func(t *testing.T) {
		for _, l := range []string{"plain", "PLAIN", "Plain"} {
			rs := list(connregistry.Filter{Listener: strp(l)})
			assert.Empty(t, rs[0].Connections, l)
			assert.Empty(t, rs[2].Connections, l)
			require.Len(t, rs[1].Connections, 1, l)
			assert.Equal(t, anonAddr, addr(rs[1].Connections[0]))
		}
		rs := list(connregistry.Filter{Listener: strp("client")})
		for i, r := range rs {
			require.NotEmpty(t, r.Connections)
			for _, rec := range r.Connections {
				assert.Equal(t, "CLIENT", rec.ListenerName, "broker %d", i)
			}
		}
		_, ok := byAddr(rs[0].Connections, aliceAddr)
		assert.True(t, ok)
		_, ok = byAddr(rs[2].Connections, bobAddr)
		assert.True(t, ok)
		for _, r := range list(connregistry.Filter{Listener: strp("EXTERNAL")}) {
			assert.Empty(t, r.Connections)
		}
	})
	t.Run("every filter at once", func(t *testing.T) {
		rs := list(connregistry.Filter{Principal: strp("User:alice"), ClientAddress: strp("127.0.0.0/8"), Listener: strp("client")})
		require.Len(t, rs[0].Connections, 1)
		assert.Equal(t, aliceAddr, addr(rs[0].Connections[0]))
		assert.Empty(t, rs[1].Connections)
		assert.Empty(t, rs[2].Connections)
		for _, r := range list(connregistry.Filter{Principal: strp("User:alice"), Listener: strp("PLAIN")}) {
			assert.Empty(t, r.Connections)
		}
	})
	t.Run("one broker", func(t *testing.T) {
		r := admin.ListBroker(ctxTimeout(t, 10*time.Second), 2, connregistry.Filter{Principal: strp("User:bob")}, false)
		require.NoError(t, r.Err)
		assert.Equal(t, int32(2), r.NodeID)
		require.Len(t, r.Connections, 1)
		assert.Equal(t, bobAddr, addr(r.Connections[0]))
	})
}

// A principal that may not DESCRIBE the CLUSTER gets
// CLUSTER_AUTHORIZATION_FAILED from every broker, with the broker's
// message, and no connections.
func TestListUnauthorized(t *testing.T) {
	c := startCluster(t, 3, nil)
	cl := newClient(t, c.Brokers[0].Client, sasl("PLAIN", "alice"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey))
	results, err := connadmin.New(cl, 0, 0).List(ctxTimeout(t, 20*time.Second), connregistry.Filter{}, false)
	require.NoError(t, err)
	require.Len(t, results, 3)
	for i, r := range results {
		assert.Equal(t, int32(i), r.NodeID)
		require.Error(t, r.Err, "broker %d", i)
		assert.True(t, errors.Is(r.Err, kerr.ClusterAuthorizationFailed), "broker %d: %v", i, r.Err)
		var em *connadmin.ErrorMessage
		require.ErrorAs(t, r.Err, &em)
		assert.Contains(t, em.Message, "User:alice")
		assert.Contains(t, r.Err.Error(), "CLUSTER_AUTHORIZATION_FAILED")
		assert.Nil(t, r.Connections)
	}

	// Only the broker whose super.users name bob lets him list.
	c = startCluster(t, 2, func(i int, o *brokerOptions) {
		if i == 1 {
			o.SuperUsers = "User:admin;User:bob"
		}
	})
	cl = newClient(t, c.Brokers[0].Client, sasl("SCRAM-SHA-256", "bob"), connadmin.VersionsOpt(0))
	results, err = connadmin.New(cl, 0, 0).List(ctxTimeout(t, 20*time.Second), connregistry.Filter{}, false)
	require.NoError(t, err)
	require.Len(t, results, 2)
	assert.ErrorIs(t, results[0].Err, kerr.ClusterAuthorizationFailed)
	require.NoError(t, results[1].Err)
	assert.Contains(t, principals(results[1].Connections), "User:bob")
}

// A filter the broker cannot parse is INVALID_REQUEST, on every broker.
func TestListInvalidFilter(t *testing.T) {
	c := startCluster(t, 2, nil)
	admin := adminClient(t, c, 0)
	for _, f := range []connregistry.Filter{
		{ClientAddress: strp("not-an-ip")},
		{ClientAddress: strp("127.0.0.1/33")},
		{Principal: strp("alice")},
		{Listener: strp("  ")},
	} {
		results, err := admin.List(ctxTimeout(t, 20*time.Second), f, false)
		require.NoError(t, err)
		require.Len(t, results, 2)
		for _, r := range results {
			assert.ErrorIs(t, r.Err, kerr.InvalidRequest, "%+v on broker %d", f, r.NodeID)
			var em *connadmin.ErrorMessage
			if assert.ErrorAs(t, r.Err, &em) {
				assert.Contains(t, em.Message, "invalid filter")
			}
		}
	}
}

// A closed connection leaves the live listing and, with IncludeClosed,
// shows with when and why it closed.
func TestListIncludeClosed(t *testing.T) {
	c := startCluster(t, 1, nil)
	start := time.Now()
	alice, aliceAddr := connectClient(t, c.Brokers[0], "PLAIN", "alice")
	admin := adminClient(t, c, 0)
	aliceOnly := connregistry.Filter{Principal: strp("User:alice")}

	rs, err := admin.List(ctxTimeout(t, 10*time.Second), aliceOnly, false)
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Len(t, rs[0].Connections, 1)

	closed := time.Now() // the server may see the close before Close returns
	alice.Close()
	var rec connregistry.ConnectionRecord
	require.Eventually(t, func() bool {
		rs, err := admin.List(ctxTimeout(t, 10*time.Second), aliceOnly, true)
		if err != nil || rs[0].Err != nil || len(rs[0].Connections) != 1 {
			return false
		}
		rec = rs[0].Connections[0]
		return rec.ClosedAt != 0
	}, 10*time.Second, 20*time.Millisecond, "alice's closed connection was not listed")
	assert.Equal(t, aliceAddr, addr(rec))
	assert.Equal(t, string(connregistry.CloseByClient), rec.CloseReason)
	assert.Equal(t, "closing", rec.State)
	assert.GreaterOrEqual(t, rec.ClosedAt, closed.UnixMilli())
	assert.LessOrEqual(t, rec.ClosedAt, time.Now().UnixMilli())
	assert.GreaterOrEqual(t, rec.ConnectedSince, start.UnixMilli())
	assert.Equal(t, "User:alice", rec.Principal)
	assert.Equal(t, "kgo", rec.SoftwareName)

	rs, err = admin.List(ctxTimeout(t, 10*time.Second), aliceOnly, false)
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	assert.Empty(t, rs[0].Connections, "a closed connection is not live")
}

// The client reaches a broker that serves ListClientConnections under
// another key (the KIP's 93 is Kafka 4.4's
// StreamsGroupTopologyDescriptionUpdate), and fails, without sending,
// against a broker that does not advertise the key it was given.
func TestListOtherAPIKey(t *testing.T) {
	c := startCluster(t, 2, func(_ int, o *brokerOptions) { o.APIKey = 200 })
	rs, err := adminClient(t, c, 200).List(ctxTimeout(t, 20*time.Second), connregistry.Filter{}, false)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.NoError(t, r.Err)
		assert.Contains(t, principals(r.Connections), "User:admin")
	}

	rs, err = adminClient(t, c, 0).List(ctxTimeout(t, 20*time.Second), connregistry.Filter{}, false)
	require.NoError(t, err, "Metadata still works")
	require.Len(t, rs, 2)
	for _, r := range rs {
		require.Error(t, r.Err)
		assert.ErrorIs(t, r.Err, connadmin.ErrNotAdvertised)
		assert.Contains(t, r.Err.Error(), "API key 93")
		assert.Nil(t, r.Connections)
	}
	for _, b := range c.Brokers {
		for _, closed := range b.Registry.Closed(connregistry.Filter{}) {
			assert.NotEqual(t, connregistry.CloseProtocolError, closed.CloseReason,
				"broker %d was sent the key it does not serve", b.ID)
		}
	}
}
