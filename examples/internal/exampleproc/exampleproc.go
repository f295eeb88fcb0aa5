// Package exampleproc runs the example programs as child processes for
// tests of other programs: examples/broker as the cluster a proxy stands
// in front of (StartBroker), and commands such as
// examples/kafka-client-connections as an operator runs them (Build). Each
// program is built once per test binary with the go command.
package exampleproc

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{}
)

// Build builds examples/<name> (broker, kafka-client-connections, ...)
// once per process and returns the program's path; Cleanup removes it.
func Build(t testing.TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[name]; ok {
		return bin
	}
	if buildDir == "" {
		dir, err := os.MkdirTemp("", "kafkanet-exampleproc-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
	}
	bin := filepath.Join(buildDir, name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/kafkanet/kafkanet/examples/"+name).CombinedOutput()
	if err != nil {
		t.Fatalf("building examples/%s (run inside the kafkanet module, with the go command on PATH): %v\n%s", name, err, out)
	}
	built[name] = bin
	return bin
}

// Cleanup removes the programs built; call it from TestMain after the
// tests.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
		buildDir, built = "", map[string]string{}
	}
}

// Broker is a running examples/broker process.
type Broker struct {
	t     testing.TB
	cmd   *exec.Cmd
	done  chan struct{}
	log   *tail
	addrs map[string]string // "broker/LISTENER" -> bound address
}

// StartBroker runs examples/broker -brokers n with the -set settings sets
// and waits until it has started; it is stopped (SIGTERM, as an operator
// stops it) when the test ends, and its log is shown if the test failed.
func StartBroker(t testing.TB, n int, sets ...string) *Broker {
	t.Helper()
	bin := Build(t, "broker")
	args := []string{"-brokers", strconv.Itoa(n)}
	for _, s := range sets {
		args = append(args, "-set", s)
	}
	c := &Broker{t: t, cmd: exec.Command(bin, args...), done: make(chan struct{}), log: &tail{max: 64 << 10}, addrs: map[string]string{}}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout = io.Discard
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	go c.read(stderr, started)
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("examples/broker's log:\n%s", c.log)
		}
	})
	select {
	case <-started:
	case <-c.done:
		t.Fatalf("examples/broker exited while starting: %v\n%s", c.cmd.ProcessState, c.log)
	case <-time.After(60 * time.Second):
		t.Fatalf("examples/broker did not start in 60 s:\n%s", c.log)
	}
	return c
}

var listenerLine = regexp.MustCompile(`msg="listener started" broker=(\d+) listener=(\S+) bind=(\S+)`)

// read keeps the broker's log and notes its listeners, until it exits.
func (c *Broker) read(r io.Reader, started chan struct{}) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	once := sync.Once{}
	for sc.Scan() {
		line := sc.Text()
		c.log.add(line)
		if m := listenerLine.FindStringSubmatch(line); m != nil {
			c.log.mu.Lock()
			c.addrs[m[1]+"/"+m[2]] = m[3]
			c.log.mu.Unlock()
		}
		if strings.Contains(line, `msg=started`) {
			once.Do(func() { close(started) })
		}
	}
	_ = c.cmd.Wait()
}

// Addr returns the address broker i is bound to on the named listener.
func (c *Broker) Addr(i int, listener string) string {
	c.t.Helper()
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	a, ok := c.addrs[strconv.Itoa(i)+"/"+listener]
	if !ok {
		c.t.Fatalf("exampleproc: broker %d has no listener %s", i, listener)
	}
	return a
}

// Pid returns the broker's process id.
func (c *Broker) Pid() int { return c.cmd.Process.Pid }

// Log returns the tail of the broker's log.
func (c *Broker) Log() string { return c.log.String() }

// Stop stops the broker as SIGTERM does (a graceful shutdown), killing it
// if it has not exited after 20 s.
func (c *Broker) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// tail keeps the last max bytes of a log.
type tail struct {
	mu    sync.Mutex
	max   int
	lines []string
	size  int
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line) + 1
	for t.size > t.max && len(t.lines) > 1 {
		t.size -= len(t.lines[0]) + 1
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
