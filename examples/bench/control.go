package main

// Scenario (e): control-plane latency while the data plane is saturated.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
)

func (b *bench) controlInfo() scenarioInfo {
	return scenarioInfo{ID: "e", Title: fmt.Sprintf("kafkanet: Metadata on the control listener while the data plane is saturated, %s per run", b.opts.duration),
		Notes: []string{
			"The server's handler never answers Metadata from the CLIENT listener: the bench sends one on each of queue+handlers+50",
			"connections, so the 8 handler goroutines block and the data-plane queue (queued.max.requests 500) is full, then",
			"sends Metadata v1 on the CONTROLLER listener one at a time. Separate: CONTROLLER is control.plane.listener.name",
			fmt.Sprintf("(KIP-291, its own queue and handler). Shared: no control plane, CONTROLLER feeds the full data queue. A request unanswered after %s", b.opts.probeTimeout),
			"counts as that long and is retried on a new connection.",
		}}
}

// runControl measures the control listener's latency with a separate
// control plane and with the control listener on the data plane.
func (b *bench) runControl(ctx context.Context, server serverKind) ([]sample, error) {
	var out []sample
	for _, shared := range []bool{false, true} {
		name := "separate control plane"
		if shared {
			name = "shared data plane"
		}
		s, err := b.controlCase(ctx, server, shared)
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		for i := range s {
			s[i].Case = name
		}
		out = append(out, s...)
	}
	return out, nil
}

// controlCase runs one server with the data plane saturated and probes its
// control listener.
func (b *bench) controlCase(ctx context.Context, server serverKind, shared bool) ([]sample, error) {
	c, err := b.startServer(ctx, childSpec{Kind: server, SharedControl: shared, BlockKey: int(kmsg.Metadata)})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var blockers connSet
	defer blockers.closeAll()
	if err := saturate(ctx, b.dialer, c, &blockers); err != nil {
		return nil, err
	}
	lats, answered, err := probeControl(ctx, b.dialer, c.controlAddr, b.opts.duration, b.opts.probeTimeout)
	if err != nil {
		return nil, err
	}
	st, err := c.stats()
	if err != nil {
		return nil, err
	}
	if st.DataQueue != st.DataQueueCap {
		return nil, fmt.Errorf("the data-plane queue held %d of %d requests at the end: not saturated", st.DataQueue, st.DataQueueCap)
	}
	out := latencySamples(nil, "", lats)[:2] // p50, p99
	out = append(out,
		sample{Metric: "answered %", Value: 100 * float64(answered) / float64(len(lats))},
		sample{Metric: "requests", Value: float64(len(lats))})
	return out, c.stop()
}

// saturate sends a Metadata request, which the server's handler holds, on
// enough connections to c's client listener to block every handler and
// fill the data-plane queue, and waits until the queue is full.
func saturate(ctx context.Context, d *dialer, c *child, conns *connSet) error {
	st, err := c.stats()
	if err != nil {
		return err
	}
	n := st.DataQueueCap + socketserver.DefaultNumIOThreads + 50
	frame := metadataV1Frame()
	for range n {
		nc, err := d.dial(ctx, c.addr)
		if err != nil {
			return err
		}
		conns.add(nc)
		if err := newRawConn(nc, frame).send(); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.stats()
		if err != nil {
			return err
		}
		if st.DataQueue == st.DataQueueCap && st.Blocked == socketserver.DefaultNumIOThreads {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %d blocked requests the queue holds %d of %d and %d handlers are blocked", n, st.DataQueue, st.DataQueueCap, st.Blocked)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// probeControl sends Metadata v1 requests to addr one at a time for dur and
// returns their sorted latencies, an unanswered request counting as
// timeout, and how many were answered.
func probeControl(ctx context.Context, d *dialer, addr string, dur, timeout time.Duration) ([]time.Duration, int, error) {
	var lats []time.Duration
	answered := 0
	var rc *rawConn
	defer func() {
		if rc != nil {
			rc.c.Close()
		}
	}()
	for end := time.Now().Add(dur); time.Now().Before(end) && ctx.Err() == nil; {
		if rc == nil {
			nc, err := d.dial(ctx, addr)
			if err != nil {
				return nil, 0, err
			}
			rc = newRawConn(nc, metadataV1Frame())
		}
		start := time.Now()
		_ = rc.c.SetDeadline(start.Add(timeout))
		err := rc.roundTrip()
		switch {
		case err == nil:
			lats = append(lats, time.Since(start))
			answered++
		case errors.Is(err, os.ErrDeadlineExceeded):
			lats = append(lats, timeout)
			rc.c.Close() // its request is still in flight: start over
			rc = nil
		default:
			return nil, 0, err
		}
	}
	if len(lats) == 0 {
		return nil, 0, errors.Join(ctx.Err(), errors.New("no request sent"))
	}
	slices.Sort(lats)
	return lats, answered, ctx.Err()
}
