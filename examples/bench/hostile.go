package main

// Scenario (i): a legitimate client beside slow and hostile peers, on
// examples/broker with its defaults and a SASL_PLAINTEXT listener.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// brokerServer is scenario i's server: examples/broker with its defaults
// and one SASL_PLAINTEXT listener (and beside it, with -baseline-broker,
// baselineServer started the same way).
const brokerServer serverKind = "examples/broker"

// hostileServers are scenario i's servers.
func (b *bench) hostileServers() []serverKind {
	return b.withBaseline([]serverKind{brokerServer}, brokerServer)
}

// The SASL/PLAIN users of scenario i's listener: the legitimate client
// logs in as alice, the attackers that authenticate as bob, and the failed
// logins try bob with a wrong password.
const (
	hostileListener  = "CLIENT"
	legitUser        = "alice"
	legitPassword    = "alice-secret"
	attackerUser     = "bob"
	attackerPassword = "bob-secret"
	wrongPassword    = "not-bob-secret"
)

const (
	// hostileTopic is the legitimate producer's topic: one partition,
	// with hostileRetentionBytes of retention, so that the broker's RSS
	// is its network layer's and not a log of what the producer wrote.
	hostileTopic          = "hostile"
	hostileRetentionBytes = 16 << 20
	hostileRecordSize     = 1024
	// hostileTick is the legitimate Metadata client's period.
	hostileTick = time.Millisecond
	// hostileSetupTimeout bounds everything before a case's windows: the
	// broker's topic, the legitimate client's warm-up and the attackers'
	// set-up.
	hostileSetupTimeout = 30 * time.Second
	// hostileLoginTimeout bounds an attacker's dial and SASL exchange.
	hostileLoginTimeout = 10 * time.Second
	// hostileParallel is how many attackers connect at once.
	hostileParallel = 32

	// claimFrameSize is the size a claim announces: a Produce frame within
	// socket.request.max.bytes' default, 104857600. claimHeader sends
	// claimSent bytes of it after the size.
	claimFrameSize = 100_000_000
	claimSent      = 10
	// pipelineDepth is how many Metadata requests a pipeliner writes at
	// once.
	pipelineDepth = 64
	// trickleInterval is how often a slowloris connection sends a byte;
	// slowlorisClientIDLen makes its request (an ApiVersions v0) 270 bytes
	// long, 269 s of trickling: no case sees its end.
	trickleInterval      = time.Second
	slowlorisClientIDLen = 256
	// loginRetryPause is how long a failed-login attacker waits after an
	// attempt that went wrong otherwise (a timeout, a reset).
	loginRetryPause = 10 * time.Millisecond
)

// hostileKind is one of scenario i's cases.
type hostileKind int

const (
	hostileAlone hostileKind = iota
	hostileSlowloris
	hostileClaims
	hostileLogins
	hostilePipeliners
)

// hostileKinds are scenario i's cases in the report's order.
var hostileKinds = []hostileKind{hostileAlone, hostileSlowloris, hostileClaims, hostileLogins, hostilePipeliners}

// The metrics of scenario i.
const (
	metaP50Metric        = "Metadata p50 ms"
	metaP99Metric        = "Metadata p99 ms"
	metaRateMetric       = "Metadata answered/s"
	metaTimeoutsMetric   = "Metadata timeouts"
	metaErrorsMetric     = "Metadata errors"
	produceMBsMetric     = "produce MB/s"
	produceErrorsMetric  = "produce errors"
	peakRSSMetric        = "peak RSS MiB"
	endRSSMetric         = "RSS at end MiB"
	brokerCPUMetric      = "broker CPU %"
	benchCPUMetric       = "bench CPU %"
	attackersCPUMetric   = "attackers CPU %"
	p99RatioMetric       = "p99 × alone"
	p99ControlMetric     = "p99 × control"
	produceRatioMetric   = "MB/s × alone"
	openConnsMetric      = "hostile conns open at end"
	failedLoginsMetric   = "failed logins/s"
	pipelinedWriteMetric = "pipelined req/s written"
)

