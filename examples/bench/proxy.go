package main

// Scenario (p): what a hop in front of examples/broker costs: examples/proxy
// against HAProxy in TCP mode, a relay that parses nothing, and against a
// direct connection, all in front of the same broker in the same round.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scenario p's columns: the ways a client reaches the broker.
const (
	directServer  serverKind = "direct"
	haproxyServer serverKind = "haproxy"
	proxyServer   serverKind = "examples/proxy" // as shipped: no Go runtime variable in its environment
	// proxyPinnedServer is the proxy with GOMAXPROCS=-proxy-procs in its
	// environment, a second case (plaintext only).
	proxyPinnedServer serverKind = "examples/proxy@pinned"
	// proxyBaselineServer is -baseline-proxy, a prebuilt examples/proxy
	// (of another commit), started as proxyServer (plaintext only).
	proxyBaselineServer serverKind = "examples/proxy@baseline"
	// With -proxy-tls, the same hops terminating TLS from the clients,
	// plaintext to the broker.
	haproxyTLSServer serverKind = "haproxy+tls"
	proxyTLSServer   serverKind = "examples/proxy+tls"
	// hopsRun is scenario p's one run per round, which measures every hop
	// and names each sample's column itself.
	hopsRun serverKind = "direct, haproxy and examples/proxy"
)

// proxyRecordSize is the size of the records scenario p produces and
// consumes: 1 KiB.
const proxyRecordSize = 1024

// relayListener is the example broker's second listener in scenario p,
// HAProxy's backend, which advertises HAProxy's address: a relay forwards
// bytes and rewrites nothing, so the broker itself must name the relay in
// Metadata for clients to stay behind it. relayTLSListener is the same for
// the HAProxy that terminates TLS (-proxy-tls), a third listener since it
// has an address of its own; both listeners are PLAINTEXT.
const (
	relayListener    = "RELAY"
	relayTLSListener = "RELAY_TLS"
)

// hopMode is how clients reach scenario p's hops: in plaintext, or with
// TLS terminated at the hop (-proxy-tls); from the hop to the broker it is
// plaintext either way.
type hopMode struct {
	tls            bool
	haproxy, proxy serverKind // the hops' columns
	relay          string     // the broker's listener that HAProxy forwards to
}

// hopModes are the plaintext hops, then those with TLS.
var hopModes = []hopMode{
	{haproxy: haproxyServer, proxy: proxyServer, relay: relayListener},
	{tls: true, haproxy: haproxyTLSServer, proxy: proxyTLSServer, relay: relayTLSListener},
}

// hopRatio is a ratio case of scenario p: hop's figures over over's of the
// same round, under hop's column.
type hopRatio struct {
	ratioCase string
	hop, over serverKind
}

// hopRatios are scenario p's ratio cases: the proxy as shipped over
// HAProxy (the targets'), then with -proxy-procs the pinned proxy, with
// -baseline-proxy the baseline and with -proxy-tls the proxy with TLS,
// each over HAProxy (with TLS for the last).
func (b *bench) hopRatios() []hopRatio {
	rows := []hopRatio{{targetsCase, proxyServer, haproxyServer}}
	if b.opts.proxyProcs > 0 {
		rows = append(rows, hopRatio{pinnedRatioCase, proxyPinnedServer, haproxyServer})
	}
	if b.opts.baselineProxy != "" {
		rows = append(rows, hopRatio{baselineRatioCase, proxyBaselineServer, haproxyServer})
	}
	if b.opts.proxyTLS {
		rows = append(rows, hopRatio{tlsRatioCase, proxyTLSServer, haproxyTLSServer})
	}
	return rows
}

// extraProxies are the columns of examples/proxy measured beside the one
// as shipped, in plaintext: the pinned one (-proxy-procs) and the
// baseline (-baseline-proxy).
func (b *bench) extraProxies() []serverKind {
	var out []serverKind
	if b.opts.proxyProcs > 0 {
		out = append(out, proxyPinnedServer)
	}
	if b.opts.baselineProxy != "" {
		out = append(out, proxyBaselineServer)
	}
	return out
}

