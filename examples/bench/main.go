package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// allScenarios are the scenario ids in the order they run.
var allScenarios = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "p"}

// options are the command's flags, after -quick has filled in the values
// not given explicitly.
type options struct {
	scenarios      []string
	rounds         int
	quick          bool
	duration       time.Duration // one measured run of (a), (d), (e) and (f)
	rawConns       []int         // connection counts of (a) and (p)
	pin            bool          // (a): also one connection with the bench and the server pinned, on one CPU and on two (Linux)
	echoControl    bool          // (a): also a second echo server, whose ratios to echo show the noise
	records        int           // records produced in (b)
	recordSize     int
	produceDiscard bool          // (b): servers that discard records instead of storing them
	idleCounts     []int         // connection counts of (c) and (f)
	settle         time.Duration // wait before sampling RSS in (c)
	listings       int           // listings timed per connection count in (f)
	probeTimeout   time.Duration // (e): a control-plane probe unanswered after this counts as this
	largeMB        int           // (g): megabytes of values produced and consumed per record size
	logChurnMB     int           // (g): MiB of other memory the ceilings and floors write after building their logs
	largeSizes     []int         // (g): record sizes
	budgetClients  int           // (h): connections that each send one large Produce at once
	budgetRequest  int           // (h): the size of each Produce request frame, in bytes
	budget         int64         // (h): queued.max.request.bytes
	brokerProps    []string      // properties ("key=value") laid over the example broker's in (b), (g), (i) and (p)
	proxyMB        int           // (p): megabytes (10^6 bytes) of 1 KiB records produced and consumed through each hop
	haproxy        string        // (p): the haproxy binary; "": looked up
	proxyTLS       bool          // (p): also the hops terminating TLS
	proxyProcs     int           // (p): the GOMAXPROCS of examples/proxy@pinned, a second case; 0: none
	baselineProxy  string        // (p): a prebuilt examples/proxy measured beside the current one, as proxyBaselineServer
	baselineBroker string        // (b), (g), (i): a prebuilt examples/broker measured beside the current one, as baselineServer
	perfDir        string        // record each measured window of a server with perf into this directory
	json           bool

	// (i): the measured window of each case, the legitimate Metadata
	// requests' timeout, and the attackers of cases 1 to 4.
	hostileDuration   time.Duration
	hostileTimeout    time.Duration
	hostileSlowloris  int
	hostileClaims     int
	hostileLogins     int
	hostileControl    bool
	hostilePipeliners int
	hostileCases      []hostileKind // the attacked cases measured beside case 0, alone (-hostile-cases)
}

// rawFlags are the flags parseOptions reads into options after parsing.
type rawFlags struct {
	scenarios, conns, idle, largeSizes, hostileCases string
	budgetRequest, budget                            int // MiB
}

