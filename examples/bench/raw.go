package main

// Scenario (a): raw ApiVersions v0 frames, one in flight per connection.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

func (b *bench) rawInfo() scenarioInfo {
	info := scenarioInfo{ID: "a", Title: fmt.Sprintf("raw ApiVersions v0 round trips, one in flight per connection, %s per run; Metadata v1 at 1 connection", b.opts.duration),
		Notes: []string{
			"The client writes a 19-byte ApiVersions v0 request and reads the whole response before the next, on each of N connections.",
			"kafkanet answers ApiVersions in the server, listing the APIs it serves; kfake lists every key it serves; echo sends a fixed empty list (see response bytes).",
			"\"conns=1, Metadata\": a 23-byte Metadata v1 request naming no topic, answered by the host: kafkanet's minimal host through Serve's",
			"queue and 8 handler goroutines, kafkanet-inline's on the connection's goroutine (socketserver.Inline); kfake's cluster goroutine; echo's fixed answer.",
			"Latency: every round trip in the run, nearest-rank percentiles. CPU µs/req: server (or bench) CPU time over the run / requests",
			"(the sum of the server's threads' run time from /proc/PID/task/*/schedstat). Context switches/req: the sum of voluntary and",
			"nonvoluntary switches over the server's threads (/proc/PID/task/*/status) over the run / requests. Reads and writes/req: the",
			"server's read and write system calls (syscr, syscw of /proc/PID/io) over the run / requests.",
			"req/s × echo and p99 × echo: kafkanet's (kafkanet-inline's) value over echo's of the same round and case, one per round, listed",
			"under the table; their median is judged. Targets: ApiVersions req/s at least 0.95 × echo at 64 and 1 connection, p99 at most 1 × echo at 64.",
			"\"conns=1, " + oneCPU + "\" and \"conns=1, " + twoCPUs + "\" (-pin): ApiVersions at one connection again, with every thread of the bench and of the",
			"server pinned to the same CPU, then each to its own. Left free, the kernel runs the two on one CPU or across two, in long stretches",
			"that differ in round trip by half, and which it settles on depends on both processes' threads and timers, not the server's work",
			"alone: pinned, each placement is measured apart, and the 1-connection target is judged on each as on the free case.",
		}, Ratios: []ratioPair{{kafkanetServer, echoServer}, {kafkanetInlineServer, echoServer}, {kafkanetServer, kfakeServer}, {kfakeServer, echoServer}},
		Paired:  rawPaired,
		Targets: rawTargets}
	if b.opts.echoControl {
		info.Notes = append(info.Notes,
			"echo-control (-echo-control): a second echo server, measured in the same rounds; its per-round ratios to echo, judged by no",
			"target, are what this machine's noise alone makes of the ratio of two identical servers: read kafkanet's beside them.")
		info.Ratios = append(info.Ratios, ratioPair{echoControlServer, echoServer})
		info.Paired = append(slices.Clone(info.Paired), pairedRatio{echoControlServer, echoServer, "req/s"}, pairedRatio{echoControlServer, echoServer, "p99 µs"})
	}
	return info
}

// rawPaired are (a)'s per-round ratios: kafkanet's and kafkanet-inline's
// req/s and p99 over echo's.
var rawPaired = []pairedRatio{
	{kafkanetServer, echoServer, "req/s"}, {kafkanetServer, echoServer, "p99 µs"},
	{kafkanetInlineServer, echoServer, "req/s"}, {kafkanetInlineServer, echoServer, "p99 µs"},
}

// rawTargets are (a)'s targets, on the medians of the per-round ratios of
// ApiVersions: req/s at least 0.95 × echo's at 64 and at 1 connection, p99
// at most echo's at 64.
var rawTargets = []target{
	{Case: "conns=64", Metric: "req/s × echo", Bound: 0.95},
	{Case: "conns=64", Metric: "p99 × echo", AtMost: true, Bound: 1},
	{Case: "conns=1", Metric: "req/s × echo", Bound: 0.95},
	{Case: placedCase(oneCPU), Metric: "req/s × echo", Bound: 0.95},
	{Case: placedCase(twoCPUs), Metric: "req/s × echo", Bound: 0.95},
}

// metadataCase is (a)'s case of Metadata at one connection.
const metadataCase = "conns=1, Metadata"

