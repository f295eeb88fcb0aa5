package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
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

	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-30*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, goTool, "test", "-count=1", "-v", "-timeout=20m", "-skip", kgoSuiteSkip, "github.com/twmb/franz-go/pkg/kgo")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+addr(t, c, 0, "CLIENT"), "KGO_TEST_RF=1", "KGO_LOG_LEVEL=none")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("franz-go's kgo tests ran for %s", time.Since(start).Round(time.Second))

	results := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (\S+)`).FindAllStringSubmatch(string(out), -1) {
		results[m[1]] = append(results[m[1]], m[2])
	}
	t.Logf("top-level tests: %d passed, %d skipped, %d failed %v", len(results["PASS"]), len(results["SKIP"]), len(results["FAIL"]), results["FAIL"])
	require.NoError(t, err, "go test github.com/twmb/franz-go/pkg/kgo:\n%s", tail(out, 200))
	assert.Empty(t, results["FAIL"])
	for _, name := range []string{"TestConsumeRegex", "TestGroupETL", "TestIssue523"} {
		assert.Contains(t, results["PASS"], name)
	}
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(string(out), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
