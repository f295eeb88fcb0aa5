// Package soak is the soak's workload and its check, shared by the
// example broker's soak (examples/broker) and the proxy's upstream-failure
// test (examples/proxy): kgo producers (acks=all, idempotent, their
// defaults) each write their own sequence to every partition of a topic in
// turn, and kgo consumers of assigned partitions read them back from the
// start. The check: every acknowledged record is consumed exactly once, at
// the offset its produce was acknowledged with, and each partition holds
// offsets 0 to its end in order with each producer's sequence without a
// gap or a repeat. Nothing but order-free digests is kept, so a run can
// last hours.
package soak

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Digest sums, order-free, the records a partition was told it
// acknowledged or that a consumer read from it: their count and a hash of
// each record's producer, sequence and offset. Equal digests on both sides
// mean every acknowledged record was consumed once, at its acknowledged
// offset, without keeping the records.
type Digest struct {
	Count int64
	Sum   uint64
}

// Add adds one record.
func (d *Digest) Add(producer int, seq, offset int64) {
	h := fnv.New64a()
	var b [24]byte
	binary.BigEndian.PutUint64(b[0:], uint64(producer))
	binary.BigEndian.PutUint64(b[8:], uint64(seq))
	binary.BigEndian.PutUint64(b[16:], uint64(offset))
	h.Write(b[:])
	d.Count++
	d.Sum += h.Sum64()
}

// Value is the value of a producer's record seq.
func Value(producer int, seq int64) string { return fmt.Sprintf("p%d-s%d", producer, seq) }

// ParseValue reads a Value.
func ParseValue(v string) (producer int, seq int64, ok bool) {
	p, s, found := strings.Cut(v, "-s")
	if !found || !strings.HasPrefix(p, "p") {
		return 0, 0, false
	}
	producer, err1 := strconv.Atoi(p[1:])
	seq, err2 := strconv.ParseInt(s, 10, 64)
	return producer, seq, err1 == nil && err2 == nil
}

// Config is a workload.
type Config struct {
	Seed       string // where the clients start
	Topic      string // with Partitions partitions, created by the caller
	Partitions int
	Producers  int
	Consumers  int
	InFlight   int           // records a producer buffers at most
	Duration   time.Duration // how long the producers produce
	Opts       []kgo.Opt     // every client's, such as SASL or TLS
	// Deadline bounds how long the consumers take to reach the end once
	// production has ended.
	Deadline time.Duration
}

// Run is a running workload.
type Run struct {
	t        *testing.T
	cfg      Config
	ctx      context.Context
	cancel   context.CancelFunc
	deadline time.Time
	clients  []*kgo.Client

	mu     sync.Mutex
	acked  []Digest
	failed []error

	produce sync.WaitGroup

	consumedMu sync.Mutex
	consumed   []Digest
	broke      *Break // the first record out of place
	consume    sync.WaitGroup
	until      chan map[int32]int64
}

// Start starts the producers and the consumers; they run until Finish.
func Start(t *testing.T, cfg Config) *Run {
	t.Helper()
	if cfg.Deadline == 0 {
		cfg.Deadline = 60 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{
		t: t, cfg: cfg, ctx: ctx, cancel: cancel, deadline: time.Now().Add(cfg.Duration),
		acked: make([]Digest, cfg.Partitions), consumed: make([]Digest, cfg.Partitions),
		until: make(chan map[int32]int64, cfg.Consumers),
	}
	for p := range cfg.Producers {
		r.startProducer(p)
	}
	for i := range cfg.Consumers {
		r.startConsumer(i)
	}
	return r
}

func (r *Run) client(opts ...kgo.Opt) *kgo.Client {
	r.t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Seed)}, r.cfg.Opts...)
	cl, err := kgo.NewClient(append(all, opts...)...)
	require.NoError(r.t, err)
	r.clients = append(r.clients, cl)
	return cl
}

