package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/internal/testkit"
)

// A SIGHUP that arrives while the broker starts neither kills it (the
// default action, exit status 129) nor is lost: the broker handles it once
// it serves. The broker runs as a process of its own, since the test
// process catches SIGHUP for its in-process brokers; it is held in its
// start opening its -audit-log, a FIFO the test opens only after sending
// the signal. It has printed its table by then, so it has passed the top
// of run.
func TestSIGHUPWhileStarting(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "audit.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	config := writeProperties(t, "listeners=PLAINTEXT://127.0.0.1:0\n")

	cmd := exec.Command(exampleproc.Build(t, "broker"), "-config", config, "-audit-log", fifo)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	running := func() bool {
		select {
		case <-exited:
			return false
		default:
			return true
		}
	}

	require.Eventually(t, func() bool { return strings.HasPrefix(stdout.String(), "LISTENER") || !running() },
		30*time.Second, 10*time.Millisecond, "stderr: %s", &stderr)
	require.True(t, running(), "the broker exited before it was held: %v\n%s", cmd.ProcessState, &stderr)
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))

	audit, err := os.Open(fifo) // lets the broker's open of the FIFO return
	require.NoError(t, err)
	defer audit.Close()
	go func() { _, _ = io.Copy(io.Discard, audit) }()

	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), "msg=\"SIGHUP: reloading") || !running()
	}, 30*time.Second, 10*time.Millisecond, "the SIGHUP is handled once the broker serves; stderr: %s", &stderr)
	require.True(t, running(), "the broker exited: %v\n%s", cmd.ProcessState, &stderr)
	assert.Contains(t, stderr.String(), "msg=started")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the broker did not stop within 20 s of SIGTERM:\n%s", &stderr)
	}
	assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "stderr: %s", &stderr)
}

// When the drain of a shutdown runs out of time, the broker closes the
// connections left and still exits 0, as Kafka's controlled shutdown
// does when it has to force a close, with a warning. A client that reads
// no response holds its connection here: the broker cannot finish writing
// a fetch of several megabytes through small socket buffers.
func TestRunExitsZeroWhenTheDrainRunsOut(t *testing.T) {
	saved := shutdownTimeout
	shutdownTimeout = 300 * time.Millisecond
	t.Cleanup(func() { shutdownTimeout = saved })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "socket.send.buffer.bytes=4096"}, &stdout, &stderr)
	}()
	started := regexp.MustCompile(`msg="listener started" broker=0 listener=PLAINTEXT bind=(\S+)`)
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "msg=started") }, 10*time.Second, 10*time.Millisecond, "stderr: %s", &stderr)
	m := started.FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "stderr: %s", &stderr)
	addr := m[1]

	setup := dialRaw(t, addr)
	createTopic(t, setup, "drain", 1)
	value := strings.Repeat("x", 900<<10)
	for range 4 {
		resp := roundTrip[*kmsg.ProduceResponse](setup, produceRequest(1, "drain", 0, value))
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	}

	// The slow reader: a receive buffer fixed small before it connects.
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	nc, err := dialer.Dial("tcp", addr)
	require.NoError(t, err)
	defer nc.Close()
	fetch := fetchRequest(0, "drain", 0, 0)
	fetch.MaxBytes = 64 << 20
	fetch.Topics[0].Partitions[0].PartitionMaxBytes = 64 << 20
	_, err = nc.Write(formatter.AppendRequest(nil, fetch, 1))
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(nc, size[:]) // the response is on its way
	require.NoError(t, err)

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "stderr: %s", &stderr)
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not return within 20 s of its context ending:\n%s", &stderr)
	}
	assert.Contains(t, stderr.String(), `level=WARN msg="shutdown: the drain ran out of time; the connections still open were closed"`)
	assert.NotContains(t, stderr.String(), "level=ERROR")
	assert.Contains(t, stderr.String(), "msg=stopped")
	rest, _ := io.ReadAll(nc) // up to the close, or its reset
	assert.Less(t, len(rest), int(binary.BigEndian.Uint32(size[:])), "the response was cut short: the broker closed the connection")
}

// Only drains that ran out of time make a shutdown error an exit 0: a
// broker's other failure joined to them is still one.
func TestOnlyDrainTimeouts(t *testing.T) {
	timeout := fmt.Errorf("broker 0: %w", context.DeadlineExceeded)
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"one broker's drain", timeout, true},
		{"every broker's drain", errors.Join(timeout, fmt.Errorf("broker 1: %w", context.DeadlineExceeded)), true},
		{"a drain and another failure", errors.Join(timeout, errors.New("broker 1: closing its listener: boom")), false},
		{"another failure alone", errors.New("boom"), false},
		{"nested", errors.Join(errors.Join(timeout), errors.Join(timeout, io.ErrClosedPipe)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, onlyDrainTimeouts(tc.err))
		})
	}
}