// modes are the hop modes measured: the plaintext hops, and with
// -proxy-tls those with TLS.
func (b *bench) modes() []hopMode {
	if b.opts.proxyTLS {
		return hopModes
	}
	return hopModes[:1]
}

// The case and metrics of the targets (issues 23 and 36): the medians of
// examples/proxy's figures over HAProxy's, as shipped, each the ratio of the
// two in one round; the other ratio cases hold the same ratios for the
// pinned proxy, the baseline and the hops with TLS, which have no targets.
const (
	targetsCase       = "examples/proxy / haproxy"
	pinnedRatioCase   = "examples/proxy@pinned / haproxy"
	baselineRatioCase = "examples/proxy@baseline / haproxy"
	tlsRatioCase      = "examples/proxy+tls / haproxy+tls"
	targetCPUPerReq   = "hop CPU µs/req, Metadata, 1 conn"
	targetAddedP50    = "added p50 µs, Metadata, 1 conn"
	targetCPUProduced = "hop CPU ms/MB produced"
	targetCPUConsumed = "hop CPU ms/MB consumed"
	targetProduceRate = "produce MB/s"
	targetConsumeRate = "consume MB/s"
)

// proxyTargets are the targets, judged on the proxy as shipped: CPU and
// added latency at most 1.5× HAProxy's, throughput at least 0.9×.
var proxyTargets = []target{
	{Case: targetsCase, Metric: targetCPUPerReq, AtMost: true, Bound: 1.5},
	{Case: targetsCase, Metric: targetAddedP50, AtMost: true, Bound: 1.5},
	{Case: targetsCase, Metric: targetCPUProduced, AtMost: true, Bound: 1.5},
	{Case: targetsCase, Metric: targetCPUConsumed, AtMost: true, Bound: 1.5},
	{Case: targetsCase, Metric: targetProduceRate, Bound: 0.9},
	{Case: targetsCase, Metric: targetConsumeRate, Bound: 0.9},
}

