package main

// Scenario (c): server memory per idle connection.

import (
	"context"
	"fmt"
	"slices"
)

func (b *bench) idleInfo() scenarioInfo {
	return scenarioInfo{ID: "c", Title: "server RSS per idle connection, after one ApiVersions v0 round trip each",
		Notes: append([]string{
			fmt.Sprintf("RSS is VmRSS from /proc/PID/status, sampled %s after the server starts and %s after each count is reached;", b.opts.settle, b.opts.settle),
			"RSS/conn = (RSS at N - RSS before) / N. The bench opens the connections 32 at a time from 64 loopback source addresses (a reconnect",
			"storm: \"N conns\"), then, in a fresh server, one at a time (\"N conns, one at a time\"), then, in a fresh server, over TLS 1.3",
			fmt.Sprintf("(at most %d, 32 at a time: \"N conns, TLS\"; kafkanet, kfake and echo, whose TLS is crypto/tls's).", tlsIdleMost),
			"kafkanet is the bench's minimal host; examples/broker the example broker with one PLAINTEXT listener; bare the floor: a goroutine",
			"per connection, no buffered reader or writer, each frame's header read into an array on its stack.",
			"kafkanet's breakdown, from its runtime.MemStats at the same moments, per connection: goroutine stacks (StackInuse), heap objects, live or not yet collected (HeapAlloc),",
			"the heap's spans the runtime keeps from the system (HeapSys-HeapReleased: \"heap kept\"), of which the free ones, kept for the heap to grow",
			"into (HeapIdle-HeapReleased: \"heap free kept\"), and all the memory it keeps (Sys-HeapReleased: \"Go kept\"); then its RSS/conn once it has",
			"given its free pages back (debug.FreeOSMemory, after the other readings: \"RSS/conn KiB, freed\", over the 0-connection RSS less the free",
			"heap pages the runtime kept then, which it gives back too), which a burst's extra lies in or not.",
		}, b.baselineNote(brokerServer)...),
		Ratios: b.baselineRatios([]ratioPair{{brokerServer, bareServer}, {kafkanetServer, bareServer}, {kafkanetServer, echoServer}, {echoServer, bareServer}}, brokerServer),
	}
}

// idleServers are the servers of scenario c.
func (b *bench) idleServers() []serverKind {
	return b.withBaseline([]serverKind{kafkanetServer, brokerServer, kfakeServer, echoServer, bareServer}, brokerServer)
}

// Scenario c opens its connections in two ways, each in a server of its
// own: burstDialers at a time, as clients reconnecting at once after an
// outage do, and one at a time.
const burstDialers = 32

// tlsIdleMost is how many TLS connections scenario c opens at most: each
// costs a handshake's CPU, and a server several times a plaintext one's
// memory.
const tlsIdleMost = 3000

// idleMode is one way of opening scenario c's connections.
type idleMode struct {
	dialers int
	tls     bool   // TLS 1.3 connections, at most tlsIdleMost, for the servers that speak it
	suffix  string // of the case names
}

var idleModes = []idleMode{{burstDialers, false, ""}, {1, false, ", one at a time"}, {burstDialers, true, ", TLS"}}

// idleTLS reports whether scenario c measures server over TLS: the bench's
// own children but the bare floor (examples/broker's TLS is the library's,
// which the minimal host measures).
func idleTLS(server serverKind) bool {
	return server == kafkanetServer || server == kfakeServer || server == echoServer
}

