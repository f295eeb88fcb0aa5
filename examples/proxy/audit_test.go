package main

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/examples/internal/auditlog"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// auditRecords parses the audit log's JSON lines.
func auditRecords(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "not a JSON line: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

// auditEvent is a record's kafkanet event token.
func auditEvent(m map[string]any) string {
	u, _ := m["unmapped"].(map[string]any)
	s, _ := u["kafkanet_event"].(string)
	return s
}

// str reads a string at a path of nested objects of m ("" if absent).
func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = o[k]
	}
	s, _ := v.(string)
	return s
}

// auditBuffer is an audit trail written to memory.
func auditBuffer() (*auditlog.Writer, *testkit.SyncBuffer) {
	var buf testkit.SyncBuffer
	return auditlog.New(&buf, auditProduct, slog.New(slog.DiscardHandler)), &buf
}

// The command's -audit-log FILE records, over real TCP, the failed logins
// on the proxy's SASL listener with the user name tried, the mechanism,
// the listener and the client's address, and a successful one with its
// principal, as OCSF Authentication records; no password is written.
func TestCommandAuditLog(t *testing.T) {
	up := startUpstream(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-upstream", up.Addr(0, "INTERNAL"), "-audit-log", path,
			"-set", "listeners=SASL://127.0.0.1:0", "-set", "listener.security.protocol.map=SASL:SASL_PLAINTEXT",
			"-set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
			"-set", "listener.name.sasl.plain.sasl.jaas.config=" + proxyJAAS,
			"-set", "connection.failed.authentication.delay.ms=0"}, &stderr)
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, stderr.String())
		case <-time.After(20 * time.Second):
			t.Fatal("the command did not stop")
		}
	}
	defer stop()
	listening := regexp.MustCompile(`msg=listening listener=SASL addr=(\S+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond, "the command logs no listener:\n%s", stderr.String())
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	const wrong = "Wr0ng-pa55word-d41c"
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		cl := newClient(t, addr, socketservertest.KgoSASL(mech, "alice", wrong), kgo.RequestRetries(0))
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 10*time.Second), cl)
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, mech)
		cl.Close()
	}
	bob := newClient(t, addr, socketservertest.KgoSASL("SCRAM-SHA-256", "bob", "bob-secret"))
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 10*time.Second), bob)
	require.NoError(t, err)
	bob.Close()
	stop() // the shutdown writes every event before the file is closed

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(raw)
	for _, secret := range []string{wrong, "bob-secret", "alice-secret"} {
		assert.NotContains(t, text, secret, "a password in the audit log")
	}
	failed := map[string]map[string]any{}
	var ok []map[string]any
	for _, r := range auditRecords(t, text) {
		switch auditEvent(r) {
		case "authentication-failed":
			failed[str(r, "auth_protocol")] = r
		case "authenticated":
			ok = append(ok, r)
		}
	}
	for _, proto := range []string{"SASL/PLAIN", "SASL/SCRAM-SHA-256"} {
		r := failed[proto]
		require.NotNil(t, r, "no failed %s login recorded:\n%s", proto, text)
		assert.EqualValues(t, 3002, r["class_uid"])
		assert.EqualValues(t, 2, r["status_id"])
		assert.Equal(t, "alice", str(r, "user", "name"), "the user name tried")
		assert.Equal(t, "SASL", str(r, "dst_endpoint", "svc_name"))
		assert.Equal(t, "127.0.0.1", str(r, "src_endpoint", "ip"))
		assert.NotZero(t, r["src_endpoint"].(map[string]any)["port"])
		assert.Equal(t, auditProduct, str(r, "metadata", "product", "name"))
	}
	require.NotEmpty(t, ok, "no successful login recorded:\n%s", text)
	for _, r := range ok {
		assert.Equal(t, "bob", str(r, "user", "name"))
		assert.Equal(t, "User:bob", str(r, "unmapped", "principal"))
		assert.Equal(t, "SASL/SCRAM-SHA-256", str(r, "auth_protocol"))
		assert.EqualValues(t, 1, r["status_id"])
	}
}

// -audit-log names a file the command can write, or it does not start.
func TestCommandAuditLogUnwritable(t *testing.T) {
	fake := startFakeUpstream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, out := runProxy(ctx, "-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0",
		"-audit-log", filepath.Join(t.TempDir(), "missing", "audit.jsonl"))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "-audit-log")
	assert.NotContains(t, out, "msg=listening")
}

// When an upstream broker goes away, the proxy records in its audit trail
// that it closes the client connections routed to it, with the broker and
// how many.
func TestAuditUpstreamBrokerGone(t *testing.T) {
	up := startUpstream(t, 2)
	broker1 := newRelay(t, up.Addr(1, "INTERNAL"))
	audit, trail := auditBuffer()
	p := startProxy(t, up.Addr(0, "INTERNAL"), &proxyOptions{audit: audit, dial: dialVia(map[string]string{up.Addr(1, "INTERNAL"): broker1.addr})},
		plaintextProxy...)
	idle := dialRaw(t, p.nodeAddr(t, "PLAIN", 1))
	idle.roundTrip(t, metadataRequest(1))

	broker1.stop()
	idle.requireClosed(t, 10*time.Second)
	var closes []map[string]any
	require.Eventually(t, func() bool {
		closes = nil
		for _, r := range auditRecords(t, trail.String()) {
			if str(r, "api", "operation") == auditCloseUpstreamDown {
				closes = append(closes, r)
			}
		}
		return len(closes) > 0
	}, 10*time.Second, 10*time.Millisecond, "the audit trail:\n%s", trail.String())
	require.Len(t, closes, 1)
	detail := str(closes[0], "unmapped", "detail")
	assert.Contains(t, detail, "node=1 ")
	assert.Contains(t, detail, "addr="+up.Addr(1, "INTERNAL"))
	assert.Contains(t, detail, "connections=1")
	assert.Contains(t, detail, "reason=upstream-broker-unavailable")
	assert.EqualValues(t, 1, closes[0]["status_id"])
}
