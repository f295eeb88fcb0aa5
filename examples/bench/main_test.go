package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/examples/internal/flagdoc"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

// TestMain lets the test binary serve as the bench's server children and
// scenario i's attacker child, as the bench binary does: the end-to-end
// tests re-execute it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(childMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(bindcheck.Wrap(m).Run())
}

// go doc and -h list every flag the command defines. (The flags of the
// child processes, which only the bench gives itself after -bench-child,
// are not the user's.)
func TestUsageAndDocListEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &stdout, &stderr); code != 0 {
		t.Fatalf("-h: exit status %d: %s", code, stderr.String())
	}
	flagdoc.Check(t, ".", flagSet(&options{}, &rawFlags{}, io.Discard), stderr.String())
}

func TestPercentile(t *testing.T) {
	var lats []time.Duration
	for i := 1; i <= 1000; i++ {
		lats = append(lats, time.Duration(i)*time.Microsecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 500 * time.Microsecond}, {99, 990 * time.Microsecond}, {99.9, 999 * time.Microsecond}, {100, 1000 * time.Microsecond}, {0.01, time.Microsecond}} {
		if got := percentile(lats, tc.p); got != tc.want {
			t.Errorf("percentile(1..1000 µs, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := percentile([]time.Duration{7}, 99.9); got != 7 {
		t.Errorf("percentile of one value = %v, want 7", got)
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("percentile of none = %v, want 0", got)
	}
	// Nearest rank: of 10 values, p99 is the 10th, p50 the 5th.
	ten := lats[:10]
	if got := percentile(ten, 99); got != 10*time.Microsecond {
		t.Errorf("p99 of 10 values = %v, want the largest", got)
	}
	if got := percentile(ten, 50); got != 5*time.Microsecond {
		t.Errorf("p50 of 10 values = %v, want the 5th", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{5}, 5}, {nil, 0}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// testSamples are two rounds of one metric for three servers, and a
// kafkanet-only metric.
func testSamples() []sample {
	var s []sample
	add := func(server string, values ...float64) {
		for i, v := range values {
			s = append(s, sample{Scenario: "a", Case: "conns=8", Metric: "req/s", Server: server, Round: i + 1, Value: v})
		}
	}
	add(kafkanetServer, 11_000, 13_000, 12_345)
	add(kfakeServer, 6000, 6200, 6100)
	add(echoServer, 24_690, 24_690, 24_690)
	s = append(s, sample{Scenario: "e", Case: "shared data plane", Metric: "answered %", Server: kafkanetServer, Round: 1, Value: 0})
	s = append(s, sample{Scenario: "p", Case: "Metadata, conns=1: added by the proxy", Metric: "p50 µs", Server: proxyServer, Round: 1, Value: 77})
	return s
}

func TestAggregate(t *testing.T) {
	rows := aggregate(testSamples())
	if len(rows) != 5 {
		t.Fatalf("got %d rows, want 5: %+v", len(rows), rows)
	}
	kn := rows[0]
	if kn.Server != kafkanetServer || kn.Median != 12_345 || kn.Min != 11_000 || kn.Max != 13_000 {
		t.Errorf("kafkanet row = %+v, want median 12345 over 11000–13000", kn)
	}
	if !slices.Equal(kn.Values, []float64{11_000, 13_000, 12_345}) {
		t.Errorf("kafkanet values = %v, want them in round order", kn.Values)
	}
	if kn.RatioToEcho == nil || *kn.RatioToEcho != 0.5 {
		t.Errorf("kafkanet ratio to echo = %v, want 0.5", kn.RatioToEcho)
	}
	if kn.RatioToKfake == nil || *kn.RatioToKfake != 12_345.0/6100 {
		t.Errorf("kafkanet ratio to kfake = %v, want %v", kn.RatioToKfake, 12_345.0/6100)
	}
	if e := rows[3]; e.RatioToEcho != nil || e.RatioToKfake != nil || e.Ratios != nil {
		t.Errorf("a kafkanet-only row has ratios: %+v", e)
	}
	if got := kn.Ratios; len(got) != 2 || got[echoServer] != 0.5 || got[kfakeServer] != 12_345.0/6100 {
		t.Errorf("kafkanet's ratios = %v, want echo 0.5 and kfake %v", got, 12_345.0/6100)
	}
	if got := rows[2].Ratios; len(got) != 2 || got[kafkanetServer] != 2 {
		t.Errorf("echo's ratios = %v, want kafkanet 2 and kfake", got)
	}
}

func TestWriteTables(t *testing.T) {
	res := &results{Rounds: 3, Scenarios: []scenarioInfo{{ID: "a", Title: "raw", Notes: []string{"a note"}}, {ID: "e", Title: "control"}, {ID: "p", Title: "proxy"}},
		Samples: testSamples(), Failures: []string{"(c) round 1, kfake: boom"}}
	var buf bytes.Buffer
	if err := writeTables(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"(a) raw", "    a note",
		"kafkanet/echo", "kafkanet/kfake", "kfake/echo",
		"12,345 (11,000–13,000)", "6,100 (6,000–6,200)", "24,690 ", // equal rounds: no range
		"0.50", "2.02", "0.25",
		"(e) control", "answered %",
		"(p) proxy", "examples/proxy", "77",
		"Failures:", "(c) round 1, kfake: boom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the tables lack %q:\n%s", want, out)
		}
	}
	// The kafkanet-only table has no ratio columns.
	_, control, _ := strings.Cut(out, "(e) control")
	if strings.Contains(control, "kafkanet/echo") {
		t.Errorf("the kafkanet-only table has ratio columns:\n%s", control)
	}
}

// TestWriteTablesRatios checks a scenario's own ratio columns: those of
// its pairs whose servers both have rows, and no others.
func TestWriteTablesRatios(t *testing.T) {
	var s []sample
	for server, v := range map[string]float64{kafkanetServer: 2, kfakeServer: 8, ceilingWritevServer: 1} {
		s = append(s, sample{Scenario: "g", Case: "1 KiB, consume", Metric: "server CPU ms/MB", Server: server, Round: 1, Value: v})
	}
	res := &results{Rounds: 1, Samples: s, Scenarios: []scenarioInfo{{ID: "g", Title: "large",
		Ratios: []ratioPair{{kafkanetServer, kfakeServer}, {kafkanetServer, ceilingWritevServer}, {kafkanetServer, ceilingSendfileServer}}}}}
	var buf bytes.Buffer
	if err := writeTables(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	head := strings.Fields(strings.Split(out, "\n")[3])
	if want := []string{"case", "metric", kafkanetServer, kfakeServer, ceilingWritevServer, "kafkanet/kfake", "kafkanet/ceiling-writev"}; !slices.Equal(head, want) {
		t.Errorf("columns %q, want %q:\n%s", head, want, out)
	}
	if !strings.Contains(out, "0.25") || !strings.Contains(out, "2.00") {
		t.Errorf("the ratios 0.25 (to kfake) and 2.00 (to the ceiling) are missing:\n%s", out)
	}
}

// TestWriteTablesTargets checks a scenario's targets: a column that says
// whether each bounded median is met, and the same in JSON.
func TestWriteTablesTargets(t *testing.T) {
	s := []sample{
		{Scenario: "i", Case: "1 slow", Metric: "p99 × alone", Server: kafkanetServer, Round: 1, Value: 1.5},
		{Scenario: "i", Case: "1 slow", Metric: "MB/s × alone", Server: kafkanetServer, Round: 1, Value: 0.25},
		{Scenario: "i", Case: "1 slow", Metric: "peak RSS MiB", Server: kafkanetServer, Round: 1, Value: 60},
	}
	info := scenarioInfo{ID: "i", Title: "hostile", Targets: []target{
		{Case: "1 slow", Metric: "p99 × alone", AtMost: true, Bound: 2},
		{Case: "1 slow", Metric: "MB/s × alone", Bound: 0.5},
	}}
	res := &results{Rounds: 1, Samples: s, Scenarios: []scenarioInfo{info}}
	var buf bytes.Buffer
	if err := writeTables(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"target", "≤ 2: met", "≥ 0.5: MISSED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "peak RSS") && strings.Contains(line, ":") {
			t.Errorf("an unbounded row has a verdict: %q", line)
		}
	}
	buf.Reset()
	if err := writeJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	var got jsonReport
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Rows {
		wantMet := map[string]bool{"p99 × alone": true, "MB/s × alone": false}
		if want, bounded := wantMet[r.Metric]; bounded != (r.TargetMet != nil) || bounded && *r.TargetMet != want {
			t.Errorf("JSON row %s: target %q, met %v", r.Metric, r.Target, r.TargetMet)
		}
	}
	// A scenario without targets has no target column.
	res.Scenarios[0].Targets = nil
	buf.Reset()
	if err := writeTables(&buf, res); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "target") {
		t.Errorf("a target column without targets:\n%s", buf.String())
	}
}

func TestWriteJSON(t *testing.T) {
	res := &results{Rounds: 3, Scenarios: []scenarioInfo{{ID: "a", Title: "raw"}}, Samples: testSamples()}
	var buf bytes.Buffer
	if err := writeJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	var got jsonReport
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("the output is not JSON: %v\n%s", err, buf.String())
	}
	if got.Rounds != 3 || len(got.Rows) != 5 || got.Failures == nil {
		t.Fatalf("got %+v", got)
	}
	if r := got.Rows[1]; r.Server != kfakeServer || r.Median != 6100 || r.RatioToEcho == nil {
		t.Errorf("kfake row = %+v", r)
	}
}

