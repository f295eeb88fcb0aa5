// Command bench measures kafkanet's socket server side by side with
// franz-go's kfake, the nearest public Go peer, and with a minimal framed
// echo server, the practical ceiling of a goroutine-per-connection Go
// server on the machine:
//
//	go run ./examples/bench                    # every scenario, 3 rounds: several minutes
//	go run ./examples/bench -quick             # 1 round, short runs: about a minute
//	go run ./examples/bench -scenarios a,d -rounds 5 -json
//
// Run it from inside the module: scenarios b, g, h, i and p build
// examples/broker (and p examples/proxy) with the go command. Each server
// runs alone in a child process on 127.0.0.1 (the bench re-executes
// itself), so that its CPU time, context switches and memory are its own;
// the bench process is the client (in scenario i, the legitimate client
// alone: the attackers run in a child of their own). CPU time is the sum
// of the run time of the child's threads
// (/proc/PID/task/*/schedstat, to the nanosecond; the tick count of
// /proc/PID/stat where threads that exited took more with them), context
// switches the sum of their voluntary and nonvoluntary switches
// (/proc/PID/task/*/status), memory VmRSS and VmHWM from /proc/PID/status.
// The servers are:
//
//   - kafkanet: a minimal host of socketserver with Kafka's defaults (3
//     network threads, 8 handler goroutines, a request queue of 500): a
//     CLIENT listener and a CONTROLLER control-plane listener. The server
//     answers ApiVersions itself; the host answers Metadata with a small
//     fixed response, acknowledges Produce and discards the records,
//     answers InitProducerId and CreateTopics, and serves
//     ListClientConnections with connregistry under key 93 as
//     examples/broker does. In scenarios b and g it is examples/broker
//     instead, which stores the records in memory as kfake does by default
//     (in b with -produce-discard: this minimal server against kfake's
//     BlackholeProduce).
//   - kafkanet-inline (scenario a): the same minimal host with its APIs
//     answered on each connection's goroutine (socketserver.Inline)
//     instead of through Serve's queue and handler goroutines.
//   - kfake: kfake.NewCluster with NumBrokers(1) on a fixed port (TLS
//     through its TLS option).
//   - echo: 4-byte-length-prefixed frames, a goroutine per connection with
//     4 KiB buffered reader and writer, each frame answered with a fixed
//     14-byte ApiVersions v0 response (no API keys) carrying the request's
//     correlation id.
//   - ceiling-writev and ceiling-sendfile (scenario g): a host of
//     socketserver, through its public API alone, that builds a log of
//     record batches in a file at start and answers each Fetch inline with
//     them by reference (socketserver.FetchResponse): from memory with
//     writev (Records.Batches; the log is read from the file into memory,
//     so that the kernel filled that memory, as a broker's log is filled
//     from its sockets), or from the file in the page cache with sendfile
//     (Records.File). They are the ceiling of consuming with kafkanet.
//     Both leave the socket buffers to the operating system, as the
//     example broker and kfake do.
//   - examples/broker (scenarios c, h and i): the example broker; in c
//     with one PLAINTEXT listener, in i with its defaults and one SASL_PLAINTEXT listener offering PLAIN to two
//     users.
//   - examples/broker@baseline (scenarios b, c, g and i, with
//     -baseline-broker): a prebuilt example broker of another commit,
//     started as the current one (see below).
//   - bare (scenario c): the floor of an idle connection: a goroutine per
//     connection and nothing else, no buffered reader or writer, each
//     frame's size and header read into an array on its stack, answered
//     with echo's fixed answer. No goroutine-per-connection Go server
//     holds an idle connection for less.
//   - floor-write (scenario g): no Kafka protocol at all; the same log, in
//     memory the kernel filled, written to one connection with writev in
//     chunks of 1 MiB (as many writes as kgo's Fetch answers) and read to
//     the end by the bench. No server can send those bytes for less CPU
//     on the machine at hand.
//   - floor-fetch (scenario g): the same log sent to kgo's consumer by a
//     goroutine per connection with no library, each request decoded with
//     kmsg and answered at once, Fetch with the batches by reference in
//     one writev: no server of the Kafka protocol serves kgo those bytes
//     for less.
//   - direct, haproxy and examples/proxy (scenario p): the ways to one
//     example broker: a direct connection; HAProxy in TCP mode (one
//     thread, kernel splicing both ways: a relay that parses nothing, the
//     floor of a hop), found on PATH or in /usr/sbin, or given with
//     -haproxy; and the example proxy. Without HAProxy the scenario
//     measures the other two and says so; with CI set that fails the run.
//     With -proxy-tls also haproxy+tls and examples/proxy+tls: the same
//     two terminating TLS from the clients, plaintext to the broker.
//
// Each scenario runs -rounds times; in each round every server is measured
// on a fresh child, and the servers' order rotates from round to round so
// that the machine's noise falls on all alike. The report gives, per case,
// metric and server, the median and the min–max over rounds, and the
// ratios of the medians that the scenario compares (kafkanet to echo and
// to kfake, in g also to a ceiling and the floor), and where a scenario
// sets targets (a, i), whether each median meets its target; -json prints
// the same as JSON with every round's value and the ratios to every other
// server. The scenarios:
//
//	a  raw ApiVersions v0 frames on 1, 8 and 64 connections (-conns), one in
//	   flight per connection, for -duration: requests/s, p50/p99/p99.9
//	   latency (nearest rank over every round trip), server CPU µs,
//	   context switches and read and write system calls per request.
//	   When -conns holds 1, also Metadata v1 at 1 connection, answered by
//	   the host: kafkanet's through Serve's queue, kafkanet-inline's
//	   inline, kfake's, and echo's fixed answer (the latency of a
//	   host-answered request against a round trip's floor). Reproduce the one-connection cases alone with
//	   -scenarios a -conns 1. In each round, kafkanet's req/s and p99 over
//	   echo's (req/s × echo, p99 × echo; kafkanet-inline's for Metadata),
//	   listed round by round under the table; their medians are judged:
//	   ApiVersions req/s at least 0.95 × echo at 64 and 1 connection, p99
//	   at most 1 × echo at 64.
//	   With -pin (the default, on Linux with two CPUs or more), ApiVersions
//	   at 1 connection again with every thread of the bench and of the
//	   server pinned to one CPU ("conns=1, one CPU"), then each to a CPU
//	   of its own ("conns=1, two CPUs"), the 1-connection target judged on
//	   each too. Left free, the kernel runs a one-connection ping-pong on
//	   one CPU or across two, in stretches whose round trips differ by
//	   half, and which it settles on depends on both processes' threads
//	   and timers: pinned, each placement is measured apart.
//	   With -echo-control, a second echo server in the same rounds
//	   (echo-control), whose ratios to echo, judged by no target, show
//	   what the machine's noise alone makes of two identical servers.
//	b  kgo producing -records records of -record-size bytes (1,000,000 of
//	   100; -quick 100,000) to a 3-partition topic: records/s, MB/s, server
//	   CPU ms per MB (not for echo).
//	c  10,000 and 100,000 idle connections (-idle; -quick 10,000) after one
//	   ApiVersions round trip each: server RSS per connection, (RSS at N -
//	   RSS before) / N, sampled -settle after reaching N; opened 32 at a
//	   time (a reconnect storm), then in a fresh server one at a time, then
//	   over TLS 1.3 (at most 3,000, 32 at a time; not bare or
//	   examples/broker). For the minimal host, from its runtime.MemStats:
//	   the stacks, the heap's objects (live or not yet collected), the
//	   heap's spans kept from the system and all the memory the runtime
//	   keeps, per connection: what a burst leaves behind shows in the kept
//	   spans beside the same objects.
//	d  new connections per second (dial, ApiVersions, close), 8 at a time,
//	   plaintext and TLS with a self-signed certificate made at start.
//	e  kafkanet only: Metadata latency on the control listener while the
//	   data plane is saturated (handlers blocked, queue full), with a
//	   separate control plane and with the control listener sharing the
//	   data plane.
//	f  kafkanet only: ListClientConnections latency at each -idle count,
//	   and the data plane's latency under (a)'s load on 8 connections with
//	   no listing, a listing every second and listings back to back.
//	g  kgo producing -large-mb megabytes (200; -quick 50) of records of
//	   each size of -large-sizes (1 KiB and 1 MiB) to a topic of one
//	   partition without compression, then a new kgo client consuming them
//	   all from offset 0: MB/s and server CPU ms per MB of each phase, for
//	   examples/broker (with log.retention.bytes=-1 so that it keeps what
//	   the consume phase reads, and message.max.bytes raised above Kafka's
//	   1048588 where the producer's batches of 1 MiB records need it) and
//	   kfake (the same message.max.bytes), and for consuming only, the
//	   two ceilings and the two floors. Each phase also reports the server's
//	   context switches, and its read and write system calls (syscr and
//	   syscw of /proc/PID/io), per MB. A fresh server for each record size
//	   and round.
//	   With -log-churn-mb the ceilings and floors write that much other
//	   memory after building their logs, so that their logs are not the
//	   last memory they touched, as a broker's is not.
//	   Reproduce with -scenarios g -rounds 3; -broker-set key=value
//	   (repeatable, also for b, i and p) lays properties over the
//	   broker's, such as queued.max.request.bytes=-1, Kafka's default,
//	   under which the broker sets no request-memory budget.
//	h  the request-memory budget: -budget-clients connections (16) each
//	   send one Produce request of -budget-request-mib (32 MiB) at once:
//	   the server's peak RSS rise (VmHWM, reset through
//	   /proc/PID/clear_refs before the requests, minus VmRSS before) and
//	   the time until every request has been answered (and the share
//	   answered), for kafkanet's minimal host (which acknowledges and
//	   discards records, so that what it holds is the request path's
//	   alone) with queued.max.request.bytes of -budget-mib (64 MiB), with
//	   it and GOMEMLIMIT at twice it (the
//	   Go runtime's memory limit, as a Kafka broker runs with a fixed
//	   heap), and without; for kfake with BlackholeProduce; and for
//	   examples/broker itself with the same budget, which sets the Go
//	   runtime's memory limit by itself (twice its budget plus its log),
//	   message.max.bytes large enough that it stores every batch and
//	   log.retention.bytes=0 so that its log keeps only the newest batch
//	   of each partition (-broker-set does not apply), against targets:
//	   its peak RSS rise at most 200 MiB, every request answered.
//	   socket.request.max.bytes is -budget-mib in every kafkanet and
//	   broker case (Kafka's rule: a budget is at least
//	   socket.request.max.bytes). No server inherits GOMEMLIMIT or GOGC
//	   from the bench's environment (the GOMEMLIMIT case sets its own).
//	   Reproduce with -scenarios h -rounds 3.
//	i  a legitimate client beside slow and hostile peers, on
//	   examples/broker with its defaults and one SASL_PLAINTEXT listener
//	   (PLAIN), everyone on that listener. The legitimate client logs in
//	   with SASL/PLAIN and is two parts, measured in two consecutive
//	   windows of -hostile-duration (5 s; -quick 2 s) once the attackers
//	   are set up, the attackers active in both: first, alone, a raw
//	   connection sending Metadata v1 on a 1 ms ticker, one in flight
//	   (p50 and p99; a request unanswered after -hostile-timeout, 2 s, is
//	   counted as a timeout and as that long, and the client reconnects);
//	   then, alone and warm, a kgo producer writing 1 KiB records as fast
//	   as it can (MB/s). Not together: the producer would saturate a small
//	   machine's cores and dominate the Metadata latency, which would then
//	   measure its load rather than the broker's fairness. The cases, each
//	   on a fresh broker: 0 alone; 1 slowloris, -hostile-slowloris (1,000)
//	   unauthenticated connections each trickling a request a byte a
//	   second; 2 claims, -hostile-claims (10) authenticated connections
//	   that each announce a 100,000,000-byte Produce frame, send 10 bytes
//	   of it and hold; 3 failed logins, -hostile-logins (100) connections
//	   failing PLAIN logins (a wrong password) in a loop; 4 pipeliners,
//	   -hostile-pipeliners (50) authenticated connections writing Metadata
//	   v1 64 at a time without ever reading. The attackers run in a child
//	   process of their own (the bench re-executed with -bench-child
//	   -attack, which gets the broker's address, the case, the count and
//	   the credentials, reports its counts on stdout when asked on stdin,
//	   and stops when its stdin closes, the bench dies or its lifetime is
//	   over), so that the legitimate client is alone in the bench process:
//	   attackers that keep a Go runtime's Ps busy (dialing in a loop,
//	   writing without pause) leave its network to sysmon's poll, every
//	   10 ms, and beside them the legitimate client's answers would be
//	   noticed late, its latency measuring the bench's scheduler as much
//	   as the broker's fairness. Also per case: the broker's peak RSS
//	   (VmHWM) and RSS at the end, its CPU, the bench's and the attackers'
//	   process's over both windows, the attackers' connections still open
//	   at the end, failed logins/s and pipelined requests/s written, the
//	   Metadata client's timeouts and errors, and p99 and MB/s over case
//	   0's of the same round, marked against the targets (cases 1 to 3:
//	   p99 at most 2× alone, MB/s at least 0.5×; case 4, saturated by
//	   design: p99 at most 5×). -hostile-cases chooses the attacked cases
//	   (case 0 is always measured). With -hostile-control each attacked
//	   case also has its control in the same round: the attackers attack
//	   a second broker of the same kind, so that the control costs the
//	   legitimate client only what the attackers' load on the machine
//	   does, and the attacked case's p99 × control is the broker's own
//	   share. Reproduce with -scenarios i -rounds 3.
//	p  examples/proxy and HAProxy in front of examples/broker against a
//	   direct connection to the same broker, in the same round, the hops'
//	   order rotating: Metadata v12 round trips on each -conns count (the
//	   latency each hop adds at p50 and p99, the hop's and the broker's
//	   CPU µs per request), and kgo producing -proxy-mb MB of 1 KiB records
//	   through each hop, then consuming them (MB/s, the hop's and the
//	   broker's CPU ms per MB). The proxy's figures over HAProxy's of the
//	   same round are marked against issue 23's targets: CPU per request
//	   at one connection and per MB produced and consumed at most 1.5×,
//	   added p50 at one connection at most 1.5×, throughput at least 0.9×.
//	   HAProxy runs one thread (nbthread 1); the proxy runs as shipped,
//	   without GOMAXPROCS, GODEBUG, GOGC or GOMEMLIMIT in its
//	   environment, so with its own runtime settings, and the targets are
//	   judged on it. examples/proxy@pinned is the same proxy with
//	   GOMAXPROCS=-proxy-procs (1 unless set; 0 leaves it out), and with
//	   -baseline-proxy FILE examples/proxy@baseline is FILE, a prebuilt
//	   examples/proxy (of an older commit, say), started as the current
//	   one, in the same rounds: each has its ratios to HAProxy in a row of
//	   its own, without targets, and the column
//	   examples/proxy/examples/proxy@baseline divides the medians. The
//	   hops' context switches per request and per MB are counted beside
//	   their CPU. Reproduce with -scenarios p -rounds 3. -proxy-tls adds both hops
//	   terminating TLS from the clients (HAProxy's bind ... ssl crt, the
//	   proxy's SSL listener; the bench's certificate, plaintext to the
//	   broker), with the same measurements and the proxy's figures over
//	   HAProxy's, without targets.
//
// With -baseline-broker FILE, scenarios b (unless -produce-discard), c, g
// and i also measure FILE, a prebuilt examples/broker (of an older commit,
// say), as one more server, examples/broker@baseline: started exactly as
// the scenario's current examples/broker (the same properties, those of
// -broker-set included, and environment), on a fresh process in every
// round, next to the current broker in the servers' rotation, so that the
// two are measured alternately in one run. The tables add the ratio of the
// current broker to the baseline for every metric, CPU ms per MB and MB/s
// among them: the column kafkanet/examples/broker@baseline in b and g,
// examples/broker/examples/broker@baseline in i. Build a baseline in a
// worktree of its own ($OLD and $BIN are paths of your choice):
//
//	git worktree add $OLD <commit>
//	(cd $OLD && go build -o $BIN ./examples/broker)
//	go run ./examples/bench -scenarios g -large-sizes 1048576 -rounds 5 -baseline-broker $BIN
//	git worktree remove $OLD
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
//
// With -perf-dir DIR, each measured run of a server is recorded with perf
// record (call stacks, sampled on the CPU clock) into a file of DIR that the
// log names, for `perf report -i FILE`: where a server spends the CPU time
// the report gives it. It needs perf on PATH and the permission to attach
// to the children (perf_event_paranoid), and perturbs what it records a
// little.
//
// Usage:
//
//	bench [-quick] [-scenarios a,b,c,d,e,f,g,h,i,p] [-rounds n] [-json] [flags]
//
// The flags are (the scenarios they concern in brackets; -quick's value
// after the default where it changes one):
//
//	-scenarios list
//		The scenarios to run, comma-separated (default all:
//		a,b,c,d,e,f,g,h,i,p).
//	-rounds n
//		Measure each scenario n times, the servers' order rotating
//		(default 3; -quick 1).
//	-quick
//		A short run: the -quick values below.
//	-json
//		Print JSON instead of tables.
//	-duration d
//		[a, d, e, f] One measured run (default 2s; -quick 500ms).
//	-conns list
//		[a, p] The connection counts (default 1,8,64).
//	-pin
//		[a] With 1 among -conns, also measure one connection with the
//		bench and the server pinned to one CPU, then to one each
//		(default true; -pin=false: not).
//	-echo-control
//		[a] Also measure a second echo server, echo-control, with its
//		per-round ratios to echo (default off).
//	-records n
//		[b] Records produced (default 1000000; -quick 100000).
//	-record-size n
//		[b] Bytes in each record's value (default 100).
//	-produce-discard
//		[b] Compare kafkanet's minimal server, which discards the
//		records, with kfake's BlackholeProduce, instead of
//		examples/broker with kfake, both storing them.
//	-idle list
//		[c, f] The idle connection counts (default 10000,100000;
//		-quick 10000).
//	-settle d
//		[c] The wait before sampling a server's RSS (default 2s; -quick
//		500ms).
//	-probe-timeout d
//		[e] A control-plane request unanswered after d counts as d
//		(default 500ms).
//	-listings n
//		[f] Listings timed at each connection count (default 5; -quick
//		3).
//	-large-mb n
//		[g] Megabytes of record values produced and consumed at each
//		record size (default 200; -quick 50).
//	-large-sizes list
//		[g] The record sizes in bytes (default 1024,1048576).
//	-log-churn-mb n
//		[g] MiB of other memory the ceilings and floors write after
//		building their logs, and keep, so that their logs are not the last
//		memory they touched, as a broker's is not (default 0).
//	-budget-clients n
//		[h] Connections that each send one Produce at once (default 16).
//	-budget-request-mib n
//		[h] The size of each Produce request in MiB (default 32).
//	-budget-mib n
//		[h] queued.max.request.bytes, and socket.request.max.bytes, in
//		MiB (default 64).
//	-broker-set key=value
//		[b, g, i, p] A property laid over examples/broker's; repeatable.
//	-baseline-broker file
//		[b, g, i] Also measure this prebuilt examples/broker (see above).
//	-hostile-duration d
//		[i] Each of a case's two measured windows (default 5s; -quick
//		2s).
//	-hostile-timeout d
//		[i] A Metadata request unanswered after d counts as a timeout
//		(default 2s).
//	-hostile-slowloris n
//		[i] Case 1's connections (default 1000).
//	-hostile-claims n
//		[i] Case 2's connections (default 10).
//	-hostile-logins n
//		[i] Case 3's connections (default 100).
//	-hostile-pipeliners n
//		[i] Case 4's connections (default 50).
//	-hostile-cases list
//		[i] The attacked cases measured beside case 0 (default 1,2,3,4).
//	-hostile-control
//		[i] Also measure each attacked case's control in the same round.
//	-proxy-mb n
//		[p] Megabytes of 1 KiB records produced, then consumed, through
//		each hop (default 300; -quick 50).
//	-proxy-tls
//		[p] Also measure both hops terminating TLS.
//	-proxy-procs n
//		[p] Also measure examples/proxy with GOMAXPROCS=n in its
//		environment, as examples/proxy@pinned (default 1; 0: not).
//	-baseline-proxy file
//		[p] Also measure file, a prebuilt examples/proxy, as
//		examples/proxy@baseline.
//	-haproxy file
//		[p] The haproxy binary (default: haproxy on PATH, else
//		/usr/sbin/haproxy).
//	-perf-dir dir
//		Record each measured run of a server with perf into a file of
//		dir.
package main
