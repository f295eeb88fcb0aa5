package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
)

// procStatus reads a field of /proc/PID/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// With its request-memory budget and nothing in the environment, the
// example broker bounds its memory by itself: it sets the runtime's soft
// memory limit from the budget, and clients that each send one large
// Produce at once raise its peak RSS by a bounded amount, every request
// answered. (The bench's scenario h runs the full size: 16 × 32 MiB with a
// budget of 64 MiB, at most 200 MiB; this is a quarter of it, in
// proportion.)
func TestMemoryBoundedWithoutGOMEMLIMIT(t *testing.T) {
	if _, err := os.Stat("/proc/self/clear_refs"); err != nil {
		t.Skip("needs /proc to measure the broker's peak RSS")
	}
	const (
		clients = 16
		request = 8 << 20
		budget  = 16 << 20
		bound   = 50 << 20 // 200 MiB × 16/64
	)
	t.Setenv("GOMEMLIMIT", "") // unset for the broker, whatever the test's environment says
	b := exampleproc.StartBroker(t, 1,
		"listeners=PLAINTEXT://127.0.0.1:0",
		"socket.request.max.bytes="+strconv.Itoa(budget),
		"queued.max.request.bytes="+strconv.Itoa(budget))
	m := regexp.MustCompile(`msg="memory limit" bytes=(\d+)`).FindStringSubmatch(b.Log())
	require.NotNil(t, m, "the broker logs the memory limit it sets:\n%s", b.Log())
	assert.Equal(t, strconv.Itoa(2*budget), m[1], "twice the budget, with an empty log")
	addr := b.Addr(0, "PLAINTEXT")

	frame := produceFrame(request)
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
		conns[i] = c
	}
	time.Sleep(200 * time.Millisecond)
	pid := b.Pid()
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0))
	before := procStatus(t, pid, "VmRSS")

	var wg sync.WaitGroup
	errs := make([]error, clients)
	for i, c := range conns {
		wg.Go(func() {
			if _, err := c.Write(frame); err != nil {
				errs[i] = err
				return
			}
			errs[i] = readProduceAnswer(c)
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "client %d's request was not answered", i)
	}
	rise := procStatus(t, pid, "VmHWM") - before
	t.Logf("%d × %d MiB Produce, budget %d MiB: peak RSS +%d MiB", clients, request>>20, budget>>20, rise>>20)
	assert.LessOrEqual(t, rise, int64(bound), "the broker's peak RSS rose by more than %d MiB", bound>>20)
}

// produceFrame is a Produce request (v7, acks=1) of about size bytes for
// partition 0 of a topic, its records bytes that are no record batch: the
// broker reads it whole and answers CORRUPT_MESSAGE, keeping none of it,
// so that what it holds is the request path's alone.
func produceFrame(size int) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, 1, 30000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "budget"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, size-100)
	tp.Partitions = append(tp.Partitions, p)
	req.Topics = append(req.Topics, tp)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("budget")).AppendRequest(nil, req, 1)
}

// readProduceAnswer reads one response frame from c.
func readProduceAnswer(c net.Conn) error {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	_, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:])))
	return err
}
