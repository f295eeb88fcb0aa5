package socketserver_test

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// handled is one request as a throttling handler saw it.
type handled struct {
	connID     string
	key        int16
	corr       int32
	received   time.Time // Request.ReceivedAt: when the server had read it
	answeredAt time.Time // just before the answer
	throttle   error     // Throttle's result, for a throttled request
}

// throttler answers every request at once (NoResponse for an acks=0
// Produce, an empty response otherwise), throttling for d those that
// throttle picks, and reports each on seen.
func throttler(d time.Duration, throttle func(*socketserver.Request) bool, seen chan<- handled) socketserver.Handler {
	return socketserver.HandlerFunc(func(r *socketserver.Request) {
		h := handled{connID: r.Conn.ID, key: r.APIKey, corr: r.CorrelationID, received: r.ReceivedAt}
		if throttle(r) {
			h.throttle = r.Throttle(d)
		}
		h.answeredAt = time.Now()
		if p, ok := r.Body.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			_ = r.NoResponse()
		} else {
			_ = respondEmpty(r)
		}
		seen <- h
	})
}

func firstCorr(r *socketserver.Request) bool { return r.CorrelationID == 0 }

func seenNext(t testing.TB, seen <-chan handled) handled {
	t.Helper()
	select {
	case h := <-seen:
		return h
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the handler")
		return handled{}
	}
}

// metadataResponse reads a Metadata v12 response and returns its
// throttle_time_ms.
func metadataThrottle(t testing.TB, c net.Conn, corr int32) int32 {
	t.Helper()
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 12
	readResponse(t, c, resp, corr)
	return resp.ThrottleMillis
}

// A client that ignores the throttle sends its next request at once: the
// answer left at once, with throttle_time_ms, and the next request is read
// only once the throttle has passed, whether it was sent after the
// response, pipelined behind the throttled request (already in the read
// buffer when the throttle began), or follows an acks=0 Produce, which has
// no response (Kafka throttles its connection too).
func TestThrottleHoldsAClientThatIgnoresIt(t *testing.T) {
	const d = 300 * time.Millisecond
	seen := make(chan handled, 10)
	srv := socketservertest.NewServer(t, nil, withAPIs, throttler(d, firstCorr, seen))
	acks0 := produceOf(100)
	acks0.Acks = 0
	for _, tc := range []struct {
		name      string
		first     kmsg.Request
		pipelined bool
	}{
		{"next request sent after the response", metadataReq(12), false},
		{"next request pipelined", metadataReq(12), true},
		{"acks=0 Produce", acks0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			first := formatter.AppendRequest(nil, tc.first, 0)
			next := formatter.AppendRequest(nil, metadataReq(12), 1)
			if tc.pipelined {
				write(t, c, append(first, next...))
			} else {
				write(t, c, first)
			}
			h0 := seenNext(t, seen)
			require.NoError(t, h0.throttle)
			if tc.first.Key() == 3 {
				assert.EqualValues(t, d/time.Millisecond, metadataThrottle(t, c, 0), "throttle_time_ms")
				got := time.Since(h0.answeredAt)
				assert.Less(t, got, d/2, "the response waited for the throttle: %s", got)
			}
			if !tc.pipelined {
				write(t, c, next)
			}
			h1 := seenNext(t, seen)
			assert.EqualValues(t, 1, h1.corr)
			held := h1.received.Sub(h0.answeredAt)
			t.Logf("next request read %s after the throttled answer (throttle %s)", held, d)
			assert.GreaterOrEqual(t, held, d, "the next request was read before the throttle had passed")
			assert.Less(t, held, d+time.Second, "the connection stayed muted")
			assert.Zero(t, metadataThrottle(t, c, 1), "an unthrottled answer")
		})
	}
}

// throttleHook records the throttles a kgo client sees.
type throttleHook struct {
	mu   sync.Mutex
	seen []time.Duration
	late []bool
}

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, interval time.Duration, throttledAfterResponse bool) {
	h.mu.Lock()
	h.seen = append(h.seen, interval)
	h.late = append(h.late, throttledAfterResponse)
	h.mu.Unlock()
}

