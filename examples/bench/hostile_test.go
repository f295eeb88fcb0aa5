package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHostileFrames(t *testing.T) {
	// A claim: the size of a 100,000,000-byte Produce frame and its first
	// 10 bytes.
	h := claimHeader()
	if len(h) != 4+claimSent || binary.BigEndian.Uint32(h) != claimFrameSize {
		t.Fatalf("claim header %x: want the size %d and %d bytes", h, claimFrameSize, claimSent)
	}
	if key, version := int16(binary.BigEndian.Uint16(h[4:])), int16(binary.BigEndian.Uint16(h[6:])); key != 0 || version != produceFrameVersion {
		t.Errorf("a claim of key %d version %d, want Produce v%d", key, version, produceFrameVersion)
	}
	// The slowloris request: a whole ApiVersions v0 of 270 bytes.
	f := slowlorisFrame()
	if len(f) != 270 || int(binary.BigEndian.Uint32(f)) != len(f)-4 || binary.BigEndian.Uint16(f[4:]) != 18 {
		t.Errorf("the slowloris frame is %d bytes (size field %d, key %d), want a 270-byte ApiVersions", len(f), binary.BigEndian.Uint32(f), binary.BigEndian.Uint16(f[4:]))
	}
	// A pipeline: 64 Metadata v1 frames with correlation ids 1 to 64.
	batch := pipelineBatch()
	one := metadataV1Frame()
	if len(batch) != pipelineDepth*len(one) {
		t.Fatalf("a batch of %d bytes, want %d frames of %d", len(batch), pipelineDepth, len(one))
	}
	for i := range pipelineDepth {
		frame := batch[i*len(one) : (i+1)*len(one)]
		if corr := binary.BigEndian.Uint32(frame[8:]); corr != uint32(i+1) || !bytes.Equal(frame[:8], one[:8]) {
			t.Errorf("frame %d: %x, correlation id %d", i, frame[:12], corr)
		}
	}
	// PLAIN's message: no authorization id, the user, the password.
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	frame := saslPlainFrame("alice", "secret")
	if err := req.ReadFrom(frame[4+8+2+len(clientID):]); err != nil {
		t.Fatal(err)
	}
	if string(req.SASLAuthBytes) != "\x00alice\x00secret" {
		t.Errorf("PLAIN message %q", req.SASLAuthBytes)
	}
}

func TestHostileInfo(t *testing.T) {
	b := &bench{opts: options{hostileDuration: 5 * time.Second, hostileTimeout: 2 * time.Second,
		hostileSlowloris: 1000, hostileClaims: 10, hostileLogins: 100, hostilePipeliners: 50}}
	info := b.hostileInfo()
	if len(info.Targets) != 7 {
		t.Fatalf("%d targets, want p99 and throughput for cases 1 to 3 and p99 for case 4", len(info.Targets))
	}
	for _, tg := range info.Targets {
		if strings.HasPrefix(tg.Case, "0 ") {
			t.Errorf("a target on the case alone: %+v", tg)
		}
		if tg.Metric == p99RatioMetric && (!tg.AtMost || tg.Bound != 2 && tg.Bound != 5) || tg.Metric == produceRatioMetric && (tg.AtMost || tg.Bound != 0.5) {
			t.Errorf("target %+v", tg)
		}
	}
	// The notes say that the two parts are measured one after the other.
	if notes := strings.Join(info.Notes, " "); !strings.Contains(notes, "two consecutive windows") {
		t.Errorf("the notes do not say the windows are consecutive:\n%s", notes)
	}
	// And that the attackers run in a process of their own.
	if notes := strings.Join(info.Notes, " "); !strings.Contains(notes, "attackers run in a child process of their own") {
		t.Errorf("the notes do not say where the attackers run:\n%s", notes)
	}
	if got := b.hostileCaseName(hostileClaims); got != "2 claims: 10 × 100 MB Produce, 10 bytes sent" {
		t.Errorf("case 2 is %q", got)
	}
}