// hostileCaseName names case k in the report.
func (b *bench) hostileCaseName(k hostileKind) string {
	o := b.opts
	switch k {
	case hostileAlone:
		return "0 alone"
	case hostileSlowloris:
		return fmt.Sprintf("1 slowloris: %d conns, a byte a second", o.hostileSlowloris)
	case hostileClaims:
		return fmt.Sprintf("2 claims: %d × 100 MB Produce, %d bytes sent", o.hostileClaims, claimSent)
	case hostileLogins:
		return fmt.Sprintf("3 failed logins: %d conns in a loop", o.hostileLogins)
	default:
		return fmt.Sprintf("4 pipeliners: %d conns × %d Metadata, never read", o.hostilePipeliners, pipelineDepth)
	}
}

func (b *bench) hostileInfo() scenarioInfo {
	o := b.opts
	info := scenarioInfo{ID: "i", Title: fmt.Sprintf("a legitimate client beside slow and hostile peers, on examples/broker with SASL/PLAIN, two windows of %s per case", o.hostileDuration),
		Notes: []string{
			"examples/broker with its defaults (queued.max.request.bytes 209715200, socket.request.max.bytes 104857600,",
			"connection.failed.authentication.delay.ms 100, ...) and one SASL_PLAINTEXT listener offering PLAIN to alice and bob. A fresh",
			"broker for each case; the cases' order rotates from round to round. Every connection comes from 127.0.0.2 and up.",
			"The legitimate client, as alice, is two parts, measured in two consecutive windows of -hostile-duration, the attackers active in",
			"both. First a raw connection (SaslHandshake v1, SaslAuthenticate v1 with PLAIN), alone, the producer idle, sending Metadata v1",
			"(no topic) on a 1 ms ticker, one in flight (a late answer delays the next send), latency from send to answer; a request",
			fmt.Sprintf("unanswered after %s (-hostile-timeout) is a timeout and counts as %s in the percentiles, and the client then reconnects", o.hostileTimeout, o.hostileTimeout),
			"(errors: failed reconnections and other failures; a client answered nothing has the timeout as p50 and p99).",
			"Then a kgo producer (SASL PLAIN, kgo defaults, no compression), alone, the Metadata connection closed, producing 1 KiB records",
			"as fast as it can to a topic of one partition with retention.bytes 16 MiB (so that the broker's RSS is not the log's): MB/s",
			"acknowledged within its window. One after the other, not together: the producer would saturate a small machine's cores, and",
			"the Metadata latency would measure its load rather than the broker's fairness to a client beside the attackers.",
			"Both are connected and warm (a Metadata answered, a record produced) before the attackers are set up; then the Metadata window",
			fmt.Sprintf("starts. Between the windows the producer produces one more record and waits for it (at most %s, -hostile-timeout;", o.hostileTimeout),
			"unacknowledged, it is not counted and the producer's window starts anyway).",
			fmt.Sprintf("1 slowloris: %d unauthenticated connections, each trickling a 270-byte ApiVersions v0 request a byte a second (never", o.hostileSlowloris),
			"  its last byte).",
			fmt.Sprintf("2 claims: %d connections log in as bob, then each writes the size of a 100,000,000-byte Produce frame and its first", o.hostileClaims),
			"  10 bytes (key, version, correlation id, client id length), and holds.",
			fmt.Sprintf("3 failed logins: %d connections each log in as bob with a wrong password, read the SASL_AUTHENTICATION_FAILED answer", o.hostileLogins),
			"  (after the broker's failure delay, KIP-306) and the broker's close, and start again, until the case ends.",
			fmt.Sprintf("4 pipeliners: %d connections log in as bob, then write batches of 64 Metadata v1 requests back to back, never", o.hostilePipeliners),
			"  reading: their writes block once the socket buffers are full, and go on as the broker reads (req/s written: into the",
			"  sockets, the kernel's buffers included, not what the broker answered).",
			"The attackers run in a child process of their own (the bench re-executed), the legitimate client alone in the bench's: attackers",
			"that keep a Go runtime's Ps busy (dialing in a loop, writing without pause) leave its network to sysmon's poll, every 10 ms, and",
			"in the bench's process they would delay the legitimate client's own answers, whose latency would then measure the bench's",
			"scheduler as much as the broker's fairness. Their counts (conns open, failed logins, requests written) come from that child.",
			"With -hostile-control each attacked case also has its control, measured in the same round: the attackers attack a second",
			"broker of the same kind, not the measured one, so that the control costs the legitimate client only what their load on",
			"the machine does; p99 × control is the attacked case's p99 over its control's, the broker's own share.",
			"Peak RSS: the broker's VmHWM over its life; RSS at end: its VmRSS at the end of the producer's window, the attackers still",
			"there. CPU % over the two windows together, the warm-up record between them excluded (100 = one core): the broker's, the",
			"bench's, which is the legitimate client alone, and the attackers' process's (cases 1 to 4), all on the same cores. Failed",
			"logins/s and req/s written: over the two windows too.",
			"p99 × alone and MB/s × alone: the case's over case 0's of the same round. Targets: in cases 1 to 3, p99 at most 2× alone",
			"and throughput at least 0.5× alone; in case 4, where the server is saturated by design, p99 at most 5× alone; RSS bounded",
			"in every case (no fixed number: compare the peaks with alone's).",
		}}
	for _, k := range []hostileKind{hostileSlowloris, hostileClaims, hostileLogins} {
		info.Targets = append(info.Targets,
			target{Case: b.hostileCaseName(k), Metric: p99RatioMetric, AtMost: true, Bound: 2},
			target{Case: b.hostileCaseName(k), Metric: produceRatioMetric, Bound: 0.5})
	}
	info.Targets = append(info.Targets, target{Case: b.hostileCaseName(hostilePipeliners), Metric: p99RatioMetric, AtMost: true, Bound: 5})
	info.Notes = append(info.Notes, b.brokerPropsNote()...)
	info.Notes = append(info.Notes, b.baselineNote(brokerServer)...)
	if b.opts.baselineBroker != "" {
		info.Ratios = b.baselineRatios(nil, brokerServer)
	}
	return info
}

