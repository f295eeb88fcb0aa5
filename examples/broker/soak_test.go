package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/examples/internal/soak"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// soakFor lengthens TestSoak: go test -run Soak ./examples/broker/ -soak=5m
// (the flag after the package).
var soakFor = flag.Duration("soak", 0, "how long each TestSoak case runs (0: a few seconds)")

// Soak: kgo producers (acks=all, idempotent, their defaults) and consumers
// of assigned partitions run through the broker for a while, with a raw
// client pipelining requests on one connection per broker. Every
// acknowledged record is consumed exactly once, at the offset its produce
// was acknowledged with, in order per partition and producer; every
// pipelined response comes back whole, in correlation-id order. Afterwards
// no connection or long poll is left.
func TestSoak(t *testing.T) {
	each := *soakFor
	if each <= 0 {
		each = 4 * time.Second
	}
	tests := []struct {
		name    string
		brokers int
	}{
		{"1 broker", 1},
		{"3 brokers", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			c := startTestCluster(t, tt.brokers, "log.retention.bytes="+strconv.Itoa(soakRetention))
			runSoak(t, c, each)
			c.Close() // the soak's clients are closed

			for i, b := range c.brokers {
				assert.Zero(t, b.srv.Registry().Len(), "broker %d keeps connections in its registry", i)
			}
			base.RequireReturned(t)
		})
	}
}

func runSoak(t *testing.T, c *cluster, d time.Duration) {
	const (
		topic      = "soak"
		partitions = 6
		producers  = 3
		consumers  = 2
		inFlight   = 500 // records a producer has buffered at most
	)
	seed := addr(t, c, 0, "CLIENT")
	setup := dialRaw(t, seed)
	createTopic(t, setup, topic, partitions)
	createTopic(t, setup, "soak-raw", int32(len(c.brokers)))
	createTopic(t, setup, "soak-idle", int32(len(c.brokers)))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := soak.Start(t, soak.Config{Seed: seed, Topic: topic, Partitions: partitions,
		Producers: producers, Consumers: consumers, InFlight: inFlight, Duration: d})
	defer run.Close()

	// The heap and the resident set, sampled while the soak runs: the
	// broker's log is bounded by retention, and the checks keep digests.
	var peakHeap atomic.Uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peakHeap.Load() {
				peakHeap.Store(ms.HeapAlloc)
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()

	// Raw pipelining, one connection per broker, in this goroutine.
	rounds := 0
	for time.Now().Before(run.Deadline()) {
		for i := range c.brokers {
			pipelineRound(t, c, i, 40)
		}
		rounds++
	}
	run.WaitProduced()

	// Every partition's end, from the broker's state: the consumers must
	// reach it.
	until := map[int32]int64{}
	tp := c.state.topic(topic)
	for p := range int32(partitions) {
		until[p] = c.state.highWatermark(tp, p)
	}
	total := run.Finish(until)
	cancel()
	<-sampled

	hwm := peakRSS(t)
	t.Logf("%v: %d records produced and consumed exactly once; %d pipelined rounds of 40 requests per broker; peak heap %d MiB, peak RSS %d MiB",
		d, total, rounds, peakHeap.Load()>>20, hwm>>20)
	assert.Less(t, peakHeap.Load(), uint64(soakMaxHeap), "the heap outgrew the soak's ceiling")
	if hwm > 0 {
		assert.Less(t, hwm, uint64(soakMaxRSS), "the process's peak RSS outgrew the soak's ceiling")
	}
}

// The soak's memory ceilings: the broker keeps at most its retention per
// partition (soakRetention), the checks keep digests, so neither grows
// with the soak's length. The heap's bound is about 1.4 times what a
// 10-minute soak reached (540 to 600 MiB): batches kept as slices of
// frames shared between partitions took it past 900 MiB in 5 minutes,
// and growing (detachSmall). The RSS bound is the target for
// -soak=10m; it holds the race detector's shadow memory too.
const (
	soakRetention = 32 << 20
	soakMaxHeap   = 800 << 20
	soakMaxRSS    = 2 << 30
)

// peakRSS returns the process's peak resident set (VmHWM), 0 where
// /proc/self/status is missing.
func peakRSS(t *testing.T) uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err, line)
			return kb << 10
		}
	}
	return 0
}

