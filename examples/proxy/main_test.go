package main

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/examples/internal/flagdoc"
	"github.com/kafkanet/kafkanet/internal/testkit"
)

// runProxy runs the command in-process until ctx ends and returns its exit
// status and what it logged.
func runProxy(ctx context.Context, args ...string) (int, string) {
	var stderr testkit.SyncBuffer
	code := run(ctx, args, &stderr)
	return code, stderr.String()
}

// go doc and -h list every flag the command defines.
func TestUsageAndDocListEveryFlag(t *testing.T) {
	code, out := runProxy(context.Background(), "-h")
	require.Equal(t, 0, code)
	flagdoc.Check(t, ".", flagSet(&options{}, io.Discard), out)
}

// -upstream is optional where virtual clusters name their upstreams: the
// synopses of -h and go doc show it in brackets, and its help and entry
// say when it is required.
func TestUsageUpstreamIsOptional(t *testing.T) {
	code, usage := runProxy(context.Background(), "-h")
	require.Equal(t, 0, code)
	doc := flagdoc.Doc(t, ".")
	for where, text := range map[string]string{"-h": usage, "go doc": doc} {
		synopsis := regexp.MustCompile(`(?m)^\s*(?:usage: )?proxy (.*)$`).FindStringSubmatch(text)
		require.NotNil(t, synopsis, "%s shows no synopsis:\n%s", where, text)
		assert.Contains(t, synopsis[1], "[-upstream HOST:PORT[,HOST:PORT]]", "%s's synopsis shows -upstream as required", where)
		assert.Regexp(t, `(?i)required\s+unless\s+proxy\.virtual\.clusters\s+configures\s+virtual\s+clusters`, text, "%s does not say when -upstream is required", where)
	}
}

// Flags and configurations that are wrong: exit status 2 for flags, 1 for
// a configuration, with the offending key named and nothing served.
func TestCommandRefuses(t *testing.T) {
	fake := startFakeUpstream(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"an argument", []string{"-upstream", fake.addr(), "extra"}, 2, `unexpected argument "extra"`},
		{"a bad log level", []string{"-upstream", fake.addr(), "-log-level", "verbose"}, 2, `invalid value "verbose" for flag -log-level: want debug, info, warn or error`},
		{"a negative TLS watch interval", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-tls-watch-interval", "-1s"}, 2,
			`invalid value "-1s" for flag -tls-watch-interval: want 0 or more (0: reload only on SIGHUP)`},
		{"a TLS watch interval that does not parse", []string{"-upstream", fake.addr(), "-tls-watch-interval", "often"}, 2,
			`invalid value "often" for flag -tls-watch-interval: parse error`},
		{"a negative -gomaxprocs", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-gomaxprocs", "-5"}, 2,
			`invalid value "-5" for flag -gomaxprocs: want 0 or more (0: Go's default, one per CPU)`},
		{"a -gomaxprocs that does not parse", []string{"-upstream", fake.addr(), "-gomaxprocs", "x"}, 2, `invalid value "x" for flag -gomaxprocs: parse error`},
		{"no upstream", []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0"}, 1, keyUpstream + ": the upstream cluster's bootstrap servers are required (-upstream HOST:PORT), unless proxy.virtual.clusters configures virtual clusters"},
		{"upstream not host:port", []string{"-upstream", "nowhere"}, 1, keyUpstream},
		{"a missing file", []string{"-upstream", fake.addr(), "-config", filepath.Join(dir, "none.properties")}, 1, "none.properties"},
		{"a bad port mapping", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "proxy.broker.port.mapping=0:x"}, 1, keyPortMapping},
		{"a per-listener base out of range", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0",
			"-set", "listener.name.plaintext.proxy.broker.port.base=70000"}, 1, "listener.name.plaintext.proxy.broker.port.base"},
		{"an unknown admin listener", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "proxy.admin.listener.name=OPS"}, 1, keyAdminListener},
		{"only an admin listener", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "proxy.admin.listener.name=PLAINTEXT"}, 1, "data-plane listener"},
		{"a control plane that is not the admin listener", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0,CTL://127.0.0.1:0",
			"-set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CTL:PLAINTEXT", "-set", "control.plane.listener.name=CTL"}, 1, "control.plane.listener.name"},
		{"an upstream mechanism", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0",
			"-set", "upstream.security.protocol=SASL_PLAINTEXT", "-set", "upstream.sasl.mechanism=GSSAPI", "-set", "upstream.sasl.username=p"}, 1, "upstream.sasl.mechanism"},
		{"the same key twice", []string{"-upstream", fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", keyCloseKey + "=93"}, 1, keyCloseKey},
		{"upstream unreachable", []string{"-upstream", "127.0.0.1:1", "-set", "listeners=PLAINTEXT://127.0.0.1:0"}, 1, "no upstream bootstrap server answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			code, out := runProxy(ctx, tc.args...)
			assert.Equal(t, tc.code, code, out)
			assert.Contains(t, out, tc.want)
			assert.NotContains(t, out, "msg=listening")
		})
	}
}

