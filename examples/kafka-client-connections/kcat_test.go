package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer collects a child process's output for a test to read while
// the process runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// kcat (librdkafka) logged in as bob with SASL/PLAIN shows in the listing
// as User:bob with librdkafka's KIP-511 software name.
func TestKcatListed(t *testing.T) {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("kcat is not installed")
		}
		t.Fatal("kcat is not installed (CI must have it)")
	}
	c := startCluster(t, 3, nil)
	bob := []string{"-b", c.Brokers[0].Client, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN",
		"-X", "sasl.username=bob", "-X", "sasl.password=bob-secret"}

	// kcat -L reads the cluster's metadata through the same listener.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, append([]string{"-L", "-m", "10"}, bob...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "3 brokers:")
	for _, b := range c.Brokers {
		assert.Contains(t, string(out), "at "+b.Client)
	}

	// A consumer stays connected until its context ends.
	consumerCtx, stop := context.WithCancel(context.Background())
	defer stop()
	consumer := exec.CommandContext(consumerCtx, kcat, append([]string{"-C", "-t", "x", "-o", "end", "-q"}, bob...)...)
	consumer.WaitDelay = 5 * time.Second
	var output lockedBuffer
	consumer.Stdout, consumer.Stderr = &output, &output
	require.NoError(t, consumer.Start())
	exited := make(chan error, 1)
	go func() { exited <- consumer.Wait() }()
	defer func() {
		stop()
		<-exited
	}()

	var listing []struct {
		BrokerId    int32
		Error       string
		Connections []kipConnection
	}
	// Poll until kcat's connections are listed.
	var last cliResult
	listed := func() bool {
		last = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--output", "json", "--principal", "User:bob",
			"--command-config", commandConfig(t, "PLAIN", "admin"))
		if last.code != 0 || json.Unmarshal([]byte(last.stdout), &listing) != nil {
			return false
		}
		for _, b := range listing {
			for _, conn := range b.Connections {
				if conn.SoftwareName == "librdkafka" {
					return true
				}
			}
		}
		return false
	}
	for deadline := time.Now().Add(20 * time.Second); !listed(); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("kcat ended (%v):\n%s", err, output.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcat's connection is not listed:\n%s\n%s\nkcat: %s", last.stdout, last.stderr, output.String())
		}
	}
	t.Logf("listing:\n%s", last.stdout)
	for _, b := range listing {
		assert.Empty(t, b.Error)
		for _, conn := range b.Connections {
			assert.Equal(t, "User:bob", conn.Principal)
			assert.Equal(t, "User", conn.PrincipalType)
			assert.Equal(t, "CLIENT", conn.ListenerName)
			assert.Equal(t, "SASL_PLAINTEXT", conn.SecurityProtocol)
			assert.Equal(t, "librdkafka", conn.SoftwareName)
			assert.Regexp(t, `^v?[0-9]+\.[0-9]+\.[0-9]+`, conn.SoftwareVersion)
		}
	}
	// The consumer fetches from partition 0's leader, broker 0.
	require.NotEmpty(t, listing)
	assert.NotEmpty(t, listing[0].Connections)
	select {
	case err := <-exited:
		exited <- err
		t.Errorf("kcat ended (%v):\n%s", err, output.String())
	default:
	}
}
