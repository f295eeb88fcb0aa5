package main

// Scenario (i): a legitimate client beside slow and hostile peers, on
// examples/broker with its defaults and a SASL_PLAINTEXT listener.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kafkanet/kafkanet/listener"
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
	p99RatioMetric       = "p99 × alone"
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
			"Peak RSS: the broker's VmHWM over its life; RSS at end: its VmRSS at the end of the producer's window, the attackers still",
			"there. CPU % over the two windows together, the warm-up record between them excluded (100 = one core): the broker's, and the",
			"bench's, which is the legitimate client and the attackers alike, on the same cores as the broker. Failed logins/s and req/s",
			"written: over the two windows too.",
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
		listener.KeySASLEnabledMechanisms + "=PLAIN",
		listener.KeyPlainJAASConfig(hostileListener) + "=" + listener.PlainLoginModule +
			fmt.Sprintf(` required user_%s="%s" user_%s="%s";`, legitUser, legitPassword, attackerUser, attackerPassword),
	}
}

// runHostile measures every case of scenario i on server, each on a fresh
// broker, in an order that rotates from round to round (the same for every
// server in a round), and the ratios of each case to the round's case
// alone. A case that fails is reported and the others go on.
func (b *bench) runHostile(ctx context.Context, server serverKind) ([]sample, error) {
	if b.hostileRuns == nil {
		b.hostileRuns = map[serverKind]int{}
	}
	order := rotate(hostileKinds, b.hostileRuns[server])
	b.hostileRuns[server]++
	results := map[hostileKind][]sample{}
	var errs []error
	for _, k := range order {
		if ctx.Err() != nil {
			break
		}
		name := b.hostileCaseName(k)
		fmt.Fprintf(b.log, "bench: (i) %s\n", name)
		s, err := b.hostileCase(ctx, server, k)
		results[k] = s
		if err != nil && ctx.Err() == nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	aloneP99, okP99 := sampleValue(results[hostileAlone], metaP99Metric)
	aloneMBs, okMBs := sampleValue(results[hostileAlone], produceMBsMetric)
	var out []sample
	for _, k := range hostileKinds {
		s := results[k]
		if k != hostileAlone {
			if v, ok := sampleValue(s, metaP99Metric); ok && okP99 && aloneP99 > 0 {
				s = append(s, sample{Metric: p99RatioMetric, Value: v / aloneP99})
			}
			if v, ok := sampleValue(s, produceMBsMetric); ok && okMBs && aloneMBs > 0 {
				s = append(s, sample{Metric: produceRatioMetric, Value: v / aloneMBs})
			}
		}
		out = append(out, renameCase(s, b.hostileCaseName(k))...)
	}
	return out, errors.Join(errs...)
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
func (b *bench) hostileCase(ctx context.Context, server serverKind, k hostileKind) ([]sample, error) {
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

	a, err := b.startAttack(ctx, setupCtx, k, c.addr)
	defer a.stop()
	if err != nil {
		return nil, fmt.Errorf("setting up the attackers: %w", err)
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
	ops0 := a.ops.Load()
	mr := meta.run(ctx, time.Now().Add(dur))
	ops := a.ops.Load() - ops0
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
	ops0 = a.ops.Load()
	acked, failed := prod.run(ctx, time.Now().Add(dur))
	ops += a.ops.Load() - ops0
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
	// between the two reads, and the peak must hold the RSS at end.
	rss, err := c.rss()
	if err != nil {
		return nil, err
	}
	peak, err := procHWM(pid)
	if err != nil {
		return nil, err
	}
	open := a.openConns()
	// Everyone leaves before the broker stops, so that its shutdown waits
	// for no one.
	a.stop()
	prod.close()

	p50, p99 := b.opts.hostileTimeout, b.opts.hostileTimeout // answered nothing
	if len(mr.lats) > 0 {
		slices.Sort(mr.lats)
		p50, p99 = percentile(mr.lats, 50), percentile(mr.lats, 99)
	}
	secs := dur.Seconds()
	elapsed := (w1.Elapsed + w2.Elapsed).Seconds()
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
	switch k {
	case hostileSlowloris, hostileClaims:
		out = append(out, sample{Metric: openConnsMetric, Value: float64(open)})
	case hostileLogins:
		out = append(out, sample{Metric: failedLoginsMetric, Value: float64(ops) / (2 * secs)})
	case hostilePipeliners:
		out = append(out, sample{Metric: openConnsMetric, Value: float64(open)},
			sample{Metric: pipelinedWriteMetric, Value: float64(ops) / (2 * secs)})
	}
	if n := a.accepted.Load(); n > 0 {
		return out, fmt.Errorf("the broker accepted %d logins with a wrong password", n)
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

// attack is the attackers of one case.
type attack struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	conns    connSet      // the connections that stay: slowloris, claims, pipeliners
	ops      atomic.Int64 // failed logins completed, or pipelined requests written
	accepted atomic.Int64 // logins with a wrong password that the broker accepted
	stopOnce sync.Once
}

// stop ends the attackers: it cancels their context, closes their
// connections and waits for their goroutines.
func (a *attack) stop() {
	a.stopOnce.Do(func() {
		a.cancel()
		a.conns.closeAll()
		a.wg.Wait()
	})
}

// openConns counts the attackers' lasting connections that the broker has
// not closed.
func (a *attack) openConns() int {
	a.conns.mu.Lock()
	conns := slices.Clone(a.conns.conns)
	a.conns.mu.Unlock()
	n := 0
	for _, c := range conns {
		if connOpen(c) {
			n++
		}
	}
	return n
}

// connOpen says whether the peer has neither closed nor reset c, by
// peeking at its receive queue without waiting.
func connOpen(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return true
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = n > 0 || errors.Is(err, syscall.EAGAIN)
		return true
	})
	return open && err == nil
}

// startAttack sets up the attackers of case k against addr within
// setupCtx; they run until stop or ctx ends. The attack must be stopped
// even when startAttack fails.
func (b *bench) startAttack(ctx, setupCtx context.Context, k hostileKind, addr string) (*attack, error) {
	actx, cancel := context.WithCancel(ctx)
	a := &attack{cancel: cancel}
	switch k {
	case hostileSlowloris:
		return a, b.slowloris(actx, setupCtx, a, addr)
	case hostileClaims:
		return a, b.claims(setupCtx, a, addr)
	case hostileLogins:
		return a, b.failedLogins(actx, setupCtx, a, addr)
	case hostilePipeliners:
		return a, b.pipeliners(actx, setupCtx, a, addr)
	}
	return a, nil
}

// openAll opens n connections with open, hostileParallel at a time, and
// adds them to a's connections; it stops at the first failure.
func openAll(ctx context.Context, a *attack, n int, open func(context.Context) (net.Conn, error)) error {
	var next atomic.Int64
	errs := make([]error, hostileParallel)
	var wg sync.WaitGroup
	for w := range min(n, hostileParallel) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				c, err := open(ctx)
				if err != nil {
					errs[w] = fmt.Errorf("connection %d of %d: %w", i, n, err)
					next.Store(int64(n))
					return
				}
				a.conns.add(c)
			}
		})
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