// TestHostileControl runs case 4 with its control (-hostile-control): the
// control is reported as a case of its own, whose attackers loaded another
// broker (the measured one stays nearly idle), and the attacked case gets
// its p99 over the control's.
func TestHostileControl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/broker")
	}
	o := options{scenarios: []string{"i"}, rounds: 1, hostileDuration: 2 * time.Second, hostileTimeout: 2 * time.Second,
		hostilePipeliners: 2, hostileCases: []hostileKind{hostilePipeliners}, hostileControl: true,
		hostileSlowloris: 1, hostileClaims: 1, hostileLogins: 1}
	quickRaceExit(t)
	rows := runScenarios(t, o)
	b := &bench{opts: o}
	attacked := b.hostileRunName(hostileRun{kind: hostilePipeliners})
	control := b.hostileRunName(hostileRun{kind: hostilePipeliners, control: true})
	if attacked == control {
		t.Fatalf("the control is named as its case: %q", control)
	}
	for _, c := range []string{attacked, control} {
		if w := find(t, rows, c, pipelinedWriteMetric, brokerServer).Median; w <= 0 {
			t.Errorf("%s: %v pipelined requests written a second", c, w)
		}
		if r := find(t, rows, c, p99RatioMetric, brokerServer).Median; r <= 0 {
			t.Errorf("%s: p99 × alone %v", c, r)
		}
	}
	// The pipeliners keep the broker they attack busy in the Metadata
	// window (about half a core more than the control's here; the
	// producer's window, in both, costs about a third of a core).
	if a, c := find(t, rows, attacked, brokerCPUMetric, brokerServer).Median, find(t, rows, control, brokerCPUMetric, brokerServer).Median; a < 1.3*c {
		t.Errorf("the measured broker used %v%% of a core attacked and %v%% in the control: the control's attackers did not go elsewhere", a, c)
	}
	if r := find(t, rows, attacked, p99ControlMetric, brokerServer).Median; r <= 0 {
		t.Errorf("%s: p99 × control %v", attacked, r)
	}
	for _, r := range rows {
		if (r.Case == control || r.Case == b.hostileCaseName(hostileAlone)) && r.Metric == p99ControlMetric {
			t.Errorf("p99 × control for a case without a control: %+v", r)
		}
	}
}

