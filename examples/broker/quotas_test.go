package main

import (
	"context"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/internal/testkit"
)

// Every quota key of -config is applied, and a reload (SIGHUP) applies the
// changed ones: raising max.connections lets the waiting connection in.
func TestReloadAppliesQuotas(t *testing.T) {
	var log testkit.SyncBuffer
	path := writeProperties(t, saslFile(`user_alice="alice-secret"`,
		"listener.name.replication.max.connections=1", "max.connections.per.ip.overrides=127.0.0.9:0", "max.connections.per.ip=100"))
	c, load := startFromFile(t, path, 1, &log)
	replication := addr(t, c, 0, "REPLICATION")

	first := dialRaw(t, replication)
	roundTrip[*kmsg.ApiVersionsResponse](first, kmsg.NewPtrApiVersionsRequest())

	// The second REPLICATION connection waits in the acceptor.
	second, err := net.DialTimeout("tcp", replication, 5*time.Second)
	require.NoError(t, err)
	defer second.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	_, err = second.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1))
	require.NoError(t, err)
	require.NoError(t, second.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	_, err = second.Read(make([]byte, 1))
	require.Error(t, err, "served beyond listener.name.replication.max.connections")

	// The override for 127.0.0.9 allows it no connection at all.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}}
	banned, err := d.Dial("tcp", addr(t, c, 0, "CLIENT"))
	require.NoError(t, err)
	defer banned.Close()
	require.NoError(t, banned.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := banned.Read(make([]byte, 1))
	assert.Zero(t, n)
	assert.Error(t, err, "max.connections.per.ip.overrides not applied")

	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-secret"`,
		"listener.name.replication.max.connections=5")), 0o600))
	require.NoError(t, c.reload(context.Background(), load))
	assert.Contains(t, log.String(), "reload: connection quotas applied")
	require.NoError(t, second.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = second.Read(make([]byte, 4))
	require.NoError(t, err, "raising the limit must let the waiting connection in")

	// An invalid quota leaves everything as it was.
	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-secret"`, "max.connections.per.ip=0")), 0o600))
	require.Error(t, c.reload(context.Background(), load))
	assert.Contains(t, log.String(), "max.connections.per.ip")
}

// The per-address connection creation rates (Kafka's connection_creation_rate
// quota of the ips entity, ConnectionQuotas.updateIpConnectionRateQuota)
// come from kafkanet.ip.connection.creation.rate and
// kafkanet.ip.connection.creation.rate.overrides, and a reload (SIGHUP)
// applies a change to the next connection.
func TestReloadAppliesIPConnectionCreationRates(t *testing.T) {
	var log testkit.SyncBuffer
	path := writeProperties(t, saslFile(`user_alice="alice-secret"`,
		"kafkanet.ip.connection.creation.rate.overrides=127.0.0.11:0, 127.0.0.12:2147483647",
		"kafkanet.ip.connection.creation.rate=1000"))
	c, load := startFromFile(t, path, 1, &log)
	replication := addr(t, c, 0, "REPLICATION")
	dialFrom := func(source string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", replication)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		return conn
	}
	servedFrom := func(source string) bool {
		t.Helper()
		conn := dialFrom(source)
		_, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		require.NoError(t, err)
		n, _ := conn.Read(make([]byte, 4))
		return n > 0
	}

	// A rate of 0 admits nothing from 127.0.0.11: held for a window, then closed.
	start := time.Now()
	assert.False(t, servedFrom("127.0.0.11"), "the override of 0 was not applied")
	assert.Greater(t, time.Since(start), 500*time.Millisecond, "closed without the throttle delay")
	assert.True(t, servedFrom("127.0.0.12"))

	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-secret"`,
		"kafkanet.ip.connection.creation.rate.overrides=127.0.0.12:0", "kafkanet.ip.connection.creation.rate=1000")), 0o600))
	require.NoError(t, c.reload(context.Background(), load))
	assert.Contains(t, log.String(), "ip_connection_creation_rate=1000 ip_connection_creation_rate_overrides=1")
	assert.True(t, servedFrom("127.0.0.11"), "the removed override still applies")
	assert.False(t, servedFrom("127.0.0.12"), "the new override does not apply")

	// An invalid override leaves the rates as they were.
	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-secret"`,
		"kafkanet.ip.connection.creation.rate.overrides=broker.example.com:5")), 0o600))
	require.Error(t, c.reload(context.Background(), load))
	assert.Contains(t, log.String(), "kafkanet.ip.connection.creation.rate.overrides")
	assert.False(t, servedFrom("127.0.0.12"), "a failed reload changed the rates")
}
