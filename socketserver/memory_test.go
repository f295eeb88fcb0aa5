package socketserver_test

import (
	"bytes"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// produceOf returns a Produce request whose frame is about size bytes.
func produceOf(size int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 1000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = bytes.Repeat([]byte{1}, size)
	t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	req.Topics = []kmsg.ProduceRequestTopic{t}
	return req
}

// With queued.max.request.bytes spent, connections stop reading: the next
// request reaches the host only once an answer gives memory back, and none
// is dropped (Kafka's SimpleMemoryPool, non-strict: a request is admitted
// while any memory is left). The control plane keeps its own allowance and
// is served meanwhile.
func TestRequestMemoryBudget(t *testing.T) {
	const budget = 1 << 20
	held := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "DATA://127.0.0.1:0,CONTROL://127.0.0.1:0",
		"listener.security.protocol.map": "DATA:PLAINTEXT,CONTROL:PLAINTEXT",
		"inter.broker.listener.name":     "DATA",
		"control.plane.listener.name":    "CONTROL",
		"socket.request.max.bytes":       strconv.Itoa(budget),
		"queued.max.request.bytes":       strconv.Itoa(budget),
	}, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		perListener(c, "CONTROL").APIs = allAPIs()
	}, socketserver.HandlerFunc(func(r *socketserver.Request) { held <- r }))

	conns := make([]net.Conn, 3)
	for i := range conns {
		conns[i] = socketservertest.Dial(t, srv, "DATA")
		send(t, conns[i], produceOf(600<<10), int32(i))
	}
	// 600 KiB, then 600 KiB more (400 KiB were left: admitted, overshooting
	// by one request), then the pool is spent and the third waits.
	first, second := recv(t, held), recv(t, held)
	select {
	case r := <-held:
		t.Fatalf("a request from %s reached the host while the memory pool was spent", r.Conn.ID)
	case <-time.After(200 * time.Millisecond):
	}
	st := srv.Stats().RequestMemory[protocolmap.DataPlane]
	assert.EqualValues(t, budget, st.Size)
	assert.Greater(t, st.Used, budget, "two requests in, the second overshooting")

	// The control plane has its own allowance.
	ctl := socketservertest.Dial(t, srv, "CONTROL")
	send(t, ctl, produceOf(600<<10), 9)
	cr := recv(t, held)
	require.Equal(t, protocolmap.ControlPlane, cr.Conn.Plane)
	require.NoError(t, cr.Respond(cr.Body.(*kmsg.ProduceRequest).ResponseKind()))
	readResponse(t, ctl, produceResponse(), 9)

	// An answer gives memory back: the third request is read and handed
	// over; every request is answered.
	require.NoError(t, first.Respond(first.Body.(*kmsg.ProduceRequest).ResponseKind()))
	third := recv(t, held)
	for _, r := range []*socketserver.Request{second, third} {
		require.NoError(t, r.Respond(r.Body.(*kmsg.ProduceRequest).ResponseKind()))
	}
	for i, c := range conns {
		readResponse(t, c, produceResponse(), int32(i))
	}
	require.Eventually(t, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used == 0 },
		5*time.Second, 10*time.Millisecond, "every answered request gave its memory back")
	assert.Positive(t, srv.Stats().RequestMemory[protocolmap.DataPlane].Depleted)
}

func produceResponse() *kmsg.ProduceResponse {
	r := kmsg.NewPtrProduceResponse()
	r.Version = 9
	return r
}

