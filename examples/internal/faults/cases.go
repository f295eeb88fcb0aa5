package faults

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
)

// Target is a server under test, with proxies in front of every address a
// client may dial.
type Target struct {
	Proxies []*Proxy
	// Seed is the server's bootstrap address, as the clients dial it (the
	// proxies stand in front of it and of every address it advertises).
	Seed string
	// Idle is the server's connections.max.idle.ms.
	Idle time.Duration
	// Registry is the server's registry of connections.
	Registry connregistry.Registry
}

// kgo options of the producers that go through the faults: a request cut
// off is retried soon, and one that gets no answer is given up after 4 s.
func (tg *Target) via(opts ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(tg.Seed), Dialer(tg.Proxies...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProduceRequestTimeout(2 * time.Second), kgo.RequestTimeoutOverhead(2 * time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}, opts...)
}

func (tg *Target) addAll(ts ...Toxic) {
	for _, p := range tg.Proxies {
		for _, toxic := range ts {
			p.Add(toxic)
		}
	}
}

func (tg *Target) removeAll() {
	for _, p := range tg.Proxies {
		p.RemoveAll()
	}
}

// request sends req to the server with a new client of its own, without
// faults, and waits at most within for the answer.
func (tg *Target) request(t testing.TB, req kmsg.Request, within time.Duration) (kmsg.Response, error) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Seed))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return cl.Request(ctx, req)
}

// CreateTopic creates topic with partitions partitions, without faults.
func (tg *Target) CreateTopic(t testing.TB, topic string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := tg.request(t, req, 10*time.Second)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode), "creating %s", topic)
}

// RequireServes checks that a new client, without faults, is served
// within 5 s.
func (tg *Target) RequireServes(t testing.TB) {
	t.Helper()
	start := time.Now()
	_, err := tg.request(t, kmsg.NewPtrMetadataRequest(), 5*time.Second)
	require.NoError(t, err, "a new client was not served during the faults")
	t.Logf("a new client was served in %v during the faults", time.Since(start).Round(time.Millisecond))
}

// RunCases runs the fault cases against tg, each a subtest: an idempotent
// producer produces through the proxies while they cut the stream into
// pieces of 1 to 8 bytes, or delay it and cap its bandwidth, or reset,
// stall and cut its connections at random points; a new client is served
// meanwhile; once the faults stop, every record it produced is
// acknowledged, and the topic holds each once, in order. A half-open
// connection (the proxy drops its data and holds its socket) is closed by
// connections.max.idle.ms and listed as closed, as idle. Goroutines and
// sockets return to their baseline, taken before the cases.
func RunCases(t *testing.T, tg *Target) {
	goroutines := goleak.IgnoreCurrent()
	base := socketBaseline(t)
	const partitions = 3
	produce := func(t *testing.T, topic string, lasting time.Duration, faults func(stop <-chan struct{})) {
		tg.CreateTopic(t, topic, partitions)
		cl, err := kgo.NewClient(tg.via()...)
		require.NoError(t, err)
		defer cl.Close()
		recs := Produce(t, cl, topic, partitions, 2*time.Millisecond)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { faults(stop) })
		time.Sleep(time.Second)
		tg.RequireServes(t)
		time.Sleep(lasting - time.Second)
		close(stop)
		wg.Wait()
		tg.removeAll()
		produced, acked := recs.Counts()
		t.Logf("%d records produced during the faults, %d acknowledged", produced, acked)
		n := recs.Finish(30 * time.Second)
		cl.Close()
		Check(t, topic, partitions, n, 20*time.Second, kgo.SeedBrokers(tg.Seed))
		t.Logf("%d records arrived exactly once, in order", n)
	}
	t.Run("sliced", func(t *testing.T) {
		produce(t, "sliced", 3*time.Second, func(<-chan struct{}) {
			tg.addAll(Both(Toxic{Name: "slicer", Type: "slicer", Attributes: map[string]any{"average_size": 5, "size_variation": 3}})...)
		})
	})
	t.Run("latency and bandwidth", func(t *testing.T) {
		produce(t, "slow", 3*time.Second, func(<-chan struct{}) {
			tg.addAll(Both(Toxic{Name: "latency", Type: "latency", Attributes: map[string]any{"latency": 30, "jitter": 15}})...)
			tg.addAll(Both(Toxic{Name: "bandwidth", Type: "bandwidth", Attributes: map[string]any{"rate": 100}})...) // KB/s
		})
	})
	t.Run("resets, stalls and cuts", func(t *testing.T) {
		seed := time.Now().UnixNano()
		t.Logf("random seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		faults := 0
		defer func() { t.Logf("%d faults", faults) }()
		produce(t, "cut", 6*time.Second, func(stop <-chan struct{}) {
			for {
				faults++
				streams := []string{"upstream", "downstream"}
				var toxic Toxic
				switch rng.IntN(3) {
				case 0: // a reset, after up to 100 ms
					toxic = Toxic{Type: "reset_peer", Attributes: map[string]any{"timeout": rng.IntN(100)}}
				case 1: // data dropped, then the connection closed after up to 500 ms
					toxic = Toxic{Type: "timeout", Attributes: map[string]any{"timeout": 1 + rng.IntN(500)}}
				default: // closed after up to 20 kB
					toxic = Toxic{Type: "limit_data", Attributes: map[string]any{"bytes": 1 + rng.IntN(20000)}}
				}
				toxic.Name, toxic.Stream = "random", streams[rng.IntN(2)]
				tg.addAll(toxic)
				select {
				case <-time.After(time.Duration(50+rng.IntN(300)) * time.Millisecond):
				case <-stop:
				}
				tg.removeAll()
				select { // the producer gets some records through between faults
				case <-time.After(time.Duration(200+rng.IntN(400)) * time.Millisecond):
				case <-stop:
					return
				}
			}
		})
	})
	t.Run("half-open", func(t *testing.T) { halfOpen(t, tg) })
	for _, p := range tg.Proxies { // their sockets were not in the baseline
		p.Stop()
	}
	RequireSocketsReturned(t, base)
	requireGoroutinesReturned(t, goroutines)
}

