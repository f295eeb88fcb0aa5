package main

// Scenario (h): many large Produce requests at once, with and without
// queued.max.request.bytes.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// budgetValueSize is the size of the record values of scenario h's
// Produce requests.
const budgetValueSize = 1 << 20

// budgetSettle is how long scenario h waits after opening its connections
// before it samples the server's RSS and sends.
const budgetSettle = 300 * time.Millisecond

func (b *bench) budgetInfo() scenarioInfo {
	return scenarioInfo{ID: "h", Title: fmt.Sprintf("%d connections each sending one %s Produce at once, with and without queued.max.request.bytes",
		b.opts.budgetClients, sizeName(b.opts.budgetRequest)),
		Notes: []string{
			fmt.Sprintf("Each request (v7, acks=1) is one frame of %d bytes holding one batch of 1 MiB records for partition 0; the", b.opts.budgetRequest),
			"bench opens the connections (an ApiVersions round trip each), waits 300 ms, then writes every request at once and reads the answers.",
			"kafkanet is the minimal socketserver host, which acknowledges Produce and discards the records, so that what it holds is the",
			"request path's alone (the example broker keeps the newest batch of each partition, a slice of its request's frame, so its RSS",
			fmt.Sprintf("would count the log too); socket.request.max.bytes is %s, and with the budget queued.max.request.bytes is %s too.", sizeName(int(b.opts.budget)), sizeName(int(b.opts.budget))),
			fmt.Sprintf("kfake runs with BlackholeProduce and message.max.bytes %d; it has no budget.", b.opts.budgetRequest),
			"The GOMEMLIMIT case has the same budget and the Go runtime's memory limit at twice it, as a Kafka broker runs with a fixed",
			"heap: without a limit, GOGC's default lets the heap grow to twice what was live at the last collection, requests included.",
			"Peak RSS rise: VmHWM after the last answer minus VmRSS before the first request, with VmHWM reset (/proc/PID/clear_refs) before it.",
			"All answered: from the start of the writes to the last response. Pool depleted: how long the budget was spent (Stats().RequestMemory).",
		},
		Ratios: []ratioPair{{kafkanetServer, kfakeServer}}}
}

// budgetCases are scenario h's cases: with the budget, with the budget and
// a Go memory limit, and without a budget.
func (b *bench) budgetCases() (limited, memLimited, unlimited string) {
	n := fmt.Sprintf("%d × %s", b.opts.budgetClients, sizeName(b.opts.budgetRequest))
	limited = n + ", queued.max.request.bytes " + sizeName(int(b.opts.budget))
	return limited, limited + ", GOMEMLIMIT " + sizeName(int(b.budgetMemLimit())), n + ", no budget"
}

// budgetMemLimit is the GOMEMLIMIT of scenario h's third case: twice the
// budget, the heap Go's default GOGC lets the budget's requests grow to.
func (b *bench) budgetMemLimit() int64 { return 2 * b.opts.budget }

