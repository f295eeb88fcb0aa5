package main

import (
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
