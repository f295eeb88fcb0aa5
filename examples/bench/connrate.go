package main

// Scenario (d): new connections per second, plaintext and TLS.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// connRateWorkers is how many connections the bench opens at once in
// scenario d.
const connRateWorkers = 8

func (b *bench) connRateInfo() scenarioInfo {
	return scenarioInfo{ID: "d", Title: fmt.Sprintf("new connections: dial, one ApiVersions v0 round trip, close; %d at a time, %s per run", connRateWorkers, b.opts.duration),
		Notes: []string{
			"TLS: TLS 1.3 with an ECDSA P-256 self-signed certificate made at start, a full handshake each time (no session",
			"resumption); kafkanet reads it as ssl.keystore.type=PEM with ssl.keystore.key and ssl.keystore.certificate.chain inline,",
			"kfake through its TLS option, echo through crypto/tls. The client closes first (FIN). Latency: the whole cycle, dial to close.",
			"Server CPU µs/conn includes 100 ms after the last close, so that the server's side of the closes is counted.",
		}}
}

// runConnRate measures one server with and without TLS.
func (b *bench) runConnRate(ctx context.Context, server serverKind) ([]sample, error) {
	var out []sample
	for _, useTLS := range []bool{false, true} {
		name := "plaintext"
		if useTLS {
			name = "TLS"
		}
		c, err := b.startServer(ctx, childSpec{Kind: server, TLS: useTLS, BlockKey: -1})
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		s, err := connRate(ctx, b.dialer, c, b.opts.duration)
		if err == nil {
			err = c.stop()
		} else {
			c.stop()
		}
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

// connRate opens connections to c, connRateWorkers at a time, for dur, each
// for one ApiVersions v0 round trip, and measures them.
func connRate(ctx context.Context, d *dialer, c *child, dur time.Duration) ([]sample, error) {
	dial := d.dialFor(c)
	w, err := startWindow(c)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(dur)
	lats := make([][]time.Duration, connRateWorkers)
	errs := make([]error, connRateWorkers)
	var wg sync.WaitGroup
	for i := range connRateWorkers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				start := time.Now()
				if errs[i] = connectOnce(ctx, dial, c.addr); errs[i] != nil {
					return
				}
				lats[i] = append(lats[i], time.Since(start))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(w.start)
	if err := sleep(ctx, 100*time.Millisecond); err != nil {
		return nil, err
	}
	if err := w.end(); err != nil {
		return nil, err
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	if len(all) == 0 {
		return nil, fmt.Errorf("no connection completed in %s", dur)
	}
	out := []sample{{Metric: "conns/s", Value: float64(len(all)) / elapsed.Seconds()}}
	out = latencySamples(out, "", all)
	return append(out,
		sample{Metric: "server CPU µs/conn", Value: micros(w.ServerCPU) / float64(len(all))},
		sample{Metric: "bench CPU µs/conn", Value: micros(w.Client) / float64(len(all))}), nil
}

// connectOnce dials addr, does one ApiVersions round trip and closes.
func connectOnce(ctx context.Context, dial func(context.Context, string) (net.Conn, error), addr string) error {
	nc, err := dial(ctx, addr)
	if err != nil {
		return err
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	err = helloRoundTrip(nc)
	if cerr := nc.Close(); err == nil {
		err = cerr
	}
	return err
}
