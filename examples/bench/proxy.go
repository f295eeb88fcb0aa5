package main

// Scenario (p): what examples/proxy adds to a request, against a direct
// connection to the same broker.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// proxyServer is scenario p's one server: examples/broker, reached
// directly and through examples/proxy, in the same round.
const proxyServer serverKind = "examples/proxy"

func (b *bench) proxyInfo() scenarioInfo {
	return scenarioInfo{ID: "p", Title: "examples/proxy in front of examples/broker, against a direct connection to the same broker",
		Notes: []string{
			"Each round starts examples/broker and examples/proxy in front of it (PLAINTEXT both sides, each in its own process) and measures",
			"the same load on the broker directly and through the proxy, one after the other. Metadata v12 naming no topic: a request the proxy",
			"forwards at the client's version on its own upstream connection, and whose response it decodes, rewrites and encodes again.",
			"'added' rows are the proxy's median minus the direct median of the same round; CPU µs/req is the proxy process's alone.",
			fmt.Sprintf("Produce: kgo producing %d records of %d bytes as scenario b, directly and through the proxy; CPU ms/MB is each process's.", b.opts.records, b.opts.recordSize),
		}}
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

// runProxy measures one round of scenario p.
func (b *bench) runProxy(ctx context.Context, _ serverKind) ([]sample, error) {
	broker, err := b.startBroker(ctx)
	if err != nil {
		return nil, err
	}
	defer broker.stop()
	proxy, err := b.startProxy(ctx, broker.addr)
	if err != nil {
		return nil, err
	}
	defer proxy.stop()

	var out []sample
	for _, n := range b.opts.rawConns {
		direct, err := runLoad(ctx, b.dialer, broker, proxiedMetadataLoad(), n, b.opts.duration, nil)
		if err != nil {
			return out, fmt.Errorf("%d connections, direct: %w", n, err)
		}
		via, err := runLoad(ctx, b.dialer, proxy, proxiedMetadataLoad(), n, b.opts.duration, nil)
		if err != nil {
			return out, fmt.Errorf("%d connections, through the proxy: %w", n, err)
		}
		c := fmt.Sprintf("Metadata, conns=%d", n)
		out = direct.samples(out, c+": direct")
		out = via.samples(out, c+": through the proxy")
		for _, p := range []float64{50, 99} {
			out = append(out, sample{Case: c + ": added by the proxy", Metric: fmt.Sprintf("p%g µs", p),
				Value: micros(percentile(via.Latencies, p)) - micros(percentile(direct.Latencies, p))})
		}
		if via.Requests > 0 {
			out = append(out, sample{Case: c + ": added by the proxy", Metric: "proxy CPU µs/req", Value: micros(via.ServerCPU) / float64(via.Requests)})
		}
	}
	for _, target := range []struct {
		name string
		c    *child
	}{{"direct", broker}, {"through the proxy", proxy}} {
		got, err := produce(ctx, target.c, produceLoad{topic: benchTopic, partitions: benchPartitions, records: b.opts.records, size: b.opts.recordSize})
		for _, s := range got {
			s.Case = "produce: " + target.name
			if target.c == proxy && s.Metric == "server CPU ms/MB" {
				s.Metric = "proxy CPU ms/MB"
			}
			out = append(out, s)
		}
		if err != nil {
			return out, fmt.Errorf("produce %s: %w", target.name, err)
		}
	}
	if err := proxy.stop(); err != nil {
		return out, err
	}
	return out, broker.stop()
}