// A kgo client reads throttle_time_ms (its HookBrokerThrottle reports it,
// as applying after the response: KIP-219) and waits before its next
// request on that connection.
func TestThrottleKgo(t *testing.T) {
	const d = 400 * time.Millisecond
	seen := make(chan handled, 10)
	var throttled sync.Once
	srv := socketservertest.NewServer(t, nil, withAPIs, throttler(d, func(r *socketserver.Request) bool {
		ok := false
		throttled.Do(func() { ok = true }) // the first request the host sees: ConnectKgo's Metadata
		return ok
	}, seen))
	hook := &throttleHook{}
	cl, _ := socketservertest.ConnectKgo(t, srv.Addr("PLAINTEXT").String(), kgo.WithHooks(hook))
	h0 := seenNext(t, seen)
	require.NoError(t, h0.throttle)

	_, err := cl.SeedBrokers()[0].Request(t.Context(), kmsg.NewPtrMetadataRequest())
	require.NoError(t, err)
	h1 := seenNext(t, seen)
	assert.Equal(t, h0.connID, h1.connID, "one connection")
	held := h1.received.Sub(h0.answeredAt)
	t.Logf("kgo's next request read %s after the throttled answer (throttle %s)", held, d)
	assert.GreaterOrEqual(t, held, d)

	hook.mu.Lock()
	defer hook.mu.Unlock()
	assert.Equal(t, []time.Duration{d}, hook.seen, "kgo saw the throttle")
	assert.Equal(t, []bool{true}, hook.late, "as KIP-219's: after the response")
}

// A muted connection holds no request memory: its next request stays in
// the socket, and another client's large request is read, handled and
// answered meanwhile. Had the muted connection read its own (as large as
// queued.max.request.bytes, held by the host until the end), the other
// request would wait for memory.
func TestThrottledConnHoldsNoMemory(t *testing.T) {
	const (
		d      = time.Second
		budget = 1 << 20
	)
	release := newGate()
	defer release.open()
	seen := make(chan handled, 10)
	var muted sync.Map // connection id → true: its Produce is held until release
	inner := throttler(d, firstCorr, seen)
	srv := socketservertest.NewServer(t, config.Properties{
		"socket.request.max.bytes": strconv.Itoa(budget),
		"queued.max.request.bytes": strconv.Itoa(budget),
		"num.io.threads":           "4",
	}, withAPIs, socketserver.HandlerFunc(func(r *socketserver.Request) {
		if _, hold := muted.Load(r.Conn.ID); hold && r.APIKey == 0 {
			seen <- handled{connID: r.Conn.ID, key: r.APIKey, received: r.ReceivedAt}
			release.wait()
		}
		inner.ServeKafka(r)
	}))

	a := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, a, metadataReq(12), 0)
	h0 := seenNext(t, seen)
	muted.Store(h0.connID, true)
	metadataThrottle(t, a, 0)
	// A request that takes the whole budget, sent while muted: its frame is
	// budget bytes.
	size := budget
	for {
		frame := len(formatter.AppendRequest(nil, produceOf(size), 1)) - 4
		if frame == budget {
			break
		}
		size -= frame - budget
	}
	send(t, a, produceOf(size), 1)

	b := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, b, produceOf(budget/2), 5)
	hb := seenNext(t, seen)
	require.NotEqual(t, h0.connID, hb.connID, "the muted connection's request was read first")
	readResponse(t, b, produceResponse(), 5)
	answered := time.Since(h0.answeredAt)
	t.Logf("the other client's request answered %s into the %s throttle", answered, d)
	assert.Less(t, answered, d, "the other client's request waited for the muted connection")

	ha := seenNext(t, seen)
	assert.Equal(t, h0.connID, ha.connID)
	assert.GreaterOrEqual(t, ha.received.Sub(h0.answeredAt), d)
	release.open()
	seenNext(t, seen)
	readResponse(t, a, produceResponse(), 1)
}