func (b *bench) proxyInfo() scenarioInfo {
	info := scenarioInfo{ID: "p", Title: "examples/proxy and HAProxy in front of examples/broker, against a direct connection to the same broker",
		Notes: []string{
			"Each round starts examples/broker, HAProxy in TCP mode in front of it (one thread, splice in both directions, a config of",
			"its own in a temporary directory) and examples/proxy in front of it (PLAINTEXT everywhere, each in its own process), and measures the same",
			"load directly, through HAProxy and through the proxy, the hops' order rotating from round to round. The broker has a second",
			"listener for HAProxy, which advertises HAProxy's address (a relay rewrites nothing); the proxy and direct clients use the first.",
			"Metadata v12 naming no topic, one request in flight per connection: the proxy decodes its answer, rewrites the brokers' addresses",
			"and encodes it again. 'added' is a hop's percentile minus the direct one of the same round; hop CPU is the hop process's alone,",
			"broker CPU the broker's in the same window; hop ctx switches are the hop's threads' context switches, voluntary and not.",
			fmt.Sprintf("Produce then consume: kgo producing %d MB of %d-byte records to a topic of one partition of its own per hop (scenario g's",
				b.opts.proxyMB, proxyRecordSize),
			"settings), then a new client consuming it from offset 0. MB = 10^6 bytes of values.",
			"examples/proxy runs as shipped: without GOMAXPROCS, GODEBUG, GOGC or GOMEMLIMIT in its environment, so with its own runtime",
			"settings (one P, the runtime's monitor thread kept awake: docs/proxy.md, \"Cost\"); HAProxy runs one thread (nbthread 1).",
			"The targets row holds examples/proxy's figure over HAProxy's of the same round (the median over rounds); the ratio columns",
			"divide the medians.",
		},
		Ratios:  []ratioPair{{proxyServer, haproxyServer}, {proxyServer, directServer}, {haproxyServer, directServer}, {proxyTLSServer, haproxyTLSServer}},
		Targets: proxyTargets,
	}
	if n := b.opts.proxyProcs; n > 0 {
		info.Notes = append(info.Notes, fmt.Sprintf("%s is the same proxy with GOMAXPROCS=%d in its environment (-proxy-procs; 0 leaves it out), measured beside it;", proxyPinnedServer, n),
			"the row "+pinnedRatioCase+" holds its ratios, without targets.")
	}
	if b.opts.baselineProxy != "" {
		info.Notes = append(info.Notes, fmt.Sprintf("%s is -baseline-proxy %s, a prebuilt examples/proxy, started as examples/proxy (as shipped) and", proxyBaselineServer, b.opts.baselineProxy),
			"measured in the same rounds; the row "+baselineRatioCase+" holds its ratios, without targets, and the column",
			proxyServer+"/"+proxyBaselineServer+" divides the medians.")
		info.Ratios = append(info.Ratios, ratioPair{proxyServer, proxyBaselineServer})
	}
	if b.opts.proxyTLS {
		info.Notes = append(info.Notes,
			"-proxy-tls: haproxy+tls and examples/proxy+tls are the same hops terminating TLS from the clients (TLS 1.3, AES-128-GCM at",
			"both, HAProxy's suites ordered as Go's; the bench's self-signed ECDSA P-256 certificate for 127.0.0.1, which the Metadata",
			"client and kgo trust, in a temporary PEM file: HAProxy's 'bind ... ssl crt', the proxy's SSL listener's key store), plaintext",
			"to the broker (HAProxy to a third listener, which advertises its address). Neither can splice: the bytes go through TLS in",
			"the hop's own buffers. 'added' is over the direct plaintext connection. The row "+tlsRatioCase+" holds the",
			"ratios of the same round, without targets.")
	} else {
		info.Notes = append(info.Notes, "-proxy-tls adds HAProxy and examples/proxy terminating TLS from the clients, plaintext to the broker.")
	}
	if b.haproxyBin == "" {
		info.Notes = append(info.Notes, "HAProxy was not found (-haproxy, PATH, /usr/sbin): no HAProxy column and no targets.")
	}
	info.Notes = append(info.Notes, b.brokerPropsNote()...)
	return info
}

// findHAProxy returns the haproxy binary: -haproxy's, else haproxy on
// PATH, else Debian's, which is in /usr/sbin (not on every user's PATH);
// "" when there is none.
func findHAProxy(flagged string) string {
	if flagged != "" {
		return flagged
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p
	}
	if p, err := exec.LookPath("/usr/sbin/haproxy"); err == nil {
		return p
	}
	return ""
}

// missingHAProxy says, for scenario p, that HAProxy was not found, and
// whether that fails the run: in CI (CI set) it does.
func (b *bench) missingHAProxy(id string) (msg string, fail bool) {
	if id != "p" || b.haproxyBin != "" {
		return "", false
	}
	return "(p) haproxy was not found (-haproxy, PATH, /usr/sbin; apt-get install haproxy): measuring without its column and targets",
		os.Getenv("CI") != ""
}

// proxiedMetadataLoad is Metadata v12 naming no topic, answered with
// brokers.
func proxiedMetadataLoad() loadRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	req.Topics = []kmsg.MetadataRequestTopic{}
	return loadRequest{frame: requestFrame(req), check: func(rc *rawConn) error {
		if len(rc.body) < 16 {
			return fmt.Errorf("Metadata response of %d bytes", len(rc.body))
		}
		return nil
	}}
}

// hop is one way to the broker: the process a client connects to (the
// broker itself for direct).
type hop struct {
	name serverKind
	c    *child
}

// clientTLS is the TLS configuration of the hop's clients: d's when the
// hop speaks TLS, else nil.
func (h hop) clientTLS(d *dialer) *tls.Config {
	if h.c.tls {
		return d.tls
	}
	return nil
}

// via is the hop process in front of the broker; nil for direct.
func (h hop) via() *child {
	if h.name == directServer {
		return nil
	}
	return h.c
}