// flagSet defines the command's flags, into o and r, on a FlagSet that
// reports to stderr.
func flagSet(o *options, r *rawFlags, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&r.scenarios, "scenarios", strings.Join(allScenarios, ","), "comma-separated `list` of the scenarios to run (a to i and p, see the package documentation)")
	fs.IntVar(&o.rounds, "rounds", 3, "measure each scenario `n` times, alternating the servers (-quick: 1)")
	fs.BoolVar(&o.quick, "quick", false, "a short run: 1 round, 0.5 s runs, 100,000 records, 10,000 idle connections, 0.5 s settle, 3 listings,\n"+
		"50 MB in scenarios g and p, 2 s windows in scenario i")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "length of one measured run of scenarios a, d, e and f (-quick: 500ms)")
	fs.StringVar(&r.conns, "conns", "1,8,64", "connection counts of scenarios a and p")
	fs.BoolVar(&o.pin, "pin", true, "scenario a, with 1 among -conns: also measure ApiVersions at one connection with the bench and the server\n"+
		"pinned to one CPU (case \"conns=1, "+oneCPU+"\") and each to its own (\"conns=1, "+twoCPUs+"\"), on Linux with two CPUs or more")
	fs.BoolVar(&o.echoControl, "echo-control", false, "scenario a: also measure a second echo server in the same rounds (echo-control), with its per-round\n"+
		"ratios to echo beside kafkanet's: what the machine's noise alone makes of the ratio of two identical servers")
	fs.IntVar(&o.records, "records", 1_000_000, "records produced in scenario b (-quick: 100000)")
	fs.IntVar(&o.recordSize, "record-size", 100, "bytes in each record's value in scenario b")
	fs.BoolVar(&o.produceDiscard, "produce-discard", false, "scenario b: compare kafkanet's minimal server, which discards records,\n"+
		"with kfake's BlackholeProduce, instead of the example broker with kfake, both storing them")
	fs.StringVar(&r.idle, "idle", "10000,100000", "idle connection counts of scenarios c and f (-quick: 10000)")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "scenario c: wait this long before sampling a server's RSS (-quick: 500ms)")
	fs.IntVar(&o.listings, "listings", 5, "scenario f: listings timed at each connection count (-quick: 3)")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", 500*time.Millisecond, "scenario e: a control-plane request unanswered after this counts as this long")
	fs.IntVar(&o.largeMB, "large-mb", 200, "scenario g: `megabytes` (10^6 bytes) of record values produced and consumed at each record size (-quick: 50)")
	fs.StringVar(&r.largeSizes, "large-sizes", "1024,1048576", "scenario g: record sizes in bytes")
	fs.IntVar(&o.logChurnMB, "log-churn-mb", 0, "scenario g: have the ceilings and floors write this many `MiB` of other memory after building their\n"+
		"logs, and keep it, so that they serve a log that is not the last memory they touched, as a broker's is not")
	fs.IntVar(&o.budgetClients, "budget-clients", 16, "scenario h: connections that each send one Produce at once")
	fs.IntVar(&r.budgetRequest, "budget-request-mib", 32, "scenario h: the size of each Produce request in `MiB`")
	fs.IntVar(&r.budget, "budget-mib", 64, "scenario h: queued.max.request.bytes in `MiB`, also socket.request.max.bytes")
	fs.Func("broker-set", "scenarios b, g, i and p: a `key=value` property laid over the example broker's (repeatable)", func(p string) error {
		if !strings.Contains(p, "=") {
			return fmt.Errorf("%q is not key=value", p)
		}
		o.brokerProps = append(o.brokerProps, p)
		return nil
	})
	fs.IntVar(&o.proxyMB, "proxy-mb", 300, "scenario p: `megabytes` (10^6 bytes) of 1 KiB records produced, then consumed, through each hop (-quick: 50)")
	fs.BoolVar(&o.proxyTLS, "proxy-tls", false, "scenario p: also measure HAProxy and examples/proxy terminating TLS from the clients, plaintext to the broker\n"+
		"(columns haproxy+tls and examples/proxy+tls, the same measurements, no targets); off by default since it adds about half\n"+
		"a minute per round at the default -conns and -proxy-mb (two more hops, each with its Metadata runs and -proxy-mb MB produced and consumed)")
	fs.IntVar(&o.proxyProcs, "proxy-procs", 1, "scenario p: also measure examples/proxy with GOMAXPROCS=`n` in its environment, as "+proxyPinnedServer+" (the targets\n"+
		"are judged on the proxy as shipped, with no Go runtime variable); 0: not")
	fs.StringVar(&o.baselineProxy, "baseline-proxy", "", "scenario p: also measure this prebuilt examples/proxy `binary` (of another commit), started as the\n"+
		"current one (as shipped), as "+proxyBaselineServer+" in the same rounds, with its ratios to HAProxy and the current's to it")
	fs.StringVar(&o.haproxy, "haproxy", "", "scenario p: the haproxy `binary` (default: haproxy on PATH, else /usr/sbin/haproxy)")
	fs.StringVar(&o.baselineBroker, "baseline-broker", "", "scenarios b, c, g and i: also measure this prebuilt examples/broker `binary` (of another commit),\n"+
		"started as the current one, as server "+baselineServer+" in the same rounds, with the current's ratio to it")
	fs.DurationVar(&o.hostileDuration, "hostile-duration", 5*time.Second, "scenario i: each of a case's two measured windows, the Metadata client's then the producer's, after the attackers are set up (-quick: 2s)")
	fs.DurationVar(&o.hostileTimeout, "hostile-timeout", 2*time.Second, "scenario i: a legitimate Metadata request unanswered after this counts as a timeout (and as this long)")
	fs.IntVar(&o.hostileSlowloris, "hostile-slowloris", 1000, "scenario i, case 1: connections that each trickle a request a byte a second")
	fs.IntVar(&o.hostileClaims, "hostile-claims", 10, "scenario i, case 2: authenticated connections that each announce a 100 MB Produce and send 10 bytes of it")
	fs.IntVar(&o.hostileLogins, "hostile-logins", 100, "scenario i, case 3: connections that fail SASL/PLAIN logins in a loop")
	fs.BoolVar(&o.hostileControl, "hostile-control", false, "scenario i: also measure each attacked case's control in the same round: the attackers attack a second broker of\n"+
		"the same kind, not the measured one, so that the control shows what their load on the machine alone costs the legitimate client")
	fs.IntVar(&o.hostilePipeliners, "hostile-pipeliners", 50, "scenario i, case 4: authenticated connections that pipeline Metadata 64 at a time and never read")
	fs.StringVar(&r.hostileCases, "hostile-cases", "1,2,3,4", "scenario i: the attacked `cases` measured, each beside case 0 (alone), which is always measured")
	fs.StringVar(&o.perfDir, "perf-dir", "", "record each measured run of a server with perf record (call stacks, CPU clock) into a file of this `directory`")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of tables")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bench [-quick] [-scenarios a,b,c,d,e,f,g,h,i,p] [-rounds n] [-json] [flags]")
		fs.PrintDefaults()
	}
	return fs
}

