package config_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Imports run one way: examples and plugins -> config -> socketserver ->
// security -> listener -> protocolmap. No runtime package imports the
// configuration layer, so that a host that configures in code links no
// parser of properties, and config builds on socketserver. (socketservertest
// is a host of the socket server, as the examples are, and reads properties
// with config.)
func TestRuntimePackagesImportNoConfig(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	const self = "github.com/kafkanet/kafkanet/config"
	deps := func(pkg string) []string {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go list -deps %s: %s", pkg, out)
		return strings.Fields(string(out))
	}
	require.Contains(t, deps("./config"), "github.com/kafkanet/kafkanet/socketserver", "config is the layer above the socket server")
	for _, pkg := range []string{
		"./socketserver", "./socketserver/records", "./socketserver/quota", "./security", "./security/sasl",
		"./security/sasl/oauthbearer", "./listener", "./protocolmap", "./connregistry", "./connregistry/connadmin",
	} {
		for _, dep := range deps(pkg) {
			require.NotEqual(t, self, dep, "%s imports the configuration layer", pkg)
		}
	}
}