// runIdle measures one server in each idleMode, at each count of -idle.
func (b *bench) runIdle(ctx context.Context, server serverKind) ([]sample, error) {
	var out []sample
	for _, m := range idleModes {
		s, err := b.runIdleMode(ctx, server, m)
		out = append(out, s...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// startIdleServer starts server for scenario c.
func (b *bench) startIdleServer(ctx context.Context, server serverKind, useTLS bool) (*child, error) {
	if server == brokerServer || server == baselineServer {
		return b.startBrokerAs(ctx, server)
	}
	return b.startServer(ctx, childSpec{Kind: server, TLS: useTLS, BlockKey: -1})
}

// runIdleMode measures one server at each count of -idle, growing one
// set of connections opened as m says.
func (b *bench) runIdleMode(ctx context.Context, server serverKind, m idleMode) ([]sample, error) {
	counts, _ := b.idleCounts()
	if m.tls {
		if !idleTLS(server) {
			return nil, nil
		}
		counts = tlsIdleCounts(counts)
	}
	if len(counts) == 0 {
		return nil, nil
	}
	c, err := b.startIdleServer(ctx, server, m.tls)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var conns connSet
	defer conns.closeAll()
	if err := sleep(ctx, b.opts.settle); err != nil {
		return nil, err
	}
	before, err := c.rss()
	if err != nil {
		return nil, err
	}
	out := []sample{{Case: "0 conns" + m.suffix, Metric: "RSS MiB", Value: mib(before)}}
	var goBefore childStats // kafkanet: the Go runtime's view, for a breakdown
	if c.name == kafkanetServer {
		if goBefore, err = c.memStats(); err != nil {
			return nil, err
		}
	}
	for i, n := range counts {
		if err := openIdle(ctx, b.dialer.dialFor(c), c.addr, &conns, n, m.dialers); err != nil {
			return out, err
		}
		if err := sleep(ctx, b.opts.settle); err != nil {
			return out, err
		}
		if err := checkServerConns(c, n); err != nil {
			return out, err
		}
		rss, err := c.rss()
		if err != nil {
			return out, err
		}

		name := fmt.Sprintf("%d conns%s", n, m.suffix)
		out = append(out,
			sample{Case: name, Metric: "RSS MiB", Value: mib(rss)},
			sample{Case: name, Metric: "RSS/conn KiB", Value: float64(rss-before) / float64(n) / 1024})
		if c.name == kafkanetServer {
			ms, err := c.memStats()
			if err != nil {
				return out, err
			}
			perConn := func(now, then uint64) float64 { return (float64(now) - float64(then)) / float64(n) / 1024 }
			out = append(out,
				sample{Case: name, Metric: "stacks/conn KiB", Value: perConn(ms.StackInuse, goBefore.StackInuse)},
				sample{Case: name, Metric: "heap/conn KiB", Value: perConn(ms.HeapAlloc, goBefore.HeapAlloc)},
				sample{Case: name, Metric: "heap kept/conn KiB", Value: perConn(ms.HeapSys-ms.HeapReleased, goBefore.HeapSys-goBefore.HeapReleased)},
				sample{Case: name, Metric: "heap free kept/conn KiB", Value: perConn(ms.HeapIdle-ms.HeapReleased, goBefore.HeapIdle-goBefore.HeapReleased)},
				sample{Case: name, Metric: "Go kept/conn KiB", Value: perConn(ms.Sys-ms.HeapReleased, goBefore.Sys-goBefore.HeapReleased)},
				sample{Case: name, Metric: "GCs", Value: float64(ms.NumGC - goBefore.NumGC)},
				sample{Case: name, Metric: "new stack KiB", Value: float64(ms.StackStart) / 1024})
			if i == len(counts)-1 { // the last reading: it changes what the runtime keeps
				if _, err := c.freeOSMemory(); err != nil {
					return out, err
				}
				freed, err := c.rss()
				if err != nil {
					return out, err
				}
				// The pages given back include those the runtime kept free
				// before the connections (goBefore's): the baseline loses
				// them too.
				base := float64(before) - float64(goBefore.HeapIdle-goBefore.HeapReleased)
				out = append(out, sample{Case: name, Metric: "RSS/conn KiB, freed", Value: (float64(freed) - base) / float64(n) / 1024})
			}
		}
	}
	return out, c.stop()
}

// tlsIdleCounts returns counts with each above tlsIdleMost lowered to it,
// once.
func tlsIdleCounts(counts []int) []int {
	var out []int
	for _, n := range counts {
		if n = min(n, tlsIdleMost); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// checkServerConns checks, for a kafkanet child, that the server holds at
// least n connections; other servers cannot tell, so they pass.
func checkServerConns(c *child, n int) error {
	if err := c.alive(); err != nil {
		return err
	}
	if c.name != kafkanetServer {
		return nil
	}
	st, err := c.stats()
	if err != nil {
		return err
	}
	if st.Connections < n {
		return fmt.Errorf("the server holds %d connections, want at least %d", st.Connections, n)
	}
	return nil
}

// fileLimitSlack is how many descriptors besides its connections a
// process may need.
const fileLimitSlack = 1000

// idleCounts splits -idle into the counts that fit under the open-file
// limit (each process holds one end of every connection) and those that
// do not.
func (b *bench) idleCounts() (fit, skipped []int) {
	for _, n := range b.opts.idleCounts {
		if uint64(n)+fileLimitSlack <= b.fileLimit {
			fit = append(fit, n)
		} else {
			skipped = append(skipped, n)
		}
	}
	return fit, skipped
}

// skippedCounts explains the -idle counts that scenario id skips for the
// open-file limit; empty when it skips none.
func (b *bench) skippedCounts(id string) string {
	if id != "c" && id != "f" {
		return ""
	}
	_, skipped := b.idleCounts()
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("(%s) skipped %v connections: the open-file limit is %d and %d connections need about %d (run as root, with CAP_SYS_RESOURCE, so that the bench can raise it, or raise ulimit -Hn)",
		id, skipped, b.fileLimit, slices.Max(skipped), slices.Max(skipped)+fileLimitSlack)
}

// mib returns bytes in MiB.
func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
