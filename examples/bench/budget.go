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
	"strings"
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
			fmt.Sprintf("examples/broker: the example broker itself, with the same budget and socket.request.max.bytes, message.max.bytes %d so", b.opts.budgetRequest),
			"that it stores every batch (each answered without error), and log.retention.bytes=0 so that its log keeps only the newest batch",
			"of each partition (its RSS then holds the request path's bytes and one batch, not a log of every request); -broker-set does not",
			"apply. It sets the Go runtime's memory limit itself: twice its budget plus the records its log holds (own memory limit: what it",
			"logged at start, before any record). No server has GOMEMLIMIT nor GOGC in its environment, even when the bench's has them,",
			"but the GOMEMLIMIT case its own.",
			"Targets, examples/broker's: peak RSS rise at most 200 MiB, every request answered.",
			"Peak RSS rise: VmHWM after the last answer minus VmRSS before the first request, with VmHWM reset (/proc/PID/clear_refs) before it.",
			"All answered: from the start of the writes to the last response. Pool depleted: how long the budget was spent (Stats().RequestMemory).",
		},
		Ratios: []ratioPair{{kafkanetServer, kfakeServer}},
		Targets: []target{
			{Case: b.budgetBrokerCase(), Metric: peakRiseMetric, AtMost: true, Bound: budgetBrokerPeakRise},
			{Case: b.budgetBrokerCase(), Metric: answeredMetric, Bound: 100},
		}}
}

// The metrics of scenario h that its targets name.
const (
	peakRiseMetric = "peak RSS rise MiB"
	answeredMetric = "answered %"
)

// budgetBrokerPeakRise is the target of examples/broker's peak RSS rise in
// scenario h, in MiB.
const budgetBrokerPeakRise = 200

// budgetCases are scenario h's cases: with the budget, with the budget and
// a Go memory limit, and without a budget.
func (b *bench) budgetCases() (limited, memLimited, unlimited string) {
	n := fmt.Sprintf("%d × %s", b.opts.budgetClients, sizeName(b.opts.budgetRequest))
	limited = n + ", queued.max.request.bytes " + sizeName(int(b.opts.budget))
	return limited, limited + ", GOMEMLIMIT " + sizeName(int(b.budgetMemLimit())), n + ", no budget"
}

// budgetBrokerCase is scenario h's case of examples/broker: the budget,
// and the memory limit the broker sets itself.
func (b *bench) budgetBrokerCase() string {
	limited, _, _ := b.budgetCases()
	return limited + ", examples/broker's own memory limit (no GOMEMLIMIT)"
}

// budgetMemLimit is the GOMEMLIMIT of scenario h's third case: twice the
// budget, the heap Go's default GOGC lets the budget's requests grow to.
func (b *bench) budgetMemLimit() int64 { return 2 * b.opts.budget }

// budgetUnsetEnv are the variables removed from every server's
// environment in scenario h, whatever the bench's: the Go runtime's memory
// limit is then the one the case sets (GOMEMLIMIT in its case,
// examples/broker's own), or none, with GOGC's default.
var budgetUnsetEnv = []string{"GOMEMLIMIT", "GOGC"}

