package socketserver_test

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
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
			base := testkit.TakeGoroutineBaseline()
			srv := newUnstarted(t, config.Properties{
				"listeners":               "PLAINTEXT://127.0.0.1:0",
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
			assert.Equal(t, connregistry.CloseIdle, closed[0].CloseReason)
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
			case r := <-socketserver.Requests(srv, protocolmap.DataPlane):
				t.Fatalf("a pipelined request of the expired connection reached the host: correlation id %d", r.CorrelationID)
			case <-time.After(50 * time.Millisecond):
			}
			require.NoError(t, other.Close())
			require.NoError(t, srv.Close())
			base.RequireReturned(t)
		})
	}
}

// Writing a response is activity, as Kafka's Selector counts a connection
// whose response is being written: a response the host gives late in the
// idle limit, to a client that reads it slowly, arrives whole although its
// write goes on past the limit counted from the request.
func TestIdleExpiryCountsTheResponseWrite(t *testing.T) {
	const idle = time.Second
	srv := newUnstarted(t, config.Properties{
		"listeners":                "PLAINTEXT://127.0.0.1:0",
		"connections.max.idle.ms":  strconv.Itoa(int(idle / time.Millisecond)),
		"socket.send.buffer.bytes": "16384",
	})
	require.NoError(t, srv.Start(t.Context()))
	c := dialTCP(t, srv.Addr("PLAINTEXT").String())
	require.NoError(t, c.SetReadBuffer(16<<10))
	send(t, c, metadataReq(1), 1)
	r := recvFrom(t, srv)
	received := time.Now()
	time.Sleep(idle * 3 / 4)
	resp := kmsg.NewPtrMetadataResponse()
	for range 5000 { // about 620 kB: more than the slow reads below can take (27 x 8 kB) plus what the socket buffers hold
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr("a-topic-name-long-enough-to-weigh-something")
		mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 4)
		resp.Topics = append(resp.Topics, mt)
	}
	require.NoError(t, r.Respond(resp))
	// Read it slowly, 8 kB every 15 ms, until past the limit counted from
	// the request, the server's write still blocked (it cannot end before
	// all but what the socket buffers hold has been read); then read the
	// rest at once, well within the limit counted from the answer.
	const buffered = 96 << 10 // more than the kernel's buffers of both ends hold here (16 kB asked each, doubled)
	slowUntil := received.Add(idle + 150*time.Millisecond)
	var got []byte
	readSlowly := -1 // bytes read while slow
	buf := make([]byte, 8<<10)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil || len(got) >= 4 && len(got)-4 >= int(binary.BigEndian.Uint32(got)) {
			break
		}
		if time.Now().Before(slowUntil) {
			time.Sleep(15 * time.Millisecond)
		} else if readSlowly < 0 {
			readSlowly = len(got)
		}
	}
	require.GreaterOrEqual(t, len(got), 4)
	require.Equal(t, int(binary.BigEndian.Uint32(got)), len(got)-4, "the response was cut short %v after the request", time.Since(received))
	require.GreaterOrEqual(t, readSlowly, 0)
	assert.Less(t, readSlowly, len(got)-buffered,
		"the write may have ended within the idle limit counted from the request: the test shows nothing")
}