// runProxy measures one round of scenario p: every hop, in an order that
// rotates from round to round.
func (b *bench) runProxy(ctx context.Context, _ serverKind) (out []sample, err error) {
	round := b.proxyRounds
	b.proxyRounds++
	modes := b.modes()
	addrs, err := freeAddrs(2 * len(modes)) // per mode, the broker's relay listener and HAProxy's
	if err != nil {
		return nil, err
	}
	relays, haproxies := addrs[:len(modes)], addrs[len(modes):]
	broker, err := b.launchBroker(ctx, brokerSpec{server: brokerServer, listenerProps: func(addr string) []string {
		return hopBrokerListeners(addr, modes, relays, haproxies)
	}, props: []string{"log.retention.bytes=-1"}})
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	hops := []hop{{directServer, broker}}
	for i, m := range modes {
		keyStore := ""
		if m.tls {
			keyStore = b.hopKeyStore
		}
		if b.haproxyBin != "" {
			hc, err := b.startHAProxy(ctx, haproxies[i], relays[i], keyStore)
			if err != nil {
				return nil, err
			}
			defer hc.stop()
			hops = append(hops, hop{m.haproxy, hc})
		}
		proxies := []serverKind{m.proxy}
		if !m.tls {
			proxies = append(proxies, b.extraProxies()...)
		}
		for _, name := range proxies {
			proxy, err := b.startProxy(ctx, name, broker.addr, keyStore)
			if err != nil {
				return nil, err
			}
			defer proxy.stop()
			hops = append(hops, hop{name, proxy})
		}
	}
	hops = rotate(hops, round)

	add := func(h hop, s sample) { s.Server = h.name; out = append(out, s) }
	fig := map[serverKind]*hopFigures{}
	for _, h := range hops {
		fig[h.name] = &hopFigures{}
	}
	for _, n := range b.opts.rawConns {
		c := fmt.Sprintf("Metadata, conns=%d", n)
		res := map[serverKind]loadResult{}
		for _, h := range hops {
			also := broker
			if h.via() == nil {
				also = nil
			}
			r, err := runLoadAlso(ctx, b.dialer, h.c, also, proxiedMetadataLoad(), n, b.opts.duration, nil)
			if err != nil {
				return out, fmt.Errorf("%s, %s: %w", c, h.name, err)
			}
			res[h.name] = r
		}
		direct := res[directServer]
		for _, h := range hops {
			r := res[h.name]
			add(h, sample{Case: c, Metric: "req/s", Value: float64(r.Requests) / r.Elapsed.Seconds()})
			for _, p := range []float64{50, 99} {
				add(h, sample{Case: c, Metric: fmt.Sprintf("p%g µs", p), Value: micros(percentile(r.Latencies, p))})
			}
			brokerCPU := r.ServerCPU
			if h.via() != nil {
				brokerCPU = r.AlsoCPU
				for _, p := range []float64{50, 99} {
					add(h, sample{Case: c, Metric: fmt.Sprintf("added p%g µs", p),
						Value: micros(percentile(r.Latencies, p)) - micros(percentile(direct.Latencies, p))})
				}
				add(h, sample{Case: c, Metric: "hop CPU µs/req", Value: micros(r.ServerCPU) / float64(r.Requests)})
				add(h, sample{Case: c, Metric: "hop ctx switches/req", Value: float64(r.ServerSwitches) / float64(r.Requests)})
				if n == 1 {
					fig[h.name].cpuReq = micros(r.ServerCPU) / float64(r.Requests)
					fig[h.name].addedP50 = micros(percentile(r.Latencies, 50)) - micros(percentile(direct.Latencies, 50))
				}
			}
			add(h, sample{Case: c, Metric: "broker CPU µs/req", Value: micros(brokerCPU) / float64(r.Requests)})
		}
	}

	records := largeRecords(b.opts.proxyMB, proxyRecordSize)
	// transfer adds a hop's produce or consume samples as case c, and
	// keeps its throughput and CPU per MB for the targets.
	transfer := func(h hop, c string, got []sample, rate, cpu *float64) {
		for _, s := range hopSamples(got, h.via() != nil) {
			s.Case = c
			add(h, s)
			switch s.Metric {
			case "MB/s":
				*rate = s.Value
			case "hop CPU ms/MB":
				*cpu = s.Value
			}
		}
	}
	for _, h := range hops {
		topic := "bench-via-" + strings.NewReplacer("/", "-", ".", "-", "+", "-", "@", "-").Replace(h.name)
		got, err := produce(ctx, broker, produceLoad{topic: topic, partitions: 1, records: records, size: proxyRecordSize,
			batchMax: producerBatchMax(proxyRecordSize), via: h.via(), tls: h.clientTLS(b.dialer)})
		transfer(h, "produce", got, &fig[h.name].produceRate, &fig[h.name].cpuProduced)
		if err != nil {
			return out, fmt.Errorf("produce, %s: %w", h.name, err)
		}
		got, err = consumeTopic(ctx, broker, h.via(), h.clientTLS(b.dialer), topic, records+1, proxyRecordSize)
		transfer(h, "consume", got, &fig[h.name].consumeRate, &fig[h.name].cpuConsumed)
		if err != nil {
			return out, fmt.Errorf("consume, %s: %w", h.name, err)
		}
	}

	out = append(out, hopRatioSamples(fig, b.hopRatios())...)
	sortHopSamples(out)
	var errs []error
	for _, h := range slices.Backward(hops) {
		if h.name != directServer {
			errs = append(errs, h.c.stop())
		}
	}
	return out, errors.Join(append(errs, broker.stop())...)
}