// The command serves until its context ends (a signal), logs its
// listeners and the upstream brokers it serves, and then drains and exits
// 0.
func TestCommandServesUntilSignalled(t *testing.T) {
	up := startUpstream(t, 3)
	config := filepath.Join(t.TempDir(), "proxy.properties")
	require.NoError(t, os.WriteFile(config, []byte("listeners=PLAIN://127.0.0.1:0,ADMIN://127.0.0.1:0\n"+
		"listener.security.protocol.map=PLAIN:PLAINTEXT,ADMIN:PLAINTEXT\nproxy.admin.listener.name=ADMIN\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-upstream", up.Addr(0, "INTERNAL"), "-config", config}, &stderr) }()
	listening := regexp.MustCompile(`msg=listening listener=PLAIN addr=(\S+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond, "the command logs no listener:\n%s", stderr.String())
	assert.Contains(t, stderr.String(), "msg=listening listener=ADMIN")
	assert.Equal(t, 3, strings.Count(stderr.String(), `msg="serving an upstream broker" listener=PLAIN`))

	c := dialRaw(t, addr)
	meta := c.roundTrip(t, metadataRequest(1)).(*kmsg.MetadataResponse)
	assert.Len(t, meta.Brokers, 3)

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not stop")
	}
	assert.Contains(t, stderr.String(), "msg=stopped")
	c.requireClosed(t, 5*time.Second)
}

// A SIGHUP that comes while the proxy starts, waiting for its upstream,
// does not end it (Go's default for a signal it does not catch): the
// proxy reloads once it serves, and then drains and exits 0 on SIGINT.
func TestCommandSIGHUPWhileStarting(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the signal's delivery is read in /proc")
	}
	bin := exampleproc.Build(t, "proxy")
	fake := startFakeUpstream(t)
	// The first bootstrap server takes the proxy's connection and answers
	// nothing until the test closes it; the proxy then asks the fake.
	stall, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer stall.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		defer close(accepted)
		if c, err := stall.Accept(); err == nil {
			accepted <- c
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-upstream", stall.Addr().String()+","+fake.addr(), "-set", "listeners=PLAINTEXT://127.0.0.1:0")
	var stderr testkit.SyncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		<-exited
	}()

	var held net.Conn
	select {
	case held = <-accepted:
	case err := <-exited:
		t.Fatalf("the proxy exited (%v) before dialing its upstream:\n%s", err, &stderr)
	case <-ctx.Done():
		t.Fatalf("the proxy did not dial its upstream:\n%s", &stderr)
	}
	defer held.Close()
	require.NotContains(t, stderr.String(), "msg=listening", "the proxy serves already")
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return !sighupPending(cmd.Process.Pid) }, 10*time.Second, time.Millisecond,
		"SIGHUP is not delivered")
	held.Close() // the proxy goes on to the fake

	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(stderr.String(), "msg=\"SIGHUP: reloading") {
		select {
		case err := <-exited:
			exited <- err // for the deferred wait
			t.Fatalf("the proxy exited (%v) instead of reloading:\n%s", err, &stderr)
		case <-ctx.Done():
			t.Fatalf("the proxy did not reload:\n%s", &stderr)
		case <-tick.C:
		}
	}
	out := stderr.String()
	assert.Less(t, strings.Index(out, "msg=listening"), strings.Index(out, "msg=\"SIGHUP: reloading"), "reloaded before serving:\n%s", out)

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err = <-exited
	exited <- err // for the deferred wait
	require.NoError(t, err, "stderr:\n%s", &stderr)
}

// sighupPending reports whether a SIGHUP waits to be delivered to process
// pid, which /proc/PID/status shows in its masks of pending signals (bit
// 0 for signal 1); false once the process has gone.
func sighupPending(pid int) bool {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		name, mask, ok := strings.Cut(line, ":")
		if !ok || name != "SigPnd" && name != "ShdPnd" {
			continue
		}
		if bits, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64); err == nil && bits&1 != 0 {
			return true
		}
	}
	return false
}
