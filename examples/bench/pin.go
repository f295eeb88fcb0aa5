package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// placement is where scenario a runs the bench and a server for its
// one-connection cases beside the free one: each process's threads
// pinned to a set of CPUs.
//
// A request answered at one connection is a ping-pong between two
// processes, and on a machine of two CPUs its round trip depends first on
// where the kernel runs the two: on one CPU each wakes the other where it
// runs, across two each wakes an idle CPU. Left free, the pair settles on
// one or the other for long stretches, and which it settles on depends on
// both processes' threads and timers as much as on the server's work: the
// same server measures from 0.7 to 1.1 × echo's rate in runs minutes
// apart (docs/performance.md). Pinned, each placement is measured alone.
type placement struct {
	Name          string
	Bench, Server cpuMask
}

// The placements' names, in scenario a's cases ("conns=1, one CPU").
const (
	oneCPU  = "one CPU"
	twoCPUs = "two CPUs"
)

// placedCase is scenario a's case of one connection under placement name.
func placedCase(name string) string { return "conns=1, " + name }

// runPlaced runs load on one connection to c with the bench and c pinned
// as p says, then lets the bench run on all its CPUs again (c stops after
// its cases).
func (b *bench) runPlaced(ctx context.Context, c *child, p placement, load loadRequest) (loadResult, error) {
	self := os.Getpid()
	defer func() { // also after a pinning that failed half-way
		if err := pinProcess(self, b.allowedCPUs); err != nil {
			fmt.Fprintf(b.log, "bench: warning: the bench stays pinned: %v\n", err)
		}
	}()
	if err := pinProcess(self, p.Bench); err != nil {
		return loadResult{}, fmt.Errorf("pinning the bench: %w", err)
	}
	if err := pinProcess(c.cmd.Process.Pid, p.Server); err != nil {
		return loadResult{}, fmt.Errorf("pinning %s: %w", c.name, err)
	}
	return runLoad(ctx, b.dialer, c, load, 1, b.opts.duration, nil)
}

// cpuMask is a set of CPUs, as sched_setaffinity(2) takes it: bit n is CPU n.
type cpuMask [16]uint64 // 1,024 CPUs

func (m *cpuMask) add(cpu int)      { m[cpu/64] |= 1 << (cpu % 64) }
func (m *cpuMask) has(cpu int) bool { return m[cpu/64]&(1<<(cpu%64)) != 0 }

// cpus returns the CPUs of m in order.
func (m *cpuMask) cpus() []int {
	var out []int
	for cpu := range len(m) * 64 {
		if m.has(cpu) {
			out = append(out, cpu)
		}
	}
	return out
}

// threadCPUs returns the CPUs thread tid may run on (0: the calling thread).
func threadCPUs(tid int) (cpuMask, error) {
	var m cpuMask
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m))); e != 0 {
		return m, e
	}
	return m, nil
}

// setThreadCPUs lets thread tid run on m's CPUs alone.
func setThreadCPUs(tid int, m cpuMask) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, uintptr(tid), unsafe.Sizeof(m), uintptr(unsafe.Pointer(&m))); e != 0 {
		return e
	}
	return nil
}

// pinProcess lets every thread of process pid run on m's CPUs alone. A
// thread starts with the CPUs of the thread that started it, so one
// started while pinProcess works may keep the old set: it lists the
// threads again until it finds none it has not set.
func pinProcess(pid int, m cpuMask) error {
	done := map[int]bool{}
	for range 10 {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			done[tid], fresh = true, true
			if err := setThreadCPUs(tid, m); err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: the thread has exited
				return fmt.Errorf("thread %d of process %d: %w", tid, pid, err)
			}
		}
		if !fresh {
			return nil
		}
	}
	return fmt.Errorf("process %d keeps starting threads", pid)
}

// placements returns scenario a's fixed placements of the bench and a
// server: both on the first CPU the bench may use, and each on one of the
// first two. It returns none when the bench may use only one CPU, and
// allowed, the CPUs the bench may use, to restore.
func placements() (ps []placement, allowed cpuMask, err error) {
	if allowed, err = threadCPUs(0); err != nil {
		return nil, allowed, fmt.Errorf("the bench's CPUs: %w", err)
	}
	cpus := allowed.cpus()
	if len(cpus) < 2 {
		return nil, allowed, nil
	}
	var first, second cpuMask
	first.add(cpus[0])
	second.add(cpus[1])
	return []placement{{Name: oneCPU, Bench: first, Server: first}, {Name: twoCPUs, Bench: first, Server: second}}, allowed, nil
}
