package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// allowedCPUs returns each thread's Cpus_allowed_list of process pid.
func allowedCPUs(t *testing.T, pid int) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
		if err != nil {
			continue // the thread has exited
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				out[e.Name()] = strings.TrimSpace(v)
			}
		}
	}
	return out
}

func TestCPUMask(t *testing.T) {
	for _, cpus := range [][]int{nil, {0}, {1}, {0, 1}, {3, 64, 1023}} {
		var m cpuMask
		for _, c := range cpus {
			m.add(c)
		}
		if got := m.cpus(); !slices.Equal(got, cpus) {
			t.Errorf("cpus of a mask of %v: %v", cpus, got)
		}
	}
}

// TestPinProcess pins every thread of a child process (the echo server, a
// Go program, which starts threads of its own) to one CPU, then lets it
// run on all of the test's again.
func TestPinProcess(t *testing.T) {
	all, err := threadCPUs(0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], childFlag, "-kind", echoServer, "-addr", "127.0.0.1:0", "-control-addr", "127.0.0.1:0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait until the runtime has started threads beside the main one: how
	// soon depends on the machine's load (a race build starts slowly).
	for deadline := time.Now().Add(10 * time.Second); len(allowedCPUs(t, cmd.Process.Pid)) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	last := all.cpus()[len(all.cpus())-1]
	var one cpuMask
	one.add(last)
	if err := pinProcess(cmd.Process.Pid, one); err != nil {
		t.Fatal(err)
	}
	got := allowedCPUs(t, cmd.Process.Pid)
	if len(got) < 2 {
		t.Fatalf("the child has %d threads: want a Go runtime's several", len(got))
	}
	for tid, cpus := range got {
		if cpus != strconv.Itoa(last) {
			t.Errorf("thread %s may run on %s, want %d alone", tid, cpus, last)
		}
	}
	if err := pinProcess(cmd.Process.Pid, all); err != nil {
		t.Fatal(err)
	}
	for tid, cpus := range allowedCPUs(t, cmd.Process.Pid) {
		if cpus == strconv.Itoa(last) && len(all.cpus()) > 1 {
			t.Errorf("thread %s still pinned to %s", tid, cpus)
		}
	}
	if err := pinProcess(1<<30, one); err == nil {
		t.Error("pinning a process that does not exist: no error")
	}
}

// TestRawPinnedEndToEnd runs scenario a's one-connection case pinned, on
// one CPU and on two, against the three servers, and checks that the
// bench may use all its CPUs again after.
func TestRawPinnedEndToEnd(t *testing.T) {
	before := allowedCPUs(t, os.Getpid())
	all, err := threadCPUs(0)
	if err != nil {
		t.Fatal(err)
	}
	rows := runScenarios(t, options{scenarios: []string{"a"}, rounds: 1, duration: 300 * time.Millisecond, rawConns: []int{1}, pin: true})
	placed := []string{placedCase(oneCPU), placedCase(twoCPUs)}
	if len(all.cpus()) < 2 {
		for _, r := range rows {
			if slices.Contains(placed, r.Case) {
				t.Errorf("one CPU allowed, yet measured %q", r.Case)
			}
		}
		return
	}
	for _, server := range []string{kafkanetServer, kfakeServer, echoServer} {
		for _, c := range placed {
			if rate := find(t, rows, c, "req/s", server).Median; rate < 100 {
				t.Errorf("%s, %s: %v req/s", server, c, rate)
			}
		}
	}
	applyTargets(rows, []scenarioInfo{(&bench{}).rawInfo()})
	for _, c := range placed {
		if r := find(t, rows, c, "req/s × echo", kafkanetServer); r.Target != "≥ 0.95" {
			t.Errorf("%s: req/s × echo's target is %q, want ≥ 0.95", c, r.Target)
		}
	}
	for _, r := range rows {
		if r.Server == kafkanetInlineServer && slices.Contains(placed, r.Case) {
			t.Errorf("kafkanet-inline measured in %q", r.Case)
		}
	}
	want := before[strconv.Itoa(os.Getpid())]
	for tid, cpus := range allowedCPUs(t, os.Getpid()) {
		if cpus != want {
			t.Errorf("after the run, thread %s may run on %s, want %s as before", tid, cpus, want)
		}
	}
}