// pipelineRound writes n requests of several APIs on a new connection to
// broker i without waiting for their responses (a goroutine writes while
// this one reads), then checks that n responses come back in
// correlation-id order, each decoding whole as its request's response.
func pipelineRound(t *testing.T, c *cluster, i int, n int) {
	t.Helper()
	conn := dialRaw(t, addr(t, c, i, "CLIENT"))
	defer conn.conn.Close()
	part := int32(i) // the partition broker i leads
	reqs := make([]kmsg.Request, n)
	for j := range reqs {
		switch j % 6 {
		case 0:
			reqs[j] = metadataRequest(12, false, "soak-raw")
		case 1:
			reqs[j] = produceRequest(1, "soak-raw", part, "raw-"+strconv.Itoa(j))
		case 2:
			reqs[j] = fetchRequest(0, "soak-raw", part, 0)
		case 3: // a long poll that expires: answered from another goroutine
			reqs[j] = fetchRequest(5*time.Millisecond, "soak-idle", part, 0)
		case 4:
			req := kmsg.NewPtrListOffsetsRequest()
			req.Version = 6
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "soak-raw"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = part, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			reqs[j] = req
		case 5:
			reqs[j] = kmsg.NewPtrApiVersionsRequest() // answered by the socket server itself
		}
	}
	writeErr := make(chan error, 1)
	go func() {
		var b []byte
		for j, req := range reqs {
			b = append(b, formatter.AppendRequest(nil, req, int32(j+1))...) // AppendRequest writes the size at dst[0]
		}
		_, err := conn.conn.Write(b)
		writeErr <- err
	}()
	for j, req := range reqs {
		frame, err := conn.readFrame()
		require.NoErrorf(t, err, "broker %d: response %d of %d", i, j+1, n)
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		decode(t, frame, resp, int32(j+1))
		if p, ok := resp.(*kmsg.ProduceResponse); ok {
			require.Equal(t, int16(0), p.Topics[0].Partitions[0].ErrorCode)
		}
	}
	require.NoError(t, <-writeErr)
}

// storedValues returns the values of partition p of topic name as the
// broker's state holds them, by offset.
func storedValues(t *testing.T, c *cluster, name string, p int32) map[int64]string {
	t.Helper()
	tp := c.state.topic(name)
	require.NotNil(t, tp, "topic %s", name)
	raw, _, _, err := c.state.read(tp, p, 0, 1<<30, nil)
	require.NoError(t, err)
	values, offsets := recordValues(t, raw)
	out := make(map[int64]string, len(values))
	for i, v := range values {
		out[offsets[i]] = v
	}
	return out
}

