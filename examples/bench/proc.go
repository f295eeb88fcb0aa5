package main

// This file reads what the bench measures of a server child from /proc:
// its CPU time, context switches, resident set and peak resident set.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times; Linux
// reports them in hundredths of a second whatever the kernel's HZ.
const clockTicks = 100

// procCPU reads a process's utime+stime from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime+stime from the text of /proc/PID/stat: fields
// 14 and 15, counted after the command name in parentheses (which may hold
// spaces).
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// procRSS reads a process's VmRSS from /proc/PID/status, in bytes.
func procRSS(pid int) (int64, error) { return procStatusKB(pid, "VmRSS") }

// procHWM reads a process's VmHWM, its peak resident set size since it
// started or since resetHWM, from /proc/PID/status, in bytes.
func procHWM(pid int) (int64, error) { return procStatusKB(pid, "VmHWM") }

// resetHWM sets a process's peak resident set size (VmHWM) to its current
// resident set size, by writing 5 to /proc/PID/clear_refs (Linux 4.0 on;
// the bench may, for its own children).
func resetHWM(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKB(string(b), field)
}

// parseStatusRSS reads the VmRSS line ("VmRSS:    1234 kB") of the text of
// /proc/PID/status, in bytes.
func parseStatusRSS(status string) (int64, error) { return parseStatusKB(status, "VmRSS") }

// parseStatusKB reads a line such as "VmHWM:    1234 kB" of the text of
// /proc/PID/status, in bytes.
func parseStatusKB(status, field string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: %s line %q", field, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: %w", err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc status: no %s line", field)
}

// parseStatusCtxSwitches reads a thread's voluntary_ctxt_switches plus
// nonvoluntary_ctxt_switches from the text of /proc/PID/task/TID/status.
func parseStatusCtxSwitches(status string) (int64, error) {
	var sum int64
	found := 0
	for line := range strings.Lines(status) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "voluntary_ctxt_switches" && name != "nonvoluntary_ctxt_switches") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: %s: %w", name, err)
		}
		sum += n
		found++
	}
	if found != 2 {
		return 0, errors.New("/proc status: no voluntary_ctxt_switches and nonvoluntary_ctxt_switches lines")
	}
	return sum, nil
}

// parseSchedstat reads the first field of /proc/PID/task/TID/schedstat:
// the nanoseconds the thread has run on a CPU.
func parseSchedstat(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return 0, fmt.Errorf("/proc schedstat: %q: want 3 fields", strings.TrimSpace(s))
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc schedstat: %w", err)
	}
	return time.Duration(ns), nil
}

// usage is what the kernel counts of a process at one moment.
type usage struct {
	// Ticks is utime+stime from /proc/PID/stat: every thread's, those that
	// have exited included, in hundredths of a second.
	Ticks time.Duration
	// TaskCPU is the sum of the live threads' run time from
	// /proc/PID/task/*/schedstat, in nanoseconds. A thread that exits takes
	// its share along; Go's runtime keeps its threads.
	TaskCPU time.Duration
	// CtxSwitches is the sum of the live threads' voluntary and
	// nonvoluntary context switches (/proc/PID/task/*/status).
	CtxSwitches int64
	// Reads and Writes are the process's read and write system calls
	// (syscr and syscw of /proc/PID/io: read, readv, recvmsg, write,
	// writev, sendmsg and their kin); IO is false when the kernel does not
	// count them.
	Reads, Writes int64
	IO            bool
}

// readUsage reads a process's usage. Threads that exit while it reads are
// skipped.
func readUsage(pid int) (usage, error) {
	var u usage
	var err error
	if u.Ticks, err = procCPU(pid); err != nil {
		return u, err
	}
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		if u.Reads, u.Writes, err = parseProcIO(string(io)); err != nil {
			return u, err
		}
		u.IO = true
	}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return u, err
	}
	for _, t := range tids {
		sched, err1 := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		status, err2 := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if errors.Is(err1, os.ErrNotExist) || errors.Is(err2, os.ErrNotExist) {
			continue // the thread has exited
		}
		if err := errors.Join(err1, err2); err != nil {
			return u, err
		}
		cpu, err := parseSchedstat(string(sched))
		if err != nil {
			return u, err
		}
		n, err := parseStatusCtxSwitches(string(status))
		if err != nil {
			return u, err
		}
		u.TaskCPU += cpu
		u.CtxSwitches += n
	}
	return u, nil
}

// cpuSince returns the CPU time spent from then to u: the threads' run
// time to the nanosecond, unless threads that exited took more than that
// with them, which the tick count (exact to a tick either way) shows.
func (u usage) cpuSince(then usage) time.Duration {
	precise := u.TaskCPU - then.TaskCPU
	coarse := u.Ticks - then.Ticks - time.Second/clockTicks
	return max(precise, coarse)
}

// parseProcIO reads syscr and syscw, the read and write system calls, from
// the text of /proc/PID/io.
func parseProcIO(s string) (reads, writes int64, err error) {
	found := 0
	for line := range strings.Lines(s) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || name != "syscr" && name != "syscw" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc io: %s: %w", name, err)
		}
		if name == "syscr" {
			reads = n
		} else {
			writes = n
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("/proc io: no syscr and syscw lines")
	}
	return reads, writes, nil
}