// saslListenerProps are the example broker's listener properties in
// scenario i: one SASL_PLAINTEXT listener at addr offering PLAIN to alice
// and bob.
func saslListenerProps(addr string) []string {
	return []string{
		"listeners=" + hostileListener + "://" + addr,
		"listener.security.protocol.map=" + hostileListener + ":SASL_PLAINTEXT",
		"inter.broker.listener.name=" + hostileListener,
		config.KeySASLEnabledMechanisms + "=PLAIN",
		config.MechanismKey(hostileListener, "PLAIN", config.KeySASLJAASConfig) + "=" + config.PlainLoginModule +
			fmt.Sprintf(` required user_%s="%s" user_%s="%s";`, legitUser, legitPassword, attackerUser, attackerPassword),
	}
}

// hostileRun is one measured case of scenario i: its attackers, and with
// control, attacking a second broker of the same kind rather than the
// measured one (-hostile-control).
type hostileRun struct {
	kind    hostileKind
	control bool
}

// runHostile measures every case of scenario i on server, each on a fresh
// broker, in an order that rotates from round to round (the same for every
// server in a round), and the ratios of each case to the round's case
// alone, and with -hostile-control to its control of the same round. A
// case that fails is reported and the others go on.
func (b *bench) runHostile(ctx context.Context, server serverKind) ([]sample, error) {
	if b.hostileRuns == nil {
		b.hostileRuns = map[serverKind]int{}
	}
	runs := []hostileRun{{kind: hostileAlone}}
	for _, k := range b.opts.hostileCases {
		runs = append(runs, hostileRun{kind: k})
		if b.opts.hostileControl {
			runs = append(runs, hostileRun{kind: k, control: true})
		}
	}
	order := rotate(runs, b.hostileRuns[server])
	b.hostileRuns[server]++
	results := map[hostileRun][]sample{}
	var errs []error
	for _, r := range order {
		if ctx.Err() != nil {
			break
		}
		name := b.hostileRunName(r)
		fmt.Fprintf(b.log, "bench: (i) %s\n", name)
		s, err := b.hostileCase(ctx, server, r)
		results[r] = s
		if err != nil && ctx.Err() == nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	aloneP99, okP99 := sampleValue(results[hostileRun{kind: hostileAlone}], metaP99Metric)
	aloneMBs, okMBs := sampleValue(results[hostileRun{kind: hostileAlone}], produceMBsMetric)
	var out []sample
	for _, r := range runs {
		s := results[r]
		if r.kind != hostileAlone {
			p99, okCase := sampleValue(s, metaP99Metric)
			if okCase && okP99 && aloneP99 > 0 {
				s = append(s, sample{Metric: p99RatioMetric, Value: p99 / aloneP99})
			}
			if v, ok := sampleValue(s, produceMBsMetric); ok && okMBs && aloneMBs > 0 {
				s = append(s, sample{Metric: produceRatioMetric, Value: v / aloneMBs})
			}
			if ctl, ok := sampleValue(results[hostileRun{kind: r.kind, control: true}], metaP99Metric); !r.control && okCase && ok && ctl > 0 {
				s = append(s, sample{Metric: p99ControlMetric, Value: p99 / ctl})
			}
		}
		out = append(out, renameCase(s, b.hostileRunName(r))...)
	}
	return out, errors.Join(errs...)
}

// hostileRunName names r in the report: its case's name, and for a
// control, that it is one.
func (b *bench) hostileRunName(r hostileRun) string {
	if r.control {
		return b.hostileCaseName(r.kind) + ", control"
	}
	return b.hostileCaseName(r.kind)
}

// sampleValue returns the value of the metric among s.
func sampleValue(s []sample, metric string) (float64, bool) {
	for _, x := range s {
		if x.Metric == metric {
			return x.Value, true
		}
	}
	return 0, false
}

// hostileCase runs one case on server: a fresh broker, the legitimate client
// connected and warm, the attackers set up, then two measured windows of
// -hostile-duration, one after the other: the Metadata client's, then the
// producer's. It tears everything down before it returns, whatever
// happened.
func (b *bench) hostileCase(ctx context.Context, server serverKind, r hostileRun) ([]sample, error) {
	k := r.kind
	c, err := b.launchBroker(ctx, brokerSpec{server: server, listenerProps: saslListenerProps})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	setupCtx, cancelSetup := context.WithTimeout(ctx, hostileSetupTimeout)
	defer cancelSetup()

	prod, err := b.newLegitProducer(setupCtx, c.addr)
	if err != nil {
		return nil, fmt.Errorf("the legitimate producer: %w", err)
	}
	defer prod.close()
	meta := &legitMetadata{d: b.dialer, addr: c.addr, timeout: b.opts.hostileTimeout}
	defer meta.close()
	if err := meta.warmUp(setupCtx); err != nil {
		return nil, fmt.Errorf("the legitimate Metadata client: %w", err)
	}

	// The attackers, in a process of their own (none in case 0).
	var atk *child
	if k != hostileAlone {
		target := c.addr
		if r.control {
			// The control: the attackers' broker is another process, so
			// the measured broker shares only the machine with them.
			other, err := b.launchBroker(ctx, brokerSpec{server: server, listenerProps: saslListenerProps})
			if err != nil {
				return nil, fmt.Errorf("the attackers' broker (-hostile-control): %w", err)
			}
			defer other.stop()
			target = other.addr
		}
		dl, _ := setupCtx.Deadline()
		atk, err = b.startAttackers(ctx, k, target, time.Until(dl))
		if atk != nil {
			defer atk.stop()
		}
		if err != nil {
			return nil, fmt.Errorf("setting up the attackers: %w", err)
		}
	}
	if err := c.alive(); err != nil {
		return nil, err
	}

	// The legitimate client's two parts, one after the other, the attackers
	// active throughout: the Metadata client alone, the producer idle, then
	// the producer alone, the Metadata connection closed. Together, the
	// producer would saturate a small machine's cores and the Metadata
	// latency would measure its load rather than the broker's fairness.
	dur := b.opts.hostileDuration
	w1, err := startWindow(c)
	if err != nil {
		return nil, err
	}
	a0, err := sampleAttackers(atk)
	if err != nil {
		return nil, err
	}
	mr := meta.run(ctx, time.Now().Add(dur))
	a1, err := sampleAttackers(atk)
	if err != nil {
		return nil, err
	}
	if err := w1.end(); err != nil {
		return nil, err
	}
	meta.close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.alive(); err != nil {
		return nil, err
	}
	if err := prod.warm(ctx, b.opts.hostileTimeout); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fmt.Fprintf(b.log, "bench: (i) %s: the producer's warm-up record: %v; its window starts anyway\n", b.hostileCaseName(k), err)
	}
	w2, err := startWindow(c)
	if err != nil {
		return nil, err
	}
	a2, err := sampleAttackers(atk)
	if err != nil {
		return nil, err
	}
	acked, failed := prod.run(ctx, time.Now().Add(dur))
	// The end of the producer's window is the attackers' end: their
	// connections still open, and the wrong passwords accepted, then.
	a3, err := sampleAttackers(atk)
	if err != nil {
		return nil, err
	}
	if err := w2.end(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := c.alive(); err != nil {
		return nil, err
	}
	pid := c.cmd.Process.Pid
	// VmRSS before VmHWM: the attackers may still make the broker grow
	// between the two reads, and the peak must hold the RSS at end. Linux
	// counts both approximately (per-CPU counters, and a high-water mark
	// it moves only at some events, such as an unmap), so a VmHWM can read
	// a little under the VmRSS read just before it, when the process gave
	// pages back in between (one run: 61.15 against 61.33 MiB): the peak
	// is at least that RSS.
	rss, err := c.rss()
	if err != nil {
		return nil, err
	}
	peak, err := procHWM(pid)
	if err != nil {
		return nil, err
	}
	peak = max(peak, rss)
	// Everyone leaves before the broker stops, so that its shutdown waits
	// for no one.
	var atkErr error
	if atk != nil {
		atkErr = atk.stop()
	}
	prod.close()

	p50, p99 := b.opts.hostileTimeout, b.opts.hostileTimeout // answered nothing
	if len(mr.lats) > 0 {
		slices.Sort(mr.lats)
		p50, p99 = percentile(mr.lats, 50), percentile(mr.lats, 99)
	}
	secs := dur.Seconds()
	elapsed := (w1.Elapsed + w2.Elapsed).Seconds()
	ops := a1.report.Ops - a0.report.Ops + a3.report.Ops - a2.report.Ops
	out := []sample{
		{Metric: metaP50Metric, Value: millis(p50)},
		{Metric: metaP99Metric, Value: millis(p99)},
		{Metric: metaRateMetric, Value: float64(mr.answered) / secs},
		{Metric: metaTimeoutsMetric, Value: float64(mr.timeouts)},
		{Metric: metaErrorsMetric, Value: float64(mr.errors)},
		{Metric: produceMBsMetric, Value: float64(acked) * hostileRecordSize / 1e6 / secs},
		{Metric: produceErrorsMetric, Value: float64(failed)},
		{Metric: peakRSSMetric, Value: mib(peak)},
		{Metric: endRSSMetric, Value: mib(rss)},
		{Metric: brokerCPUMetric, Value: 100 * (w1.ServerCPU + w2.ServerCPU).Seconds() / elapsed},
		{Metric: benchCPUMetric, Value: 100 * (w1.Client + w2.Client).Seconds() / elapsed},
	}
	if atk != nil {
		cpu := a1.usage.cpuSince(a0.usage) + a3.usage.cpuSince(a2.usage)
		out = append(out, sample{Metric: attackersCPUMetric, Value: 100 * cpu.Seconds() / elapsed})
	}
	switch k {
	case hostileSlowloris, hostileClaims:
		out = append(out, sample{Metric: openConnsMetric, Value: float64(a3.report.Open)})
	case hostileLogins:
		out = append(out, sample{Metric: failedLoginsMetric, Value: float64(ops) / (2 * secs)})
	case hostilePipeliners:
		out = append(out, sample{Metric: openConnsMetric, Value: float64(a3.report.Open)},
			sample{Metric: pipelinedWriteMetric, Value: float64(ops) / (2 * secs)})
	}
	if n := a3.report.Accepted; n > 0 {
		return out, fmt.Errorf("the broker accepted %d logins with a wrong password", n)
	}
	if atkErr != nil {
		return out, atkErr
	}
	return out, c.stop()
}

// millis returns d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// legitProducer is the legitimate client's kgo producer.
type legitProducer struct {
	cl        *kgo.Client
	values    [][]byte
	closeOnce sync.Once
}

// newLegitProducer connects a kgo producer as alice, creates hostileTopic
// and produces one record, so that the producer id and the metadata are
// known before the window.
func (b *bench) newLegitProducer(ctx context.Context, addr string) (*legitProducer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.SASL(plain.Auth{User: legitUser, Pass: legitPassword}.AsMechanism()),
		kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return b.dialer.dial(ctx, host) }),
		kgo.DefaultProduceTopic(hostileTopic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, fmt.Errorf("kgo client: %w", err)
	}
	p := &legitProducer{cl: cl}
	if err := createTopicWith(ctx, cl, hostileTopic, 1, map[string]string{"retention.bytes": fmt.Sprint(hostileRetentionBytes)}); err != nil {
		cl.Close()
		return nil, err
	}
	if p.values, err = randomValues(1024, hostileRecordSize); err != nil {
		cl.Close()
		return nil, err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: p.values[0]}).FirstErr(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("first record: %w", err)
	}
	return p, nil
}