// runBudget measures kafkanet with the budget, with it and a memory limit,
// and without, and kfake.
func (b *bench) runBudget(ctx context.Context, server serverKind) ([]sample, error) {
	limited, memLimited, unlimited := b.budgetCases()
	requestMax := "socket.request.max.bytes=" + strconv.FormatInt(b.opts.budget, 10)
	specs := []struct {
		name string
		spec childSpec
	}{{unlimited, childSpec{Kind: server, BlockKey: -1, Discard: true, MessageMaxBytes: b.opts.budgetRequest, Props: []string{requestMax}}}}
	if server == kafkanetServer {
		budget := "queued.max.request.bytes=" + strconv.FormatInt(b.opts.budget, 10)
		specs = append([]struct {
			name string
			spec childSpec
		}{
			{limited, childSpec{Kind: server, BlockKey: -1, Props: []string{requestMax, budget}}},
			{memLimited, childSpec{Kind: server, BlockKey: -1, Props: []string{requestMax, budget},
				Env: []string{"GOMEMLIMIT=" + strconv.FormatInt(b.budgetMemLimit(), 10)}}},
		}, specs...)
	}
	frame, err := b.budgetFrame()
	if err != nil {
		return nil, err
	}
	var out []sample
	for _, s := range specs {
		res, err := b.budgetCase(ctx, s.spec, frame)
		out = append(out, renameCase(res, s.name)...)
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return out, nil
}

// budgetFrame returns scenario h's Produce request frame, built once.
func (b *bench) budgetFrame() ([]byte, error) {
	b.produceFrameOnce.Do(func() {
		b.produceFrame, b.produceFrameErr = largeProduceFrame(b.opts.budgetRequest)
	})
	return b.produceFrame, b.produceFrameErr
}

// budgetCase starts a server, sends the large Produce requests at once and
// measures the server's peak RSS and the time until all are answered.
func (b *bench) budgetCase(ctx context.Context, spec childSpec, frame []byte) ([]sample, error) {
	c, err := b.startServer(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if err := createBenchTopic(ctx, c.addr); err != nil {
		return nil, err
	}
	var conns []*rawConn
	defer func() {
		for _, rc := range conns {
			rc.c.Close()
		}
	}()
	for range b.opts.budgetClients {
		nc, err := b.dialer.dial(ctx, c.addr)
		if err != nil {
			return nil, err
		}
		conns = append(conns, newRawConn(nc, nil))
		if err := helloRoundTrip(nc); err != nil {
			return nil, err
		}
	}
	stop := context.AfterFunc(ctx, func() {
		for _, rc := range conns {
			rc.c.Close()
		}
	})
	defer stop()
	if err := sleep(ctx, budgetSettle); err != nil {
		return nil, err
	}
	pid := c.cmd.Process.Pid
	if err := resetHWM(pid); err != nil {
		return nil, fmt.Errorf("resetting the server's peak RSS: %w", err)
	}
	before, err := c.rss()
	if err != nil {
		return nil, err
	}
	w, err := startWindow(c)
	if err != nil {
		return nil, err
	}
	took := make([]time.Duration, len(conns))
	errs := make([]error, len(conns))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, rc := range conns {
		wg.Go(func() {
			<-start
			_ = rc.c.SetDeadline(time.Now().Add(2 * time.Minute))
			t0 := time.Now()
			if errs[i] = sendProduce(rc, frame); errs[i] == nil {
				took[i] = time.Since(t0)
			}
		})
	}
	close(start)
	wg.Wait()
	if err := w.end(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(ctx.Err(), err)
	}
	peak, err := procHWM(pid)
	if err != nil {
		return nil, err
	}
	out := []sample{
		{Metric: "peak RSS rise MiB", Value: mib(peak - before)},
		{Metric: "RSS before MiB", Value: mib(before)},
		{Metric: "all answered ms", Value: micros(slices.Max(took)) / 1000},
		{Metric: "server CPU ms", Value: micros(w.ServerCPU) / 1000},
	}
	if spec.Kind == kafkanetServer {
		st, err := c.stats()
		if err != nil {
			return out, err
		}
		if st.RequestMemoryUsed != 0 {
			return out, fmt.Errorf("the request memory pool holds %d bytes after every request was answered", st.RequestMemoryUsed)
		}
		if st.RequestMemorySize > 0 {
			out = append(out, sample{Metric: "pool depleted ms", Value: st.RequestMemoryDepleted})
		}
		if st.MemoryLimit < math.MaxInt64 {
			out = append(out, sample{Metric: "GOMEMLIMIT MiB", Value: mib(st.MemoryLimit)})
		}
	}
	return out, c.stop()
}

// sendProduce writes the Produce frame (correlation id 0) on rc and reads
// its answer, which must report no error for any partition.
func sendProduce(rc *rawConn, frame []byte) error {
	if _, err := rc.c.Write(frame); err != nil {
		return err
	}
	rc.corr = 0
	if err := rc.receive(); err != nil {
		return err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = produceFrameVersion
	if err := resp.ReadFrom(rc.body[4:]); err != nil {
		return fmt.Errorf("decoding the Produce response: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("Produce to %s[%d]: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// produceFrameVersion is the version of scenario h's Produce requests.
const produceFrameVersion = 7

// largeProduceFrame returns a Produce request frame (correlation id 0) of
// size bytes, its length prefix included, holding one record batch of
// random records of budgetValueSize bytes, the last one shorter, for
// partition 0 of benchTopic.
func largeProduceFrame(size int) ([]byte, error) {
	pool, err := randomValues(1, budgetValueSize)
	if err != nil {
		return nil, err
	}
	value := pool[0]
	frameWith := func(values [][]byte) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = produceFrameVersion, 1, 30_000
		t := kmsg.NewProduceRequestTopic()
		t.Topic = benchTopic
		p := kmsg.NewProduceRequestTopicPartition()
		p.Records = appendBatch(nil, 0, time.Now().UnixMilli(), values)
		t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
		req.Topics = []kmsg.ProduceRequestTopic{t}
		return requestFrame(req)
	}
	left := size - len(frameWith([][]byte{{}})) + recordSize(0, 0) // room for the records
	var values [][]byte
	for left > 0 {
		i := len(values)
		n := min(budgetValueSize, left-(recordSize(i, 0)))
		for n > 0 && recordSize(i, n) > left { // the varints grow with the value
			n--
		}
		if n <= 0 {
			break
		}
		values = append(values, value[:n])
		left -= recordSize(i, n)
	}
	frame := frameWith(values)
	if len(frame) > size || len(frame) < size-16 {
		return nil, fmt.Errorf("built a Produce frame of %d bytes, want %d", len(frame), size)
	}
	return frame, nil
}

// createBenchTopic creates benchTopic on the server at addr.
func createBenchTopic(ctx context.Context, addr string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	return createTopic(ctx, cl, benchTopic, benchPartitions)
}
