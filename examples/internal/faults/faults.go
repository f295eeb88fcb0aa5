// Package faults puts faults on the path between Kafka clients and the
// example programs, for their tests: Shopify's toxiproxy, a fault injector
// written elsewhere, runs in the test process in front of a server
// (Start), its toxics added and removed while clients use it (Add,
// Remove), and an idempotent producer's records are checked to arrive
// exactly once and in order (Records).
package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

// Proxy is a toxiproxy proxy in front of one address of a server.
type Proxy struct {
	t        testing.TB
	Addr     string // where clients connect: 127.0.0.1 on a port of its own
	Upstream string // the server's address it stands in front of
	p        *toxiproxy.Proxy
	mu       sync.Mutex
	toxics   map[string]bool
}

// Start starts a proxy on 127.0.0.1, on a port of its own, in front of
// upstream; it stops (closing every connection through it) when the test
// ends, or with Stop.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "to-"+upstream, "127.0.0.1:0", upstream)
	require.NoError(t, p.Start())
	fp := &Proxy{t: t, Addr: p.Listen, Upstream: upstream, p: p, toxics: map[string]bool{}}
	t.Cleanup(fp.Stop)
	return fp
}

// Stop stops the proxy and closes the connections through it.
func (p *Proxy) Stop() { p.p.Stop() }

// Toxic is one of toxiproxy's toxics: its type (latency, bandwidth,
// slicer, timeout, reset_peer, limit_data, slow_close), the stream it acts
// on (upstream: from the clients to the server; downstream: back), and its
// attributes.
type Toxic struct {
	Name       string
	Type       string
	Stream     string
	Attributes map[string]any
}

// Add adds toxic to every connection through the proxy, present and to
// come.
func (p *Proxy) Add(toxic Toxic) {
	p.t.Helper()
	b, err := json.Marshal(map[string]any{"name": toxic.Name, "type": toxic.Type, "stream": toxic.Stream,
		"toxicity": 1.0, "attributes": toxic.Attributes})
	require.NoError(p.t, err)
	_, err = p.p.Toxics.AddToxicJson(strings.NewReader(string(b)))
	require.NoError(p.t, err, "adding toxic %s", toxic.Name)
	p.mu.Lock()
	p.toxics[toxic.Name] = true
	p.mu.Unlock()
}

// Remove removes the toxic named name.
func (p *Proxy) Remove(name string) {
	p.t.Helper()
	require.NoError(p.t, p.p.Toxics.RemoveToxic(context.Background(), name), "removing toxic %s", name)
	p.mu.Lock()
	delete(p.toxics, name)
	p.mu.Unlock()
}

// RemoveAll removes every toxic: the faults stop.
func (p *Proxy) RemoveAll() {
	p.t.Helper()
	p.mu.Lock()
	names := make([]string, 0, len(p.toxics))
	for n := range p.toxics {
		names = append(names, n)
	}
	p.mu.Unlock()
	for _, n := range names {
		p.Remove(n)
	}
}

// Both returns toxic on both streams, named after it with -up and -down.
func Both(toxic Toxic) []Toxic {
	up, down := toxic, toxic
	up.Name, up.Stream = toxic.Name+"-up", "upstream"
	down.Name, down.Stream = toxic.Name+"-down", "downstream"
	return []Toxic{up, down}
}

// Dialer returns a kgo option that makes a client dial each proxy in
// place of the address it stands in front of, whatever the server's
// metadata advertises: the client's every connection to those addresses
// goes through the faults.
func Dialer(proxies ...*Proxy) kgo.Opt {
	via := map[string]string{}
	for _, p := range proxies {
		via[p.Upstream] = p.Addr
	}
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if to, ok := via[host]; ok {
			host = to
		}
		return d.DialContext(ctx, network, host)
	})
}

// Sockets counts the process's open sockets (Linux); ok is false where
// they cannot be counted.
func Sockets() (n int, ok bool) {
	if runtime.GOOS != "linux" {
		return 0, false
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n, true
}

// RequireSocketsReturned polls, for up to 15 seconds, until the process
// has no more open sockets than base (from Sockets), and fails t
// otherwise.
func RequireSocketsReturned(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, ok := Sockets()
		if !ok || n <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sockets did not return: %d open, %d before", n, base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// IgnoreToxiproxy are goleak's options that ignore the goroutines
// toxiproxy starts for a connection's links and their toxics: removing a
// toxic that has closed its stream (timeout, limit_data) can leave them
// blocked for ever on their channels, the injector's leak, not the
// server's under test. A test package that uses Start passes them to
// goleak.VerifyTestMain.
func IgnoreToxiproxy() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).RemoveToxic.func1"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
	}
}