// runRaw measures one server at each connection count of -conns, and with
// Metadata at one connection when -conns holds 1. kafkanet-inline, which
// differs from kafkanet only in how the host answers, runs the Metadata
// case alone.
func (b *bench) runRaw(ctx context.Context, server serverKind) ([]sample, error) {
	kind := server
	if server == echoControlServer {
		kind = echoServer
	}
	c, err := b.startServer(ctx, childSpec{Kind: kind, BlockKey: -1})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var out []sample
	if server != kafkanetInlineServer {
		size, err := apiVersionsResponseSize(ctx, b.dialer, c.addr)
		if err != nil {
			return nil, err
		}
		out = append(out, sample{Case: "any", Metric: "response bytes", Value: float64(size)})
		for _, n := range b.opts.rawConns {
			res, err := runLoad(ctx, b.dialer, c, apiVersionsLoad(), n, b.opts.duration, nil)
			if err != nil {
				return out, fmt.Errorf("%d connections: %w", n, err)
			}
			out = res.samples(out, fmt.Sprintf("conns=%d", n))
		}
	}
	if slices.Contains(b.opts.rawConns, 1) {
		res, err := runLoad(ctx, b.dialer, c, metadataLoad(), 1, b.opts.duration, nil)
		if err != nil {
			return out, fmt.Errorf("Metadata: %w", err)
		}
		out = res.samples(out, metadataCase)
		if server != kafkanetInlineServer {
			for _, p := range b.placements { // last: the server is left pinned
				res, err := b.runPlaced(ctx, c, p, apiVersionsLoad())
				if err != nil {
					return out, fmt.Errorf("1 connection, %s: %w", p.Name, err)
				}
				out = res.samples(out, placedCase(p.Name))
			}
		}
	}
	return out, c.stop()
}

// loadRequest is the request a load sends over and over, and the check of
// each response (its correlation id is checked in any case).
type loadRequest struct {
	frame []byte
	check func(*rawConn) error // nil: any response will do
}

// apiVersionsLoad sends ApiVersions v0 and checks for no error.
func apiVersionsLoad() loadRequest {
	return loadRequest{frame: apiVersionsV0Frame(), check: (*rawConn).apiVersionsOK}
}

// metadataLoad sends Metadata v1 naming no topic. Echo answers it as any
// frame, so the response is not decoded.
func metadataLoad() loadRequest { return loadRequest{frame: metadataV1Frame()} }

// loadResult is what one run of the raw load measured.
type loadResult struct {
	Requests  int
	Latencies []time.Duration // sorted
	Listings  int             // scenario f: listings made meanwhile
	*window
}

// samples adds the result's metrics to out under the case c.
func (r loadResult) samples(out []sample, c string) []sample {
	out = append(out, sample{Case: c, Metric: "req/s", Value: float64(r.Requests) / r.Elapsed.Seconds()})
	out = latencySamples(out, c, r.Latencies)
	if r.Requests > 0 {
		out = append(out,
			sample{Case: c, Metric: "server CPU µs/req", Value: micros(r.ServerCPU) / float64(r.Requests)},
			sample{Case: c, Metric: "server ctx switches/req", Value: float64(r.ServerSwitches) / float64(r.Requests)},
			sample{Case: c, Metric: "bench CPU µs/req", Value: micros(r.Client) / float64(r.Requests)})
		if r.ServerReads >= 0 {
			out = append(out,
				sample{Case: c, Metric: "server reads/req", Value: float64(r.ServerReads) / float64(r.Requests)},
				sample{Case: c, Metric: "server writes/req", Value: float64(r.ServerWrites) / float64(r.Requests)})
		}
	}
	return out
}

// runLoad sends req's round trips to c on conns connections (TLS when c
// speaks it), one in flight each, and measures them for dur. The connections are opened
// and have done one round trip before the load starts, and the load runs
// for warmUp(dur) before the measurement. During the run,
// meanwhile (if not nil) runs with a context that ends with it, and its
// result is the run's Listings.
func runLoad(ctx context.Context, d *dialer, c *child, req loadRequest, conns int, dur time.Duration, meanwhile func(context.Context) int) (loadResult, error) {
	return runLoadAlso(ctx, d, c, nil, req, conns, dur, meanwhile)
}