// TestHostileEndToEnd runs scenario i with 2 s windows (the Metadata
// client's, then the producer's; 1 s ones saw no produce acknowledged
// once on a machine loaded by other tests) and a few attackers of each
// kind against examples/broker: every case, its metrics and the ratios to
// the case alone.
func TestHostileEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/broker")
	}
	o := options{scenarios: []string{"i"}, rounds: 1, hostileDuration: 2 * time.Second, hostileTimeout: 2 * time.Second,
		hostileSlowloris: 20, hostileClaims: 2, hostileLogins: 4, hostilePipeliners: 2, hostileCases: hostileKinds[1:]}
	quickRaceExit(t)
	rows := runScenarios(t, o)
	b := &bench{opts: o}
	for _, k := range hostileKinds {
		c := b.hostileCaseName(k)
		p50 := find(t, rows, c, metaP50Metric, brokerServer).Median
		p99 := find(t, rows, c, metaP99Metric, brokerServer).Median
		answered := find(t, rows, c, metaRateMetric, brokerServer).Median
		mbs := find(t, rows, c, produceMBsMetric, brokerServer).Median
		peak := find(t, rows, c, peakRSSMetric, brokerServer).Median
		rss := find(t, rows, c, endRSSMetric, brokerServer).Median
		// At most one Metadata request a tick, over its own window only.
		maxAnswered := float64(time.Second/hostileTick) + 1 // a rate: per second of the window
		if p50 <= 0 || p99 < p50 || answered <= 0 || answered > maxAnswered || mbs <= 0 || rss <= 0 || peak < rss {
			t.Errorf("%s: p50 %v ms, p99 %v ms, %v Metadata/s, %v MB/s, peak RSS %v MiB, RSS %v MiB", c, p50, p99, answered, mbs, peak, rss)
		}
		if cpu := find(t, rows, c, brokerCPUMetric, brokerServer).Median; cpu <= 0 {
			t.Errorf("%s: the broker used %v%% of a core", c, cpu)
		}
		for _, m := range []string{metaTimeoutsMetric, metaErrorsMetric, produceErrorsMetric, benchCPUMetric} {
			if v := find(t, rows, c, m, brokerServer).Median; v < 0 {
				t.Errorf("%s: %s %v", c, m, v)
			}
		}
		if k == hostileAlone {
			for _, r := range rows {
				if r.Case == c && r.Metric == attackersCPUMetric {
					t.Errorf("an attacker child's CPU in the case alone: %+v", r)
				}
			}
			continue
		}
		// The attacker child ran, if only to answer the bench's questions
		// within the windows.
		if cpu := find(t, rows, c, attackersCPUMetric, brokerServer).Median; cpu <= 0 {
			t.Errorf("%s: the attacker child used %v%% of a core", c, cpu)
		}
		if r := find(t, rows, c, p99RatioMetric, brokerServer).Median; r <= 0 {
			t.Errorf("%s: p99 × alone %v", c, r)
		}
		if r := find(t, rows, c, produceRatioMetric, brokerServer).Median; r <= 0 {
			t.Errorf("%s: MB/s × alone %v", c, r)
		}
	}
	for _, r := range rows {
		if r.Case == b.hostileCaseName(hostileAlone) && (r.Metric == p99RatioMetric || r.Metric == produceRatioMetric) {
			t.Errorf("a ratio for the case alone: %+v", r)
		}
	}
	for k, n := range map[hostileKind]int{hostileSlowloris: o.hostileSlowloris, hostileClaims: o.hostileClaims, hostilePipeliners: o.hostilePipeliners} {
		if open := find(t, rows, b.hostileCaseName(k), openConnsMetric, brokerServer).Median; open < 0 || open > float64(n) {
			t.Errorf("%s: %v attackers open, of %d", b.hostileCaseName(k), open, n)
		}
	}
	// The attackers really ran, in their child: its counts reached the
	// report.
	if v := find(t, rows, b.hostileCaseName(hostileLogins), failedLoginsMetric, brokerServer).Median; v <= 0 {
		t.Errorf("%v failed logins/s", v)
	}
	if v := find(t, rows, b.hostileCaseName(hostilePipeliners), pipelinedWriteMetric, brokerServer).Median; v <= 0 {
		t.Errorf("%v pipelined requests/s written", v)
	}
}

func TestParseAttackSpec(t *testing.T) {
	want := attackSpec{Case: hostileLogins, Addr: "127.0.0.1:9092", Conns: 7, User: "bob", Password: "bob-secret",
		WrongPassword: "not-bob-secret", Setup: 3 * time.Second, Lifetime: time.Minute}
	args := want.args()
	if len(args) < 2 || args[0] != childFlag || args[1] != attackFlag {
		t.Fatalf("args %q: want %s %s first", args, childFlag, attackFlag)
	}
	got, err := parseAttackSpec(args[2:])
	if err != nil || got != want {
		t.Fatalf("parseAttackSpec(%q) = %+v, %v; want %+v", args[2:], got, err, want)
	}
	// The slowloris need no credentials.
	if _, err := parseAttackSpec([]string{"-case", "1", "-addr", "a:1", "-conns", "1", "-setup", "1s", "-lifetime", "1s"}); err != nil {
		t.Errorf("slowloris without credentials: %v", err)
	}
	for _, bad := range [][]string{
		{"-case", "0"}, {"-case", "5"}, {"-addr", ""}, {"-conns", "0"}, {"-user", ""}, {"-wrong-password", ""},
		{"-setup", "0s"}, {"-lifetime", "0s"}, {"-unknown", "1"},
	} {
		args := append(slices.Clone(want.args()[2:]), bad...)
		if _, err := parseAttackSpec(args); err == nil {
			t.Errorf("parseAttackSpec accepted %q", bad)
		}
	}
}

// holdListener accepts connections on 127.0.0.1 and holds them, or, with
// closeAtOnce, closes each at once. It returns its address and the
// connections accepted so far.
func holdListener(t *testing.T, closeAtOnce bool) (string, func() []net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if closeAtOnce {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), func() []net.Conn {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(conns)
	}
}