// connections.max.idle.ms does not count the time a connection is muted:
// one throttled for longer than the idle limit stays open, whether its
// client sends its next request during the throttle (read at its end) or
// after it, within the idle limit counted from the throttle's end. It
// expires at the idle limit after its last request, as any other.
func TestThrottleSurvivesIdleExpiry(t *testing.T) {
	const (
		idle = 250 * time.Millisecond
		d    = 3 * idle
	)
	seen := make(chan handled, 10)
	srv := socketservertest.NewServer(t, config.Properties{
		"connections.max.idle.ms": strconv.Itoa(int(idle / time.Millisecond)),
	}, withAPIs, throttler(d, firstCorr, seen))
	for _, tc := range []struct {
		name     string
		sendNext func(answered time.Time) time.Duration // how long after the answer to send the next request
	}{
		{"next request sent during the throttle", func(time.Time) time.Duration { return 0 }},
		{"next request sent after it", func(time.Time) time.Duration { return d + idle/2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := socketservertest.Dial(t, srv, "PLAINTEXT")
			send(t, c, metadataReq(12), 0)
			h0 := seenNext(t, seen)
			metadataThrottle(t, c, 0)
			time.Sleep(time.Until(h0.answeredAt.Add(tc.sendNext(h0.answeredAt))))
			send(t, c, metadataReq(12), 1)
			h1 := seenNext(t, seen)
			assert.GreaterOrEqual(t, h1.received.Sub(h0.answeredAt), d)
			metadataThrottle(t, c, 1)
			last := time.Now()

			requireClosedNoResponse(t, c)
			assert.Less(t, time.Since(last), idle+time.Second, "not expired after the throttle")
			closed := srv.Registry().Closed(connregistry.Filter{})
			require.NotEmpty(t, closed)
			assert.Equal(t, connregistry.CloseIdle, closed[len(closed)-1].CloseReason)
			assert.InDelta(t, d, closed[len(closed)-1].ThrottleTime, float64(idle), "the time muted, counted")
		})
	}
}

// A muted connection is listed as throttled, in the registry and on the
// ListClientConnections wire (the tags a kgo client's listing decodes),
// with ThrottledUntil the throttle's end, in the future, and the time
// muted counted; once the throttle has passed, ThrottledUntil is zero and
// ThrottleTime holds it.
func TestThrottledConnListed(t *testing.T) {
	const d = 2 * time.Second
	seen := make(chan handled, 10)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = slices.DeleteFunc(allAPIs(), func(a socketserver.API) bool { return a.Key == connregistry.DefaultListAPIKey })
		c.APIs = append(c.APIs, socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil))
	}, throttler(d, func(r *socketserver.Request) bool { return r.APIKey == 3 && r.CorrelationID == 0 }, seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(12), 0)
	h0 := seenNext(t, seen)
	metadataThrottle(t, c, 0)
	end := h0.answeredAt.Add(d)

	byID := func(conns []connregistry.Conn) connregistry.Conn {
		for _, c := range conns {
			if c.ID == h0.connID {
				return c
			}
		}
		t.Fatalf("%s is not listed", h0.connID)
		return connregistry.Conn{}
	}
	var listed connregistry.Conn
	require.Eventually(t, func() bool {
		listed = byID(srv.Registry().Snapshot(connregistry.Filter{}))
		return !listed.ThrottledUntil.IsZero()
	}, 5*time.Second, 5*time.Millisecond, "never listed as throttled")
	assert.True(t, listed.ThrottledUntil.After(time.Now()), "ThrottledUntil %s is not in the future", listed.ThrottledUntil)
	assert.WithinDuration(t, end, listed.ThrottledUntil, 100*time.Millisecond)

	// On the wire, through a client of KIP-1329's API, with the time muted
	// so far.
	time.Sleep(50 * time.Millisecond)
	cl, _ := socketservertest.ConnectKgo(t, srv.Addr("PLAINTEXT").String(), connadmin.VersionsOpt(connregistry.DefaultListAPIKey))
	resp, err := cl.SeedBrokers()[0].Request(t.Context(), &connregistry.ListClientConnectionsRequest{})
	require.NoError(t, err)
	var rec *connregistry.ConnectionRecord
	for i, r := range resp.(*connregistry.ListClientConnectionsResponse).Connections {
		if r.ConnectionID == h0.connID {
			rec = &resp.(*connregistry.ListClientConnectionsResponse).Connections[i]
		}
	}
	require.NotNil(t, rec, "the muted connection is not on the wire")
	assert.Equal(t, listed.ThrottledUntil.UnixMilli(), rec.ThrottledUntil)
	assert.GreaterOrEqual(t, rec.ThrottleTimeMs, int64(50))
	assert.Less(t, rec.ThrottleTimeMs, d.Milliseconds())

	require.Eventually(t, func() bool {
		return byID(srv.Registry().Snapshot(connregistry.Filter{})).ThrottledUntil.IsZero()
	}, 5*time.Second, 10*time.Millisecond, "still throttled after the throttle")
	after := byID(srv.Registry().Snapshot(connregistry.Filter{}))
	assert.InDelta(t, d, after.ThrottleTime, float64(100*time.Millisecond))
	assert.False(t, time.Now().Before(end), "unmuted before the throttle's end")
}