// runLoadAlso is runLoad that also measures the CPU time of also, if not
// nil (the window's AlsoCPU): scenario p's broker behind a hop.
func runLoadAlso(ctx context.Context, d *dialer, c, also *child, req loadRequest, conns int, dur time.Duration, meanwhile func(context.Context) int) (loadResult, error) {
	rcs, err := openLoadConns(ctx, d.dialFor(c), c.addr, req, conns)
	defer func() {
		for _, rc := range rcs {
			rc.c.Close()
		}
	}()
	if err != nil {
		return loadResult{}, err
	}
	// Closing the connections unblocks the round trips when ctx ends.
	stop := context.AfterFunc(ctx, func() {
		for _, rc := range rcs {
			rc.c.Close()
		}
	})
	defer stop()
	// The round trips start warmUp before the measurement, so that it
	// finds the server and the connections busy.
	measureFrom := time.Now().Add(warmUp(dur))
	deadline := measureFrom.Add(dur)
	lats := make([][]time.Duration, conns)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i, rc := range rcs {
		wg.Go(func() { lats[i], errs[i] = loadConn(rc, req.check, measureFrom, deadline) })
	}
	if err := sleep(ctx, time.Until(measureFrom)); err != nil {
		wg.Wait()
		return loadResult{}, err
	}
	w, err := startWindowAlso(c, also)
	if err != nil {
		wg.Wait()
		return loadResult{}, err
	}
	res := loadResult{window: w}
	listings := make(chan int, 1)
	mctx, mcancel := context.WithDeadline(ctx, deadline)
	defer mcancel()
	if meanwhile != nil {
		go func() { listings <- meanwhile(mctx) }()
	}
	wg.Wait()
	if err := w.end(); err != nil {
		return loadResult{}, err
	}
	if meanwhile != nil {
		res.Listings = <-listings
	}
	if err := errors.Join(errs...); err != nil {
		return loadResult{}, errors.Join(ctx.Err(), err)
	}
	res.Latencies = slices.Concat(lats...)
	slices.Sort(res.Latencies)
	res.Requests = len(res.Latencies)
	if res.Requests == 0 && ctx.Err() == nil {
		return loadResult{}, fmt.Errorf("no round trip of the measured %s completed: the server stalled", dur)
	}
	return res, ctx.Err()
}

// apiVersionsResponseSize returns the size of the server's ApiVersions v0
// response frame, its 4-byte size included.
func apiVersionsResponseSize(ctx context.Context, d *dialer, addr string) (int, error) {
	rcs, err := openLoadConns(ctx, d.dial, addr, apiVersionsLoad(), 1)
	for _, rc := range rcs {
		rc.c.Close()
	}
	if err != nil {
		return 0, err
	}
	return 4 + len(rcs[0].body), nil
}

// openLoadConns opens n connections to addr with dial, each after one
// round trip of req, ready to send more.
func openLoadConns(ctx context.Context, dial func(context.Context, string) (net.Conn, error), addr string, req loadRequest, n int) ([]*rawConn, error) {
	var rcs []*rawConn
	for range n {
		nc, err := dial(ctx, addr)
		if err != nil {
			return rcs, err
		}
		rc := newRawConn(nc, req.frame)
		rcs = append(rcs, rc)
		if err := rc.roundTrip(); err != nil {
			return rcs, err
		}
		if req.check != nil {
			if err := req.check(rc); err != nil {
				return rcs, err
			}
		}
	}
	return rcs, nil
}

// warmUp is how long the load runs before a measurement of dur starts.
func warmUp(dur time.Duration) time.Duration { return min(dur/5, 500*time.Millisecond) }

// loadConn does round trips on rc until the deadline, checking each
// response with check (if not nil), and returns the latencies of those
// that started from measureFrom on.
func loadConn(rc *rawConn, check func(*rawConn) error, measureFrom, deadline time.Time) ([]time.Duration, error) {
	_ = rc.c.SetDeadline(deadline.Add(30 * time.Second)) // a stuck server fails the run, not hangs it
	lat := make([]time.Duration, 0, 1<<14)
	for {
		start := time.Now()
		if !start.Before(deadline) {
			return lat, nil
		}
		if err := rc.roundTrip(); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return lat, nil // the run was cancelled
			}
			return lat, err
		}
		if !start.Before(measureFrom) {
			lat = append(lat, time.Since(start))
		}
		if check != nil {
			if err := check(rc); err != nil {
				return lat, err
			}
		}
	}
}
