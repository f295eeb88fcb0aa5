package socketserver_test

import (
	"encoding/binary"
	"net"
	"os"
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

// claim announces a Produce frame of size bytes on c and sends only its
// first sent bytes (at least the 10 of its header's start).
func claim(t testing.TB, c net.Conn, size, sent int) {
	t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(size))
	b = append(b, headerBytes(0, 9, 1, strp("claim"), nil)...)
	for len(b) < 4+sent {
		b = append(b, 0)
	}
	write(t, c, b[:4+sent])
}

// resetPeakRSS resets the process's VmHWM to its VmRSS and returns that;
// the test is skipped where /proc cannot do it.
func resetPeakRSS(t *testing.T) uint64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS here: %v", err)
	}
	return procStatusKB(t, "VmRSS")
}

// procStatusKB reads a field of /proc/self/status, in bytes.
func procStatusKB(t *testing.T, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// Three peers announce a 100 MB Produce each and send 10 bytes of it, on
// a listener with the example broker's budget (queued.max.request.bytes
// twice socket.request.max.bytes): they cost what they sent, not what
// they claimed. Another client's Metadata is answered at once, and the
// process's peak RSS barely moves. (Charged at their announced size, the
// claims spent the budget and every other client stalled until
// connections.max.idle.ms; allocated at it, they cost 100 MB each.)
func TestHostileClaims(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"queued.max.request.bytes": strconv.Itoa(2 * socketserver.DefaultRequestMaxBytes),
	}, withAPIs, answerAll)
	before := resetPeakRSS(t)
	claims := make([]net.Conn, 3)
	for i := range claims {
		claims[i] = socketservertest.Dial(t, srv, "PLAINTEXT")
		claim(t, claims[i], 100_000_000, 10)
	}
	waitFor(t, 5*time.Second, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used > 0 },
		"the claims are being read")

	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	require.NoError(t, c.SetDeadline(time.Now().Add(2*time.Second)))
	send(t, c, metadataReq(9), 7)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, c, resp, 7)

	time.Sleep(100 * time.Millisecond)
	grew := int64(procStatusKB(t, "VmHWM")) - int64(before)
	used := srv.Stats().RequestMemory[protocolmap.DataPlane].Used
	t.Logf("three claims of 100 MB: %d bytes of the budget held, peak RSS +%d KiB", used, grew>>10)
	assert.LessOrEqual(t, used, 3*4096, "the claims hold more than their first buffers")
	assert.Less(t, grew, int64(20<<20), "the process's peak RSS grew by 20 MiB or more")
}

// While claims hold the whole budget and send nothing more, a connection
// that has sent a whole frame is read and served (the pool lets the frame
// nearest to whole go on once the frames holding memory make no
// progress), and small requests never wait for the budget at all.
func TestWholeFrameServedBeforeClaims(t *testing.T) {
	const budget = 1 << 20
	held := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, config.Properties{
		"socket.request.max.bytes": strconv.Itoa(budget),
		"queued.max.request.bytes": strconv.Itoa(budget),
		config.KeyRequestStallMs:   "60000", // the claims stay for the test
	}, withAPIs, socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.APIKey == 3 {
			_ = respondEmpty(r)
			return
		}
		held <- r
	}))
	// Each claim sends 40 KiB of 1,000,000 bytes: enough for its buffer to
	// take the whole frame, so that two of them spend the budget.
	for range 3 {
		claim(t, socketservertest.Dial(t, srv, "PLAINTEXT"), 1_000_000, 40<<10)
	}
	waitFor(t, 5*time.Second, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used >= budget },
		"the claims spend the budget")

	small := socketservertest.Dial(t, srv, "PLAINTEXT")
	require.NoError(t, small.SetDeadline(time.Now().Add(2*time.Second)))
	send(t, small, metadataReq(9), 1)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, small, resp, 1)

	whole := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, whole, produceOf(512<<10), 2)
	select {
	case r := <-held:
		assert.Equal(t, int32(2), r.CorrelationID)
		require.NoError(t, r.Respond(r.Body.(*kmsg.ProduceRequest).ResponseKind()))
		readResponse(t, whole, produceResponse(), 2)
	case <-time.After(2 * time.Second):
		t.Fatal("a whole frame waited behind claims that send nothing")
	}
	assert.Equal(t, 5, srv.Stats().ConnectionCount["PLAINTEXT"], "the claims, the small and the whole frame's connections are open")
}

// A connection that holds some of the budget for a frame it has begun and
// sends nothing more of it for kafkanet.request.stall.ms is closed, and
// ListClientConnections' recently closed list says why. Without a budget
// the key has no effect: only connections.max.idle.ms closes it.
func TestStalledRequestClosed(t *testing.T) {
	const stall = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		budget string
		closed bool
	}{
		{"with a budget", strconv.Itoa(socketserver.DefaultRequestMaxBytes), true},
		{"without a budget", "-1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, config.Properties{
				"queued.max.request.bytes": tc.budget,
				config.KeyRequestStallMs:   strconv.Itoa(int(stall / time.Millisecond)),
			}, func(c *socketserver.Config) {
				c.APIs = []socketserver.API{mustKmsgAPI(kmsg.Produce), socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil)}
			}, answerAll)
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			claim(t, c, 1<<20, 10)
			if !tc.closed {
				require.NoError(t, c.SetReadDeadline(time.Now().Add(3*stall)))
				_, err := c.Read(make([]byte, 1))
				var ne net.Error
				require.ErrorAs(t, err, &ne, "closed without a budget")
				require.True(t, ne.Timeout(), "closed without a budget: %v", err)
				return
			}
			took := readUntilClosed(t, c, stall+5*time.Second)
			assert.GreaterOrEqual(t, took, stall-50*time.Millisecond, "closed before the stall timeout")

			admin := socketservertest.Dial(t, srv, "PLAINTEXT")
			require.NoError(t, admin.SetDeadline(time.Now().Add(5*time.Second)))
			send(t, admin, &connregistry.ListClientConnectionsRequest{APIKey: connregistry.DefaultListAPIKey, IncludeClosed: true}, 9)
			resp := &connregistry.ListClientConnectionsResponse{APIKey: connregistry.DefaultListAPIKey}
			readResponse(t, admin, resp, 9)
			var reasons []string
			for _, r := range resp.Connections {
				if r.CloseReason != "" {
					reasons = append(reasons, r.CloseReason)
				}
			}
			assert.Equal(t, []string{string(connregistry.CloseStalledRequest)}, reasons)
			waitFor(t, 5*time.Second, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used == 0 },
				"the stalled frame's memory came back")
		})
	}
}