// parseOptions parses the command's arguments.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	var r rawFlags
	fs := flagSet(&o, &r, stderr)
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		quickDefault(set, "rounds", &o.rounds, 1)
		quickDefault(set, "duration", &o.duration, 500*time.Millisecond)
		quickDefault(set, "records", &o.records, 100_000)
		quickDefault(set, "idle", &r.idle, "10000")
		quickDefault(set, "settle", &o.settle, 500*time.Millisecond)
		quickDefault(set, "listings", &o.listings, 3)
		quickDefault(set, "large-mb", &o.largeMB, 50)
		quickDefault(set, "proxy-mb", &o.proxyMB, 50)
		quickDefault(set, "hostile-duration", &o.hostileDuration, 2*time.Second)
	}
	var err error
	if o.scenarios, err = parseScenarios(r.scenarios); err != nil {
		return options{}, err
	}
	if o.rawConns, err = parseCounts("conns", r.conns); err != nil {
		return options{}, err
	}
	if o.idleCounts, err = parseCounts("idle", r.idle); err != nil {
		return options{}, err
	}
	if o.largeSizes, err = parseCounts("large-sizes", r.largeSizes); err != nil {
		return options{}, err
	}
	if o.rounds < 1 || o.duration <= 0 || o.records < 1 || o.recordSize < 1 || o.listings < 1 || o.probeTimeout <= 0 || o.settle < 0 ||
		o.largeMB < 1 || o.proxyMB < 1 || o.budgetClients < 1 || r.budgetRequest < 1 || r.budget < 1 || o.proxyProcs < 0 {
		return options{}, errors.New("-rounds, -duration, -records, -record-size, -listings, -probe-timeout, -large-mb, -proxy-mb, -budget-clients, -budget-request-mib and -budget-mib must be positive, -settle and -proxy-procs not negative")
	}
	if r.budgetRequest > r.budget || r.budget > 2047 {
		return options{}, fmt.Errorf("-budget-request-mib (%d) must be at most -budget-mib (%d), which is also socket.request.max.bytes and must be below 2048 MiB",
			r.budgetRequest, r.budget)
	}
	if o.hostileDuration <= 0 || o.hostileTimeout <= 0 || o.hostileSlowloris < 1 || o.hostileClaims < 1 || o.hostileLogins < 1 || o.hostilePipeliners < 1 {
		return options{}, errors.New("-hostile-duration, -hostile-timeout, -hostile-slowloris, -hostile-claims, -hostile-logins and -hostile-pipeliners must be positive")
	}
	cases, err := parseCounts("hostile-cases", r.hostileCases)
	if err != nil {
		return options{}, err
	}
	for _, c := range cases {
		if c > int(hostilePipeliners) {
			return options{}, fmt.Errorf("-hostile-cases: %d is not a case: want 1 to %d", c, hostilePipeliners)
		}
		o.hostileCases = append(o.hostileCases, hostileKind(c))
	}
	if set["baseline-proxy"] && strings.TrimSpace(o.baselineProxy) == "" {
		return options{}, errors.New("-baseline-proxy: an empty path")
	}
	if set["baseline-broker"] && strings.TrimSpace(o.baselineBroker) == "" {
		return options{}, errors.New("-baseline-broker: an empty path")
	}
	o.budgetRequest, o.budget = r.budgetRequest<<20, int64(r.budget)<<20
	return o, nil
}

// quickDefault sets *v to quick unless the flag name was given.
func quickDefault[T any](set map[string]bool, name string, v *T, quick T) {
	if !set[name] {
		*v = quick
	}
}

