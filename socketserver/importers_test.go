package socketserver_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A fresh module that imports socketserver and connregistry gets none of
// the examples' or the plugins' dependencies in its build list, Prometheus
// and OpenTelemetry above all: the examples and each plugin (plugin/knprom,
// plugin/knotel) are modules of their own, so that minimal version
// selection never raises an importer's own versions of them.
func TestImportersBuildList(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("go.mod", "module example.com/importer\n\ngo 1.26.0\n\nrequire github.com/kafkanet/kafkanet v0.0.0\n\n"+
		"replace github.com/kafkanet/kafkanet => "+filepath.ToSlash(root)+"\n")
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	write("go.sum", string(sum))
	write("main.go", `package main

import (
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
)

func main() { _, _ = socketserver.New(socketserver.Config{RegistryHistory: connregistry.DefaultHistorySize}) }
`)
	gocmd := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	gocmd("mod", "tidy")
	all := gocmd("list", "-m", "all")
	require.Contains(t, all, "github.com/twmb/franz-go/pkg/kmsg", "the build list as listed:\n%s", all)
	for _, heavy := range []string{
		"github.com/prometheus/", "github.com/IBM/sarama", "github.com/segmentio/kafka-go",
		"github.com/twmb/franz-go/pkg/kfake", "github.com/rcrowley/go-metrics",
		"go.opentelemetry.io/", "google.golang.org/grpc", "github.com/kafkanet/kafkanet/plugin/",
	} {
		require.NotContains(t, all, heavy, "an importer's build list holds %s:\n%s", heavy, all)
	}
}

// Pay for what you use: socketserver, security and listener, and
// everything they import, import neither go-jose nor the oauthbearer
// package, whose JWKS validator needs it and an HTTP client; a host that
// serves OAUTHBEARER imports security/sasl/oauthbearer itself. (examples/embed's
// TestProgramLinksNoJOSE checks a program's binary.)
func TestImportsNoJOSE(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	for _, pkg := range []string{"./socketserver", "./security", "./listener"} {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go list -deps %s: %s", pkg, out)
		deps := strings.Fields(string(out))
		require.Contains(t, deps, "github.com/kafkanet/kafkanet/protocolmap", "go list -deps %s lists its imports", pkg)
		for _, dep := range deps {
			for _, heavy := range []string{"github.com/go-jose/", "github.com/kafkanet/kafkanet/security/sasl/oauthbearer", "net/http"} {
				require.False(t, dep == heavy || strings.HasPrefix(dep, heavy),
					"%s imports %s, which only a host that serves OAUTHBEARER should pay for:\n%s", pkg, dep, out)
			}
		}
	}
}

// listener knows nothing of who is talking: it imports neither security
// nor anything beneath it (imports run security → listener → protocolmap).
func TestListenerImportsNoSecurity(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../listener")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	require.Contains(t, strings.Fields(string(out)), "github.com/kafkanet/kafkanet/protocolmap", "go list -deps lists listener's imports")
	for _, dep := range strings.Fields(string(out)) {
		require.False(t, strings.HasPrefix(dep, "github.com/kafkanet/kafkanet/security"), "listener imports %s:\n%s", dep, out)
	}
}

// socketserver, connregistry and listener link neither kgo nor its
// compression libraries: reading records (socketserver/records) is a
// package of its own, so that only the hosts that use it pay for them.
func TestImportersLinkNoKgo(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command("go", "list", "-deps", ".", "../connregistry", "../listener/...", "../security/...")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	for _, heavy := range []string{"github.com/twmb/franz-go/pkg/kgo", "github.com/klauspost/compress", "github.com/pierrec/lz4"} {
		require.NotContains(t, string(out), heavy, "socketserver links %s", heavy)
	}
	cmd = exec.Command("go", "list", "-deps", "./records")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	require.Contains(t, string(out), "github.com/twmb/franz-go/pkg/kgo\n", "records uses kgo's decompressors")
}