// socketBaseline counts the sockets open now.
func socketBaseline(t *testing.T) int {
	n, ok := Sockets()
	if !ok {
		t.Log("sockets cannot be counted here: not checked")
	}
	return n
}

// halfOpen: a connection through the first proxy is served once; then the
// proxy drops everything the client sends and holds the socket, as a
// half-open connection does. The server closes it at
// connections.max.idle.ms from its last activity, and lists it as closed,
// for being idle.
func halfOpen(t *testing.T, tg *Target) {
	const software = "half-open-test"
	c, err := net.DialTimeout("tcp", tg.Proxies[0].Addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, software, "1"
	roundTrip(t, c, req, 1)
	tg.Proxies[0].Add(Toxic{Name: "hold", Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}})
	defer tg.Proxies[0].Remove("hold")
	_, err = c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrMetadataRequest(), 2)) // dropped
	require.NoError(t, err)
	var closed connregistry.Conn
	require.Eventually(t, func() bool {
		for _, cc := range tg.Registry.Closed(connregistry.Filter{}) {
			if cc.ClientSoftwareName == software {
				closed = cc
				return true
			}
		}
		return false
	}, tg.Idle+10*time.Second, 10*time.Millisecond, "the half-open connection was not closed")
	assert.Equal(t, connregistry.CloseIdle, closed.CloseReason)
	after := closed.ClosedAt.Sub(closed.LastActivity)
	assert.GreaterOrEqual(t, after, tg.Idle-100*time.Millisecond, "closed before connections.max.idle.ms")
	assert.Less(t, after, tg.Idle+2*time.Second, "closed long after connections.max.idle.ms")
	t.Logf("the half-open connection was closed %v after its last activity, as %q", after.Round(time.Millisecond), closed.CloseReason)
}

// roundTrip sends req on c with correlation id corr and reads its answer.
func roundTrip(t *testing.T, c net.Conn, req kmsg.Request, corr int32) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	defer c.SetDeadline(time.Time{})
	_, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, corr))
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	require.NoError(t, err)
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, frame)
	require.NoError(t, err)
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "correlation id")
}

// SlowLink: the stream to the server is cut into pieces of 1 to 8 bytes,
// a millisecond apart (about 4 kB/s), and delayed by 20 ms each way, so
// that a Produce of a few kilobytes takes longer than
// connections.max.idle.ms (tg.Idle, which must be short: a second or two)
// to arrive. Every record is acknowledged, and the topic holds each once,
// in order: a request still arriving is not idle.
func SlowLink(t *testing.T, tg *Target) {
	const topic, records = "slow-link", 1000
	tg.CreateTopic(t, topic, 1)
	var mu sync.Mutex
	var slowest time.Duration // the longest a Produce answered without error took, from its write to its answer
	hook := e2eHook(func(key int16, e2e kgo.BrokerE2E) {
		if key == int16(kmsg.Produce) && e2e.Err() == nil {
			mu.Lock()
			slowest = max(slowest, e2e.DurationE2E())
			mu.Unlock()
		}
	})
	tg.addAll(Toxic{Name: "slicer", Type: "slicer", Stream: "upstream",
		Attributes: map[string]any{"average_size": 5, "size_variation": 3, "delay": 1000}})
	tg.addAll(Both(Toxic{Name: "latency", Type: "latency", Attributes: map[string]any{"latency": 20}})...)
	cl, err := kgo.NewClient(tg.via(kgo.WithHooks(hook), kgo.RequestTimeoutOverhead(30*time.Second))...)
	require.NoError(t, err)
	defer cl.Close()
	start := time.Now()
	var acked sync.WaitGroup
	var errs []error
	for i := range records {
		acked.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: []byte(Value(i))}, func(_ *kgo.Record, err error) {
			defer acked.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = cl.Flush(ctx)
	t.Logf("connections the server closed, by reason: %v", closeReasons(tg.Registry))
	require.NoError(t, err, "the records were not acknowledged within 20 s over the slow link")
	acked.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, errs)
	t.Logf("%d records acknowledged over the slow link in %v; the slowest Produce took %v from its write to its answer",
		records, time.Since(start).Round(time.Millisecond), slowest.Round(time.Millisecond))
	require.Greater(t, slowest, tg.Idle, "no Produce took longer than connections.max.idle.ms: the test shows nothing")
	tg.removeAll()
	cl.Close()
	Check(t, topic, 1, records, 20*time.Second, kgo.SeedBrokers(tg.Seed))
}

// closeReasons counts the connections reg lists as closed, by reason.
func closeReasons(reg connregistry.Registry) map[connregistry.CloseReason]int {
	n := map[connregistry.CloseReason]int{}
	for _, c := range reg.Closed(connregistry.Filter{}) {
		n[c.CloseReason]++
	}
	return n
}

// e2eHook is a kgo hook that sees each request's end to end timing.
type e2eHook func(key int16, e2e kgo.BrokerE2E)

func (h e2eHook) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) { h(key, e2e) }