// startProducer starts producer p: it writes its own sequence to every
// partition in turn until the run's duration has passed, and adds each
// acknowledged record to its partition's digest.
func (r *Run) startProducer(p int) {
	cl := r.client(kgo.DefaultProduceTopic(r.cfg.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(r.cfg.InFlight))
	r.produce.Go(func() {
		next := make([]int64, r.cfg.Partitions)
		for i := 0; time.Now().Before(r.deadline); i++ {
			part := int32(i % r.cfg.Partitions)
			seq := next[part]
			next[part]++
			rec := kgo.StringRecord(Value(p, seq))
			rec.Partition = part
			cl.Produce(r.ctx, rec, func(rec *kgo.Record, err error) {
				r.mu.Lock()
				defer r.mu.Unlock()
				if err != nil {
					if len(r.failed) < 10 {
						r.failed = append(r.failed, err)
					}
					return
				}
				r.acked[rec.Partition].Add(p, seq, rec.Offset)
			})
		}
		fctx, fcancel := context.WithTimeout(r.ctx, 30*time.Second)
		defer fcancel()
		assert.NoError(r.t, cl.Flush(fctx), "producer %d", p)
	})
}

// startConsumer starts consumer i: it reads its share of the partitions
// from the start and checks the records as they stream: offsets 0..end-1
// exactly once and in order, each producer's sequence without a gap or a
// repeat. Only the digests are kept.
func (r *Run) startConsumer(i int) {
	t := r.t
	assign := map[int32]kgo.Offset{}
	for p := int32(i); p < int32(r.cfg.Partitions); p += int32(r.cfg.Consumers) {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl := r.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.Topic: assign}), kgo.FetchMaxWait(500*time.Millisecond))
	r.consume.Go(func() {
		var until map[int32]int64
		next := map[int32]int64{}
		nextSeq := map[[2]int64]int64{} // partition, producer -> sequence
		broken := false
		var endBy time.Time
		for !broken {
			if until == nil {
				select {
				case until = <-r.until:
					endBy = time.Now().Add(r.cfg.Deadline)
				default:
				}
			}
			if until != nil {
				done := true
				for p := range assign {
					done = done && next[p] >= until[p]
				}
				if done {
					return
				}
				if time.Now().After(endBy) {
					t.Errorf("consumer %d: did not reach the end of its partitions: at %v of %v", i, next, until)
					return
				}
			}
			pctx, pcancel := context.WithTimeout(r.ctx, time.Second)
			fetches := cl.PollFetches(pctx)
			pcancel()
			for _, err := range fetches.Errors() {
				if !errors.Is(err.Err, context.DeadlineExceeded) && !errors.Is(err.Err, context.Canceled) {
					assert.NoError(t, err.Err, "consumer %d: %s[%d]", i, err.Topic, err.Partition)
				}
			}
			fetches.EachRecord(func(rec *kgo.Record) {
				if broken {
					return
				}
				producer, seq, ok := ParseValue(string(rec.Value))
				key := [2]int64{int64(rec.Partition), int64(producer)}
				switch {
				case rec.Offset != next[rec.Partition]:
					t.Errorf("partition %d: offset %d where %d was next: a record out of order, missing or twice", rec.Partition, rec.Offset, next[rec.Partition])
				case !ok:
					t.Errorf("partition %d offset %d: value %q", rec.Partition, rec.Offset, rec.Value)
				case seq != nextSeq[key]:
					t.Errorf("partition %d offset %d: producer %d's sequence %d where %d was next", rec.Partition, rec.Offset, producer, seq, nextSeq[key])
				default:
					next[rec.Partition] = rec.Offset + 1
					nextSeq[key]++
					r.consumedMu.Lock()
					r.consumed[rec.Partition].Add(producer, seq, rec.Offset)
					r.consumedMu.Unlock()
					return
				}
				broken = true
				r.consumedMu.Lock()
				if r.broke == nil {
					r.broke = &Break{Partition: rec.Partition, Offset: rec.Offset}
				}
				r.consumedMu.Unlock()
			})
		}
	})
}

// Break is where a consumer first found a record out of place.
type Break struct {
	Partition int32
	Offset    int64
}

// Broke returns where a consumer first found a record out of place, nil
// if none has: a test that fails may show the log around it.
func (r *Run) Broke() *Break {
	r.consumedMu.Lock()
	defer r.consumedMu.Unlock()
	return r.broke
}

// Deadline is when the producers stop producing.
func (r *Run) Deadline() time.Time { return r.deadline }

// WaitProduced waits until the producers have stopped and flushed.
func (r *Run) WaitProduced() { r.produce.Wait() }

// Finish tells the consumers where each partition ends (its high
// watermark once production has ended), waits until they have read to it,
// closes the clients and checks: no produce failed, each partition's
// records were consumed up to its end, and the records consumed are
// exactly those acknowledged, at their acknowledged offsets. It returns
// the records consumed.
func (r *Run) Finish(until map[int32]int64) int64 {
	t := r.t
	t.Helper()
	r.WaitProduced()
	for range r.cfg.Consumers {
		r.until <- until
	}
	r.consume.Wait()
	r.cancel()
	for _, cl := range r.clients {
		cl.Close()
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	require.Empty(t, r.failed, "produce errors")
	r.consumedMu.Lock()
	defer r.consumedMu.Unlock()
	total := int64(0)
	for p := range int32(r.cfg.Partitions) {
		require.Equalf(t, until[p], r.consumed[p].Count, "partition %d: records consumed vs. its high watermark", p)
		require.Equalf(t, r.acked[p].Count, r.consumed[p].Count, "partition %d: records acknowledged vs. consumed", p)
		require.Equalf(t, r.acked[p].Sum, r.consumed[p].Sum,
			"partition %d: the records consumed are not those acknowledged at their acknowledged offsets", p)
		total += r.consumed[p].Count
	}
	require.Positive(t, total)
	return total
}

// Close stops the clients at once (a test that failed before Finish).
func (r *Run) Close() {
	r.cancel()
	for _, cl := range r.clients {
		cl.Close()
	}
}
