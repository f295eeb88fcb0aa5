package main

// This file is the parent side of the server children: the bench's
// environment, starting and stopping children, and reading their CPU time
// and RSS from /proc.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// bench is the environment of one run of the command.
type bench struct {
	opts      options
	exe       string   // this binary, re-executed as each server
	env       []string // the children's environment, with the TLS key and chain
	dialer    *dialer
	brokerBin string // the example broker, built for scenarios g, h, i and p, and b unless -produce-discard
	// baselineBin is -baseline-broker, an absolute path, measured as
	// baselineServer beside brokerBin.
	baselineBin string
	proxyBin    string // the example proxy, built for scenario p
	// proxyBaselineBin is -baseline-proxy, an absolute path, measured as
	// proxyBaselineServer beside proxyBin.
	proxyBaselineBin string
	haproxyBin       string // scenario p: HAProxy; "" when it was not found
	// hopKeyStore is scenario p's with -proxy-tls: the bench's TLS key
	// and certificate (PEM) in a file, HAProxy's crt and the proxy's key
	// store.
	hopKeyStore string
	proxyRounds int    // scenario p's rounds so far: the hops' order rotates
	fileLimit   uint64 // RLIMIT_NOFILE, inherited by the children
	log         io.Writer

	// placements are scenario a's pinned placements of the bench and a
	// server (-pin), none when it is off or the bench may use one CPU;
	// allowedCPUs are the CPUs the bench may use, restored after each.
	placements  []placement
	allowedCPUs cpuMask

	// Scenario h's Produce request, built once.
	produceFrameOnce sync.Once
	produceFrame     []byte
	produceFrameErr  error

	// hostileRuns counts scenario i's runs of each server, whose cases'
	// order rotates from round to round.
	hostileRuns map[serverKind]int
}

// newBench prepares a run: it raises the open-file limit, makes a
// self-signed certificate, checks -baseline-broker's binary and, when
// scenario b stores records or scenario g, h, i or p runs, builds the
// example broker into a temporary directory (and for p the example
// proxy, and with -proxy-tls writes the certificate's key store there).
// cleanup removes the directory.
func newBench(ctx context.Context, o options, log io.Writer) (b *bench, cleanup func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("finding the bench binary to re-execute: %w", err)
	}
	limit, err := raiseFileLimit()
	if err != nil {
		fmt.Fprintf(log, "bench: warning: cannot raise the open-file limit (now %d): %v\n", limit, err)
	}
	key, chain, clientTLS, err := selfSignedCert()
	if err != nil {
		return nil, nil, err
	}
	b = &bench{opts: o, exe: exe, dialer: newDialer(clientTLS), fileLimit: limit, log: log,
		env: append(os.Environ(), envTLSKey+"="+key, envTLSChain+"="+chain)}
	if o.pin && slices.Contains(o.scenarios, "a") && slices.Contains(o.rawConns, 1) {
		if b.placements, b.allowedCPUs, err = placements(); err != nil {
			return nil, nil, fmt.Errorf("-pin: %w", err)
		}
		if len(b.placements) == 0 {
			fmt.Fprintln(log, "bench: -pin: the bench may use one CPU: scenario a measures no pinned placement")
		}
	}
	if o.perfDir != "" {
		if err := os.MkdirAll(o.perfDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("-perf-dir: %w", err)
		}
	}
	if o.baselineBroker != "" {
		if b.baselineBin, err = checkBaseline("-baseline-broker", o.baselineBroker, "broker"); err != nil {
			return nil, nil, err
		}
	}
	if o.baselineProxy != "" {
		if b.proxyBaselineBin, err = checkBaseline("-baseline-proxy", o.baselineProxy, "proxy"); err != nil {
			return nil, nil, err
		}
	}
	cleanup = func() {}
	needBroker := slices.Contains(o.scenarios, "b") && !o.produceDiscard || slices.Contains(o.scenarios, "c") || slices.Contains(o.scenarios, "g") || slices.Contains(o.scenarios, "h") ||
		slices.Contains(o.scenarios, "i") || slices.Contains(o.scenarios, "p")
	if needBroker {
		dir, err := os.MkdirTemp("", "kafkanet-bench-")
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		fmt.Fprintln(log, "bench: building examples/broker")
		if b.brokerBin, err = buildExample(ctx, dir, "broker"); err != nil {
			cleanup()
			return nil, nil, err
		}
		if slices.Contains(o.scenarios, "p") {
			b.haproxyBin = findHAProxy(o.haproxy)
			if o.proxyTLS {
				b.hopKeyStore = filepath.Join(dir, "hop-keystore.pem")
				if err := os.WriteFile(b.hopKeyStore, []byte(key+chain), 0o600); err != nil {
					cleanup()
					return nil, nil, err
				}
			}
			fmt.Fprintln(log, "bench: building examples/proxy for scenario p")
			if b.proxyBin, err = buildExample(ctx, dir, "proxy"); err != nil {
				cleanup()
				return nil, nil, err
			}
		}
	}
	return b, cleanup, nil
}

