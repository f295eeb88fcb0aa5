package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// -audit-log records a failed login with the user name tried, the
// mechanism and the client's address, a successful one with the
// principal, an AlterClientQuotas change with who made it, and an
// operator's CloseClientConnections with who asked and the filter, as OCSF
// JSON lines in a file of mode 0600; no password appears in it.
func TestAuditLog(t *testing.T) {
	const wrong = "not-alice-secret-9d1e"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "server.properties")
	require.NoError(t, os.WriteFile(cfg, []byte(saslFile(`user_alice="alice-secret" user_bob="bob-secret"`)), 0o600))
	path := filepath.Join(dir, "audit.jsonl")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-config", cfg, "-audit-log", path}, &stdout, &stderr) }()
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "msg=started") }, 10*time.Second, 10*time.Millisecond, "stderr: %s", &stderr)
	m := regexp.MustCompile(`msg="listener started" broker=0 listener=CLIENT bind=(\S+)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "stderr: %s", &stderr)
	bootstrap := m[1]

	dialer := &testkit.RecordingDialer{} // the failed client's sockets, to find in the log
	err := login(t, bootstrap, 10*time.Second, kgo.SASL(saslMechanism("PLAIN", "alice", wrong)), kgo.Dialer(dialer.Dial))
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.SASL(saslMechanism("SCRAM-SHA-256", "alice", "alice-secret")))
	require.NoError(t, err)
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	entity := kadm.ClientQuotaEntity{{Type: "user", Name: kmsg.StringPtr("bob")}}
	altered, err := kadm.NewClient(cl).AlterClientQuotas(rctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}}})
	require.NoError(t, err)
	require.NoError(t, altered[0].Err)
	cl.Close()

	// An operator (alice: without super.users everyone may) closes bob's
	// connection with CloseClientConnections.
	bob, _ := socketservertest.ConnectKgo(t, bootstrap, socketservertest.KgoSASL("PLAIN", "bob", "bob-secret"))
	defer bob.Close()
	op, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.SASL(saslMechanism("PLAIN", "alice", "alice-secret")),
		connadmin.VersionsOpt(connregistry.DefaultListAPIKey, connregistry.DefaultCloseAPIKey))
	require.NoError(t, err)
	closed, err := connadmin.New(op, 0, 0).CloseConnections(rctx, connregistry.Filter{Principal: kmsg.StringPtr("User:bob")})
	op.Close()
	require.NoError(t, err)
	require.Len(t, closed, 1)
	require.NoError(t, closed[0].Err)
	require.Len(t, closed[0].Connections, 1, "bob's connection closed")
	assert.Equal(t, "User:bob", closed[0].Connections[0].Principal)

	cancel() // the broker shuts down: its audit queue is written before run returns
	select {
	case code := <-done:
		require.Equal(t, 0, code, "stderr: %s", &stderr)
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return")
	}

	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, secret := range []string{wrong, "alice-secret", "bob-secret"} {
		assert.NotContains(t, string(raw), secret)
	}
	var failed, ok, quota, operator []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var r map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %q", sc.Text())
		switch {
		case r["class_uid"] == 3002.0 && r["status_id"] == 2.0:
			failed = append(failed, r)
		case r["class_uid"] == 3002.0 && r["status_id"] == 1.0:
			ok = append(ok, r)
		case r["class_uid"] == 6003.0 && r["api"].(map[string]any)["operation"] == "CloseClientConnections":
			operator = append(operator, r)
		case r["class_uid"] == 6003.0:
			quota = append(quota, r)
		}
	}
	require.NotEmpty(t, failed, "log: %s", raw)
	var from []string // each failed login's client address, as the client's sockets name theirs
	for _, f := range failed {
		src := f["src_endpoint"].(map[string]any)
		from = append(from, net.JoinHostPort(src["ip"].(string), strconv.Itoa(int(src["port"].(float64)))))
	}
	assert.ElementsMatch(t, dialer.Addrs(), from, "a failed login for each socket the client opened, with its address")
	f := failed[0]
	assert.Equal(t, "alice", f["user"].(map[string]any)["name"], "the user name tried")
	assert.Equal(t, "SASL/PLAIN", f["auth_protocol"])
	assert.Equal(t, "CLIENT", f["dst_endpoint"].(map[string]any)["svc_name"])
	assert.Contains(t, f["status_detail"], "Invalid username or password")
	assert.Equal(t, "authentication-failed", f["unmapped"].(map[string]any)["kafkanet_event"])

	require.NotEmpty(t, ok, "log: %s", raw)
	assert.Equal(t, "alice", ok[0]["user"].(map[string]any)["name"])
	assert.Equal(t, "SASL/SCRAM-SHA-256", ok[0]["auth_protocol"])
	assert.Equal(t, "User:alice", ok[0]["unmapped"].(map[string]any)["principal"])

	require.Len(t, quota, 1, "log: %s", raw)
	assert.Equal(t, "alter-client-quotas", quota[0]["api"].(map[string]any)["operation"])
	assert.Equal(t, "alice", quota[0]["actor"].(map[string]any)["user"].(map[string]any)["name"])
	assert.Equal(t, "user=bob producer_byte_rate=1024", quota[0]["unmapped"].(map[string]any)["detail"])
	assert.EqualValues(t, 1, quota[0]["status_id"])

	require.Len(t, operator, 1, "log: %s", raw)
	assert.Equal(t, "alice", operator[0]["actor"].(map[string]any)["user"].(map[string]any)["name"], "who asked")
	assert.Contains(t, operator[0]["unmapped"].(map[string]any)["filter"], "principal=User:bob", "with which filter")
	assert.EqualValues(t, 1, operator[0]["unmapped"].(map[string]any)["closed"])
	assert.EqualValues(t, 1, operator[0]["status_id"])
}

// -audit-log - writes the audit trail to standard error.
func TestAuditLogStderr(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "server.properties")
	require.NoError(t, os.WriteFile(cfg, []byte(saslFile(`user_alice="alice-secret"`)), 0o600))
	stderr, _ := serveBroker(t, "-config", cfg, "-audit-log", "-")
	m := regexp.MustCompile(`msg="listener started" broker=0 listener=CLIENT bind=(\S+)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "stderr: %s", stderr)
	require.ErrorIs(t, login(t, m[1], 10*time.Second, kgo.SASL(saslMechanism("PLAIN", "mallory", "x-secret-x"))), kerr.SaslAuthenticationFailed)
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), `"class_uid":3002`) }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, stderr.String(), `"user":{"name":"mallory"}`)
	assert.NotContains(t, stderr.String(), "x-secret-x")
}

func TestAuditLogUnwritable(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-audit-log", t.TempDir()}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "-audit-log")
}
