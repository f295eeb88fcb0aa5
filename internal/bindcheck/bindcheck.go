package bindcheck

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// Interval is how often the listening sockets are read. A listener that
// lives for less than this may go unseen; the suite's servers live far
// longer.
const Interval = 2 * time.Millisecond

// Socket is a listening socket.
type Socket struct {
	Addr  netip.AddrPort
	Inode uint64
}

func (s Socket) String() string { return s.Addr.String() }

// Allowed reports whether a test may listen on addr: a loopback address
// and a port in the ephemeral range [lo, hi].
func Allowed(addr netip.AddrPort, lo, hi uint16) bool {
	a := addr.Addr().Unmap()
	return a.IsLoopback() && addr.Port() >= lo && addr.Port() <= hi
}

// TestingM is what a TestMain's *testing.M offers, and what goleak's
// VerifyTestMain takes.
type TestingM interface{ Run() int }

// watchEnv, set in the environment of a test binary, makes it the watcher
// of its parent process instead of running tests.
const watchEnv = "KAFKANET_BINDCHECK_WATCH"

// Wrap returns m with the check around its Run: the sockets listening
// when Run begins are left alone (a local Kafka, another program's
// server); any socket this process or a child of it listens on later, on
// an address [Allowed] refuses, fails the run with a line naming it. Use
// it in TestMain:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }
//
// The watch runs in a child process (the test binary again, which Wrap
// turns into the watcher), so that it allocates nothing in the tests' own
// process, whose allocation and memory guards count every allocation.
func Wrap(m TestingM) TestingM {
	if os.Getenv(watchEnv) != "" {
		os.Exit(watchParent(os.Stdin, os.Stdout))
	}
	return wrapped{m}
}

type wrapped struct{ m TestingM }

func (w wrapped) Run() int {
	var code int
	bad, err := underWatch(func() { code = w.m.Run() })
	if err != nil {
		fmt.Fprintf(os.Stderr, "bindcheck: %v\n", err)
		return 1
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "bindcheck: tests listened on %s: listen on a loopback address, on port 0 or a port reserved from it\n", strings.Join(bad, ", "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// underWatch runs run with this test binary started again as the watcher
// of this process, and returns what the watcher found.
func underWatch(run func()) ([]string, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), watchEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the watcher: %w", err)
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != ready {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("the watcher did not start: %q", out.Text())
	}
	run()
	stdin.Close()
	var bad []string
	finished := false
	for out.Scan() {
		if out.Text() == done {
			finished = true
			break
		}
		bad = append(bad, out.Text())
	}
	if err := cmd.Wait(); err != nil || !finished {
		return nil, fmt.Errorf("the watcher failed: %v", err)
	}
	return bad, nil
}

// The watcher's lines: ready once it has read what was listening before,
// then one line per forbidden address, then done.
const (
	ready = "bindcheck: ready"
	done  = "bindcheck: done"
)

// watchParent watches the parent process until in ends, and reports on
// out.
func watchParent(in io.Reader, out io.Writer) int {
	w, err := watch(os.Getppid())
	if err != nil {
		fmt.Fprintf(out, "%v\n", err)
		return 1
	}
	fmt.Fprintln(out, ready)
	io.Copy(io.Discard, in)
	for _, b := range w.Stop() {
		fmt.Fprintln(out, b)
	}
	fmt.Fprintln(out, done)
	return 0
}

// Watcher reads the listening sockets every [Interval] until Stop.
type Watcher struct {
	lo, hi uint16
	pid    int
	before map[uint64]bool // inodes listening when the watch began

	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	bad  map[string]bool // "addr (process)"
	seen map[uint64]bool // inodes judged already
	err  error
}

// Watch starts a watcher of this process's listening sockets and its
// children's.
func Watch() (*Watcher, error) { return watch(os.Getpid()) }

func watch(pid int) (*Watcher, error) {
	lo, hi, err := ephemeralPorts()
	if err != nil {
		return nil, err
	}
	socks, err := listening()
	if err != nil {
		return nil, err
	}
	w := &Watcher{lo: lo, hi: hi, pid: pid, before: map[uint64]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
		bad: map[string]bool{}, seen: map[uint64]bool{}}
	for _, s := range socks {
		w.before[s.Inode] = true
	}
	go w.run()
	return w, nil
}

func (w *Watcher) run() {
	defer close(w.done)
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		w.check()
		select {
		case <-w.stop:
			w.check()
			return
		case <-t.C:
		}
	}
}

func (w *Watcher) check() {
	socks, err := listening()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.err == nil {
			w.err = err
		}
		return
	}
	var suspects []Socket
	for _, s := range socks {
		if w.before[s.Inode] || w.seen[s.Inode] {
			continue
		}
		w.seen[s.Inode] = true
		if !Allowed(s.Addr, w.lo, w.hi) {
			suspects = append(suspects, s)
		}
	}
	if len(suspects) == 0 {
		return
	}
	inodes := make([]uint64, len(suspects))
	for i, s := range suspects {
		inodes[i] = s.Inode
	}
	owners := socketOwners(w.pid, inodes)
	for _, s := range suspects {
		if pid, ok := owners[s.Inode]; ok {
			who := "the test process"
			if pid != w.pid {
				who = fmt.Sprintf("child process %d", pid)
			}
			w.bad[fmt.Sprintf("%s (%s)", s, who)] = true
		}
	}
}

// Stop ends the watch and returns the forbidden addresses listened on,
// sorted, and an error of its own if the sockets could not be read.
func (w *Watcher) Stop() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var bad []string
	for b := range w.bad {
		bad = append(bad, b)
	}
	if w.err != nil {
		bad = append(bad, "(the listening sockets could not be read: "+w.err.Error()+")")
	}
	sort.Strings(bad)
	return bad
}
