package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// Against the example broker, with alice limited to one connection
// (kafkanet.max.connections.per.principal.overrides) and a maximum age of
// 1.5 s (kafkanet.connections.max.age.ms), --include-closed shows her
// second connection closed as principal-limit and her first as max-age, in
// the table and in JSON (as the listing gives them), and --principal
// selects them as it selects the others.
func TestNewCloseReasonsShown(t *testing.T) {
	b := exampleproc.StartBroker(t, 1,
		"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name=REPLICATION",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
		"listener.name.client.plain.sasl.jaas.config="+config.PlainLoginModule+
			` required user_admin="admin-secret" user_alice="alice-secret";`,
		"super.users=User:admin",
		"kafkanet.max.connections.per.principal.overrides=User:alice:1",
		"kafkanet.connections.max.age.ms=1500")
	addr := b.Addr(0, "CLIENT")

	socketservertest.ConnectKgo(t, addr, sasl("PLAIN", "alice"))
	second, err := kgo.NewClient(kgo.SeedBrokers(addr), sasl("SCRAM-SHA-256", "alice"), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer second.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, second)
	require.Error(t, err, "alice's second connection was served over her limit")
	second.Close()

	want := map[string]string{"principal-limit": "SCRAM-SHA-256", "max-age": "PLAIN"}
	var last cliResult
	require.Eventually(t, func() bool {
		last = runCLI(t, "--bootstrap-server", addr, "--list", "--include-closed", "--principal", "User:alice",
			"--command-config", commandConfig(t, "PLAIN", "admin"))
		if last.code != 0 {
			return false
		}
		_, rows := table(t, last.stdout)
		seen := map[string]bool{}
		for _, r := range rows {
			assert.Equal(t, "User:alice", r["PRINCIPAL"])
			seen[r["CLOSE-REASON"]] = true
		}
		return seen["principal-limit"] && seen["max-age"]
	}, 20*time.Second, 200*time.Millisecond, "the listing:\n%s\n%s", last.stdout, last.stderr)

	res := runCLI(t, "--bootstrap-server", addr, "--list", "--include-closed", "--principal", "User:alice", "--output", "json",
		"--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	var brokers []struct{ Connections []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &brokers))
	require.Len(t, brokers, 1)
	seen := map[string]string{}
	for _, c := range brokers[0].Connections {
		if r, ok := c["CloseReason"].(string); ok {
			seen[r], _ = c["SaslMechanism"].(string)
		}
	}
	for reason, mech := range want {
		assert.Contains(t, seen, reason, res.stdout)
		if m, ok := seen[reason]; ok && reason == "principal-limit" {
			assert.Equal(t, mech, m, "the connection over the limit is the second one")
		}
	}
}