func TestFormatNumber(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{{0, "0"}, {1.234, "1.23"}, {99.94, "99.9"}, {100, "100"}, {1234567.4, "1,234,567"}, {-4321, "-4,321"}, {0.000123, "0.000123"}} {
		if got := formatNumber(tc.in); got != tc.want {
			t.Errorf("formatNumber(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseProc(t *testing.T) {
	stat := "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 123 456 789"
	cpu, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; cpu != want { // (250+75) ticks of 10 ms
		t.Errorf("parseStatCPU = %v, want %v", cpu, want)
	}
	if _, err := parseStatCPU("4242 (x) S 1 2"); err == nil {
		t.Error("parseStatCPU accepted a short line")
	}
	rss, err := parseStatusRSS("Name:\tx\nVmPeak:\t  999 kB\nVmRSS:\t    1536 kB\nThreads:\t4\n")
	if err != nil {
		t.Fatal(err)
	}
	if rss != 1536*1024 {
		t.Errorf("parseStatusRSS = %d, want %d", rss, 1536*1024)
	}
	if _, err := parseStatusRSS("Name:\tx\n"); err == nil {
		t.Error("parseStatusRSS accepted a status without VmRSS")
	}
	hwm, err := parseStatusKB("VmHWM:\t    2048 kB\nVmRSS:\t    1536 kB\n", "VmHWM")
	if err != nil || hwm != 2048*1024 {
		t.Errorf("parseStatusKB(VmHWM) = %d, %v; want %d", hwm, err, 2048*1024)
	}
	if _, err := parseStatusKB("VmHWM:\t2048 MB\n", "VmHWM"); err == nil {
		t.Error("parseStatusKB accepted a value not in kB")
	}
	switches, err := parseStatusCtxSwitches("Name:\tx\nvoluntary_ctxt_switches:\t196\nnonvoluntary_ctxt_switches:\t4234\n")
	if err != nil || switches != 196+4234 {
		t.Errorf("parseStatusCtxSwitches = %d, %v; want %d", switches, err, 196+4234)
	}
	if _, err := parseStatusCtxSwitches("voluntary_ctxt_switches:\t196\n"); err == nil {
		t.Error("parseStatusCtxSwitches accepted a status without nonvoluntary_ctxt_switches")
	}
	if _, err := parseStatusCtxSwitches("voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n"); err == nil {
		t.Error("parseStatusCtxSwitches accepted a count that is not a number")
	}
	reads, writes, err := parseProcIO("rchar: 6976\nwchar: 12\nsyscr: 10\nsyscw: 3\nread_bytes: 0\n")
	if err != nil || reads != 10 || writes != 3 {
		t.Errorf("parseProcIO = %d, %d, %v; want 10, 3", reads, writes, err)
	}
	for _, bad := range []string{"rchar: 1\nsyscr: 10\n", "syscr: x\nsyscw: 1\n"} {
		if _, _, err := parseProcIO(bad); err == nil {
			t.Errorf("parseProcIO(%q) succeeded", bad)
		}
	}
	run, err := parseSchedstat("942115456 3128204594 4419\n")
	if err != nil || run != 942115456*time.Nanosecond {
		t.Errorf("parseSchedstat = %v, %v; want 942.115456ms", run, err)
	}
	for _, bad := range []string{"", "1 2", "x 2 3"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat(%q) succeeded", bad)
		}
	}
	// And for real, on this process.
	if cpu, err := procCPU(os.Getpid()); err != nil || cpu < 0 {
		t.Errorf("procCPU(self) = %v, %v", cpu, err)
	}
	if rss, err := procRSS(os.Getpid()); err != nil || rss < 1<<20 {
		t.Errorf("procRSS(self) = %d, %v; want at least 1 MiB", rss, err)
	}
	if hwm, err := procHWM(os.Getpid()); err != nil || hwm < 1<<20 {
		t.Errorf("procHWM(self) = %d, %v; want at least 1 MiB", hwm, err)
	}
}

// rusageCPU is the process's user and system time from getrusage.
func rusageCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestUsage(t *testing.T) {
	u0, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin 50 ms of CPU time and yield in between, so that the run time
	// and the context switches of this process's threads grow.
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
		time.Sleep(time.Microsecond)
	}
	// Spin until getrusage, which counts apart from /proc, says the process
	// has run 50 ms more: a wall-clock spin can get less on a busy machine.
	r0 := rusageCPU(t)
	for rusageCPU(t)-r0 < 50*time.Millisecond {
	}
	u1, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if cpu := u1.cpuSince(u0); cpu < 40*time.Millisecond || cpu > 10*time.Second {
		t.Errorf("CPU time over 50 ms of spinning: %v", cpu)
	}
	if u1.CtxSwitches <= u0.CtxSwitches {
		t.Errorf("context switches went from %d to %d over a run of sleeps", u0.CtxSwitches, u1.CtxSwitches)
	}
	// The threads' run time counts to the nanosecond; the tick count only
	// when threads that exited took more with them.
	then := usage{Ticks: 100 * time.Millisecond, TaskCPU: 95 * time.Millisecond}
	for _, tc := range []struct {
		now  usage
		want time.Duration
	}{
		{usage{Ticks: 110 * time.Millisecond, TaskCPU: 102 * time.Millisecond}, 7 * time.Millisecond},   // within a tick: the precise count
		{usage{Ticks: 300 * time.Millisecond, TaskCPU: 120 * time.Millisecond}, 190 * time.Millisecond}, // a thread that ran 170 ms has exited
	} {
		if got := tc.now.cpuSince(then); got != tc.want {
			t.Errorf("%+v.cpuSince(%+v) = %v, want %v", tc.now, then, got, tc.want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-rounds", "2", "-scenarios", "d, a"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 2 || o.duration != 500*time.Millisecond || o.records != 100_000 || !slices.Equal(o.idleCounts, []int{10_000}) {
		t.Errorf("-quick -rounds 2: got rounds %d, duration %v, records %d, idle %v", o.rounds, o.duration, o.records, o.idleCounts)
	}
	if !slices.Equal(o.scenarios, []string{"a", "d"}) {
		t.Errorf("scenarios = %v, want [a d] in run order", o.scenarios)
	}
	if o.largeMB != 50 || !slices.Equal(o.largeSizes, []int{1024, 1 << 20}) {
		t.Errorf("-quick: large-mb %d, large-sizes %v; want 50 and [1024 1048576]", o.largeMB, o.largeSizes)
	}
	o, err = parseOptions(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.rounds != 3 || !slices.Equal(o.idleCounts, []int{10_000, 100_000}) || !slices.Equal(o.rawConns, []int{1, 8, 64}) || len(o.scenarios) != len(allScenarios) ||
		o.largeMB != 200 || o.budgetClients != 16 || o.budgetRequest != 32<<20 || o.budget != 64<<20 {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseOptions([]string{"-quick", "-large-mb", "7", "-large-sizes", "4096,100", "-budget-request-mib", "8", "-budget-mib", "16", "-budget-clients", "4"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.largeMB != 7 || !slices.Equal(o.largeSizes, []int{100, 4096}) || o.budgetRequest != 8<<20 || o.budget != 16<<20 || o.budgetClients != 4 {
		t.Errorf("explicit g and h flags: %+v", o)
	}
	o, err = parseOptions([]string{"-broker-set", "queued.max.request.bytes=209715200", "-broker-set", "socket.send.buffer.bytes=-1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"queued.max.request.bytes=209715200", "socket.send.buffer.bytes=-1"}; !slices.Equal(o.brokerProps, want) {
		t.Errorf("-broker-set: %q, want %q", o.brokerProps, want)
	}
	if note := (&bench{opts: o}).largeInfo().Notes; !strings.Contains(note[len(note)-1], "-broker-set queued.max.request.bytes=209715200 -broker-set socket.send.buffer.bytes=-1") {
		t.Errorf("(g)'s notes do not name the broker's properties: %q", note[len(note)-1])
	}
	o, err = parseOptions([]string{"-scenarios", "g", "-baseline-broker", "old/broker"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.baselineBroker != "old/broker" {
		t.Errorf("-baseline-broker: %q, want old/broker", o.baselineBroker)
	}
	if o, _ := parseOptions(nil, io.Discard); o.baselineBroker != "" || o.proxyTLS {
		t.Errorf("a baseline broker (%q) or TLS hops (%v) by default", o.baselineBroker, o.proxyTLS)
	}
	if o, err := parseOptions([]string{"-scenarios", "p", "-proxy-tls"}, io.Discard); err != nil || !o.proxyTLS {
		t.Errorf("-proxy-tls: %v, %v", o.proxyTLS, err)
	}
	if o, _ := parseOptions(nil, io.Discard); o.proxyProcs != 1 {
		t.Errorf("examples/proxy's GOMAXPROCS is %d by default, want 1 (HAProxy's one thread)", o.proxyProcs)
	}
	if o, err := parseOptions([]string{"-proxy-procs", "0"}, io.Discard); err != nil || o.proxyProcs != 0 {
		t.Errorf("-proxy-procs 0: %v, %v", o.proxyProcs, err)
	}
	o, err = parseOptions([]string{"-scenarios", "i", "-quick", "-hostile-slowloris", "7", "-hostile-claims", "3", "-hostile-logins", "2", "-hostile-pipeliners", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.hostileDuration != 2*time.Second || o.hostileTimeout != 2*time.Second || o.hostileSlowloris != 7 || o.hostileClaims != 3 || o.hostileLogins != 2 || o.hostilePipeliners != 1 {
		t.Errorf("-quick and scenario i's counts: %+v", o)
	}
	o, err = parseOptions([]string{"-scenarios", "i"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.hostileDuration != 5*time.Second || o.hostileSlowloris != 1000 || o.hostileClaims != 10 || o.hostileLogins != 100 || o.hostilePipeliners != 50 ||
		!slices.Equal(o.hostileCases, hostileKinds[1:]) {
		t.Errorf("scenario i's defaults: %+v", o)
	}
	if o, err := parseOptions([]string{"-hostile-cases", "4,3"}, io.Discard); err != nil || !slices.Equal(o.hostileCases, []hostileKind{hostileLogins, hostilePipeliners}) {
		t.Errorf("-hostile-cases 4,3: %v, %v", o.hostileCases, err)
	}
	for _, bad := range [][]string{{"-scenarios", "a,z"}, {"-idle", "10,-1"}, {"-rounds", "0"}, {"extra"},
		{"-large-mb", "0"}, {"-large-sizes", "1024,0"}, {"-budget-clients", "0"},
		{"-budget-request-mib", "65", "-budget-mib", "64"}, {"-budget-mib", "2048"}, {"-broker-set", "novalue"},
		{"-hostile-duration", "0s"}, {"-hostile-timeout", "0s"}, {"-hostile-slowloris", "0"}, {"-hostile-claims", "-1"},
		{"-hostile-logins", "0"}, {"-hostile-pipeliners", "0"}, {"-baseline-broker", ""}, {"-baseline-broker", " "}, {"-proxy-procs", "-1"},
		{"-hostile-cases", "0"}, {"-hostile-cases", "5"}, {"-hostile-cases", "1,x"}} {
		if _, err := parseOptions(bad, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) succeeded", bad)
		}
	}
}

func TestRotate(t *testing.T) {
	s := []string{"a", "b", "c"}
	for n, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotate(s, n); !slices.Equal(got, want) {
			t.Errorf("rotate(%v, %d) = %v, want %v", s, n, got, want)
		}
	}
}

// runScenarios runs a bench of options o in a test and fails it on any
// failed run, or on a goroutine left running.
func runScenarios(t *testing.T, o options) []row {
	t.Helper()
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	b, cleanup, err := newBench(ctx, o, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	res := b.runAll(ctx)
	if len(res.Failures) > 0 {
		t.Fatalf("failures: %q\n%s", res.Failures, log.String())
	}
	return aggregate(res.Samples)
}

// find returns the row of a scenario, case, metric and server.
func find(t *testing.T, rows []row, c, metric, server string) row {
	t.Helper()
	for _, r := range rows {
		if r.Case == c && r.Metric == metric && r.Server == server {
			return r
		}
	}
	t.Fatalf("no row for %s / %s / %s", c, metric, server)
	return row{}
}

// TestRawEndToEnd runs scenario a for 1 s on 8 connections against the
// three servers, each a child process.
func TestRawEndToEnd(t *testing.T) {
	rows := runScenarios(t, options{scenarios: []string{"a"}, rounds: 1, duration: time.Second, rawConns: []int{8}})
	if got := find(t, rows, "any", "response bytes", echoServer).Median; got != echoResponseSize {
		t.Errorf("echo's response is %v bytes, want %d", got, echoResponseSize)
	}
	for _, server := range []string{kafkanetServer, kfakeServer} {
		if got := find(t, rows, "any", "response bytes", server).Median; got <= echoResponseSize {
			t.Errorf("%s's ApiVersions response is %v bytes: it lists no API", server, got)
		}
	}
	for _, server := range []string{kafkanetServer, kfakeServer, echoServer} {
		rate := find(t, rows, "conns=8", "req/s", server).Median
		p50 := find(t, rows, "conns=8", "p50 µs", server).Median
		p99 := find(t, rows, "conns=8", "p99 µs", server).Median
		p999 := find(t, rows, "conns=8", "p99.9 µs", server).Median
		cpu := find(t, rows, "conns=8", "server CPU µs/req", server).Median
		if rate < 100 || p50 <= 0 || p50 > p99 || p99 > p999 || cpu <= 0 {
			t.Errorf("%s: %v req/s, p50 %v, p99 %v, p99.9 %v µs, server CPU %v µs/req: want a positive rate and CPU and ordered percentiles",
				server, rate, p50, p99, p999, cpu)
		}
	}
	// One request in flight per connection: each costs the server a read
	// and a write at least (the window's edges aside), and none should
	// cost five.
	for _, server := range []string{kafkanetServer, echoServer} {
		reads := find(t, rows, "conns=8", "server reads/req", server).Median
		writes := find(t, rows, "conns=8", "server writes/req", server).Median
		if reads < 0.9 || reads > 5 || writes < 0.9 || writes > 5 {
			t.Errorf("%s: %v reads and %v writes per request", server, reads, writes)
		}
	}
	// One round: its ratio to echo is the ratio of the two rates.
	want := find(t, rows, "conns=8", "req/s", kafkanetServer).Median / find(t, rows, "conns=8", "req/s", echoServer).Median
	if got := find(t, rows, "conns=8", "req/s × echo", kafkanetServer).Median; math.Abs(got-want) > 1e-9 {
		t.Errorf("req/s × echo %v, want %v", got, want)
	}
}

// TestRawMetadataEndToEnd runs scenario a at one connection: ApiVersions
// and Metadata against the four servers, the inline one Metadata only.
func TestRawMetadataEndToEnd(t *testing.T) {
	rows := runScenarios(t, options{scenarios: []string{"a"}, rounds: 1, duration: 300 * time.Millisecond, rawConns: []int{1}})
	for _, server := range []string{kafkanetServer, kafkanetInlineServer, kfakeServer, echoServer} {
		for _, c := range []string{"conns=1", metadataCase} {
			if server == kafkanetInlineServer && c == "conns=1" {
				continue
			}
			p50 := find(t, rows, c, "p50 µs", server).Median
			switches := find(t, rows, c, "server ctx switches/req", server).Median
			if p50 <= 0 || switches <= 0 || switches > 50 {
				t.Errorf("%s, %s: p50 %v µs, %v context switches per request", server, c, p50, switches)
			}
		}
	}
	for _, r := range rows {
		if r.Server == kafkanetInlineServer && r.Case != metadataCase {
			t.Errorf("kafkanet-inline measured in %q", r.Case)
		}
	}
}

// TestControlEndToEnd runs scenario e briefly: with a separate control
// plane every control request is answered, sharing the saturated data
// plane none is.
func TestControlEndToEnd(t *testing.T) {
	rows := runScenarios(t, options{scenarios: []string{"e"}, rounds: 1, duration: 300 * time.Millisecond, probeTimeout: 100 * time.Millisecond})
	if got := find(t, rows, "separate control plane", "answered %", kafkanetServer).Median; got != 100 {
		t.Errorf("separate control plane: %v%% answered, want 100", got)
	}
	if got := find(t, rows, "shared data plane", "answered %", kafkanetServer).Median; got != 0 {
		t.Errorf("shared data plane: %v%% answered, want 0 (the queue is full)", got)
	}
	if got := find(t, rows, "shared data plane", "p50 µs", kafkanetServer).Median; got != 100_000 {
		t.Errorf("shared data plane: p50 %v µs, want the 100 ms timeout", got)
	}
}

// TestListingEndToEnd runs scenario f with 300 idle connections. Each
// load runs 900 ms: time for the first listing of a lister that lists
// every second to end on a loaded machine under the race detector (in
// 300 ms it once did not), and too little for its second.
func TestListingEndToEnd(t *testing.T) {
	rows := runScenarios(t, options{scenarios: []string{"f"}, rounds: 1, duration: 900 * time.Millisecond, idleCounts: []int{300}, listings: 2})
	all := find(t, rows, "list 300 conns", "response MiB", kafkanetServer).Median
	if all <= 0 {
		t.Errorf("the listing response is %v MiB", all)
	}
	// The top 10's response holds 10 connections (timeListings checks the
	// count): a thirtieth of the 300's, give or take the records' sizes.
	if top := find(t, rows, "top 10 of 300 conns", "response MiB", kafkanetServer).Median; top <= 0 || top > all/10 {
		t.Errorf("the top 10's response is %v MiB, the whole listing's %v MiB", top, all)
	}
	name := func(mode string) string { return "8 conns, 300 idle, " + mode }
	if got := find(t, rows, name("no listing"), "listings", kafkanetServer).Median; got != 0 {
		t.Errorf("%v listings without listing", got)
	}
	if got := find(t, rows, name("a listing every second"), "listings", kafkanetServer).Median; got != 1 {
		t.Errorf("%v listings in 900 ms at one a second, want 1", got)
	}
	if got := find(t, rows, name("listings back to back"), "listings", kafkanetServer).Median; got < 2 {
		t.Errorf("%v listings back to back in 900 ms, want several", got)
	}
}

// TestProxyEndToEnd runs scenario p briefly, with -proxy-tls:
// examples/broker reached directly, through HAProxy and through
// examples/proxy, in plaintext and with TLS at the hop, Metadata round
// trips, and a little produced and consumed each way. Without haproxy it
// checks the others, unless CI is set: then it fails.
func TestProxyEndToEnd(t *testing.T) {
	haproxy := findHAProxy("") != ""
	if !haproxy && os.Getenv("CI") != "" {
		t.Fatal("haproxy is required in CI (apt-get install haproxy)")
	}
	rows := runScenarios(t, options{scenarios: []string{"p"}, rounds: 1, duration: 300 * time.Millisecond, rawConns: []int{1}, proxyMB: 2, proxyTLS: true})
	hops := []string{directServer, proxyServer, proxyTLSServer}
	if haproxy {
		hops = append(hops, haproxyServer, haproxyTLSServer)
	}
	for _, h := range hops {
		if got := find(t, rows, "Metadata, conns=1", "req/s", h).Median; got <= 0 {
			t.Errorf("%s: %v req/s", h, got)
		}
		for _, c := range []string{"produce", "consume"} {
			if got := find(t, rows, c, "MB/s", h).Median; got <= 0 {
				t.Errorf("%s, %s: %v MB/s", c, h, got)
			}
			if got := find(t, rows, c, "broker CPU ms/MB", h).Median; got <= 0 {
				t.Errorf("%s, %s: the broker used %v ms of CPU per MB", c, h, got)
			}
		}
		if h == directServer {
			continue
		}
		if got := find(t, rows, "Metadata, conns=1", "hop CPU µs/req", h).Median; got <= 0 {
			t.Errorf("%s used %v µs of CPU per request: it was not in the path", h, got)
		}
		for _, c := range []string{"produce", "consume"} {
			if got := find(t, rows, c, "hop CPU ms/MB", h).Median; got <= 0 {
				t.Errorf("%s, %s: %v ms of CPU per MB: it was not in the path", c, h, got)
			}
		}
	}
	if !haproxy {
		return
	}
	for _, tg := range proxyTargets {
		if tg.Metric == targetAddedP50 { // absent when HAProxy added nothing in so short a run
			continue
		}
		if got := find(t, rows, tg.Case, tg.Metric, proxyServer).Median; got <= 0 {
			t.Errorf("%s: the ratio is %v", tg.Metric, got)
		}
		if got := find(t, rows, tlsRatioCase, tg.Metric, proxyTLSServer).Median; got <= 0 {
			t.Errorf("%s with TLS: the ratio is %v", tg.Metric, got)
		}
	}
}

// TestPairedRatios checks scenario a's per-round ratios and their
// judging: each round's kafkanet value over echo's of the same round, the
// median of those against the targets, where a ratio of medians would
// judge otherwise; a round without echo has no ratio.
func TestPairedRatios(t *testing.T) {
	var s []sample
	add := func(c, metric string, server serverKind, values ...float64) {
		for i, v := range values {
			s = append(s, sample{Scenario: "a", Case: c, Metric: metric, Server: server, Round: i + 1, Value: v})
		}
	}
	// req/s at 64: ratios 1.0, 0.9, 1.0, median 1.0 (met); medians' ratio 90/100 = 0.9.
	add("conns=64", "req/s", kafkanetServer, 100, 90, 80)
	add("conns=64", "req/s", echoServer, 100, 100, 80)
	// p99 at 64: ratios 0.91, 1.2, 0.86, median 0.91 (met); medians' ratio 12/11 > 1.
	add("conns=64", "p99 µs", kafkanetServer, 10, 12, 30)
	add("conns=64", "p99 µs", echoServer, 11, 10, 35)
	// req/s at 1: ratios 0.83, 0.91, 1.0, median 0.91 (missed); medians' ratio 50/55 = 0.91.
	add("conns=1", "req/s", kafkanetServer, 50, 50, 50)
	add("conns=1", "req/s", echoServer, 60, 55, 50)
	// Metadata at 1 for kafkanet-inline, with echo failing in round 2.
	add("conns=1, Metadata", "req/s", kafkanetInlineServer, 40, 40, 40)
	s = append(s, sample{Scenario: "a", Case: "conns=1, Metadata", Metric: "req/s", Server: echoServer, Round: 1, Value: 80},
		sample{Scenario: "a", Case: "conns=1, Metadata", Metric: "req/s", Server: echoServer, Round: 3, Value: 20})
	b := &bench{opts: options{duration: time.Second}}
	info := b.rawInfo()
	s = append(s, pairedSamples(info, s)...)
	rows := aggregate(s)
	applyTargets(rows, []scenarioInfo{info})
	for _, tc := range []struct {
		c, metric string
		server    serverKind
		values    []float64
		met       *bool
	}{
		{"conns=64", "req/s × echo", kafkanetServer, []float64{1, 0.9, 1}, ptr(true)},
		{"conns=64", "p99 × echo", kafkanetServer, []float64{10.0 / 11, 1.2, 30.0 / 35}, ptr(true)},
		{"conns=1", "req/s × echo", kafkanetServer, []float64{50.0 / 60, 50.0 / 55, 1}, ptr(false)},
		{"conns=1, Metadata", "req/s × echo", kafkanetInlineServer, []float64{0.5, 2}, nil},
	} {
		r := find(t, rows, tc.c, tc.metric, tc.server)
		if !slices.EqualFunc(r.Values, tc.values, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Errorf("%s %s: by round %v, want %v", tc.c, tc.metric, r.Values, tc.values)
		}
		if (r.TargetMet == nil) != (tc.met == nil) || r.TargetMet != nil && *r.TargetMet != *tc.met {
			t.Errorf("%s %s: target %q met %v, want met %v", tc.c, tc.metric, r.Target, r.TargetMet, tc.met)
		}
	}
	// The ratios of medians would judge otherwise: 0.9 and 1.2 × echo.
	if got := *find(t, rows, "conns=64", "req/s", kafkanetServer).RatioToEcho; got >= 0.95 {
		t.Errorf("ratio of medians %v, want below 0.95", got)
	}
	if slices.ContainsFunc(rows, func(r row) bool { return r.Server == echoServer && strings.Contains(r.Metric, "×") }) {
		t.Error("echo has a ratio to itself")
	}
	var buf bytes.Buffer
	if err := writeTables(&buf, &results{Rounds: 3, Samples: s, Scenarios: []scenarioInfo{info}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"conns=64, req/s × echo, kafkanet, by round: 1.00 0.90 1.00", "conns=1, req/s × echo, kafkanet, by round: 0.83 0.91 1.00", "≥ 0.95: met", "≤ 1: met", "≥ 0.95: MISSED"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

// TestEchoControl checks -echo-control: scenario a measures a second echo
// server, whose per-round ratios to echo sit beside kafkanet's, judged by
// no target; without the flag it is not measured.
func TestEchoControl(t *testing.T) {
	off := &bench{opts: options{duration: time.Second}}
	if slices.Contains(off.scenario("a").servers, echoControlServer) {
		t.Error("echo-control measured without -echo-control")
	}
	on := &bench{opts: options{duration: time.Second, echoControl: true}}
	if !slices.Contains(on.scenario("a").servers, echoControlServer) {
		t.Fatal("-echo-control does not measure echo-control")
	}
	var s []sample
	add := func(metric string, server serverKind, values ...float64) {
		for i, v := range values {
			s = append(s, sample{Scenario: "a", Case: "conns=64", Metric: metric, Server: server, Round: i + 1, Value: v})
		}
	}
	add("req/s", echoServer, 100, 100, 100)
	add("req/s", echoControlServer, 90, 80, 85) // 0.85 × echo: below the target, which does not judge a control
	add("req/s", kafkanetServer, 100, 96, 97)
	add("p99 µs", echoServer, 10, 10, 10)
	add("p99 µs", echoControlServer, 11, 9, 12)
	info := on.rawInfo()
	s = append(s, pairedSamples(info, s)...)
	rows := aggregate(s)
	applyTargets(rows, []scenarioInfo{info})
	for _, tc := range []struct {
		metric string
		server serverKind
		values []float64
		judged bool
	}{
		{"req/s × echo", echoControlServer, []float64{0.9, 0.8, 0.85}, false},
		{"p99 × echo", echoControlServer, []float64{1.1, 0.9, 1.2}, false},
		{"req/s × echo", kafkanetServer, []float64{1, 0.96, 0.97}, true},
	} {
		r := find(t, rows, "conns=64", tc.metric, tc.server)
		if !slices.EqualFunc(r.Values, tc.values, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Errorf("%s %s: by round %v, want %v", tc.server, tc.metric, r.Values, tc.values)
		}
		if (r.TargetMet != nil) != tc.judged {
			t.Errorf("%s %s: judged %v (target %q), want judged %v", tc.server, tc.metric, r.TargetMet != nil, r.Target, tc.judged)
		}
	}
	var buf bytes.Buffer
	if err := writeTables(&buf, &results{Rounds: 3, Samples: s, Scenarios: []scenarioInfo{info}}); err != nil {
		t.Fatal(err)
	}
	if want := "conns=64, p99 × echo, echo-control, by round: 1.10 0.90 1.20"; !strings.Contains(buf.String(), want) {
		t.Errorf("the table lacks %q:\n%s", want, buf.String())
	}
}

func ptr[T any](v T) *T { return &v }
