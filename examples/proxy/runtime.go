package main

import (
	"flag"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// This file is the proxy's own defaults for the Go runtime, which a hop
// that forwards small requests feels more than most programs: the cost of
// the hop is the work it does per request, and on a small machine most of
// that is the runtime's waking of threads (docs/proxy.md, "Cost").
//
//   - One P (GOMAXPROCS=1): one thread runs Go code at a time, as one
//     HAProxy thread (nbthread 1) does the work of a TCP relay. With a P
//     per CPU, every goroutine the network or another goroutine makes
//     runnable wakes a second thread to look for more work, which finds
//     none and sleeps again.
//   - The runtime's monitor thread (sysmon) kept awake. It sleeps whenever
//     every P is idle, and the next system call wakes it: once per burst of
//     work, a wake-up and a sleep of its own that cost about a third of a
//     forwarded Metadata's CPU on a virtual machine of two cores. Kept
//     awake, it polls every 10 ms while the proxy is idle instead. The
//     runtime keeps it awake only when GODEBUG sets schedtrace (its
//     periodic scheduler trace), and reads GODEBUG once, at start: so the
//     proxy executes itself again at start, with
//     schedtrace=2147483647 added to GODEBUG, the longest period there is
//     (24.8 days, in milliseconds). The trace is a line on standard error,
//     "SCHED ...", which the runtime prints at that period from the
//     machine's boot: so never, unless the machine has been up for 24.8
//     days, when it prints one at start.
//
// Both give way to the environment (GOMAXPROCS, a schedtrace in GODEBUG)
// and to the flags -gomaxprocs and -sysmon-awake.

// sysmonSetting is the GODEBUG setting that keeps sysmon awake.
const (
	schedtraceKey = "schedtrace"
	sysmonSetting = schedtraceKey + "=2147483647"
)

// Flags of the Go runtime's settings.
const (
	flagGOMAXPROCS  = "gomaxprocs"
	flagSysmonAwake = "sysmon-awake"
)

// defaultProcs is the proxy's GOMAXPROCS unless the environment or
// -gomaxprocs says otherwise.
const defaultProcs = 1

// runtimeFlags defines the runtime's flags, into o, on fs.
func runtimeFlags(fs *flag.FlagSet, o *options) {
	o.gomaxprocs = defaultProcs
	fs.Var(atLeastZero[int]{&o.gomaxprocs, parseInt, "Go's default, one per CPU"}, flagGOMAXPROCS, "run Go code on at most `n` threads at once (GOMAXPROCS), unless the environment sets GOMAXPROCS;\n"+
		"0: Go's default, one per CPU")
	fs.BoolVar(&o.sysmonAwake, flagSysmonAwake, true, "keep the Go runtime's monitor thread (sysmon) awake while the proxy is idle, polling every 10 ms,\n"+
		"rather than woken at each burst of work: the proxy executes itself again at start with "+sysmonSetting+"\n"+
		"added to GODEBUG (Linux), unless GODEBUG sets schedtrace already")
}

// runtimeSettings are what the proxy sets of the Go runtime before it
// starts: GOMAXPROCS (procs; 0 restores Go's default; leave: the
// environment's stands), and the environment to execute the proxy again
// with when sysmon is to be kept awake (reexec nil: it is already, or is
// not to be).
type runtimeSettings struct {
	procs  int
	leave  bool
	reexec []string
}

// settingsFor works out the runtime's settings from the command's
// arguments and environment (as os.Environ gives it). Arguments that do
// not parse set nothing: run reports them.
func settingsFor(args, environ []string) runtimeSettings {
	var o options
	fs := flagSet(&o, io.Discard)
	if fs.Parse(args) != nil {
		return runtimeSettings{leave: true}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	s := runtimeSettings{procs: o.gomaxprocs}
	if !set[flagGOMAXPROCS] && lookupEnv(environ, "GOMAXPROCS") != "" {
		s.leave = true
	}
	if o.sysmonAwake {
		s.reexec = withSysmonAwake(environ)
	}
	return s
}

// withSysmonAwake returns environ with sysmonSetting added to GODEBUG, or
// nil when GODEBUG sets schedtrace already (to any value: the user's
// stands, and the proxy executed again finds its own).
func withSysmonAwake(environ []string) []string {
	godebug := lookupEnv(environ, "GODEBUG")
	for field := range strings.SplitSeq(godebug, ",") {
		if k, _, _ := strings.Cut(strings.TrimSpace(field), "="); k == schedtraceKey {
			return nil
		}
	}
	if godebug != "" {
		godebug += ","
	}
	env := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") })
	return append(env, "GODEBUG="+godebug+sysmonSetting)
}

// lookupEnv returns the value of key in environ; the last one counts, as
// for os.Getenv.
func lookupEnv(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// apply sets GOMAXPROCS as s says.
func (s runtimeSettings) apply() {
	switch {
	case s.leave:
	case s.procs == 0:
		runtime.SetDefaultGOMAXPROCS()
	default:
		runtime.GOMAXPROCS(s.procs)
	}
}

// sysmonAwake reports whether GODEBUG, as the runtime read it at start
// (godebug), keeps sysmon awake: a schedtrace above 0.
func sysmonAwake(godebug string) bool {
	awake := false
	for field := range strings.SplitSeq(godebug, ",") {
		if k, v, _ := strings.Cut(strings.TrimSpace(field), "="); k == schedtraceKey {
			if n, err := strconv.ParseInt(v, 10, 32); err == nil { // the runtime ignores a value that does not parse
				awake = n > 0
			}
		}
	}
	return awake
}