// hopFigures are a hop's figures in one round that the ratio rows divide.
type hopFigures struct{ cpuReq, addedP50, cpuProduced, cpuConsumed, produceRate, consumeRate float64 }

// hopRatioSamples are one round's ratio rows: for each ratio case whose
// two hops were measured (fig), the hop's figures over the other's, under
// the hop's column (those of targetsCase are the targets' rows).
func hopRatioSamples(fig map[serverKind]*hopFigures, cases []hopRatio) []sample {
	var out []sample
	for _, rc := range cases {
		ha, px := fig[rc.over], fig[rc.hop]
		if ha == nil || px == nil {
			continue
		}
		for _, r := range []struct {
			metric   string
			num, den float64
		}{
			{targetCPUPerReq, px.cpuReq, ha.cpuReq},
			{targetAddedP50, px.addedP50, ha.addedP50},
			{targetCPUProduced, px.cpuProduced, ha.cpuProduced},
			{targetCPUConsumed, px.cpuConsumed, ha.cpuConsumed},
			{targetProduceRate, px.produceRate, ha.produceRate},
			{targetConsumeRate, px.consumeRate, ha.consumeRate},
		} {
			// Zero without a 1-connection Metadata run (-conns), and a
			// ratio to an added latency HAProxy did not add means nothing.
			if r.den > 0 {
				out = append(out, sample{Case: rc.ratioCase, Metric: r.metric, Server: rc.hop, Value: r.num / r.den})
			}
		}
	}
	return out
}

// hopBrokerListeners are the example broker's listener properties in
// scenario p: PLAINTEXT on addr, for direct clients, examples/proxy and
// the broker itself, and for each mode its relay listener on relays[i],
// also PLAINTEXT, advertising the address of the mode's HAProxy,
// haproxies[i].
func hopBrokerListeners(addr string, modes []hopMode, relays, haproxies []string) []string {
	listeners, advertised, protocols := []string{"PLAINTEXT://" + addr}, []string{"PLAINTEXT://" + addr}, []string{"PLAINTEXT:PLAINTEXT"}
	for i, m := range modes {
		listeners = append(listeners, m.relay+"://"+relays[i])
		advertised = append(advertised, m.relay+"://"+haproxies[i])
		protocols = append(protocols, m.relay+":PLAINTEXT")
	}
	return []string{
		"listeners=" + strings.Join(listeners, ","),
		"advertised.listeners=" + strings.Join(advertised, ","),
		"listener.security.protocol.map=" + strings.Join(protocols, ","),
		"inter.broker.listener.name=PLAINTEXT",
	}
}

