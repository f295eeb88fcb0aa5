package socketserver_test

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// A full request queue (queued.max.requests) makes connections wait to
// queue their request; none is dropped.
func TestBackPressureQueueFullNothingDropped(t *testing.T) {
	const conns = 10
	release := newGate()
	defer release.open()
	held := make(chan int32, conns)
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		held <- r.CorrelationID
		release.wait()
		assert.NoError(t, respondEmpty(r))
	})
	srv := socketservertest.NewServer(t, config.Properties{"queued.max.requests": "2", "num.io.threads": "1"}, withAPIs, h)

	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = socketservertest.Dial(t, srv, "PLAINTEXT")
		send(t, cs[i], metadataReq(1), int32(i))
	}
	// One request is in the handler, two fill the queue, seven wait.
	require.Eventually(t, func() bool { return srv.Stats().RequestQueueSize[protocolmap.DataPlane] == 2 },
		10*time.Second, time.Millisecond, "the request queue never filled")
	<-held
	requireOpen(t, cs[0], 100*time.Millisecond) // (a pause long enough for a leak past the bound to show)
	st := srv.Stats()
	assert.Equal(t, 2, st.RequestQueueSize[protocolmap.DataPlane], "queue size beyond queued.max.requests")
	assert.Equal(t, conns, st.ConnectionCount["PLAINTEXT"])
	assert.Empty(t, held, "the single handler took a second request while blocked")

	release.open()
	for i, c := range cs {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 1
		readResponse(t, c, resp, int32(i))
	}
	assert.Len(t, held, conns-1)
	assert.Equal(t, 0, srv.Stats().RequestQueueSize[protocolmap.DataPlane])
}

// connections.max.idle.ms closes a connection with no complete request or
// response for that long, including one that trickles a frame that never
// completes (stricter than Kafka, whose idle clock runs on any byte). A
// request the host answers within the limit is unaffected (see
// TestIdleExpiryWithRequestInFlight for one it does not).
func TestIdleExpiry(t *testing.T) {
	const idle = 200 * time.Millisecond
	props := config.Properties{"connections.max.idle.ms": strconv.Itoa(int(idle / time.Millisecond))}

	t.Run("idle connection", func(t *testing.T) {
		srv := socketservertest.NewServer(t, props, withAPIs, echoMetadata)
		start := time.Now()
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		requireClosedNoResponse(t, c)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, idle-10*time.Millisecond)
		assert.Less(t, took, time.Second+idle)
	})

	t.Run("idle after a response", func(t *testing.T) {
		srv := socketservertest.NewServer(t, props, withAPIs, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		metadataRoundTrip(t, c, 1, 1)
		start := time.Now()
		requireClosedNoResponse(t, c)
		assert.GreaterOrEqual(t, time.Since(start), idle-50*time.Millisecond)
		assert.Less(t, time.Since(start), time.Second+idle)
	})

	t.Run("trickling a never-complete frame", func(t *testing.T) {
		srv := socketservertest.NewServer(t, props, withAPIs, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		stop := make(chan struct{})
		trickled := make(chan int)
		go func() {
			data := append([]byte{0, 0, 4, 0}, make([]byte, 1024)...) // a 1 KiB frame, one byte at a time
			// A byte every 20 ms: by the 200 ms limit about 10 have arrived,
			// far from the assertion's bound below even on a loaded machine.
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			n := 0
			defer func() { trickled <- n }()
			for ; n < len(data); n++ {
				if _, err := c.Write(data[n : n+1]); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		}()
		start := time.Now()
		requireClosedNoResponse(t, c)
		took := time.Since(start)
		close(stop)
		n := <-trickled
		assert.GreaterOrEqual(t, took, idle-10*time.Millisecond)
		assert.Less(t, took, time.Second+idle)
		assert.Greater(t, n, 3, "the frame was trickling when the server closed")
	})

	t.Run("long poll shorter than the limit", func(t *testing.T) {
		seen := make(chan *socketserver.Request, 1)
		srv := socketservertest.NewServer(t, props, withAPIs, queueHandler(seen))
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		time.Sleep(idle / 2) // idle before the request: the request resets the clock
		send(t, c, metadataReq(1), 8)
		r := recv(t, seen)
		time.Sleep(idle * 3 / 4)
		require.NoError(t, respondEmpty(r))
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 1
		readResponse(t, c, resp, 8)
		// Then the idle clock starts again.
		start := time.Now()
		requireClosedNoResponse(t, c)
		assert.Less(t, time.Since(start), time.Second+idle)
	})

	t.Run("negative limit disables expiry", func(t *testing.T) {
		srv := socketservertest.NewServer(t, config.Properties{"connections.max.idle.ms": "-1"}, withAPIs, echoMetadata)
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		requireOpen(t, c, 3*idle)
		metadataRoundTrip(t, c, 1, 1)
	})
}

// parseConnID splits Kafka's connection id,
// localIP:localPort-remoteIP:remotePort-processorId-index.
func parseConnID(t testing.TB, id string) (local, remote string, processor, index int) {
	t.Helper()
	parts := strings.Split(id, "-")
	require.Len(t, parts, 4, "connection id %q", id)
	var err error
	processor, err = strconv.Atoi(parts[2])
	require.NoError(t, err, "connection id %q", id)
	index, err = strconv.Atoi(parts[3])
	require.NoError(t, err, "connection id %q", id)
	return parts[0], parts[1], processor, index
}

// Connection ids name both ends and the processor; connections go round
// robin over a listener's processors, each numbering its own from 0. The
// request carries the connection's description.
func TestConnectionIDAndRequestFields(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	srv := socketservertest.NewServer(t, config.Properties{"num.network.threads": "2"}, withAPIs, queueHandler(seen))
	var processors, indexes []int
	for i := range int32(4) {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		before := time.Now()
		send(t, c, metadataReq(4), 50+i)
		r := recv(t, seen)
		after := time.Now()

		local, remote, processor, index := parseConnID(t, r.Conn.ID)
		assert.Equal(t, c.RemoteAddr().String(), local, "the server's end")
		assert.Equal(t, c.LocalAddr().String(), remote, "the client's end")
		processors = append(processors, processor)
		indexes = append(indexes, index)

		assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), r.Conn.Listener)
		assert.Equal(t, protocolmap.Plaintext, r.Conn.SecurityProtocol)
		assert.Equal(t, protocolmap.DataPlane, r.Conn.Plane)
		assert.Equal(t, connregistry.Anonymous(), r.Conn.Principal)
		assert.Equal(t, "User:ANONYMOUS", r.Conn.Principal.String())
		assert.Equal(t, netip.MustParseAddrPort(c.LocalAddr().String()), r.Conn.ClientAddr)
		assert.Empty(t, r.Conn.ClientSoftwareName)
		assert.False(t, r.ReceivedAt.Before(before) || r.ReceivedAt.After(after), "ReceivedAt %v not in [%v, %v]", r.ReceivedAt, before, after)
		require.NotNil(t, r.ClientID)
		assert.Equal(t, "test", *r.ClientID)
		assert.Equal(t, int16(3), r.APIKey)
		assert.Equal(t, int16(4), r.APIVersion)
		assert.Equal(t, 50+i, r.CorrelationID)
		assert.Equal(t, len(formatter.AppendRequest(nil, metadataReq(4), 50+i))-4, r.Size)

		require.NoError(t, respondEmpty(r))
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 4
		readResponse(t, c, resp, 50+i)
	}
	assert.Equal(t, []int{0, 1, 0, 1}, processors, "processor ids")
	assert.Equal(t, []int{0, 0, 1, 1}, indexes, "per-processor connection indexes")
}