// requireGoroutinesReturned polls, for up to 15 seconds, until no
// goroutine is left but those running when base was taken, toxiproxy's
// (IgnoreToxiproxy) and the server's Serve workers, and fails t
// otherwise. The workers belong to the server under test, which outlives
// the check: Serve starts them on goroutines of their own, which may not
// have run yet when the cases take base (a test with -count above 1, or a
// loaded machine), and the socket server's own tests check that they end
// with it.
func requireGoroutinesReturned(t testing.TB, base goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := goleak.Find(append(IgnoreToxiproxy(), base,
			goleak.IgnoreTopFunction("github.com/kafkanet/kafkanet/socketserver.(*Server).Serve.func1"))...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines did not return: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Value is the value of record i of a producer's run: the consumer reads
// the index back from it.
func Value(i int) string { return fmt.Sprintf("record-%06d", i) }

// Records is an idempotent producer's run (kgo's defaults: acks=all,
// idempotent, retrying without end): records produced one after another,
// record i to partition i mod the topic's partitions, until Finish.
type Records struct {
	t          testing.TB
	cl         *kgo.Client
	topic      string
	partitions int
	stop       chan struct{}
	stopOnce   sync.Once
	done       chan struct{}

	mu       sync.Mutex
	produced int
	acked    int
	errs     []error
}

// Produce starts producing to topic, which has partitions partitions,
// with cl (whose records go to the partition they name:
// kgo.RecordPartitioner(kgo.ManualPartitioner())), a record every every,
// until Finish or the end of the test.
func Produce(t testing.TB, cl *kgo.Client, topic string, partitions int, every time.Duration) *Records {
	r := &Records{t: t, cl: cl, topic: topic, partitions: partitions, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(r.halt)
	go func() {
		defer close(r.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
			rec := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(Value(i))}
			r.mu.Lock()
			r.produced++
			r.mu.Unlock()
			cl.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
				r.mu.Lock()
				defer r.mu.Unlock()
				if err != nil {
					r.errs = append(r.errs, err)
					return
				}
				r.acked++
			})
		}
	}()
	return r
}

// halt stops producing.
func (r *Records) halt() {
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}

// Counts returns the records produced so far and those acknowledged.
func (r *Records) Counts() (produced, acked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.produced, r.acked
}

// Finish stops producing and waits, for at most within, until every
// record produced has been acknowledged; it fails the test if one was
// not, or failed. It returns how many were produced.
func (r *Records) Finish(within time.Duration) int {
	r.t.Helper()
	r.halt()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	require.NoError(r.t, r.cl.Flush(ctx), "flushing the producer")
	produced, acked := r.Counts()
	r.mu.Lock()
	errs := r.errs
	r.mu.Unlock()
	require.Empty(r.t, errs, "records that failed")
	require.Equal(r.t, produced, acked, "records acknowledged of those produced")
	require.Positive(r.t, produced)
	return produced
}

// Check reads topic from its start with a client of its own (opts, a seed
// among them) and checks that it holds exactly the n records a Records
// run produced to its partitions, each once and in order: partition p
// holds records p, p+partitions, p+2×partitions, ... at offsets 0, 1,
// 2, ..., and nothing after them. Call it once the run has finished.
func Check(t testing.TB, topic string, partitions, n int, within time.Duration, opts ...kgo.Opt) {
	t.Helper()
	assign := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	next := make([]int64, partitions) // each partition's next offset, and the count of its records read
	end := make([]int64, partitions)  // each partition's high watermark, as the fetches give it
	read := 0
	for read < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of the %d records within %v: each partition's next offset %v", read, n, within, next)
		}
		for _, e := range fetches.Errors() {
			require.NoError(t, e.Err, "fetching %s[%d]", e.Topic, e.Partition)
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) { end[fp.Partition] = fp.HighWatermark })
		fetches.EachRecord(func(rec *kgo.Record) {
			p := rec.Partition
			want := int(p) + int(next[p])*partitions
			require.Equal(t, next[p], rec.Offset, "partition %d: a record missing, or twice", p)
			require.Equal(t, Value(want), string(rec.Value), "partition %d offset %d: a record out of order, or twice", p, rec.Offset)
			next[p]++
			read++
		})
	}
	for p := range partitions {
		require.Equal(t, int64((n-p+partitions-1)/partitions), next[p], "partition %d: records read", p)
		require.Equal(t, next[p], end[p], "partition %d: records after the last one produced", p)
	}
}
