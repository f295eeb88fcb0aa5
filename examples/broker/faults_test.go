package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/examples/internal/faults"
)

// faultTarget starts a broker with connections.max.idle.ms idle, and
// toxiproxy in front of its CLIENT listener, which the clients of the
// fault cases dial.
func faultTarget(t *testing.T, idle time.Duration) *faults.Target {
	c := startTestCluster(t, 1, "connections.max.idle.ms="+strconv.Itoa(int(idle.Milliseconds())))
	seed := addr(t, c, 0, "CLIENT")
	return &faults.Target{Proxies: []*faults.Proxy{faults.Start(t, seed)}, Seed: seed, Idle: idle,
		Registry: c.brokers[0].srv.Registry()}
}

// Clients produce to the broker through a fault injector (Shopify's
// toxiproxy, in the test process): the stream cut into pieces of 1 to 8
// bytes; latency, jitter and a bandwidth cap; connections reset, stalled
// and cut at random points. An idempotent producer's records all arrive
// exactly once and in order once the faults stop, new clients are served
// meanwhile, a half-open connection is expired by connections.max.idle.ms
// and listed as closed, and goroutines and sockets return to their
// baseline (faults.RunCases).
func TestFaults(t *testing.T) {
	faults.RunCases(t, faultTarget(t, 2*time.Second))
}

// A Produce that takes longer than connections.max.idle.ms to arrive, over
// a link that cuts it into pieces of 1 to 8 bytes, is not closed as idle
// while it arrives: its records are acknowledged (faults.SlowLink). Before,
// the broker closed the connection in the middle of the request, the
// client sent it again, and so on for ever.
func TestFaultsSlowLink(t *testing.T) {
	faults.SlowLink(t, faultTarget(t, time.Second))
}
