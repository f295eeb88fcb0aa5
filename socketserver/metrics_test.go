package socketserver_test

import (
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

type metricEvent struct {
	Kind     string
	Listener protocolmap.ListenerName
	Key      int16
	Bytes    int
}

// fakeMetrics records every call.
type fakeMetrics struct {
	mu     sync.Mutex
	events []metricEvent
}

func (m *fakeMetrics) add(e metricEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
}

func (m *fakeMetrics) ConnectionCreated(l protocolmap.ListenerName) {
	m.add(metricEvent{"created", l, -1, 0})
}
func (m *fakeMetrics) ConnectionClosed(l protocolmap.ListenerName) {
	m.add(metricEvent{"closed", l, -1, 0})
}
func (m *fakeMetrics) Request(l protocolmap.ListenerName, key int16, n int) {
	m.add(metricEvent{"request", l, key, n})
}
func (m *fakeMetrics) Response(l protocolmap.ListenerName, key int16, n int) {
	m.add(metricEvent{"response", l, key, n})
}

func (m *fakeMetrics) ConnectionAccepted(l protocolmap.ListenerName) {
	m.add(metricEvent{"accepted", l, -1, 0})
}
func (m *fakeMetrics) AcceptorBlocked(l protocolmap.ListenerName, blocked, throttle time.Duration) {
	m.add(metricEvent{"blocked", l, -1, int(blocked)})
}
func (m *fakeMetrics) ConnectionRejected(l protocolmap.ListenerName, hold time.Duration) {
	m.add(metricEvent{"rejected", l, -1, int(hold)})
}

func (m *fakeMetrics) of(kind string) []metricEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []metricEvent
	for _, e := range m.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b metricEvent) int {
		if a.Key != b.Key {
			return int(a.Key) - int(b.Key)
		}
		return a.Bytes - b.Bytes
	})
	return out
}

// The server counts connections created and closed, and each request and
// response with its API key and size: the frame size for requests (as
// Request.Size), the bytes written for responses.
func TestMetrics(t *testing.T) {
	m := &fakeMetrics{}
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.Metrics = m
	}, echoMetadata)

	var wantReq, wantResp []metricEvent
	roundTrip := func(c net.Conn, req kmsg.Request, corr int32) {
		t.Helper()
		f := formatter.AppendRequest(nil, req, corr)
		write(t, c, f)
		resp := readRawFrame(t, c)
		require.Equal(t, corr, int32(resp[0])<<24|int32(resp[1])<<16|int32(resp[2])<<8|int32(resp[3]))
		wantReq = append(wantReq, metricEvent{"request", "PLAINTEXT", req.Key(), len(f) - 4})
		wantResp = append(wantResp, metricEvent{"response", "PLAINTEXT", req.Key(), len(resp) + 4})
	}
	c1 := socketservertest.Dial(t, srv, "PLAINTEXT")
	c2 := socketservertest.Dial(t, srv, "PLAINTEXT")
	roundTrip(c1, apiVersionsReq(3, "kafkanet-test", "0.1"), 1)
	roundTrip(c1, metadataReq(1), 2)
	roundTrip(c2, metadataReq(9), 3)
	big := metadataReq(9)
	for range 10 {
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("a-rather-long-topic-name")
		big.Topics = append(big.Topics, topic)
	}
	roundTrip(c2, big, 4)

	// A request closed by the handler is counted, with no response.
	c3 := socketservertest.Dial(t, srv, "PLAINTEXT")
	f := formatter.AppendRequest(nil, kmsg.NewPtrFindCoordinatorRequest(), 5)
	write(t, c3, f)
	requireClosedNoResponse(t, c3)
	wantReq = append(wantReq, metricEvent{"request", "PLAINTEXT", 10, len(f) - 4})

	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())
	require.Eventually(t, func() bool { return len(m.of("closed")) == 3 }, 10*time.Second, 5*time.Millisecond)

	sortEvents := func(es []metricEvent) []metricEvent {
		slices.SortFunc(es, func(a, b metricEvent) int {
			if a.Key != b.Key {
				return int(a.Key) - int(b.Key)
			}
			return a.Bytes - b.Bytes
		})
		return es
	}
	assert.Equal(t, sortEvents(wantReq), m.of("request"))
	assert.Equal(t, sortEvents(wantResp), m.of("response"))
	assert.Len(t, m.of("created"), 3)
	ratios := srv.Stats().ProcessorIdleRatio
	assert.Len(t, ratios, socketserver.DefaultNumNetworkThreads)
	for id, r := range ratios {
		assert.True(t, r >= 0 && r <= 1, "processor %d idle ratio %v", id, r)
	}
	for _, e := range append(m.of("created"), m.of("closed")...) {
		assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), e.Listener)
	}
}
