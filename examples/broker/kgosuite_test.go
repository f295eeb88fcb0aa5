package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kgoSuiteSkip is the -skip pattern of franz-go's kgo integration tests
// that need what the example broker does not have: transactions.
const kgoSuiteSkip = "TestTxnEtl"

// TestKgoIntegrationSuite runs franz-go's own kgo integration tests, of the
// franz-go version in go.mod and as they ship, against one example broker
// on loopback: `go test github.com/twmb/franz-go/pkg/kgo` with KGO_SEEDS
// naming the broker and KGO_TEST_RF=1, as franz-go's CI runs them against
// one broker. Only the transaction tests are skipped; the tests of share
// groups, KIP-848 and SASL skip themselves when the broker lacks them. They
// create and delete topics, find __consumer_offsets flagged internal after
// a FindCoordinator (TestConsumeRegex), chain consumer groups (range and
// cooperative-sticky balancers, static members) over 500000 records, and
// more.
func TestKgoIntegrationSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs franz-go's kgo integration tests, a minute or more")
	}
	goTool := requireTool(t, "go", "the Go toolchain")
	c := startTestCluster(t, 1)

	// franz-go's tests get a timeout of their own that ends 90 s before
	// this test's deadline, a minute before the context that stops them:
	// a test of theirs that hangs then makes their
	// binary panic, naming the tests still running, which this test
	// reports, where being killed at its own deadline would tell nothing.
	ctx, timeout := t.Context(), 20*time.Minute
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
		timeout = min(timeout, time.Until(deadline)-90*time.Second)
		require.Positive(t, timeout, "too little time left for franz-go's kgo tests: run with a larger -timeout")
	}
	cmd := exec.CommandContext(ctx, goTool, "test", "-count=1", "-v", "-timeout="+timeout.Round(time.Second).String(), "-skip", kgoSuiteSkip, "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+addr(t, c, 0, "CLIENT"), "KGO_TEST_RF=1", "KGO_LOG_LEVEL=none")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("franz-go's kgo tests ran for %s", time.Since(start).Round(time.Second))

	results := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (\S+)`).FindAllStringSubmatch(string(out), -1) {
		results[m[1]] = append(results[m[1]], m[2])
	}
	t.Logf("top-level tests: %d passed, %d skipped, %d failed %v; the longest: %s", len(results["PASS"]), len(results["SKIP"]), len(results["FAIL"]), results["FAIL"], longestTests(out, 5))
	if running := timedOutTests(out); running != "" {
		t.Fatalf("franz-go's kgo tests timed out after %s; still running:\n%s", timeout.Round(time.Second), running)
	}
	require.NoError(t, err, "go test github.com/twmb/franz-go/pkg/kgo:\n%s", tail(out, 200))
	assert.Empty(t, results["FAIL"])
	for _, name := range []string{"TestConsumeRegex", "TestGroupETL", "TestIssue523"} {
		assert.Contains(t, results["PASS"], name)
	}
}

// longestTests returns the n top-level tests of go test -v's output out
// that ran longest, with their times, longest first.
func longestTests(out []byte, n int) string {
	type ran struct {
		name string
		took time.Duration
	}
	var all []ran
	for _, m := range regexp.MustCompile(`(?m)^--- (?:PASS|FAIL): (\S+) \(([0-9.]+s)\)`).FindAllStringSubmatch(string(out), -1) {
		if d, err := time.ParseDuration(m[2]); err == nil {
			all = append(all, ran{m[1], d})
		}
	}
	slices.SortFunc(all, func(a, b ran) int { return cmp.Compare(b.took, a.took) })
	var names []string
	for _, r := range all[:min(n, len(all))] {
		names = append(names, fmt.Sprintf("%s %s", r.name, r.took))
	}
	return strings.Join(names, ", ")
}

// timedOutTests returns the tests that go test's output out lists as still
// running when its -timeout ended them, or "" if it did not.
func timedOutTests(out []byte) string {
	_, after, ok := strings.Cut(string(out), "panic: test timed out after ")
	if !ok {
		return ""
	}
	_, running, _ := strings.Cut(after, "running tests:\n")
	running, _, _ = strings.Cut(running, "\n\n")
	return running
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(string(out), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// TestKgoSuiteOutput checks how TestKgoIntegrationSuite reads go test's
// output: the tests still running when its -timeout ended it, and the
// longest tests.
func TestKgoSuiteOutput(t *testing.T) {
	for _, tc := range []struct {
		name, out, running, longest string
	}{
		{"passed", "--- PASS: TestA (1.50s)\n--- PASS: TestB (26.02s)\n--- SKIP: TestC (0.00s)\n--- PASS: TestD (0.10s)\nok\n", "", "TestB 26.02s, TestA 1.5s"},
		{"timed out", "--- PASS: TestA (1.50s)\npanic: test timed out after 7m0s\n\trunning tests:\n\t\tTestGroupETL (6m12s)\n\t\tTestIssue337 (2s)\n\ngoroutine 1 [running]:\n", "\t\tTestGroupETL (6m12s)\n\t\tTestIssue337 (2s)", "TestA 1.5s"},
		{"nothing ran", "FAIL\texit status 1\n", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.running, timedOutTests([]byte(tc.out)))
			assert.Equal(t, tc.longest, longestTests([]byte(tc.out), 2))
		})
	}
}
