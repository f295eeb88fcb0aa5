// Command bench measures kafkanet's socket server side by side with
// franz-go's kfake, the nearest public Go peer, and with a minimal framed
// echo server, the practical ceiling of a goroutine-per-connection Go
// server on the machine:
//
//	go run ./examples/bench                    # every scenario, 3 rounds: a few minutes
//	go run ./examples/bench -quick             # 1 round, short runs: under a minute
//	go run ./examples/bench -scenarios a,d -rounds 5 -json
//
// Run it from inside the module: scenarios b and g build examples/broker
// (and g examples/proxy) with the go command. Each server runs alone in a child process on 127.0.0.1 (the
// bench re-executes itself), so that its CPU time (utime+stime from
// /proc/PID/stat) and memory (VmRSS from /proc/PID/status) are its own;
// the bench process is the client. The servers are:
//
//   - kafkanet: a minimal host of socketserver with Kafka's defaults (3
//     network threads, 8 handler goroutines, a request queue of 500): a
//     CLIENT listener and a CONTROLLER control-plane listener. The server
//     answers ApiVersions itself; the host answers Metadata with a small
//     fixed response, acknowledges Produce and discards the records,
//     answers InitProducerId and CreateTopics, and serves
//     ListClientConnections with connregistry under key 93 as
//     examples/broker does. In scenario b it is examples/broker instead,
//     which stores the records in memory as kfake does by default (with
//     -produce-discard: this minimal server against kfake's
//     BlackholeProduce).
//   - kfake: kfake.NewCluster with NumBrokers(1) on a fixed port (TLS
//     through its TLS option).
//   - echo: 4-byte-length-prefixed frames, a goroutine per connection with
//     4 KiB buffered reader and writer, each frame answered with a fixed
//     14-byte ApiVersions v0 response (no API keys) carrying the request's
//     correlation id.
//
// Each scenario runs -rounds times; in each round every server is measured
// on a fresh child, and the servers' order rotates from round to round so
// that the machine's noise falls on all alike. The report gives, per case,
// metric and server, the median and the min–max over rounds, and the
// ratios of the medians to echo's and to kfake's; -json prints the same as
// JSON with every round's value. The scenarios:
//
//	a  raw ApiVersions v0 frames on 1, 8 and 64 connections (-conns), one in
//	   flight per connection, for -duration: requests/s, p50/p99/p99.9
//	   latency (nearest rank over every round trip), server CPU µs per
//	   request.
//	b  kgo producing -records records of -record-size bytes (1,000,000 of
//	   100; -quick 100,000) to a 3-partition topic: records/s, MB/s, server
//	   CPU ms per MB (not for echo).
//	c  10,000 and 100,000 idle connections (-idle; -quick 10,000) after one
//	   ApiVersions round trip each: server RSS per connection, (RSS at N -
//	   RSS before) / N, sampled -settle after reaching N.
//	d  new connections per second (dial, ApiVersions, close), 8 at a time,
//	   plaintext and TLS with a self-signed certificate made at start.
//	e  kafkanet only: Metadata latency on the control listener while the
//	   data plane is saturated (handlers blocked, queue full), with a
//	   separate control plane and with the control listener sharing the
//	   data plane.
//	f  kafkanet only: ListClientConnections latency at each -idle count,
//	   and the data plane's latency under (a)'s load on 8 connections with
//	   no listing, a listing every second and listings back to back.
//	p  examples/proxy in front of examples/broker against a direct
//	   connection to the same broker, in the same round: Metadata v12 round
//	   trips on each -conns count (the latency the proxy adds at p50 and
//	   p99, and the proxy's CPU µs per request), and kgo producing as in b
//	   (records/s, and each process's CPU ms per MB).
//
// The client's connections come from 64 loopback source addresses
// (127.0.0.2 and up) so that ephemeral ports do not run out, and the bench
// raises its open-file limit (soft and hard, up to fs.nr_open when it may:
// run as root for 100,000 connections); the children inherit it. Ctrl-C
// stops the run, its children and its connections, and prints what was
// measured so far. The exit status is 1 when a run failed (the report
// lists the failures), 2 for bad flags.
//
// The client and the servers share the machine's cores, so requests/s is a
// whole-machine number; CPU per request and per megabyte compare the
// servers more fairly.
package main
