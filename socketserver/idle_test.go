package socketserver_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// connections.max.idle.ms expires a connection even while the host holds
// its request, as Kafka's Selector does (SocketServerTest.testIdleConnection:
// "Connection with one request being processed (channel is muted)", with
// and without more requests pipelined behind it): Kafka's idle clock counts
// I/O, and a muted connection does none while its request is handled. A
// handler that never answers therefore does not pin the connection: it
// closes at the limit, its request's context is cancelled, its quota slot
// and registry entry return, no goroutine is left, and answering the request
// afterwards is harmless.
func TestIdleExpiryWithRequestInFlight(t *testing.T) {
	const idle = 300 * time.Millisecond
	for _, tc := range []struct {
		name      string
		pipelined int
	}{
		{"one request held", 1},
		{"one request held, more pipelined", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := socketservertest.TakeGoroutineBaseline()
			srv := newUnstarted(t, listener.Properties{
				"connections.max.idle.ms": strconv.Itoa(int(idle / time.Millisecond)),
				"max.connections.per.ip":  "1",
			})
			require.NoError(t, srv.Start(t.Context()))
			c := dialTCP(t, srv.Addr("PLAINTEXT").String())
			var b []byte
			for corr := range int32(tc.pipelined) {
				b = append(b, formatter.AppendRequest(nil, metadataReq(1), corr)...)
			}
			write(t, c, b)
			r := recvFrom(t, srv) // and never answered
			sent := time.Now()
			requireNotDone(t, r.Context())

			requireClosedNoResponse(t, c)
			took := time.Since(sent)
			assert.GreaterOrEqual(t, took, idle-50*time.Millisecond, "closed before connections.max.idle.ms")
			assert.Less(t, took, idle+time.Second, "not closed at connections.max.idle.ms")
			requireDone(t, r.Context())
			requireConnCount(t, srv, "PLAINTEXT", 0)
			requireQuotasReleased(t, srv)
			assert.Empty(t, srv.Registry().Snapshot(connregistry.Filter{}), "the registry still lists the connection")
			closed := srv.Registry().Closed(connregistry.Filter{})
			require.Len(t, closed, 1)
			assert.Equal(t, connregistry.Idle, closed[0].CloseReason)
			assert.Equal(t, r.Conn.ID, closed[0].ID)

			// The quota slot is free: max.connections.per.ip is 1.
			other := dialTCP(t, srv.Addr("PLAINTEXT").String())
			send(t, other, metadataReq(1), 9)
			r2 := recvFrom(t, srv)
			assert.NoError(t, respondEmpty(r2))
			readRawFrame(t, other)

			assert.NoError(t, respondEmpty(r), "answering the expired connection's request")
			assert.ErrorIs(t, respondEmpty(r), socketserver.ErrAlreadyAnswered)
			select {
			case r := <-srv.Requests(listener.DataPlane):
				t.Fatalf("a pipelined request of the expired connection reached the host: correlation id %d", r.CorrelationID)
			case <-time.After(50 * time.Millisecond):
			}
			require.NoError(t, other.Close())
			require.NoError(t, srv.Close())
			base.RequireReturned(t)
		})
	}
}