// parseScenarios reads -scenarios: ids among allScenarios, run in
// allScenarios' order whatever the list's.
func parseScenarios(s string) ([]string, error) {
	want := map[string]bool{}
	for id := range strings.SplitSeq(s, ",") {
		id = strings.ToLower(strings.TrimSpace(id))
		if !slices.Contains(allScenarios, id) {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (want some of %s)", id, strings.Join(allScenarios, ","))
		}
		want[id] = true
	}
	var out []string
	for _, id := range allScenarios {
		if want[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// parseCounts reads a comma-separated list of positive counts, sorted
// ascending.
func parseCounts(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(strings.ReplaceAll(f, "_", "")))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive count", name, f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// run is the whole command: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	b, cleanup, err := newBench(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	defer cleanup()
	res := b.runAll(ctx)
	if o.json {
		err = writeJSON(stdout, res)
	} else {
		err = writeTables(stdout, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "bench: interrupted")
		return 1
	}
	if len(res.Failures) > 0 {
		return 1
	}
	return 0
}

// runAll runs every selected scenario, its rounds and its servers, and
// collects the results; a failed run is noted and the others go on.
func (b *bench) runAll(ctx context.Context) *results {
	res := &results{Rounds: b.opts.rounds, Quick: b.opts.quick}
	for _, id := range b.opts.scenarios {
		sc := b.scenario(id)
		res.Scenarios = append(res.Scenarios, sc.info)
		if msg := b.skippedCounts(id); msg != "" {
			fmt.Fprintf(b.log, "bench: %s\n", msg)
			res.Failures = append(res.Failures, msg)
		}
		if msg, fail := b.missingHAProxy(id); msg != "" {
			fmt.Fprintf(b.log, "bench: %s\n", msg)
			if fail {
				res.Failures = append(res.Failures, msg+" (CI is set: HAProxy is required)")
			}
		}
		first := len(res.Samples)
		for round := range b.opts.rounds {
			for _, server := range rotate(sc.servers, round) {
				if ctx.Err() != nil {
					return res
				}
				fmt.Fprintf(b.log, "bench: (%s) round %d/%d: %s\n", id, round+1, b.opts.rounds, server)
				samples, err := sc.run(ctx, server)
				for i := range samples {
					samples[i].Scenario, samples[i].Round = id, round+1
					if samples[i].Server == "" { // scenario p names its hops
						samples[i].Server = server
					}
				}
				res.Samples = append(res.Samples, samples...)
				if err != nil && ctx.Err() == nil {
					msg := fmt.Sprintf("(%s) round %d, %s: %v", id, round+1, server, err)
					fmt.Fprintf(b.log, "bench: %s\n", msg)
					res.Failures = append(res.Failures, msg)
				}
			}
		}
		res.Samples = append(res.Samples, pairedSamples(sc.info, res.Samples[first:])...)
	}
	return res
}

// rotate returns s rotated left by n, so that each round starts with
// another server and machine noise falls on all of them alike.
func rotate[T any](s []T, n int) []T {
	if len(s) == 0 {
		return nil
	}
	n %= len(s)
	return append(slices.Clone(s[n:]), s[:n]...)
}

// scenario is one scenario: what the report says about it, the servers it
// measures, and one round's measurement of one server.
type scenario struct {
	info    scenarioInfo
	servers []serverKind
	run     func(ctx context.Context, server serverKind) ([]sample, error)
}

// scenario returns the scenario with the given id.
func (b *bench) scenario(id string) scenario {
	all := []serverKind{kafkanetServer, kfakeServer, echoServer}
	switch id {
	case "a":
		servers := []serverKind{kafkanetServer, kafkanetInlineServer, kfakeServer, echoServer}
		if b.opts.echoControl {
			servers = append(servers, echoControlServer)
		}
		return scenario{b.rawInfo(), servers, b.runRaw}
	case "b":
		servers := []serverKind{kafkanetServer, kfakeServer}
		if !b.opts.produceDiscard { // else kafkanet is the minimal host, not examples/broker
			servers = b.withBaseline(servers, kafkanetServer)
		}
		return scenario{b.produceInfo(), servers, b.runProduce}
	case "c":
		return scenario{b.idleInfo(), b.idleServers(), b.runIdle}
	case "d":
		return scenario{b.connRateInfo(), all, b.runConnRate}
	case "e":
		return scenario{b.controlInfo(), []serverKind{kafkanetServer}, b.runControl}
	case "f":
		return scenario{b.listingInfo(), []serverKind{kafkanetServer}, b.runListing}
	case "g":
		return scenario{b.largeInfo(), b.withBaseline([]serverKind{kafkanetServer, kfakeServer, ceilingWritevServer, ceilingSendfileServer, fetchFloorServer, floorServer}, kafkanetServer),
			b.runLarge}
	case "h":
		return scenario{b.budgetInfo(), []serverKind{kafkanetServer, kfakeServer, brokerServer}, b.runBudget}
	case "i":
		return scenario{b.hostileInfo(), b.hostileServers(), b.runHostile}
	default:
		return scenario{b.proxyInfo(), []serverKind{hopsRun}, b.runProxy}
	}
}
