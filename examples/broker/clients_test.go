package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// debianPython is the interpreter of Debian's python3-kafka and
// python3-confluent-kafka packages. A python3 earlier on PATH (pyenv, a
// virtualenv) may not see them.
const debianPython = "/usr/bin/python3"

// clientsDir holds the client scripts TestRealClients runs.
var clientsDir = filepath.Join("testdata", "clients")

// realClient is one client stack and how to check it is installed.
type realClient struct {
	name    string
	install string // what installs it, for the skip message
	// missing returns why the client cannot run here, or "".
	missing func() string
	// command returns the program and arguments running the check script.
	command func(bootstrap, mech, user, password string) []string
}

func pythonClient(name, module, script, pkg string) realClient {
	return realClient{
		name:    name,
		install: "apt-get install " + pkg,
		missing: func() string {
			if _, err := os.Stat(debianPython); err != nil {
				return debianPython + " is missing"
			}
			out, err := exec.Command(debianPython, "-c", "import "+module).CombinedOutput()
			if err != nil {
				return "python module " + module + " is missing: " + strings.TrimSpace(string(out))
			}
			return ""
		},
		command: func(bootstrap, mech, user, password string) []string {
			return []string{debianPython, filepath.Join(clientsDir, script), bootstrap, mech, user, password}
		},
	}
}

var realClients = []realClient{
	pythonClient("kafka-python", "kafka", "kafka_python_check.py", "python3-kafka"),
	pythonClient("confluent-kafka", "confluent_kafka", "confluent_check.py", "python3-confluent-kafka"),
	{
		name:    "kafkajs",
		install: "apt-get install nodejs npm; npm ci --prefix " + filepath.Join("examples", "broker", clientsDir, "node"),
		missing: func() string {
			if _, err := exec.LookPath("node"); err != nil {
				return "node is missing"
			}
			if _, err := os.Stat(filepath.Join(clientsDir, "node", "node_modules", "kafkajs", "package.json")); err != nil {
				return "kafkajs is not installed in " + filepath.Join(clientsDir, "node")
			}
			return ""
		},
		command: func(bootstrap, mech, user, password string) []string {
			return []string{"node", filepath.Join(clientsDir, "kafkajs_check.js"), bootstrap, mech, user, password}
		},
	},
}

// TestRealClients runs other Kafka client stacks against the built-in
// settings' SASL_PLAINTEXT listener: kafka-python (pure Python,
// SaslHandshake v0 with raw tokens), confluent-kafka-python (librdkafka)
// and kafkajs (pure JavaScript), each with every mechanism, and each with a
// wrong password, which must fail with an authentication error rather than
// a timeout. A client that is not installed is skipped, unless CI is set.
func TestRealClients(t *testing.T) {
	c := startDefaultCluster(t)
	bootstrap := addr(t, c, 0, "CLIENT")
	for _, client := range realClients {
		t.Run(client.name, func(t *testing.T) {
			if why := client.missing(); why != "" {
				if os.Getenv("CI") == "" {
					t.Skipf("%s (%s); in CI this fails", why, client.install)
				}
				t.Fatalf("%s is required in CI: %s (%s)", client.name, why, client.install)
			}
			tests := []struct {
				mech, user, password string
				wantOK               bool
			}{
				{"PLAIN", "alice", "alice-secret", true},
				{"SCRAM-SHA-256", "alice", "alice-secret", true},
				{"SCRAM-SHA-512", "bob", "bob-secret", true},
				{"PLAIN", "alice", "wrong-password", false},
				{"SCRAM-SHA-256", "bob", "wrong-password", false},
			}
			for _, tt := range tests {
				name := tt.mech + "/" + tt.user
				if !tt.wantOK {
					name += "/wrong password"
				}
				t.Run(name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					args := client.command(bootstrap, tt.mech, tt.user, tt.password)
					cmd := exec.CommandContext(ctx, args[0], args[1:]...)
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					start := time.Now()
					err := cmd.Run()
					elapsed := time.Since(start)
					require.NoError(t, ctx.Err(), "%s ran into the test's timeout\nstdout: %s\nstderr: %s", client.name, &stdout, &stderr)
					t.Logf("%s %s as %s: %v in %v\nstdout: %s", client.name, tt.mech, tt.user, err, elapsed.Round(time.Millisecond), &stdout)
					if tt.wantOK {
						require.NoError(t, err, "stderr: %s", &stderr)
						assert.True(t, strings.HasPrefix(stdout.String(), "OK "+client.name+" "), "stdout: %s", &stdout)
						assert.Contains(t, stdout.String(), " "+tt.mech+" produced ")
						return
					}
					require.Error(t, err, "a wrong password was accepted\nstdout: %s", &stdout)
					var exit *exec.ExitError
					require.ErrorAs(t, err, &exit)
					assert.Equal(t, 1, exit.ExitCode(), "stderr: %s", &stderr)
					assert.Contains(t, stderr.String(), "FAIL "+client.name+": ")
					assert.Contains(t, stderr.String(), "SASL authentication failed")
					assert.NotContains(t, stderr.String(), "timed out")
					assert.Less(t, elapsed, 15*time.Second, "the failure took as long as a timeout")
				})
			}
		})
	}
}