// quickRaceExit spares the attacker children, the test binary
// re-executed, the race detector's second of sleep at exit (its
// atexit_sleep_ms), which would otherwise lengthen every case of scenario
// i by a second under -race. It sets GORACE for the children the test
// starts; the test's own process has read GORACE already.
func quickRaceExit(t *testing.T) {
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// attackerBench is a bench that can start attacker children: the test
// binary, re-executed (TestMain).
func attackerBench(t *testing.T) *bench {
	t.Helper()
	quickRaceExit(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &bench{exe: exe, env: os.Environ(), log: io.Discard,
		opts: options{hostileDuration: time.Second, hostileTimeout: time.Second, hostileSlowloris: 3, hostileClaims: 2, hostileLogins: 2, hostilePipeliners: 2}}
}

// waitExit waits at most 10 s for c to exit.
func waitExit(t *testing.T, c *child) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
		t.Fatalf("%s did not exit by itself", c.name)
	}
}

// TestHostileAttackerChild runs the attacker child of case 1 against a
// listener that holds its connections: it reports them open, and when the
// bench closes its stdin it closes them and exits.
func TestHostileAttackerChild(t *testing.T) {
	addr, accepted := holdListener(t, false)
	b := attackerBench(t)
	c, err := b.startAttackers(t.Context(), hostileSlowloris, addr, 10*time.Second)
	if c != nil {
		defer c.stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := sampleAttackers(c)
	if err != nil {
		t.Fatal(err)
	}
	if s.report.Open != 3 || s.report.Accepted != 0 || s.usage.TaskCPU <= 0 {
		t.Errorf("report %+v, usage %+v: want 3 connections open", s.report, s.usage)
	}
	conns := accepted()
	if len(conns) != 3 {
		t.Fatalf("%d connections accepted, want 3", len(conns))
	}
	// A byte a second: the first, at once.
	buf := make([]byte, 1)
	for _, nc := range conns {
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(nc, buf); err != nil || buf[0] != slowlorisFrame()[0] {
			t.Fatalf("the first byte trickled: %x, %v", buf, err)
		}
	}
	c.stdin.Close()
	waitExit(t, c)
	if c.waitErr != nil {
		t.Errorf("the attacker child exited with %v: %s", c.waitErr, c.stderr)
	}
	for _, nc := range conns {
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, nc); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("a connection still open after the child's exit: %v", err)
		}
	}
}

// TestHostileAttackerChildLifetime: an attacker child that the bench
// neither asks nor stops exits by itself when its lifetime is over.
func TestHostileAttackerChildLifetime(t *testing.T) {
	addr, _ := holdListener(t, false)
	b := attackerBench(t)
	spec := attackSpec{Case: hostileSlowloris, Addr: addr, Conns: 2, Setup: 5 * time.Second, Lifetime: time.Second}
	c := &child{name: "the attacker child"}
	if err := b.spawn(t.Context(), c, b.exe, spec.args(), os.Environ()); err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	if r, err := c.readAttackReport(5 * time.Second); err != nil || !r.Ready {
		t.Fatalf("report %+v, %v", r, err)
	}
	waitExit(t, c)
	if c.waitErr == nil || !strings.Contains(c.stderr.String(), "lifetime") {
		t.Errorf("exit %v, stderr %q: want a failure for the lifetime", c.waitErr, c.stderr)
	}
}

// TestHostileAttackerChildSetupFails: attackers that cannot log in make
// startAttackers fail with the child's error.
func TestHostileAttackerChildSetupFails(t *testing.T) {
	addr, _ := holdListener(t, true)
	b := attackerBench(t)
	c, err := b.startAttackers(t.Context(), hostileClaims, addr, 5*time.Second)
	if c == nil {
		t.Fatalf("no child: %v", err)
	}
	c.stop()
	if err == nil || !strings.Contains(err.Error(), "connection 1 of 2") && !strings.Contains(err.Error(), "connection 2 of 2") {
		t.Errorf("startAttackers: %v, want the child's failed logins", err)
	}
}
