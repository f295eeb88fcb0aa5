package auditlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/socketserver"
)

// Each kind of event becomes the OCSF class, activity and status that fit
// it, with type_uid = class_uid*100 + activity_id and the time in
// milliseconds, as one JSON line.
func TestRecords(t *testing.T) {
	at := time.UnixMilli(1700000000123)
	client := netip.MustParseAddrPort("10.0.0.7:50123")
	proxy := netip.MustParseAddrPort("10.0.0.1:41000")
	for _, tc := range []struct {
		e                         socketserver.AuditEvent
		class, activity, status   int
		user, protocol, operation string
		unmapped                  map[string]any
	}{
		{e: socketserver.AuditEvent{Kind: socketserver.AuditAuthenticated, Principal: "User:alice", Mechanism: "SCRAM-SHA-256"},
			class: 3002, activity: 1, status: 1, user: "alice", protocol: "SASL/SCRAM-SHA-256"},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditAuthenticationFailed, User: "mallory", Mechanism: "PLAIN", Reason: "Authentication failed: Invalid username or password"},
			class: 3002, activity: 1, status: 2, user: "mallory", protocol: "SASL/PLAIN"},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditReauthenticated, Principal: "User:alice", Mechanism: "OAUTHBEARER"},
			class: 3002, activity: 99, status: 1, user: "alice", protocol: "SASL/OAUTHBEARER"},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditReauthenticationFailed, Principal: "User:bob", User: "bob", Mechanism: "PLAIN", Reason: "x"},
			class: 3002, activity: 99, status: 2, user: "bob", protocol: "SASL/PLAIN"},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditAuthenticated, Principal: "User:CN=Alice,O=Acme", TLSSubject: "CN=Alice,O=Acme"},
			class: 3002, activity: 1, status: 1, user: "CN=Alice,O=Acme", protocol: "TLS", unmapped: map[string]any{"tls_subject": "CN=Alice,O=Acme"}},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditConnectionRefused, Reason: "too many", Throttle: 1500 * time.Millisecond},
			class: 4001, activity: 5, status: 2, unmapped: map[string]any{"held_ms": 1500.0}},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditThrottled, Principal: "User:alice", Throttle: 250 * time.Millisecond},
			class: 4001, activity: 99, unmapped: map[string]any{"throttle_ms": 250.0}},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditConnectionsClosed, Principal: "User:admin", Filter: "principal=User:bob", Count: 3},
			class: 6003, activity: 4, status: 1, operation: "CloseClientConnections", unmapped: map[string]any{"filter": "principal=User:bob", "closed": 3.0}},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditEventsDropped, Count: 7},
			class: 6002, activity: 99, unmapped: map[string]any{"dropped": 7.0}},
		{e: socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Principal: "User:admin", Action: "alter-client-quotas", Detail: "user=alice producer_byte_rate=1024"},
			class: 6003, activity: 99, status: 1, operation: "alter-client-quotas", unmapped: map[string]any{"detail": "user=alice producer_byte_rate=1024"}},
	} {
		t.Run(tc.e.Kind.String(), func(t *testing.T) {
			e := tc.e
			e.Time, e.ClientAddr, e.ProxyAddr, e.Listener, e.ConnID = at, client, proxy, "CLIENT", "conn-1"
			var out bytes.Buffer
			New(&out, "test", slog.New(slog.DiscardHandler)).Hook(3).OnAudit(e)
			require.True(t, strings.HasSuffix(out.String(), "}\n"))
			require.Equal(t, 1, strings.Count(out.String(), "\n"), "one line")
			var m map[string]any
			require.NoError(t, json.Unmarshal(out.Bytes(), &m))
			assert.EqualValues(t, tc.class, m["class_uid"])
			assert.EqualValues(t, tc.class/1000, m["category_uid"])
			assert.EqualValues(t, tc.activity, m["activity_id"])
			assert.EqualValues(t, tc.class*100+tc.activity, m["type_uid"])
			assert.EqualValues(t, 1700000000123, m["time"])
			if tc.status != 0 {
				assert.EqualValues(t, tc.status, m["status_id"])
			} else {
				assert.NotContains(t, m, "status_id")
			}
			if e.Reason != "" {
				assert.Equal(t, e.Reason, m["status_detail"])
			}
			meta := m["metadata"].(map[string]any)
			assert.Equal(t, SchemaVersion, meta["version"])
			assert.Equal(t, map[string]any{"name": "test", "vendor_name": "kafkanet", "uid": "3"}, meta["product"])
			assert.Equal(t, map[string]any{"ip": "10.0.0.7", "port": 50123.0}, m["src_endpoint"])
			assert.Equal(t, map[string]any{"svc_name": "CLIENT"}, m["dst_endpoint"])
			assert.Equal(t, map[string]any{"uid": "conn-1"}, m["session"])
			if tc.user != "" {
				assert.Equal(t, tc.user, m["user"].(map[string]any)["name"])
			}
			if tc.protocol != "" {
				assert.Equal(t, tc.protocol, m["auth_protocol"])
			}
			if tc.operation != "" {
				assert.Equal(t, tc.operation, m["api"].(map[string]any)["operation"])
				assert.Equal(t, strings.TrimPrefix(e.Principal, "User:"), m["actor"].(map[string]any)["user"].(map[string]any)["name"])
			}
			unmapped := m["unmapped"].(map[string]any)
			assert.Equal(t, e.Kind.String(), unmapped["kafkanet_event"])
			assert.Equal(t, proxy.String(), unmapped["proxy_address"])
			for k, v := range tc.unmapped {
				assert.Equal(t, v, unmapped[k], k)
			}
		})
	}
}

type failing struct{ n int }

func (f *failing) Write([]byte) (int, error) { f.n++; return 0, errors.New("disk full") }

// A failed write is logged once, however many follow.
func TestWriteFailureLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	f := &failing{}
	h := New(f, "test", slog.New(slog.NewTextHandler(&logs, nil))).Hook(0)
	for range 3 {
		h.OnAudit(socketserver.AuditEvent{Kind: socketserver.AuditThrottled})
	}
	assert.Equal(t, 3, f.n)
	assert.Equal(t, 1, strings.Count(logs.String(), "disk full"))
}