// hopMetrics is the order of scenario p's metrics within a case.
var hopMetrics = []string{"req/s", "p50 µs", "p99 µs", "added p50 µs", "added p99 µs", "hop CPU µs/req", "hop ctx switches/req", "broker CPU µs/req",
	"MB/s", "hop CPU ms/MB", "hop ctx switches/MB", "broker CPU ms/MB"}

// sortHopSamples orders a round's samples by case, in the order the cases
// first appear, then by metric (hopMetrics), so that the table's lines do
// not depend on which hop the round measured first.
func sortHopSamples(s []sample) {
	caseRank := map[string]int{}
	for _, x := range s {
		if _, ok := caseRank[x.Case]; !ok {
			caseRank[x.Case] = len(caseRank)
		}
	}
	slices.SortStableFunc(s, func(a, b sample) int {
		if d := caseRank[a.Case] - caseRank[b.Case]; d != 0 {
			return d
		}
		return slices.Index(hopMetrics, a.Metric) - slices.Index(hopMetrics, b.Metric)
	})
}

// hopSamples keeps the throughput metrics of scenario p, naming the
// measured process's CPU after what it is: the hop's, or for a direct
// connection the broker's; and a hop's context switches.
func hopSamples(in []sample, viaHop bool) []sample {
	var out []sample
	for _, s := range in {
		switch s.Metric {
		case "MB/s", "broker CPU ms/MB":
		case "server CPU ms/MB":
			s.Metric = "broker CPU ms/MB"
			if viaHop {
				s.Metric = "hop CPU ms/MB"
			}
		case "server ctx switches/MB":
			if !viaHop {
				continue
			}
			s.Metric = "hop ctx switches/MB"
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// startHAProxy starts HAProxy in TCP mode on addr, relaying every
// connection to backend, with one thread and kernel splicing
// (haproxyConfig), and waits until an ApiVersions round
// trip through it is answered. With crt not "" it terminates TLS on addr
// with that PEM file (key and certificate). Its configuration is written
// to a temporary directory, removed once HAProxy has read it.
func (b *bench) startHAProxy(ctx context.Context, addr, backend, crt string) (*child, error) {
	dir, err := os.MkdirTemp("", "kafkanet-bench-haproxy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(addr, backend, crt)), 0o600); err != nil {
		return nil, err
	}
	c := &child{name: haproxyServer, addr: addr}
	if crt != "" {
		c.name, c.tls = haproxyTLSServer, true
	}
	if err := b.launch(ctx, c, b.haproxyBin, []string{"-db", "-f", cfg}, b.childEnv(nil)); err != nil {
		return nil, err
	}
	return c, nil
}

// tls13Suites are the TLS 1.3 suites in Go's server's order where AES has
// hardware support, as OpenSSL names them.
const tls13Suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

// haproxyConfig is HAProxy's configuration in scenario p: a TCP relay from
// addr to backend, one thread, no health checks, kernel splicing in both
// directions (splice-request, splice-response): socket to pipe to socket,
// no copy through HAProxy's buffers. With crt not "", HAProxy terminates
// TLS on addr with that PEM file (key and certificate) and forwards
// plaintext; it cannot splice then, the bytes go through its buffers to be
// decrypted or encrypted. Its TLS 1.3 suites are then ordered as Go's
// server orders them on a machine with AES instructions, AES-128-GCM
// first (HAProxy's own order puts AES-256-GCM first and it picks by its
// order), so that both TLS hops encrypt with the same suite.
func haproxyConfig(addr, backend, crt string) string {
	bind := addr
	if crt != "" {
		bind += " ssl crt " + crt + " ciphersuites " + tls13Suites
	}
	return `global
    nbthread 1
    maxconn 4096

defaults
    mode tcp
    option splice-request
    option splice-response
    timeout connect 5s
    timeout client 5m
    timeout server 5m

frontend kafka
    bind ` + bind + `
    default_backend broker

backend broker
    server broker0 ` + backend + `
`
}
