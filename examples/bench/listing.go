package main

// Scenario (f): ListClientConnections latency, and what listing costs the
// data plane.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
)

// listingLoadConns is the data-plane load of scenario f: (a)'s round trips
// on this many connections.
const listingLoadConns = 8

// listingModes are how often scenario f lists while the data-plane load
// runs: never, once a second (a dashboard), back to back.
var listingModes = []struct {
	name     string
	interval time.Duration // between listings; negative: no listing
}{{"no listing", -1}, {"a listing every second", time.Second}, {"listings back to back", 0}}

func (b *bench) listingInfo() scenarioInfo {
	return scenarioInfo{ID: "f", Title: "kafkanet: ListClientConnections (KIP-1329) with many connections, and its cost to the data plane",
		Notes: []string{
			fmt.Sprintf("The server serves it with connregistry.ListHandler under API key %d, as examples/broker does by default. The connections", connregistry.DefaultListAPIKey),
			fmt.Sprintf("are idle ones after an ApiVersions round trip each. Listing latency: %d listings one after another, send to the last", b.opts.listings),
			"byte of the response (snapshot, encoding, transfer; the bench decodes afterwards and checks the count).",
			fmt.Sprintf("\"top %d of N\" asks for the %d busiest (SortBy requests, Limit %d: issue 38's top talkers), beside \"list N\", all of them.", topListing, topListing, topListing),
			fmt.Sprintf("Data plane: (a)'s load on %d connections for %s with %d idle connections, while another connection lists.", listingLoadConns, b.opts.duration, b.opts.idleCounts[0]),
		}}
}

// runListing measures listings at each count of -idle, and the data plane
// with listings at the first count.
func (b *bench) runListing(ctx context.Context, server serverKind) ([]sample, error) {
	counts, _ := b.idleCounts()
	if len(counts) == 0 {
		return nil, nil
	}
	c, err := b.startServer(ctx, childSpec{Kind: server, BlockKey: -1})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var conns connSet
	defer conns.closeAll()
	var out []sample
	for i, n := range counts {
		if err := openIdle(ctx, b.dialer.dial, c.addr, &conns, n, burstDialers); err != nil {
			return out, err
		}
		for _, l := range []struct {
			name  string
			frame []byte
			limit int
		}{{fmt.Sprintf("list %d conns", n), listConnectionsFrame(), 0}, {fmt.Sprintf("top %d of %d conns", topListing, n), topConnectionsFrame(topListing), topListing}} {
			lats, size, err := timeListings(ctx, b.dialer, c.addr, l.frame, n, l.limit, b.opts.listings)
			if err != nil {
				return out, fmt.Errorf("%s: %w", l.name, err)
			}
			out = append(out,
				sample{Case: l.name, Metric: "p50 ms", Value: micros(percentile(lats, 50)) / 1000},
				sample{Case: l.name, Metric: "max ms", Value: micros(lats[len(lats)-1]) / 1000},
				sample{Case: l.name, Metric: "response MiB", Value: mib(int64(size))})
		}
		if i == 0 {
			if out, err = b.dataPlaneWithListings(ctx, c, n, out); err != nil {
				return out, err
			}
		}
	}
	return out, c.stop()
}

// dataPlaneWithListings runs (a)'s load on listingLoadConns connections in
// each of listingModes, with idle connections open.
func (b *bench) dataPlaneWithListings(ctx context.Context, c *child, idle int, out []sample) ([]sample, error) {
	for _, m := range listingModes {
		var lister func(context.Context) int
		if m.interval >= 0 {
			lister = func(ctx context.Context) int { return listUntilDone(ctx, b.dialer, c.addr, m.interval) }
		}
		res, err := runLoad(ctx, b.dialer, c, apiVersionsLoad(), listingLoadConns, b.opts.duration, lister)
		if err != nil {
			return out, fmt.Errorf("data plane, %s: %w", m.name, err)
		}
		name := fmt.Sprintf("%d conns, %d idle, %s", listingLoadConns, idle, m.name)
		out = append(out, sample{Case: name, Metric: "req/s", Value: float64(res.Requests) / res.Elapsed.Seconds()})
		out = latencySamples(out, name, res.Latencies)
		out = append(out, sample{Case: name, Metric: "listings", Value: float64(res.Listings)})
	}
	return out, nil
}

// topListing is how many connections scenario f's top listing asks for.
const topListing = 10

// timeListings sends frame, a ListClientConnections request, to addr k
// times on one connection and returns the sorted latencies and the size of
// the last response. Each response must hold at least want connections,
// or exactly limit when limit is positive (and want is more).
func timeListings(ctx context.Context, d *dialer, addr string, frame []byte, want, limit, k int) ([]time.Duration, int, error) {
	if limit > 0 {
		want = min(want, limit)
	}
	nc, err := d.dial(ctx, addr)
	if err != nil {
		return nil, 0, err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	rc := newRawConn(nc, frame)
	var lats []time.Duration
	for range k {
		start := time.Now()
		if err := rc.roundTrip(); err != nil {
			return nil, 0, err
		}
		lats = append(lats, time.Since(start))
		got, err := listedConnections(rc.body)
		if err != nil {
			return nil, 0, err
		}
		if got < want || (limit > 0 && got > limit) {
			return nil, 0, fmt.Errorf("the listing holds %d connections, want at least %d (at most %d)", got, want, limit)
		}
	}
	slices.Sort(lats)
	return lats, 4 + len(rc.body), nil
}

// listedConnections decodes a ListClientConnections response (its body
// after the correlation id: the header's tags, then the response) and
// returns its connection count.
func listedConnections(body []byte) (int, error) {
	if len(body) < 5 || body[4] != 0 {
		return 0, fmt.Errorf("ListClientConnections response header: want no tags")
	}
	resp := &connregistry.ListClientConnectionsResponse{APIKey: connregistry.DefaultListAPIKey}
	if err := resp.ReadFrom(body[5:]); err != nil {
		return 0, fmt.Errorf("decoding ListClientConnections: %w", err)
	}
	if resp.ErrorCode != 0 {
		return 0, fmt.Errorf("ListClientConnections error code %d", resp.ErrorCode)
	}
	return len(resp.Connections), nil
}

// listUntilDone lists addr's connections until ctx ends, waiting interval
// between listings, and returns how many it completed. An error ends it
// early: the load's own checks report a broken server.
func listUntilDone(ctx context.Context, d *dialer, addr string, interval time.Duration) int {
	nc, err := d.dial(ctx, addr)
	if err != nil {
		return 0
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	rc := newRawConn(nc, listConnectionsFrame())
	n := 0
	for ctx.Err() == nil {
		if err := rc.roundTrip(); err != nil {
			return n
		}
		n++
		if interval > 0 && sleep(ctx, interval) != nil {
			return n
		}
	}
	return n
}