// A connection that closes while its request is held, and one that closes
// while it waits for memory, give back what they took once the host has
// answered: as in Kafka, whose muted channel reads nothing more, the
// server reads a client's close only after its request's answer (a
// half-closed client still reads its responses).
func TestRequestMemoryReturnedOnClose(t *testing.T) {
	const budget = 1 << 20
	held := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, config.Properties{
		"socket.request.max.bytes": strconv.Itoa(budget),
		"queued.max.request.bytes": strconv.Itoa(budget),
	}, func(c *socketserver.Config) { c.APIs = allAPIs() }, socketserver.HandlerFunc(func(r *socketserver.Request) { held <- r }))
	a := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, a, produceOf(budget-100), 1)
	first := recv(t, held)
	b := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, b, produceOf(100<<10), 2) // a large frame: waits for memory
	require.Eventually(t, func() bool { return srv.Stats().RequestMemory[protocolmap.DataPlane].Used >= budget },
		5*time.Second, time.Millisecond, "b's frame took what was left and waits for more")
	require.NoError(t, b.Close())
	require.NoError(t, a.Close())
	require.NoError(t, first.Respond(first.Body.(*kmsg.ProduceRequest).ResponseKind()))
	second := recv(t, held) // b's, read once memory came back
	require.NoError(t, second.Respond(second.Body.(*kmsg.ProduceRequest).ResponseKind()))
	require.Eventually(t, func() bool {
		st := srv.Stats()
		return st.RequestMemory[protocolmap.DataPlane].Used == 0 && st.ConnectionCount["PLAINTEXT"] == 0
	}, 5*time.Second, 10*time.Millisecond, "the closed connections' memory came back and they closed")
}

// A large frame's buffer grows as its bytes arrive, so that a peer's mere
// claim allocates little (TestHostileClaims), with or without a budget;
// it grows four times at a time and then to the whole frame, so a frame
// that arrives whole is allocated about once: 64 KiB, 256 KiB, then 8 MiB.
func TestLargeFrameReadOnce(t *testing.T) {
	const size = 8 << 20
	for _, tc := range []struct {
		name   string
		budget string
		max    float64 // allocated / size
		min    float64
	}{
		{"within a budget", strconv.Itoa(4 * size), 1.1, 1},
		{"without a budget", "-1", 1.1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan struct{})
			srv := socketservertest.NewServer(t, config.Properties{
				"socket.request.max.bytes": strconv.Itoa(2 * size),
				"queued.max.request.bytes": tc.budget,
			}, func(c *socketserver.Config) { c.APIs = allAPIs() }, socketserver.HandlerFunc(func(r *socketserver.Request) {
				_ = r.NoResponse()
				got <- struct{}{}
			}))
			req := produceOf(size)
			req.Acks = 0
			frame := formatter.AppendRequest(nil, req, 1)
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := c.Write(frame)
			require.NoError(t, err)
			<-got
			runtime.ReadMemStats(&after)
			ratio := float64(after.TotalAlloc-before.TotalAlloc) / size
			t.Logf("%s: %.2f× the frame allocated", tc.name, ratio)
			assert.LessOrEqual(t, ratio, tc.max)
			assert.GreaterOrEqual(t, ratio, tc.min)
		})
	}
}

// queued.max.request.bytes is read with Kafka's rule (KafkaConfig): a
// limit is at least socket.request.max.bytes; -1 (the default) is none.
func TestQueuedMaxRequestBytesConfig(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    int
		wantErr bool
	}{
		{"", -1, false},
		{"-1", -1, false},
		{"0", 0, false},
		{"104857600", 104857600, false},
		{"104857599", 0, true},
		{"lots", 0, true},
	} {
		props := config.Properties{}
		if tc.value != "" {
			props["queued.max.request.bytes"] = tc.value
		}
		cfg, err := config.Server(props)
		if tc.wantErr {
			var ce *config.Error
			require.ErrorAs(t, err, &ce, tc.value)
			assert.Equal(t, "queued.max.request.bytes", ce.Key)
			continue
		}
		require.NoError(t, err, tc.value)
		assert.Equal(t, tc.want, cfg.QueuedMaxRequestBytes, tc.value)
	}
	lc, err := config.Listeners(config.Properties{})
	require.NoError(t, err)
	_, err = socketserver.New(socketserver.Config{Listeners: lc, QueuedMaxRequestBytes: 1000})
	assert.Error(t, err, "New holds a Config built in code to the same rule")
}
