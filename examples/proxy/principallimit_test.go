package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The proxy limits connections per principal from its configuration, and a
// reload (SIGHUP) applies a changed limit to new connections: here
// User:ANONYMOUS, limited only by an override, on its PLAINTEXT listener.
// The audit trail records each refusal and each reload, applied or refused.
func TestProxyReloadsPrincipalLimits(t *testing.T) {
	up := startUpstream(t, 1)
	sets := []string{"listeners=PLAIN://127.0.0.1:0", "listener.security.protocol.map=PLAIN:PLAINTEXT",
		"kafkanet.max.connections.per.principal.overrides=User:ANONYMOUS:1"}
	audit, trail := auditBuffer()
	tp := startProxy(t, up.Addr(0, "INTERNAL"), &proxyOptions{audit: audit}, sets...)
	seed := tp.addr(t, "PLAIN")
	served := func(c *rawConn) bool {
		t.Helper()
		c.corr++
		if _, err := c.Write(formatter.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), c.corr)); err != nil {
			return false
		}
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err := readFrame(c, 1<<20)
		return err == nil
	}
	first := dialRaw(t, seed)
	require.True(t, served(first))
	assert.False(t, served(dialRaw(t, seed)), "a second anonymous connection over the override of 1")

	sets[2] = "kafkanet.max.connections.per.principal.overrides=User:ANONYMOUS:2"
	require.NoError(t, tp.reload(func() (*proxyConfig, error) { return resolve("", sets, up.Addr(0, "INTERNAL")) }))
	assert.True(t, served(dialRaw(t, seed)), "the raised limit was not applied")
	assert.False(t, served(dialRaw(t, seed)), "a third anonymous connection over the override of 2")
	assert.True(t, served(first), "the reload closed an open connection")

	sets[2] = "kafkanet.max.connections.per.principal.overrides=User:ANONYMOUS:x"
	require.Error(t, tp.reload(func() (*proxyConfig, error) { return resolve("", sets, up.Addr(0, "INTERNAL")) }))

	var refused, reloads []map[string]any
	require.Eventually(t, func() bool {
		refused, reloads = nil, nil
		for _, r := range auditRecords(t, trail.String()) {
			switch {
			case auditEvent(r) == "connection-refused":
				refused = append(refused, r)
			case str(r, "api", "operation") == auditReload:
				reloads = append(reloads, r)
			}
		}
		return len(refused) == 2 && len(reloads) == 2
	}, 5*time.Second, 10*time.Millisecond, "the audit trail:\n%s", trail.String())
	for _, r := range refused {
		assert.Equal(t, "User:ANONYMOUS", str(r, "unmapped", "principal"))
		assert.Equal(t, "PLAIN", str(r, "dst_endpoint", "svc_name"))
		assert.NotEmpty(t, str(r, "session", "uid"))
	}
	assert.EqualValues(t, 1, reloads[0]["status_id"], "the first reload was applied")
	assert.Contains(t, str(reloads[0], "unmapped", "detail"), "connection-quotas applied")
	assert.EqualValues(t, 2, reloads[1]["status_id"], "the second reload was refused")
	assert.Contains(t, str(reloads[1], "status_detail"), "kafkanet.max.connections.per.principal.overrides")
}
