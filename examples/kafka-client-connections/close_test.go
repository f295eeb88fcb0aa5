package main

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
)

// --close --principal closes that principal's connections on every broker
// that serves CloseClientConnections and prints what each closed, as
// --list prints connections; the command's own connections stay, and a
// principal that may not alter the cluster is refused by name.
func TestClose(t *testing.T) {
	c := startCluster(t, 3, func(_ int, o *brokerOptions) {
		o.APIs = append(o.APIs, socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, connregistry.SuperUsers("User:admin")))
	})
	_, bob0 := connectClient(t, c.Brokers[0], "PLAIN", "bob")
	_, bob2 := connectClient(t, c.Brokers[2], "SCRAM-SHA-256", "bob")
	_, alice1 := connectClient(t, c.Brokers[1], "PLAIN", "alice")

	res := runCLI(t, "--bootstrap-server", c.Brokers[1].Client, "--close", "--principal", "User:bob", "--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stderr)
	header, rows := table(t, res.stdout)
	assert.Equal(t, tableHeader, header)
	require.Len(t, rows, 2, res.stdout)
	for broker, addr := range map[string]string{"0": bob0, "2": bob2} {
		row, ok := rowAt(rows, addr)
		require.True(t, ok, "bob's connection %s is not listed as closed:\n%s", addr, res.stdout)
		assert.Equal(t, broker, row["BROKER"])
		assert.Equal(t, "User:bob", row["PRINCIPAL"])
	}
	for i := range 3 {
		require.Eventually(t, func() bool {
			bob := connregistry.Filter{Principal: ptr("User:bob")}
			require.NoError(t, bob.Validate())
			return len(c.Brokers[i].Registry.Snapshot(bob)) == 0
		}, 5*time.Second, 5*time.Millisecond, "broker %d still holds bob's connection", i)
	}
	listed := runCLI(t, "--bootstrap-server", c.Brokers[1].Client, "--list", "--include-closed", "--principal", "User:bob",
		"--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, listed.code, listed.stderr)
	_, rows = table(t, listed.stdout)
	for _, addr := range []string{bob0, bob2} {
		row, ok := rowAt(rows, addr)
		require.True(t, ok, listed.stdout)
		assert.Equal(t, "closed-by-operator", row["CLOSE-REASON"])
	}

	// By connection id, in JSON.
	_, rows = table(t, runCLI(t, "--bootstrap-server", c.Brokers[1].Client, "--list", "--principal", "User:alice",
		"--command-config", commandConfig(t, "PLAIN", "admin")).stdout)
	alice, ok := rowAt(rows, alice1)
	require.True(t, ok)
	res = runCLI(t, "--bootstrap-server", c.Brokers[1].Client, "--close", "--connection-id", alice["CONNECTION-ID"], "--output", "json",
		"--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, `"ConnectionId": "`+alice["CONNECTION-ID"]+`"`)
	assert.Equal(t, 1, strings.Count(res.stdout, `"ConnectionId"`), res.stdout)

	// alice may not close connections.
	res = runCLI(t, "--bootstrap-server", c.Brokers[1].Client, "--close", "--listener", "CLIENT", "--command-config", commandConfig(t, "PLAIN", "alice"))
	assert.Equal(t, 1, res.code)
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	require.Len(t, lines, 3, res.stderr)
	for _, l := range lines {
		assert.Contains(t, l, "not authorized: User:alice may not close connections")
		assert.Contains(t, l, "ALTER on CLUSTER")
	}
}

// --close never closes the command's own connections, though its filter
// selects them: each filter here selects the command's bootstrap
// connection too, and only the other admin client's connections are
// closed and printed, on one broker and on three.
func TestCloseSparesOwnConnections(t *testing.T) {
	for _, tt := range []struct {
		name    string
		brokers int
		filter  []string
	}{
		{"listener, one broker", 1, []string{"--listener", "CLIENT"}},
		{"principal, one broker", 1, []string{"--principal", "User:admin"}},
		{"listener, three brokers", 3, []string{"--listener", "client"}},
		{"client address, three brokers", 3, []string{"--client-address", "127.0.0.0/8"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster(t, tt.brokers, func(_ int, o *brokerOptions) {
				o.APIs = append(o.APIs, socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, connregistry.SuperUsers("User:admin")))
			})
			want := map[string]int32{}
			for i, b := range c.Brokers {
				_, addr := connectClient(t, b, "PLAIN", "admin")
				want[addr] = int32(i)
			}
			args := append([]string{"--bootstrap-server", c.Brokers[0].Client, "--close", "--output", "json",
				"--command-config", commandConfig(t, "PLAIN", "admin")}, tt.filter...)
			res := runCLI(t, args...)
			require.Equal(t, 0, res.code, res.stderr)
			var brokers []struct {
				BrokerId    int32
				Connections []kipConnection
			}
			require.NoError(t, json.Unmarshal([]byte(res.stdout), &brokers), res.stdout)
			closed := map[string]int32{}
			for _, b := range brokers {
				for _, conn := range b.Connections {
					closed[net.JoinHostPort(conn.ClientAddress, strconv.Itoa(int(conn.ClientPort)))] = b.BrokerId
				}
			}
			assert.Equal(t, want, closed, "only the other client's connections are closed:\n%s", res.stdout)
		})
	}
}