// raiseFileLimit raises RLIMIT_NOFILE, soft and hard, to the kernel's
// maximum (fs.nr_open), or the soft limit to the hard one when the process
// may not raise the hard limit. Children inherit the limit. It returns the
// soft limit in force.
func raiseFileLimit() (uint64, error) {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &cur); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	want := cur.Max
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			want = max(want, n)
		}
	}
	lim := syscall.Rlimit{Cur: want, Max: want}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		lim = syscall.Rlimit{Cur: cur.Max, Max: cur.Max}
		if err2 := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err2 != nil {
			return cur.Cur, fmt.Errorf("setrlimit: %w", errors.Join(err, err2))
		}
		return lim.Cur, fmt.Errorf("setrlimit to %d: %w (raised the soft limit to the hard one)", want, err)
	}
	return lim.Cur, nil
}

// selfSignedCert makes an ECDSA P-256 key and a self-signed certificate for
// 127.0.0.1 and localhost, valid for a day. It returns both in PEM, and a
// client configuration that trusts the certificate and keeps no session
// cache, so that every connection makes a full handshake.
func selfSignedCert() (keyPEM, chainPEM string, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, fmt.Errorf("TLS key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kafkanet bench"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, fmt.Errorf("TLS certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", nil, fmt.Errorf("TLS key: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, fmt.Errorf("TLS certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	keyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
	chainPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return keyPEM, chainPEM, &tls.Config{RootCAs: pool}, nil
}

// buildExample builds examples/<name> into dir with the go command, from
// the current directory, which must be inside the kafkanet module.
func buildExample(ctx context.Context, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/kafkanet/kafkanet/examples/"+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building examples/%s (run the bench inside the kafkanet module, with the go command on PATH): %w\n%s", name, err, out)
	}
	return bin, nil
}

// freeAddrs returns n addresses on 127.0.0.1 whose ports were free a
// moment ago.
func freeAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// child is a running server process.
type child struct {
	name        string
	addr        string // the client listener
	controlAddr string // kafkanet's control listener, else empty
	tls         bool
	cmd         *exec.Cmd
	stdin       io.WriteCloser // kafkanet: "stats" commands
	stdout      *bufio.Reader
	stderr      *tailBuffer
	exited      chan struct{}
	waitErr     error // set before exited closes

	perfDir string    // -perf-dir: record each measured window of the child with perf
	perfRun int       // windows recorded so far
	log     io.Writer // the bench's log, for the perf files' names
}

// startServer starts a server child for spec on free ports and waits until
// it answers ApiVersions.
func (b *bench) startServer(ctx context.Context, spec childSpec) (*child, error) {
	addrs, err := freeAddrs(2)
	if err != nil {
		return nil, err
	}
	spec.Addr, spec.ControlAddr = addrs[0], addrs[1]
	c := &child{name: spec.Kind, addr: spec.Addr, tls: spec.TLS}
	if spec.Kind == kafkanetServer || spec.Kind == kafkanetInlineServer {
		c.controlAddr = spec.ControlAddr
	}
	if err := b.launch(ctx, c, b.exe, spec.args(), b.childEnv(spec.UnsetEnv, spec.Env...)); err != nil {
		return nil, err
	}
	return c, nil
}

// startBroker starts the example broker with one PLAINTEXT listener, the
// given properties ("key=value") and then those of -broker-set, and waits
// until it answers ApiVersions.
func (b *bench) startBroker(ctx context.Context, props ...string) (*child, error) {
	return b.startBrokerAs(ctx, brokerServer, props...)
}

// startBrokerAs is startBroker for server: baselineServer is the
// -baseline-broker binary, started the same way; any other kind the
// current example broker.
func (b *bench) startBrokerAs(ctx context.Context, server serverKind, props ...string) (*child, error) {
	return b.launchBroker(ctx, brokerSpec{server: server, props: props})
}

// brokerSpec says how to start an example broker: with the listener
// properties that listenerProps returns for a free address on 127.0.0.1
// (one listener, there), then the given properties, then those of
// -broker-set.
type brokerSpec struct {
	// server is baselineServer for the -baseline-broker binary; any other
	// kind is the example broker the bench built.
	server serverKind
	// listenerProps returns the listener properties for a free address on
	// 127.0.0.1; nil: one PLAINTEXT listener there.
	listenerProps func(addr string) []string
	// props are laid over the listener properties, and -broker-set's over
	// them unless ownProps.
	props    []string
	ownProps bool
	// unsetEnv are variables removed from the broker's environment.
	unsetEnv []string
}

// launchBroker starts an example broker as s says and waits until it
// answers ApiVersions on its listener.
func (b *bench) launchBroker(ctx context.Context, s brokerSpec) (*child, error) {
	addrs, err := freeAddrs(1)
	if err != nil {
		return nil, err
	}
	bin, name := b.brokerBinary(s.server)
	c := &child{name: name, addr: addrs[0]}
	listenerProps := []string{"listeners=PLAINTEXT://" + c.addr}
	if s.listenerProps != nil {
		listenerProps = s.listenerProps(c.addr)
	}
	props := slices.Concat(listenerProps, s.props)
	if !s.ownProps {
		props = append(props, b.opts.brokerProps...)
	}
	var args []string
	for _, p := range props {
		args = append(args, "-set", p)
	}
	if err := b.launch(ctx, c, bin, args, b.childEnv(s.unsetEnv)); err != nil {
		return nil, err
	}
	return c, nil
}

// startProxy starts the example proxy of column name (the baseline's
// binary for proxyBaselineServer) in front of upstream with one listener
// (proxyArgs), PLAINTEXT, or SSL with keyStore when it is not "", and
// waits until it answers ApiVersions.
func (b *bench) startProxy(ctx context.Context, name serverKind, upstream, keyStore string) (*child, error) {
	addrs, err := freeAddrs(1)
	if err != nil {
		return nil, err
	}
	c := &child{name: name, addr: addrs[0], tls: keyStore != ""}
	bin := b.proxyBin
	if name == proxyBaselineServer {
		bin = b.proxyBaselineBin
	}
	if err := b.launch(ctx, c, bin, proxyArgs(upstream, c.addr, keyStore), b.proxyEnv(name)); err != nil {
		return nil, err
	}
	return c, nil
}

// goRuntimeEnv are the Go runtime's variables, which scenario p's
// examples/proxy runs without, as shipped: with its own runtime settings.
var goRuntimeEnv = []string{"GOMAXPROCS", "GODEBUG", "GOGC", "GOMEMLIMIT"}

// proxyEnv is the environment of the example proxy of column name: the
// bench's without the Go runtime's variables, and for proxyPinnedServer
// with GOMAXPROCS set to -proxy-procs.
func (b *bench) proxyEnv(name serverKind) []string {
	if name == proxyPinnedServer {
		return b.childEnv(goRuntimeEnv, "GOMAXPROCS="+strconv.Itoa(b.opts.proxyProcs))
	}
	return b.childEnv(goRuntimeEnv)
}

// proxyArgs are the example proxy's arguments in scenario p: in front of
// upstream, one listener on addr, its brokers' ports ephemeral; the
// listener is PLAINTEXT, or with keyStore not "" SSL with that PEM file
// (key and certificate chain) as its key store.
func proxyArgs(upstream, addr, keyStore string) []string {
	name, protocol := "PLAIN", "PLAINTEXT"
	if keyStore != "" {
		name, protocol = "TLS", "SSL"
	}
	args := []string{"-upstream", upstream, "-set", "listeners=" + name + "://" + addr, "-set", "listener.security.protocol.map=" + name + ":" + protocol,
		"-set", "proxy.broker.port.base=0"}
	if keyStore != "" {
		args = append(args, "-set", "ssl.keystore.type=PEM", "-set", "ssl.keystore.location="+keyStore)
	}
	return args
}

// childEnv returns a child's environment: the bench's, without the
// variables named in unset, then add.
func (b *bench) childEnv(unset []string, add ...string) []string {
	env := slices.DeleteFunc(slices.Clone(b.env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(unset, k)
	})
	return append(env, add...)
}

// launch starts c's process with the environment env and waits until it
// answers ApiVersions. The process gets SIGTERM when ctx ends, and SIGKILL
// if the bench dies.
func (b *bench) launch(ctx context.Context, c *child, path string, args []string, env []string) error {
	if err := b.spawn(ctx, c, path, args, env); err != nil {
		return err
	}
	if err := c.waitReady(ctx, b.dialer); err != nil {
		c.stop()
		return err
	}
	return nil
}

// spawn starts c's process with the environment env, its stdin and stdout
// pipes to the bench, and returns without waiting for anything. The
// process gets SIGTERM when ctx ends, and SIGKILL if the bench dies.
func (b *bench) spawn(ctx context.Context, c *child, path string, args []string, env []string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.stderr = &tailBuffer{max: 4096}
	c.perfDir, c.log = b.opts.perfDir, b.log
	cmd.Stderr = c.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	c.cmd, c.stdin, c.stdout, c.exited = cmd, stdin, bufio.NewReader(stdout), make(chan struct{})
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return nil
}

// waitReady waits until the child answers an ApiVersions round trip on its
// client listener, for at most 30 s.
func (c *child) waitReady(ctx context.Context, d *dialer) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return fmt.Errorf("%s exited while starting: %v: %s", c.name, c.waitErr, c.stderr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if last = c.probe(ctx, d); last == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer ApiVersions within 30 s: %w: %s", c.name, last, c.stderr)
}

// probe does one ApiVersions round trip on a new connection.
func (c *child) probe(ctx context.Context, d *dialer) error {
	conn, err := d.dialFor(c)(ctx, c.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	return helloRoundTrip(conn)
}

// stop ends the child: SIGTERM, then SIGKILL after 10 s. It returns an
// error when the child had already exited with a failure.
func (c *child) stop() error {
	select {
	case <-c.exited:
		if c.waitErr != nil {
			return fmt.Errorf("%s exited early: %w: %s", c.name, c.waitErr, c.stderr)
		}
		return nil
	default:
	}
	c.stdin.Close()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	return nil
}

// alive returns an error if the child has exited.
func (c *child) alive() error {
	select {
	case <-c.exited:
		return fmt.Errorf("%s exited: %v: %s", c.name, c.waitErr, c.stderr)
	default:
		return nil
	}
}

// usage returns the child's CPU time and context switches so far.
func (c *child) usage() (usage, error) { return readUsage(c.cmd.Process.Pid) }

// rss returns the child's resident set size in bytes.
func (c *child) rss() (int64, error) { return procRSS(c.cmd.Process.Pid) }

// stats asks the kafkanet child for its queue and connection counts.
func (c *child) stats() (childStats, error) { return c.statsLine("stats") }

// memStats is stats with the child's runtime.MemStats figures.
func (c *child) memStats() (childStats, error) { return c.statsLine("memstats") }

// freeOSMemory has the kafkanet child give the runtime's free heap pages
// back to the system (debug.FreeOSMemory), then returns its memstats.
func (c *child) freeOSMemory() (childStats, error) { return c.statsLine("freeosmemory") }

func (c *child) statsLine(ask string) (childStats, error) {
	var st childStats
	if _, err := io.WriteString(c.stdin, ask+"\n"); err != nil {
		return st, fmt.Errorf("asking %s for stats: %w", c.name, err)
	}
	line, err := c.stdout.ReadBytes('\n')
	if err != nil {
		return st, fmt.Errorf("reading %s's stats: %w", c.name, err)
	}
	if err := json.Unmarshal(line, &st); err != nil {
		return st, fmt.Errorf("reading %s's stats: %w", c.name, err)
	}
	return st, nil
}

// clientCPU returns the bench process's own CPU time, user and system.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// window measures a timed run: its wall time, and the CPU time and context
// switches of the server and the CPU time of the bench in it; with a
// second process (startWindowAlso), that process's CPU time too.
type window struct {
	c                 *child
	start             time.Time
	server0           usage
	client0           time.Duration
	Elapsed           time.Duration
	ServerCPU, Client time.Duration
	ServerSwitches    int64 // the server's threads' context switches, voluntary and not
	// ServerReads and ServerWrites are the server's read and write system
	// calls (/proc/PID/io), -1 when the kernel does not count them.
	ServerReads, ServerWrites int64

	also    *child // a second process measured, or nil (scenario p: the broker behind a hop)
	also0   usage
	AlsoCPU time.Duration

	perf *exec.Cmd // with -perf-dir: perf record, attached to the server
}

// startWindow starts measuring c, and with -perf-dir starts recording it
// with perf.
func startWindow(c *child) (*window, error) { return startWindowAlso(c, nil) }

// startWindowAlso starts measuring c and, if not nil, also's CPU time.
func startWindowAlso(c, also *child) (*window, error) {
	w := &window{c: c, also: also}
	if c.perfDir != "" {
		if err := w.startPerf(); err != nil {
			return nil, err
		}
	}
	if also != nil {
		u, err := also.usage()
		if err != nil {
			w.stopPerf()
			return nil, fmt.Errorf("reading %s's CPU time: %w", also.name, err)
		}
		w.also0 = u
	}
	u, err := c.usage()
	if err != nil {
		w.stopPerf()
		return nil, fmt.Errorf("reading %s's CPU time: %w", c.name, err)
	}
	w.start, w.server0, w.client0 = time.Now(), u, clientCPU()
	return w, nil
}

// end stops measuring.
func (w *window) end() error {
	w.Elapsed = time.Since(w.start)
	w.Client = clientCPU() - w.client0
	u, err := w.c.usage()
	if err != nil {
		err = fmt.Errorf("reading %s's CPU time: %w", w.c.name, err)
	} else if w.also != nil {
		ua, aerr := w.also.usage()
		if aerr != nil {
			err = fmt.Errorf("reading %s's CPU time: %w", w.also.name, aerr)
		}
		w.AlsoCPU = ua.cpuSince(w.also0)
	}
	w.stopPerf()
	if err != nil {
		return err
	}
	w.ServerCPU = u.cpuSince(w.server0)
	w.ServerSwitches = u.CtxSwitches - w.server0.CtxSwitches
	w.ServerReads, w.ServerWrites = -1, -1
	if u.IO && w.server0.IO {
		w.ServerReads, w.ServerWrites = u.Reads-w.server0.Reads, u.Writes-w.server0.Writes
	}
	return nil
}

// startPerf starts perf record on the server, sampling its call stacks on
// the CPU clock, into a file of -perf-dir named after the server, its
// process id and the window's number. perf starts with its events
// disabled and is told through its control FIFO to enable them; startPerf
// returns once perf has acknowledged, so that the window is recorded from
// its start, however long perf took to attach.
func (w *window) startPerf() error {
	c := w.c
	c.perfRun++
	name := strings.NewReplacer("/", "-", " ", "-").Replace(c.name)
	base := filepath.Join(c.perfDir, fmt.Sprintf("%s-%d-%d", name, c.cmd.Process.Pid, c.perfRun))
	ctl, ack := base+".ctl", base+".ack"
	for _, f := range []string{ctl, ack} {
		os.Remove(f)
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			return fmt.Errorf("-perf-dir: %w", err)
		}
	}
	defer os.Remove(ctl)
	defer os.Remove(ack)
	out := base + ".perf.data"
	cmd := exec.Command("perf", "record", "-e", "cpu-clock", "-F", "1999", "-g", "-p", strconv.Itoa(c.cmd.Process.Pid),
		"-o", out, "-D", "-1", "--control", "fifo:"+ctl+","+ack)
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting perf record (-perf-dir): %w", err)
	}
	w.perf = cmd
	// perf opens both FIFOs once it is ready; opening them waits for it.
	err := func() error {
		cf, err := os.OpenFile(ctl, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer cf.Close()
		af, err := os.Open(ack)
		if err != nil {
			return err
		}
		defer af.Close()
		if _, err := io.WriteString(cf, "enable\n"); err != nil {
			return err
		}
		reply := make([]byte, 4)
		if _, err := io.ReadFull(af, reply); err != nil || string(reply) != "ack\n" {
			return fmt.Errorf("perf did not acknowledge (%q): %w", reply, err)
		}
		return nil
	}()
	if err != nil {
		w.stopPerf()
		return fmt.Errorf("perf record (-perf-dir): %w", err)
	}
	fmt.Fprintf(c.log, "bench: perf: recording %s in %s\n", c.name, out)
	return nil
}

// stopPerf ends perf record, which then writes its file.
func (w *window) stopPerf() {
	if w.perf != nil {
		_ = w.perf.Process.Signal(os.Interrupt)
		_ = w.perf.Wait()
		w.perf = nil
	}
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
