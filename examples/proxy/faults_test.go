package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/examples/internal/faults"
)

// faultTarget starts examples/broker and a proxy in front of it with
// connections.max.idle.ms idle, and toxiproxy in front of the proxy's
// ports (its bootstrap port and upstream node 0's), which the clients of
// the fault cases dial.
func faultTarget(t *testing.T, idle time.Duration) *faults.Target {
	up := startUpstream(t, 1)
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil,
		append(plaintextProxy, "connections.max.idle.ms="+strconv.Itoa(int(idle.Milliseconds())))...)
	seed := p.addr(t, "PLAIN")
	metadata := dialRaw(t, seed) // the proxy opens node 0's port once it knows the node
	metadata.roundTrip(t, metadataRequest(1))
	node := p.nodeAddr(t, "PLAIN", 0)
	metadata.Close()
	proxies := []*faults.Proxy{faults.Start(t, seed)}
	if node != seed {
		proxies = append(proxies, faults.Start(t, node))
	}
	return &faults.Target{Proxies: proxies, Seed: seed, Idle: idle, Registry: p.srv.Registry()}
}

// Clients produce through a fault injector (Shopify's toxiproxy, in the
// test process) to the proxy, and through it to examples/broker: the
// stream cut into pieces of 1 to 8 bytes; latency, jitter and a bandwidth
// cap; connections reset, stalled and cut at random points. An idempotent
// producer's records all arrive exactly once and in order once the faults
// stop, new clients are served meanwhile, a half-open connection is
// expired by connections.max.idle.ms and listed as closed, and goroutines
// and sockets return to their baseline (faults.RunCases).
func TestFaults(t *testing.T) {
	faults.RunCases(t, faultTarget(t, 2*time.Second))
}

// A Produce that takes longer than connections.max.idle.ms to reach the
// proxy, over a link that cuts it into pieces of 1 to 8 bytes, is not
// closed as idle while it arrives: its records are acknowledged
// (faults.SlowLink).
func TestFaultsSlowLink(t *testing.T) {
	faults.SlowLink(t, faultTarget(t, time.Second))
}