// Producers with acks=all keep producing while the cluster shuts down:
// every record whose produce was acknowledged (kgo's callback without an
// error, or a raw produce response without an error) is in the broker's
// state afterwards, at the offset it was acknowledged with.
func TestShutdownLosesNoAcknowledgedWrite(t *testing.T) {
	for _, brokers := range []int{1, 3} {
		t.Run(strconv.Itoa(brokers)+" brokers", func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			const topic, partitions, producers = "acked", 6, 3
			c := startTestCluster(t, brokers)
			seed := addr(t, c, 0, "CLIENT")
			createTopic(t, dialRaw(t, seed), topic, partitions)

			type ack struct {
				partition int32
				offset    int64
				value     string
			}
			var (
				mu       sync.Mutex
				acks     []ack
				failures atomic.Int64
				running  sync.WaitGroup
			)
			stop := make(chan struct{})
			var clients []*kgo.Client
			for p := range producers {
				cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic(topic),
					kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(200),
					kgo.ProducerBatchCompression(kgo.NoCompression()), // the check below decodes the stored batches
					kgo.RecordDeliveryTimeout(5*time.Second), kgo.RetryTimeout(5*time.Second))
				require.NoError(t, err)
				clients = append(clients, cl)
				running.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						r := kgo.StringRecord(soak.Value(p, int64(i)))
						r.Partition = int32(i % partitions)
						cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
							if err != nil {
								failures.Add(1)
								return
							}
							mu.Lock()
							acks = append(acks, ack{r.Partition, r.Offset, string(r.Value)})
							mu.Unlock()
						})
					}
				})
			}
			// A raw client per broker pipelines acks=-1 produces too.
			for i := range c.brokers {
				conn, err := net.DialTimeout("tcp", addr(t, c, i, "CLIENT"), 5*time.Second)
				require.NoError(t, err)
				defer conn.Close()
				running.Go(func() {
					var written sync.WaitGroup
					defer written.Wait()
					values := map[int32]string{}
					var vmu sync.Mutex
					written.Go(func() {
						for corr := int32(1); ; corr++ {
							select {
							case <-stop:
								return
							default:
							}
							v := fmt.Sprintf("raw%d-%d", i, corr)
							vmu.Lock()
							values[corr] = v
							vmu.Unlock()
							if _, err := conn.Write(formatter.AppendRequest(nil, produceRequest(-1, topic, int32(i), v), corr)); err != nil {
								return
							}
						}
					})
					defer conn.Close() // as a client does when the broker closes
					for corr := int32(1); ; corr++ {
						var size [4]byte
						if _, err := fullRead(conn, size[:]); err != nil {
							return // the broker closed the connection
						}
						frame := make([]byte, binary.BigEndian.Uint32(size[:]))
						if _, err := fullRead(conn, frame); err != nil {
							return
						}
						if !assert.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "raw producer %d: correlation id", i) {
							return
						}
						resp := kmsg.NewPtrProduceResponse()
						resp.Version = 9
						if !assert.NoError(t, resp.ReadFrom(frame[5:])) { // v9 is flexible: an empty tag section follows the correlation id
							return
						}
						sp := resp.Topics[0].Partitions[0]
						if sp.ErrorCode == 0 {
							vmu.Lock()
							v := values[corr]
							vmu.Unlock()
							mu.Lock()
							acks = append(acks, ack{int32(i), sp.BaseOffset, v})
							mu.Unlock()
						}
					}
				})
			}
			require.Eventually(t, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(acks) >= 2000
			}, 30*time.Second, 5*time.Millisecond, "too few records acknowledged before the shutdown")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			require.NoError(t, c.Shutdown(ctx))
			t.Logf("Shutdown took %v under load", time.Since(start))
			close(stop)
			for _, conn := range clients {
				conn.Close() // fails what it still buffers
			}
			running.Wait()

			mu.Lock()
			defer mu.Unlock()
			stored := map[int32]map[int64]string{}
			for p := range int32(partitions) {
				stored[p] = storedValues(t, c, topic, p)
			}
			for _, a := range acks {
				v, ok := stored[a.partition][a.offset]
				require.Truef(t, ok, "acknowledged record %s (partition %d offset %d) lost", a.value, a.partition, a.offset)
				require.Equalf(t, a.value, v, "partition %d offset %d", a.partition, a.offset)
			}
			t.Logf("%d acknowledged records all stored; %d records failed when the brokers went", len(acks), failures.Load())
			for i, b := range c.brokers {
				assert.Zero(t, b.srv.Registry().Len(), "broker %d keeps connections in its registry", i)
			}
			base.RequireReturned(t)
		})
	}
}

