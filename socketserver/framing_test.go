package socketserver_test

import (
	"encoding/binary"
	"math"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// A frame is accepted up to socket.request.max.bytes inclusive (Kafka
// rejects only size > limit) and a larger one closes the connection without
// a response.
func TestFrameSizeLimit(t *testing.T) {
	req := requestFrame(metadataReq(1), 41, strp("c"))
	size := len(req) - 4
	for _, tc := range []struct {
		name   string
		limit  int
		accept bool
	}{
		{"size below limit", size + 1, true},
		{"size equal to limit", size, true},
		{"size one above limit", size - 1, false},
		{"size far above limit", 8, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, config.Properties{"socket.request.max.bytes": strconv.Itoa(tc.limit)}, withAPIs, echoMetadata)
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			write(t, c, req)
			if !tc.accept {
				requireClosedNoResponse(t, c)
				return
			}
			resp := kmsg.NewPtrMetadataResponse()
			resp.Version = 1
			readResponse(t, c, resp, 41)
		})
	}
}

// A negative size prefix closes the connection without a response, however
// many bytes follow.
func TestNegativeFrameSize(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	for _, size := range []int32{-1, -2, math.MinInt32} {
		t.Run(strconv.Itoa(int(size)), func(t *testing.T) {
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			b := binary.BigEndian.AppendUint32(nil, uint32(size))
			write(t, c, append(b, requestFrame(metadataReq(1), 1, nil)...))
			requireClosedNoResponse(t, c)
		})
	}
	// The server still serves others.
	metadataRoundTrip(t, socketservertest.Dial(t, srv, "PLAINTEXT"), 1, 9)
}

// A client that sends part of a frame and goes away leaves nothing behind.
func TestTruncatedFrameThenClientClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"half a size prefix", []byte{0, 0}},
		{"size and part of the header", []byte{0, 0, 0, 100, 0, 3, 0}},
		{"header complete, body missing", requestFrame(metadataReq(1), 1, strp("client"))[:20]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			write(t, c, tc.data)
			requireConnCount(t, srv, "PLAINTEXT", 1)
			require.NoError(t, c.Close())
			requireConnCount(t, srv, "PLAINTEXT", 0)
		})
	}
}

// requireConnCount waits for the listener's connection count to reach n.
func requireConnCount(t testing.TB, srv *socketserver.Server, l string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return srv.Stats().ConnectionCount[protocolmap.ListenerName(l)] == n
	}, 10*time.Second, 5*time.Millisecond, "connection count of %s never reached %d", l, n)
}

// A peer announcing a frame of 100 MB (the default limit) and sending 10
// bytes must not make the server allocate 100 MB: buffers grow with the
// bytes that arrive. Several connections do it at once so that a server
// allocating the announced size would need hundreds of megabytes.
func TestLargeAnnouncedFrameAllocatesLittle(t *testing.T) {
	const conns = 4
	const budget = 8 << 20
	srv := socketservertest.NewServer(t, nil, withAPIs, echoMetadata)
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = socketservertest.Dial(t, srv, "PLAINTEXT")
		// A round trip first, so that the connection's goroutine is running
		// and waiting on the socket when the big frame starts.
		metadataRoundTrip(t, cs[i], 1, int32(i))
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := binary.BigEndian.AppendUint32(nil, socketserver.DefaultRequestMaxBytes)
	start = append(start, 0, 3, 0, 1, 0, 0, 0, 7, 0, 0) // 10 bytes of a Metadata v1 header
	for _, c := range cs {
		write(t, c, start)
	}
	// No event says the server has read the 14 bytes, so watch the
	// allocation total for a while: a server that allocates the announced
	// size does so as soon as it reads the prefix.
	delta := func() uint64 {
		var now runtime.MemStats
		runtime.ReadMemStats(&now)
		return now.TotalAlloc - before.TotalAlloc
	}
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		require.Less(t, delta(), uint64(budget), "the server allocated for the announced size")
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("allocated %d bytes while %d connections each announced %d", delta(), conns, socketserver.DefaultRequestMaxBytes)
	// The server is still waiting for the rest of every frame.
	require.Equal(t, conns, srv.Stats().ConnectionCount["PLAINTEXT"])
	for _, c := range cs {
		requireOpen(t, c, 20*time.Millisecond)
	}
}