// runBudget measures kafkanet with the budget, with it and a memory limit,
// and without; kfake; and examples/broker with the budget and its own
// memory limit.
func (b *bench) runBudget(ctx context.Context, server serverKind) ([]sample, error) {
	limited, memLimited, unlimited := b.budgetCases()
	requestMax := "socket.request.max.bytes=" + strconv.FormatInt(b.opts.budget, 10)
	budget := "queued.max.request.bytes=" + strconv.FormatInt(b.opts.budget, 10)
	type caseRun struct {
		name  string
		start func(context.Context) (*child, error)
	}
	minimal := func(spec childSpec) func(context.Context) (*child, error) {
		return func(ctx context.Context) (*child, error) { return b.startServer(ctx, spec) }
	}
	noBudget := caseRun{unlimited, minimal(childSpec{Kind: server, BlockKey: -1, Discard: true, MessageMaxBytes: b.opts.budgetRequest,
		Props: []string{requestMax}, UnsetEnv: budgetUnsetEnv})}
	var runs []caseRun
	switch server {
	case brokerServer:
		runs = []caseRun{{b.budgetBrokerCase(), func(ctx context.Context) (*child, error) {
			return b.launchBroker(ctx, brokerSpec{server: brokerServer, ownProps: true, unsetEnv: budgetUnsetEnv,
				props: []string{requestMax, budget, "message.max.bytes=" + strconv.Itoa(b.opts.budgetRequest), "log.retention.bytes=0"}})
		}}}
	case kafkanetServer:
		runs = []caseRun{
			{limited, minimal(childSpec{Kind: server, BlockKey: -1, Props: []string{requestMax, budget}, UnsetEnv: budgetUnsetEnv})},
			{memLimited, minimal(childSpec{Kind: server, BlockKey: -1, Props: []string{requestMax, budget}, UnsetEnv: budgetUnsetEnv,
				Env: []string{"GOMEMLIMIT=" + strconv.FormatInt(b.budgetMemLimit(), 10)}})},
			noBudget,
		}
	default:
		runs = []caseRun{noBudget}
	}
	frame, err := b.budgetFrame()
	if err != nil {
		return nil, err
	}
	var out []sample
	for _, r := range runs {
		res, err := b.budgetRun(ctx, r.start, frame)
		out = append(out, renameCase(res, r.name)...)
		if err != nil {
			return out, fmt.Errorf("%s: %w", r.name, err)
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

// budgetRun starts a server with start, sends the large Produce requests
// at once and measures the server's peak RSS and the time until all are
// answered. A request unanswered, or answered with an error, fails the
// run, but the server's figures are still returned.
func (b *bench) budgetRun(ctx context.Context, start func(context.Context) (*child, error), frame []byte) ([]sample, error) {
	c, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	ownLimit, ownLimitOK := int64(0), false
	if c.name == brokerServer {
		if ownLimit, ownLimitOK, err = loggedMemoryLimit(ctx, c); err != nil {
			return nil, err
		}
	}
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
	answered := make([]bool, len(conns))
	errs := make([]error, len(conns))
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i, rc := range conns {
		wg.Go(func() {
			<-begin
			_ = rc.c.SetDeadline(time.Now().Add(2 * time.Minute))
			t0 := time.Now()
			answered[i], errs[i] = sendProduce(rc, frame)
			if errs[i] == nil {
				took[i] = time.Since(t0)
			}
		})
	}
	close(begin)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := w.end(); err != nil {
		return nil, err
	}
	peak, err := procHWM(pid)
	if err != nil {
		return nil, errors.Join(err, c.alive())
	}
	n := 0
	for _, a := range answered {
		if a {
			n++
		}
	}
	out := []sample{
		{Metric: peakRiseMetric, Value: mib(peak - before)},
		{Metric: "RSS before MiB", Value: mib(before)},
		{Metric: answeredMetric, Value: 100 * float64(n) / float64(len(conns))},
	}
	failed := errors.Join(errs...)
	if failed == nil {
		out = append(out, sample{Metric: "all answered ms", Value: micros(slices.Max(took)) / 1000})
	}
	out = append(out, sample{Metric: "server CPU ms", Value: micros(w.ServerCPU) / 1000})
	if ownLimitOK {
		out = append(out, sample{Metric: "own memory limit MiB", Value: mib(ownLimit)})
	}
	if failed != nil {
		return out, fmt.Errorf("%d of %d requests answered, %d without error: %w", n, len(conns), countNil(errs), failed)
	}
	if c.name == kafkanetServer {
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

// countNil counts the nil errors of errs.
func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}

// loggedMemoryLimit waits, at most 5 s, for the example broker c to log
// the Go runtime's memory limit it set at start ("memory limit" with its
// bytes), and returns it. It returns false when the broker logged that it
// set none, or does not log it (an older broker); an error when the
// broker says it took the environment's GOMEMLIMIT.
func loggedMemoryLimit(ctx context.Context, c *child) (int64, bool, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		limit, state := parseMemoryLimitLog(c.stderr.String())
		switch state {
		case limitSet:
			return limit, true, nil
		case limitNone:
			return 0, false, nil
		case limitFromEnv:
			return 0, false, errors.New("examples/broker took GOMEMLIMIT from its environment, which should have none")
		}
		if time.Now().After(deadline) {
			return 0, false, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return 0, false, err
		}
	}
}

// What the example broker's log says of the memory limit at start.
type limitState int

const (
	limitUnlogged limitState = iota
	limitSet                 // msg="memory limit" bytes=N
	limitNone                // msg="memory limit: none"
	limitFromEnv             // msg="memory limit: the environment's"
)

// parseMemoryLimitLog reads the example broker's log line about its memory
// limit (log/slog's text format) from log.
func parseMemoryLimitLog(log string) (int64, limitState) {
	for line := range strings.Lines(log) {
		switch {
		case strings.Contains(line, `msg="memory limit: none"`):
			return 0, limitNone
		case strings.Contains(line, `msg="memory limit: the environment's"`):
			return 0, limitFromEnv
		case strings.Contains(line, `msg="memory limit"`):
			_, v, ok := strings.Cut(line, " bytes=")
			if !ok {
				continue
			}
			v, _, _ = strings.Cut(v, " ")
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n, limitSet
			}
		}
	}
	return 0, limitUnlogged
}

// sendProduce writes the Produce frame (correlation id 0) on rc and reads
// its answer, which must report no error for any partition. answered says
// whether an answer came, whatever it says.
func sendProduce(rc *rawConn, frame []byte) (answered bool, err error) {
	if _, err := rc.c.Write(frame); err != nil {
		return false, err
	}
	rc.corr = 0
	if err := rc.receive(); err != nil {
		return false, err
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = produceFrameVersion
	if err := resp.ReadFrom(rc.body[4:]); err != nil {
		return true, fmt.Errorf("decoding the Produce response: %w", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return true, fmt.Errorf("Produce to %s[%d]: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return true, nil
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
