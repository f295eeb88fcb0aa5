package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/examples/internal/flagdoc"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

func TestMain(m *testing.M) { os.Exit(bindcheck.Wrap(m).Run()) }

func TestFindTargets(t *testing.T) {
	root := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, path), []byte(text), 0o644))
	}
	write("b/x_test.go", "package b\nfunc FuzzB(f *testing.F) {}\nfunc FuzzA(fz *testing.F) {}\n// func FuzzNot(f *testing.F)\nfunc TestC(t *testing.T) {}\n")
	write("a/y_test.go", "package a\nfunc FuzzZ(f *testing.F) {}\n")
	write("a/y.go", "package a\nfunc FuzzNotATest(f *testing.F) {}\n")
	write("a/testdata/z_test.go", "package z\nfunc FuzzInTestdata(f *testing.F) {}\n")
	write("node_modules/m/q_test.go", "package m\nfunc FuzzInModules(f *testing.F) {}\n")
	got, err := findTargets(root)
	require.NoError(t, err)
	assert.Equal(t, []target{{"./a", "FuzzZ"}, {"./b", "FuzzA"}, {"./b", "FuzzB"}}, got)
}

// TestModuleTargets checks that the module's own targets are found, in
// every package that has parsers of untrusted bytes.
func TestModuleTargets(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-list"}, &out, &errOut), errOut.String())
	for _, want := range []string{
		"./socketserver FuzzReadFrame", "./socketserver FuzzParseHeaderPrefix", "./socketserver FuzzSASLPreAuth",
		"./config FuzzConfig", "./config FuzzPrincipalOverrides", "./socketserver FuzzProxyHeader", "./connregistry FuzzDecode", "./security/sasl FuzzSCRAMClientFirst",
		"./security/sasl FuzzPlainMessage", "./config FuzzParseProperties", "./protocolmap FuzzParse",
	} {
		assert.Contains(t, out.String(), want+"\n")
	}
}

// TestEveryTargetBriefly fuzzes every target of the module for 1,000
// executions. A count, not a duration: a -fuzztime duration lets go
// test's own deadline escape as a failure on a loaded machine
// (golang/go#75804, which CI hit with go1.26.8). It is slow (a build per
// package), so it runs in CI (CI set) or when KAFKANET_FUZZ_SMOKE is set.
func TestEveryTargetBriefly(t *testing.T) {
	if os.Getenv("CI") == "" && os.Getenv("KAFKANET_FUZZ_SMOKE") == "" {
		t.Skip("set CI or KAFKANET_FUZZ_SMOKE to fuzz every target briefly")
	}
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-fuzztime", "1000x"}, &out, &errOut)
	t.Log("\n" + out.String())
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	assert.GreaterOrEqual(t, strings.Count(out.String(), " ok\n"), 17)
}

func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		isCount  bool
	}{
		{in: "10m", want: "10m0s"},
		{in: "2s", want: "2s"},
		{in: "1000x", want: "1000x", isCount: true},
		{in: "0x"},
		{in: "0s"},
		{in: "-1s"},
		{in: "x"},
		{in: "10"},
		{in: "1e3x"},
		{in: ""},
	} {
		got, err := parseBudget(tc.in)
		if tc.want == "" {
			require.Error(t, err, tc.in)
			assert.Contains(t, err.Error(), "-fuzztime")
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, budget(tc.want), got)
		assert.Equal(t, tc.isCount, got.isCount(), tc.in)
	}
}

func TestBareDeadline(t *testing.T) {
	bare := "fuzz: elapsed: 2s, execs: 17337 (8196/sec)\n--- FAIL: FuzzX (2.15s)\n    context deadline exceeded\nFAIL\nexit status 1"
	crash := "--- FAIL: FuzzX (0.10s)\n    context deadline exceeded\n\n    Failing input written to testdata/fuzz/FuzzX/0123\nFAIL"
	panicked := "--- FAIL: FuzzX (0.10s)\n    panic: index out of range\nFAIL"
	assert.True(t, bareDeadline(bare))
	assert.False(t, bareDeadline(crash))
	assert.False(t, bareDeadline(panicked))
}

func TestBadFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 2, run(context.Background(), []string{"-run", "("}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-run")
	errOut.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-fuzztime", "0x"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "-fuzztime")
	assert.Equal(t, 1, run(context.Background(), []string{"-run", "NoSuchTarget", "-list"}, &out, &errOut))
	assert.Contains(t, errOut.String(), "no targets")
	errOut.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"-list", "extra"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `unexpected argument "extra"`)
}

// go doc and -h list every flag the command defines; -h is no error.
func TestUsageAndDocListEveryFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &out, &errOut))
	assert.Empty(t, out.String())
	flagdoc.Check(t, ".", flagSet(&options{}, io.Discard), errOut.String())
}