// attackerLogin opens a connection authenticated as bob.
func (b *bench) attackerLogin(addr string) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		rc, err := saslLogin(ctx, b.dialer, addr, attackerUser, attackerPassword, hostileLoginTimeout)
		if err != nil {
			return nil, err
		}
		return rc.c, nil
	}
}

// slowlorisFrame is the request a slowloris connection trickles: an
// ApiVersions v0, which a SASL listener takes before authentication, with
// a client id of slowlorisClientIDLen bytes.
func slowlorisFrame() []byte {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("slowloris" + strings.Repeat("-", slowlorisClientIDLen-len("slowloris"))))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return f.AppendRequest(nil, req, 0)
}

// slowloris opens -hostile-slowloris connections, unauthenticated, and
// has each send its request's next byte every trickleInterval, all but
// the last.
func (b *bench) slowloris(ctx, setupCtx context.Context, a *attack, addr string) error {
	if err := openAll(setupCtx, a, b.opts.hostileSlowloris, func(ctx context.Context) (net.Conn, error) {
		return b.dialer.dial(ctx, addr)
	}); err != nil {
		return err
	}
	conns := slices.Clone(a.conns.conns)
	frame := slowlorisFrame()
	a.wg.Go(func() {
		sent := make([]int, len(conns)) // -1: the broker closed it
		t := time.NewTicker(trickleInterval)
		defer t.Stop()
		for {
			for i, c := range conns {
				if sent[i] < 0 || sent[i] >= len(frame)-1 {
					continue
				}
				_ = c.SetWriteDeadline(time.Now().Add(trickleInterval))
				if _, err := c.Write(frame[sent[i] : sent[i]+1]); err != nil {
					sent[i] = -1
					continue
				}
				sent[i]++
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return nil
}

// claimHeader is what a claim writes: the size of a claimFrameSize-byte
// Produce frame and its first claimSent bytes (API key, version,
// correlation id, client id length).
func claimHeader() []byte {
	h := binary.BigEndian.AppendUint32(nil, claimFrameSize)
	h = binary.BigEndian.AppendUint16(h, uint16(kmsg.Produce))
	h = binary.BigEndian.AppendUint16(h, produceFrameVersion)
	h = binary.BigEndian.AppendUint32(h, 1)
	return binary.BigEndian.AppendUint16(h, uint16(len(clientID)))
}

// claims opens -hostile-claims connections authenticated as bob, then has
// each announce its Produce frame and send claimSent bytes of it. They
// hold until the case ends.
func (b *bench) claims(setupCtx context.Context, a *attack, addr string) error {
	if err := openAll(setupCtx, a, b.opts.hostileClaims, b.attackerLogin(addr)); err != nil {
		return err
	}
	h := claimHeader()
	for _, c := range slices.Clone(a.conns.conns) {
		_ = c.SetWriteDeadline(time.Now().Add(hostileLoginTimeout))
		if _, err := c.Write(h); err != nil {
			return fmt.Errorf("a claim: %w", err)
		}
	}
	return nil
}

// failedLogins starts -hostile-logins attackers that fail logins in a
// loop until ctx ends, and waits until each has failed one.
func (b *bench) failedLogins(ctx, setupCtx context.Context, a *attack, addr string) error {
	n := b.opts.hostileLogins
	first := make(chan struct{}, n)
	for range n {
		a.wg.Go(func() {
			signalled := false
			for ctx.Err() == nil {
				err := failLogin(ctx, b.dialer, addr)
				switch {
				case err == nil:
					a.ops.Add(1)
					if !signalled {
						first <- struct{}{}
						signalled = true
					}
				case errors.Is(err, errLoginAccepted):
					a.accepted.Add(1)
				default:
					_ = sleep(ctx, loginRetryPause)
				}
			}
		})
	}
	for got := range n {
		select {
		case <-first:
		case <-setupCtx.Done():
			return fmt.Errorf("%d of %d attackers failed a first login in time: %w", got, n, setupCtx.Err())
		}
	}
	return nil
}

// errLoginAccepted is a login with a wrong password that succeeded.
var errLoginAccepted = errors.New("the broker accepted a wrong password")

// failLogin dials addr, logs in as bob with a wrong password, reads the
// SASL_AUTHENTICATION_FAILED answer and waits for the broker to close the
// connection, all within hostileLoginTimeout.
func failLogin(ctx context.Context, d *dialer, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, hostileLoginTimeout)
	defer cancel()
	nc, err := d.dial(ctx, addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	_ = nc.SetDeadline(time.Now().Add(hostileLoginTimeout))
	rc := newRawConn(nc, nil)
	code, err := saslExchange(rc, attackerUser, wrongPassword)
	switch {
	case err != nil:
		return err
	case code == 0:
		return errLoginAccepted
	case code != kerr.SaslAuthenticationFailed.Code:
		return fmt.Errorf("a wrong password answered with %w", kerr.ErrorForCode(code))
	}
	_, err = io.Copy(io.Discard, rc.br) // until the broker closes it
	return err
}

// pipelineBatch is pipelineDepth Metadata v1 requests back to back, with
// correlation ids 1 and up.
func pipelineBatch() []byte {
	one := metadataV1Frame()
	var batch []byte
	for i := range pipelineDepth {
		binary.BigEndian.PutUint32(one[8:], uint32(i+1))
		batch = append(batch, one...)
	}
	return batch
}

// pipeliners opens -hostile-pipeliners connections authenticated as bob,
// and has each write pipelineBatch over and over, never reading, until ctx
// ends (stop closes the connections, which ends a blocked write).
func (b *bench) pipeliners(ctx, setupCtx context.Context, a *attack, addr string) error {
	if err := openAll(setupCtx, a, b.opts.hostilePipeliners, b.attackerLogin(addr)); err != nil {
		return err
	}
	batch := pipelineBatch()
	for _, c := range slices.Clone(a.conns.conns) {
		_ = c.SetDeadline(time.Time{})
		a.wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := c.Write(batch); err != nil {
					return
				}
				a.ops.Add(pipelineDepth)
			}
		})
	}
	return nil
}
