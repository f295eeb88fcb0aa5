package main

// Scenario (p): what a hop in front of examples/broker costs: examples/proxy
// against HAProxy in TCP mode, a relay that parses nothing, and against a
// direct connection, all in front of the same broker in the same round.

import (
	"context"
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
	proxyServer   serverKind = "examples/proxy"
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
// Metadata for clients to stay behind it.
const relayListener = "RELAY"

// The case and metrics of the targets (issue 23): examples/proxy's medians
// over HAProxy's, each the ratio of the two in one round.
const (
	targetsCase       = "examples/proxy / haproxy"
	targetCPUPerReq   = "hop CPU µs/req, Metadata, 1 conn"
	targetAddedP50    = "added p50 µs, Metadata, 1 conn"
	targetCPUProduced = "hop CPU ms/MB produced"
	targetCPUConsumed = "hop CPU ms/MB consumed"
	targetProduceRate = "produce MB/s"
	targetConsumeRate = "consume MB/s"
)

// proxyTargets are the targets: CPU and added latency at most 1.5×
// HAProxy's, throughput at least 0.9×.
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
			"broker CPU the broker's in the same window.",
			fmt.Sprintf("Produce then consume: kgo producing %d MB of %d-byte records to a topic of one partition of its own per hop (scenario g's",
				b.opts.proxyMB, proxyRecordSize),
			"settings), then a new client consuming it from offset 0. MB = 10^6 bytes of values.",
			"The targets row holds examples/proxy's figure over HAProxy's of the same round (the median over rounds); the ratio columns",
			"divide the medians.",
		},
		Ratios:  []ratioPair{{proxyServer, haproxyServer}, {proxyServer, directServer}, {haproxyServer, directServer}},
		Targets: proxyTargets,
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
	addrs, err := freeAddrs(2) // the broker's relay listener, and HAProxy's
	if err != nil {
		return nil, err
	}
	relayAddr, haproxyAddr := addrs[0], addrs[1]
	broker, err := b.launchBroker(ctx, brokerSpec{server: brokerServer, listenerProps: func(addr string) []string {
		return []string{
			"listeners=PLAINTEXT://" + addr + "," + relayListener + "://" + relayAddr,
			"advertised.listeners=PLAINTEXT://" + addr + "," + relayListener + "://" + haproxyAddr,
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT," + relayListener + ":PLAINTEXT",
			"inter.broker.listener.name=PLAINTEXT",
		}
	}, props: []string{"log.retention.bytes=-1"}})
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	hops := []hop{{directServer, broker}}
	if b.haproxyBin != "" {
		hc, err := b.startHAProxy(ctx, haproxyAddr, relayAddr)
		if err != nil {
			return nil, err
		}
		defer hc.stop()
		hops = append(hops, hop{haproxyServer, hc})
	}
	proxy, err := b.startProxy(ctx, broker.addr)
	if err != nil {
		return nil, err
	}
	defer proxy.stop()
	hops = rotate(append(hops, hop{proxyServer, proxy}), round)

	add := func(h hop, s sample) { s.Server = h.name; out = append(out, s) }
	// per round figures of the targets, by hop
	type figures struct{ cpuReq, addedP50, cpuProduced, cpuConsumed, produceRate, consumeRate float64 }
	fig := map[serverKind]*figures{}
	for _, h := range hops {
		fig[h.name] = &figures{}
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
		topic := "bench-via-" + strings.NewReplacer("/", "-", ".", "-").Replace(h.name)
		got, err := produce(ctx, broker, produceLoad{topic: topic, partitions: 1, records: records, size: proxyRecordSize,
			batchMax: producerBatchMax(proxyRecordSize), via: h.via()})
		transfer(h, "produce", got, &fig[h.name].produceRate, &fig[h.name].cpuProduced)
		if err != nil {
			return out, fmt.Errorf("produce, %s: %w", h.name, err)
		}
		got, err = consumeTopic(ctx, broker, h.via(), nil, topic, records+1, proxyRecordSize)
		transfer(h, "consume", got, &fig[h.name].consumeRate, &fig[h.name].cpuConsumed)
		if err != nil {
			return out, fmt.Errorf("consume, %s: %w", h.name, err)
		}
	}

	if ha, px := fig[haproxyServer], fig[proxyServer]; ha != nil && px != nil {
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
				out = append(out, sample{Case: targetsCase, Metric: r.metric, Server: proxyServer, Value: r.num / r.den})
			}
		}
	}
	sortHopSamples(out)
	var errs []error
	for _, h := range slices.Backward(hops) {
		if h.name != directServer {
			errs = append(errs, h.c.stop())
		}
	}
	return out, errors.Join(append(errs, broker.stop())...)
}

// hopMetrics is the order of scenario p's metrics within a case.
var hopMetrics = []string{"req/s", "p50 µs", "p99 µs", "added p50 µs", "added p99 µs", "hop CPU µs/req", "broker CPU µs/req",
	"MB/s", "hop CPU ms/MB", "broker CPU ms/MB"}

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
// connection the broker's.
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
// trip through it is answered. Its configuration is written to a
// temporary directory, removed once HAProxy has read it.
func (b *bench) startHAProxy(ctx context.Context, addr, backend string) (*child, error) {
	dir, err := os.MkdirTemp("", "kafkanet-bench-haproxy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxyConfig(addr, backend)), 0o600); err != nil {
		return nil, err
	}
	c := &child{name: haproxyServer, addr: addr}
	if err := b.launch(ctx, c, b.haproxyBin, []string{"-db", "-f", cfg}, b.childEnv(nil)); err != nil {
		return nil, err
	}
	return c, nil
}

// haproxyConfig is HAProxy's configuration in scenario p: a TCP relay from
// addr to backend, one thread, no health checks, kernel splicing in both
// directions (splice-request, splice-response): socket to pipe to socket,
// no copy through HAProxy's buffers.
func haproxyConfig(addr, backend string) string {
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
    bind ` + addr + `
    default_backend broker

backend broker
    server broker0 ` + backend + `
`
}