func fullRead(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Clients that go away while a long-poll Fetch waits (MaxWait of several
// seconds, no data) or right after sending requests the broker is handling:
// the long polls stop, the connections close, every broker's connection
// count and registry return to zero, the per-address quota gives every slot
// back (as many new connections as the limit allows are served), and no
// goroutine is left.
func TestDisconnectDuringLongPollAndHandling(t *testing.T) {
	const limit = 6 // max.connections.per.ip
	tests := []struct {
		name string
		// start makes limit connections busy; gone makes them go.
		start func(t *testing.T, c *cluster) (gone func())
	}{
		{"raw long polls, close", func(t *testing.T, c *cluster) func() {
			conns := longPollConns(t, c, limit)
			return func() {
				for _, conn := range conns {
					require.NoError(t, conn.conn.Close())
				}
			}
		}},
		{"raw long polls, reset", func(t *testing.T, c *cluster) func() {
			conns := longPollConns(t, c, limit)
			return func() {
				for _, conn := range conns {
					require.NoError(t, conn.conn.(*net.TCPConn).SetLinger(0))
					require.NoError(t, conn.conn.Close())
				}
			}
		}},
		{"kgo consumers, closed", func(t *testing.T, c *cluster) func() {
			var cls []*kgo.Client
			for range limit / 3 { // kgo connects to the seed, and to the broker for fetches and for the rest
				cl, err := kgo.NewClient(kgo.SeedBrokers(addr(t, c, 0, "CLIENT")), kgo.FetchMaxWait(5*time.Second),
					kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"empty": {0: kgo.NewOffset().AtStart()}}))
				require.NoError(t, err)
				cls = append(cls, cl)
				go cl.PollFetches(context.Background()) // returns when the client closes
			}
			require.Eventually(t, func() bool { return longPolls() == len(cls) }, 10*time.Second, 5*time.Millisecond)
			return func() {
				for _, cl := range cls {
					cl.Close()
				}
			}
		}},
		{"pipelined produces, reset", func(t *testing.T, c *cluster) func() {
			var conns []*rawConn
			for range limit {
				conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
				for range 50 {
					conn.send(produceRequest(-1, "empty", 0, strings.Repeat("x", 1000)))
				}
				conns = append(conns, conn)
			}
			return func() {
				for _, conn := range conns {
					require.NoError(t, conn.conn.(*net.TCPConn).SetLinger(0))
					require.NoError(t, conn.conn.Close())
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			c := startTestCluster(t, 1, "max.connections.per.ip="+strconv.Itoa(limit))
			setup := dialRaw(t, addr(t, c, 0, "INTERNAL"))
			createTopic(t, setup, "empty", 1)
			setup.conn.Close()
			requireConnections(t, c, 0)

			gone := tt.start(t, c)
			gone()
			require.Eventually(t, func() bool { return longPolls() == 0 }, 10*time.Second, 5*time.Millisecond, "long polls still wait")
			requireConnections(t, c, 0)

			// Every quota slot is free again: limit new connections are served.
			for range limit {
				conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
				roundTrip[*kmsg.ApiVersionsResponse](conn, kmsg.NewPtrApiVersionsRequest())
			}
			c.Close()
			base.RequireReturned(t)
		})
	}
}

// longPollConns opens n connections that each send a Fetch that waits
// 5 s for records that never come, and waits until the broker holds them.
func longPollConns(t *testing.T, c *cluster, n int) []*rawConn {
	t.Helper()
	var conns []*rawConn
	for range n {
		conn := dialRaw(t, addr(t, c, 0, "CLIENT"))
		conn.send(fetchRequest(5*time.Second, "empty", 0, 0))
		conns = append(conns, conn)
	}
	require.Eventually(t, func() bool { return longPolls() == n }, 10*time.Second, 5*time.Millisecond, "long polls waiting")
	return conns
}

// requireConnections waits until every listener of every broker of c
// counts n connections in all and the registries hold as many.
func requireConnections(t *testing.T, c *cluster, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var b strings.Builder
		ok := true
		for i, br := range c.brokers {
			counts := br.srv.Stats().ConnectionCount
			names := make([]string, 0, len(counts))
			total := 0
			for l, k := range counts {
				names = append(names, fmt.Sprintf("%s=%d", l, k))
				total += k
			}
			sort.Strings(names)
			reg := br.srv.Registry().Len()
			fmt.Fprintf(&b, "broker %d: %v, registry %d; ", i, names, reg)
			ok = ok && total == n && reg == n
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("connections never reached %d: %s", n, b.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