// Throttle belongs before the answer: after it, ErrAlreadyAnswered, and
// nothing is throttled; before it, the last call wins and d ≤ 0 throttles
// nothing.
func TestThrottleAfterAnswer(t *testing.T) {
	errs := make(chan error, 1)
	srv := socketservertest.NewServer(t, nil, withAPIs, socketserver.HandlerFunc(func(r *socketserver.Request) {
		switch r.CorrelationID {
		case 0: // after the answer
			_ = respondEmpty(r)
			errs <- r.Throttle(time.Hour)
		case 1: // replaced, then none
			err := r.Throttle(time.Hour)
			if err == nil {
				err = r.Throttle(-time.Second)
			}
			_ = respondEmpty(r)
			errs <- err
		default:
			_ = respondEmpty(r)
		}
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	for corr := range int32(2) {
		send(t, c, metadataReq(12), corr)
		assert.Zero(t, metadataThrottle(t, c, corr))
		err := <-errs
		if corr == 0 {
			assert.ErrorIs(t, err, socketserver.ErrAlreadyAnswered)
		} else {
			assert.NoError(t, err)
		}
		start := time.Now()
		send(t, c, metadataReq(12), 2)
		metadataThrottle(t, c, 2)
		assert.Less(t, time.Since(start), time.Second, "the connection was muted")
	}
}

// Shutdown does not wait for a throttle: a muted connection is idle, and
// closes at once.
func TestShutdownDoesNotWaitForAThrottle(t *testing.T) {
	seen := make(chan handled, 10)
	srv := newUnstarted(t, config.Properties{"num.io.threads": "1", "listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, srv.Start(t.Context()))
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(context.Background(), protocolmap.DataPlane, throttler(time.Hour, firstCorr, seen))
	}()
	c := dialTCP(t, srv.Addr("PLAINTEXT").String())
	send(t, c, metadataReq(12), 0)
	seenNext(t, seen)
	assert.EqualValues(t, time.Hour/time.Millisecond, metadataThrottle(t, c, 0))
	require.Eventually(t, func() bool {
		conns := srv.Registry().Snapshot(connregistry.Filter{})
		return len(conns) == 1 && !conns[0].ThrottledUntil.IsZero()
	}, 5*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, srv.Shutdown(ctx))
	took := time.Since(start)
	t.Logf("Shutdown took %s with a connection muted for an hour", took)
	assert.Less(t, took, 5*time.Second)
	requireClosed(t, c)
	require.ErrorIs(t, <-served, socketserver.ErrServerClosed)
	closed := srv.Registry().Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, connregistry.CloseServerShutdown, closed[0].CloseReason)
}

// A connection parks as before once its throttle has passed (it does not
// while muted: it waits for no request), and its next request wakes it.
func TestThrottledConnParksAfterward(t *testing.T) {
	const d = 500 * time.Millisecond
	seen := make(chan handled, 10)
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) { c.APIs, c.ParkAfter = allAPIs(), 20*time.Millisecond },
		throttler(d, firstCorr, seen))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(12), 0)
	h0 := seenNext(t, seen)
	metadataThrottle(t, c, 0)
	time.Sleep(d / 2)
	if time.Since(h0.answeredAt) < d-50*time.Millisecond {
		assert.Zero(t, srv.Stats().ParkedConnections, "parked while muted")
	}
	require.Eventually(t, func() bool { return srv.Stats().ParkedConnections == 1 }, 5*time.Second, 5*time.Millisecond,
		"never parked after the throttle")
	send(t, c, metadataReq(12), 1)
	h1 := seenNext(t, seen)
	assert.GreaterOrEqual(t, h1.received.Sub(h0.answeredAt), d)
	metadataThrottle(t, c, 1)
}