// warm produces one record and waits at most timeout for its
// acknowledgement, so that the producer's connection is in use just
// before its window. A record still unacknowledged stays in flight, and
// is not counted.
func (p *legitProducer) warm(ctx context.Context, timeout time.Duration) error {
	done := make(chan error, 1)
	p.cl.Produce(ctx, &kgo.Record{Value: p.values[0]}, func(_ *kgo.Record, err error) { done <- err })
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("unacknowledged after %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run produces records as fast as the client takes them until end, and
// returns how many were acknowledged before end, and how many failed
// before end otherwise than by the end of the window.
func (p *legitProducer) run(ctx context.Context, end time.Time) (acked, failed int64) {
	pctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var ack, fail atomic.Int64
	promise := func(_ *kgo.Record, err error) {
		switch {
		case !time.Now().Before(end):
		case err == nil:
			ack.Add(1)
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			fail.Add(1)
		}
	}
	for i := 0; pctx.Err() == nil; i++ {
		p.cl.Produce(pctx, &kgo.Record{Value: p.values[i%len(p.values)]}, promise)
	}
	return ack.Load(), fail.Load()
}

// close closes the client, failing what it still buffers.
func (p *legitProducer) close() { p.closeOnce.Do(p.cl.Close) }

// legitMetadata is the legitimate client's raw Metadata connection, which
// it opens again after a timeout or an error.
type legitMetadata struct {
	d       *dialer
	addr    string
	timeout time.Duration
	rc      *rawConn // nil while disconnected
}

// metadataResult is what the legitimate Metadata client measured.
type metadataResult struct {
	lats     []time.Duration // answered, and timed out as the timeout
	answered int
	timeouts int
	errors   int // failed reconnections and failures other than timeouts
}

// warmUp connects and has one Metadata v1 answered, which must name the
// broker.
func (m *legitMetadata) warmUp(ctx context.Context) error {
	rc, err := saslLogin(ctx, m.d, m.addr, legitUser, legitPassword, hostileLoginTimeout)
	if err != nil {
		return err
	}
	m.rc = rc
	_ = rc.c.SetDeadline(time.Now().Add(hostileLoginTimeout))
	if err := rc.roundTrip(); err != nil {
		return fmt.Errorf("Metadata: %w", err)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 1
	if err := resp.ReadFrom(rc.body[4:]); err != nil {
		return fmt.Errorf("decoding the Metadata response: %w", err)
	}
	if len(resp.Brokers) == 0 {
		return errors.New("the Metadata response names no broker")
	}
	return nil
}

// run sends Metadata v1 on a ticker of hostileTick until end, one request
// in flight, each with the timeout, and reconnects after a failure.
func (m *legitMetadata) run(ctx context.Context, end time.Time) metadataResult {
	var res metadataResult
	res.lats = make([]time.Duration, 0, int(time.Until(end)/hostileTick)+1)
	t := time.NewTicker(hostileTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return res
		case <-t.C:
		}
		if !time.Now().Before(end) {
			return res
		}
		if m.rc == nil {
			rc, err := saslLogin(ctx, m.d, m.addr, legitUser, legitPassword, m.timeout)
			if err != nil {
				res.errors++
				continue
			}
			m.rc = rc
		}
		_ = m.rc.c.SetDeadline(time.Now().Add(m.timeout))
		start := time.Now()
		err := m.rc.roundTrip()
		took := time.Since(start)
		if err == nil && len(m.rc.body) < 16 { // correlation id, throttle, brokers, controller, topics
			err = fmt.Errorf("a Metadata response of %d bytes", len(m.rc.body))
		}
		switch {
		case err == nil:
			res.lats = append(res.lats, took)
			res.answered++
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			res.lats = append(res.lats, m.timeout)
			res.timeouts++
		default:
			res.errors++
		}
		m.close()
	}
}

// close closes the connection, if any.
func (m *legitMetadata) close() {
	if m.rc != nil {
		m.rc.c.Close()
		m.rc = nil
	}
}

// saslHandshakeFrame is a SaslHandshake v1 request for PLAIN.
func saslHandshakeFrame() []byte {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, "PLAIN"
	return requestFrame(req)
}

// saslPlainFrame is a SaslAuthenticate v1 request carrying PLAIN's message
// for user and password (RFC 4616, no authorization id).
func saslPlainFrame(user, password string) []byte {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	req.SASLAuthBytes = []byte("\x00" + user + "\x00" + password)
	return requestFrame(req)
}

// saslExchange does SaslHandshake v1 for PLAIN and SaslAuthenticate v1
// with user and password on rc, and returns the SaslAuthenticate answer's
// error code. It leaves rc's request a Metadata v1.
func saslExchange(rc *rawConn, user, password string) (int16, error) {
	rc.frame = saslHandshakeFrame()
	if err := rc.roundTrip(); err != nil {
		return 0, fmt.Errorf("SaslHandshake: %w", err)
	}
	hs := kmsg.NewPtrSASLHandshakeResponse()
	hs.Version = 1
	if err := hs.ReadFrom(rc.body[4:]); err != nil {
		return 0, fmt.Errorf("decoding the SaslHandshake response: %w", err)
	}
	if err := kerr.ErrorForCode(hs.ErrorCode); err != nil {
		return 0, fmt.Errorf("SaslHandshake for PLAIN: %w (the broker offers %v)", err, hs.SupportedMechanisms)
	}
	rc.frame = saslPlainFrame(user, password)
	if err := rc.roundTrip(); err != nil {
		return 0, fmt.Errorf("SaslAuthenticate: %w", err)
	}
	auth := kmsg.NewPtrSASLAuthenticateResponse()
	auth.Version = 1
	if err := auth.ReadFrom(rc.body[4:]); err != nil {
		return 0, fmt.Errorf("decoding the SaslAuthenticate response: %w", err)
	}
	rc.frame = metadataV1Frame()
	return auth.ErrorCode, nil
}

// saslLogin dials addr and logs in as user with SASL/PLAIN, all within
// timeout, and returns the connection ready to send Metadata v1.
func saslLogin(ctx context.Context, d *dialer, addr, user, password string, timeout time.Duration) (*rawConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := d.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	_ = nc.SetDeadline(time.Now().Add(timeout))
	rc := newRawConn(nc, nil)
	code, err := saslExchange(rc, user, password)
	if err == nil {
		err = kerr.ErrorForCode(code)
	}
	if err != nil || !stop() {
		nc.Close()
		return nil, errors.Join(err, ctx.Err())
	}
	_ = nc.SetDeadline(time.Time{})
	return rc, nil
}

// attackAnswerTimeout bounds the wait for each of the attacker child's
// answers to the bench; past it, the bench kills the child.
const attackAnswerTimeout = 10 * time.Second

// attackLifetimeSlack is how long an attacker child outlives the longest
// case it may serve, before it stops by itself.
const attackLifetimeSlack = 30 * time.Second

// attackSpec returns the attacker child's spec for case k against addr,
// with setup for the attackers' set-up: the case's count, bob's
// credentials and the wrong password, and a lifetime that covers the
// set-up, the two windows, a Metadata request in flight at the first's
// end and the producer's warm-up record between them.
func (b *bench) attackSpec(k hostileKind, addr string, setup time.Duration) attackSpec {
	o := b.opts
	n := map[hostileKind]int{hostileSlowloris: o.hostileSlowloris, hostileClaims: o.hostileClaims,
		hostileLogins: o.hostileLogins, hostilePipeliners: o.hostilePipeliners}[k]
	return attackSpec{Case: k, Addr: addr, Conns: n, User: attackerUser, Password: attackerPassword, WrongPassword: wrongPassword,
		Setup: setup, Lifetime: setup + 2*(o.hostileDuration+o.hostileTimeout) + attackLifetimeSlack}
}

// startAttackers starts the attacker child of case k against addr (the
// bench binary re-executed with childFlag and attackFlag) and waits until
// it has set its attackers up, within setup. The child, when not nil, must
// be stopped even when startAttackers fails.
func (b *bench) startAttackers(ctx context.Context, k hostileKind, addr string, setup time.Duration) (*child, error) {
	if setup <= 0 {
		return nil, context.DeadlineExceeded
	}
	c := &child{name: "the attacker child"}
	if err := b.spawn(ctx, c, b.exe, b.attackSpec(k, addr, setup).args(), b.childEnv(nil)); err != nil {
		return nil, err
	}
	r, err := c.readAttackReport(setup + attackAnswerTimeout)
	switch {
	case err != nil:
		return c, err
	case r.Err != "":
		return c, errors.New(r.Err)
	case !r.Ready:
		return c, fmt.Errorf("%s reported its attackers not ready", c.name)
	}
	return c, nil
}

// attackSample is what the bench reads of the attacker child at a
// window's edge: its CPU time, and its counts.
type attackSample struct {
	usage  usage
	report attackReport
}

// sampleAttackers reads the attacker child c's usage and counts; nothing
// when c is nil (case 0).
func sampleAttackers(c *child) (attackSample, error) {
	var s attackSample
	if c == nil {
		return s, nil
	}
	u, err := c.usage()
	if err != nil {
		return s, fmt.Errorf("reading %s's CPU time: %w", c.name, err)
	}
	s.usage = u
	if _, err := io.WriteString(c.stdin, attackStatsAsk+"\n"); err != nil {
		return s, fmt.Errorf("asking %s for its counts: %w: %s", c.name, err, c.stderr)
	}
	s.report, err = c.readAttackReport(attackAnswerTimeout)
	return s, err
}

// readAttackReport reads the attacker child's next report line, within
// timeout: past it, it kills the child, which ends the read.
func (c *child) readAttackReport(timeout time.Duration) (attackReport, error) {
	var r attackReport
	kill := time.AfterFunc(timeout, func() { _ = c.cmd.Process.Kill() })
	line, err := c.stdout.ReadBytes('\n')
	if !kill.Stop() {
		return r, fmt.Errorf("%s did not answer within %s: %s", c.name, timeout, c.stderr)
	}
	if err != nil {
		select {
		case <-c.exited:
			return r, fmt.Errorf("%s exited: %v: %s", c.name, c.waitErr, c.stderr)
		case <-time.After(time.Second):
			return r, fmt.Errorf("reading %s's report: %w: %s", c.name, err, c.stderr)
		}
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("reading %s's report %q: %w", c.name, line, err)
	}
	return r, nil
}
