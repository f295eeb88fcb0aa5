package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/listener"
)

// The proxy limits connections per principal from its configuration, and a
// reload (SIGHUP) applies a changed limit to new connections: here
// User:ANONYMOUS, limited only by an override, on its PLAINTEXT listener.
func TestProxyReloadsPrincipalLimits(t *testing.T) {
	up := startUpstream(t, 1)
	sets := []string{"listeners=PLAIN://127.0.0.1:0", "listener.security.protocol.map=PLAIN:PLAINTEXT",
		"kafkanet.max.connections.per.principal.overrides=User:ANONYMOUS:1"}
	tp := startProxy(t, up.Addr(0, "INTERNAL"), nil, sets...)
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
	require.NoError(t, tp.reload(func() (*listener.Set, error) { return resolve("", sets, up.Addr(0, "INTERNAL")) }))
	assert.True(t, served(dialRaw(t, seed)), "the raised limit was not applied")
	assert.False(t, served(dialRaw(t, seed)), "a third anonymous connection over the override of 2")
	assert.True(t, served(first), "the reload closed an open connection")

	sets[2] = "kafkanet.max.connections.per.principal.overrides=User:ANONYMOUS:x"
	require.Error(t, tp.reload(func() (*listener.Set, error) { return resolve("", sets, up.Addr(0, "INTERNAL")) }))
}
