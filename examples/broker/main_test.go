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
)

// runBroker runs the command with args and returns its exit status, standard
// output and standard error.
func runBroker(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// rows splits the printed table into its cells, header included.
func rows(table string) [][]string {
	var out [][]string
	for line := range strings.Lines(table) {
		out = append(out, strings.Fields(line))
	}
	return out
}

var header = []string{"LISTENER", "BIND", "ADVERTISED", "PROTOCOL", "PLANE", "INTER-BROKER"}

// defaultTable is the table of the built-in KIP-103 settings, byte for byte.
const defaultTable = `LISTENER     BIND            ADVERTISED      PROTOCOL        PLANE    INTER-BROKER
CLIENT       127.0.0.1:9092  127.0.0.1:9092  SASL_PLAINTEXT  data     -
REPLICATION  127.0.0.1:9093  127.0.0.1:9093  PLAINTEXT       data     yes
INTERNAL     127.0.0.1:9094  127.0.0.1:9094  PLAINTEXT       data     -
CONTROLLER   127.0.0.1:9095  127.0.0.1:9095  PLAINTEXT       control  -
`

// serverProperties exercises the Java .properties syntax: both comment
// styles, ':' and white-space separators and a line continuation.
const serverProperties = `# A broker with an internal and an external listener.
! Comments may also start with an exclamation mark.
listeners : INSIDE://127.0.0.1:19092,\
            OUTSIDE://:19093
listener.security.protocol.map:INSIDE:PLAINTEXT,OUTSIDE:SASL_PLAINTEXT
advertised.listeners = INSIDE://127.0.0.1:19092,OUTSIDE://broker.example.com:19093
inter.broker.listener.name INSIDE
sasl.enabled.mechanisms=PLAIN
listener.name.outside.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
    user_alice="alice-secret";
`

func writeProperties(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server.properties")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestRunPrintsListeners(t *testing.T) {
	config := writeProperties(t, serverProperties)
	// A listener advertised with an empty host is advertised as the
	// machine's host name, as socketserver.Server.Broker does.
	host, err := os.Hostname()
	require.NoError(t, err)
	tests := []struct {
		name       string
		args       []string
		want       [][]string // table rows after the header
		wantStderr string     // "" means stderr must be empty
	}{
		{
			name: "built-in defaults, check",
			args: []string{"-check"},
			want: [][]string{
				{"CLIENT", "127.0.0.1:9092", "127.0.0.1:9092", "SASL_PLAINTEXT", "data", "-"},
				{"REPLICATION", "127.0.0.1:9093", "127.0.0.1:9093", "PLAINTEXT", "data", "yes"},
				{"INTERNAL", "127.0.0.1:9094", "127.0.0.1:9094", "PLAINTEXT", "data", "-"},
				{"CONTROLLER", "127.0.0.1:9095", "127.0.0.1:9095", "PLAINTEXT", "control", "-"},
			},
		},
		{
			// -set alone replaces the built-in settings: every other key
			// takes Kafka's default, so the inter-broker listener is the one
			// named PLAINTEXT and there is no control plane.
			name: "set alone reads over Kafka's defaults",
			args: []string{"-check", "-set", "listeners=PLAINTEXT://:9092"},
			want: [][]string{
				{"PLAINTEXT", ":9092", host + ":9092", "PLAINTEXT", "data", "yes"},
			},
		},
		{
			name: "Kafka's defaults with no listeners key",
			args: []string{"-check", "-set", "broker.id=1"},
			want: [][]string{
				{"PLAINTEXT", ":9092", host + ":9092", "PLAINTEXT", "data", "yes"},
			},
		},
		{
			name: "several sets apply in order",
			args: []string{"-check",
				"-set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
				"-set", "listeners=PLAINTEXT://127.0.0.1:9092,OTHER://[::1]:9093",
				"-set", "advertised.listeners=PLAINTEXT://localhost:9092",
				"-set", "listeners=PLAINTEXT://127.0.0.1:9092,OTHER://[::1]:9094"},
			want: [][]string{
				{"PLAINTEXT", "127.0.0.1:9092", "localhost:9092", "PLAINTEXT", "data", "yes"},
				{"OTHER", "[::1]:9094", "-", "PLAINTEXT", "data", "-"},
			},
		},
		{
			name: "advertised with an empty host",
			args: []string{"-check", "-set", "listeners=PLAINTEXT://127.0.0.1:9092", "-set", "advertised.listeners=PLAINTEXT://:19092"},
			want: [][]string{
				{"PLAINTEXT", "127.0.0.1:9092", host + ":19092", "PLAINTEXT", "data", "yes"},
			},
		},
		{
			name: "config file",
			args: []string{"-check", "-config", config},
			want: [][]string{
				{"INSIDE", "127.0.0.1:19092", "127.0.0.1:19092", "PLAINTEXT", "data", "yes"},
				{"OUTSIDE", ":19093", "broker.example.com:19093", "SASL_PLAINTEXT", "data", "-"},
			},
		},
		{
			name: "set overrides a key of the config file",
			args: []string{"-check", "-config", config, "-set", "advertised.listeners=INSIDE://127.0.0.1:19092"},
			want: [][]string{
				{"INSIDE", "127.0.0.1:19092", "127.0.0.1:19092", "PLAINTEXT", "data", "yes"},
				{"OUTSIDE", ":19093", "-", "SASL_PLAINTEXT", "data", "-"},
			},
		},
		{
			// Kafka reads a broker's JAAS settings only with the listener
			// and mechanism prefix; the bare key is ignored, with a warning.
			name: "un-prefixed sasl.jaas.config is ignored",
			args: []string{"-check", "-config", config, "-set", "sasl.jaas.config=" + defaultJAAS},
			want: [][]string{
				{"INSIDE", "127.0.0.1:19092", "127.0.0.1:19092", "PLAINTEXT", "data", "yes"},
				{"OUTSIDE", ":19093", "broker.example.com:19093", "SASL_PLAINTEXT", "data", "-"},
			},
			wantStderr: "broker: warning: ignoring sasl.jaas.config: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in listener.name.outside.plain.sasl.jaas.config\n",
		},
		{
			name: "listener-prefixed sasl.jaas.config is ignored",
			args: []string{"-check", "-config", config, "-set", "listener.name.outside.sasl.jaas.config=" + defaultJAAS},
			want: [][]string{
				{"INSIDE", "127.0.0.1:19092", "127.0.0.1:19092", "PLAINTEXT", "data", "yes"},
				{"OUTSIDE", ":19093", "broker.example.com:19093", "SASL_PLAINTEXT", "data", "-"},
			},
			wantStderr: "broker: warning: ignoring listener.name.outside.sasl.jaas.config: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in listener.name.outside.plain.sasl.jaas.config\n",
		},
		{
			name: "set adds a control plane to the config file",
			args: []string{"-check", "-config", config, "-set", "control.plane.listener.name=outside"},
			want: [][]string{
				{"INSIDE", "127.0.0.1:19092", "127.0.0.1:19092", "PLAINTEXT", "data", "yes"},
				{"OUTSIDE", ":19093", "broker.example.com:19093", "SASL_PLAINTEXT", "control", "-"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runBroker(t, tt.args...)
			require.Equal(t, 0, code, "stderr: %s", stderr)
			assert.Equal(t, append([][]string{header}, tt.want...), rows(stdout))
			assert.Equal(t, tt.wantStderr, stderr)
		})
	}
}

// With -brokers N the table lists every broker's listeners, each row led by
// its broker's node id, on the ports that broker binds and advertises.
func TestRunPrintsEveryBroker(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	brokerHeader := append([]string{"BROKER"}, header...)
	tests := []struct {
		name string
		args []string
		want [][]string // table rows after the header
	}{
		{
			name: "three brokers from node id 0",
			args: []string{"-brokers", "3", "-set", "listeners=PLAINTEXT://127.0.0.1:9092,OTHER://:9093",
				"-set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
			want: [][]string{
				{"0", "PLAINTEXT", "127.0.0.1:9092", "127.0.0.1:9092", "PLAINTEXT", "data", "yes"},
				{"0", "OTHER", ":9093", host + ":9093", "PLAINTEXT", "data", "-"},
				{"1", "PLAINTEXT", "127.0.0.1:9192", "127.0.0.1:9192", "PLAINTEXT", "data", "yes"},
				{"1", "OTHER", ":9193", host + ":9193", "PLAINTEXT", "data", "-"},
				{"2", "PLAINTEXT", "127.0.0.1:9292", "127.0.0.1:9292", "PLAINTEXT", "data", "yes"},
				{"2", "OTHER", ":9293", host + ":9293", "PLAINTEXT", "data", "-"},
			},
		},
		{
			name: "two brokers from node.id, advertised elsewhere, port 0",
			args: []string{"-brokers", "2", "-set", "node.id=5", "-set", "listeners=PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:9093",
				"-set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
				"-set", "advertised.listeners=PLAINTEXT://localhost:0,OTHER://broker.example.com:19093"},
			want: [][]string{
				{"5", "PLAINTEXT", "127.0.0.1:0", "localhost:0", "PLAINTEXT", "data", "yes"},
				{"5", "OTHER", "127.0.0.1:9093", "broker.example.com:19093", "PLAINTEXT", "data", "-"},
				{"6", "PLAINTEXT", "127.0.0.1:0", "localhost:0", "PLAINTEXT", "data", "yes"},
				{"6", "OTHER", "127.0.0.1:9193", "broker.example.com:19193", "PLAINTEXT", "data", "-"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runBroker(t, append([]string{"-check"}, tt.args...)...)
			require.Equal(t, 0, code, "stderr: %s", stderr)
			assert.Equal(t, append([][]string{brokerHeader}, tt.want...), rows(stdout))
			assert.Empty(t, stderr)
		})
	}
}

func TestRunDefaultTableLayout(t *testing.T) {
	code, stdout, stderr := runBroker(t, "-check")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	assert.Equal(t, defaultTable, stdout)
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	config := writeProperties(t, serverProperties)
	tests := []struct {
		name string
		args []string
		// key is the configuration key the error must name.
		key string
	}{
		{
			name: "unknown protocol in the map",
			args: []string{"-set", "listeners=CLIENT://:9092", "-set", "listener.security.protocol.map=CLIENT:TLS"},
			key:  "listener.security.protocol.map",
		},
		{
			name: "duplicate listener name in the map",
			args: []string{"-set", "listeners=CLIENT://:9092", "-set", "listener.security.protocol.map=CLIENT:PLAINTEXT,client:SSL"},
			key:  "listener.security.protocol.map",
		},
		{
			name: "duplicate port",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"},
			key:  "listeners",
		},
		{
			name: "advertised 0.0.0.0",
			args: []string{"-set", "listeners=PLAINTEXT://0.0.0.0:9092"},
			key:  "advertised.listeners",
		},
		{
			name: "inter-broker listener name and protocol both set",
			args: []string{"-config", config, "-set", "security.inter.broker.protocol=PLAINTEXT"},
			key:  "security.inter.broker.protocol",
		},
		{
			name: "listener missing from the config file's map",
			args: []string{"-config", config, "-set", "listeners=INSIDE://127.0.0.1:19092,REPLICATION://:19094"},
			key:  "listeners",
		},
		{
			name: "control plane is the inter-broker listener",
			args: []string{"-config", config, "-set", "control.plane.listener.name=INSIDE"},
			key:  "control.plane.listener.name",
		},
		{
			name: "port out of range",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:70000"},
			key:  "listeners",
		},
		{
			name: "another broker's port out of range",
			args: []string{"-brokers", "3", "-set", "listeners=PLAINTEXT://127.0.0.1:65500"},
			key:  "listeners",
		},
		{
			name: "another broker's advertised port out of range",
			args: []string{"-brokers", "2", "-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "advertised.listeners=PLAINTEXT://localhost:65500"},
			key:  "advertised.listeners",
		},
		{
			name: "socket server key",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "queued.max.requests=0"},
			key:  "queued.max.requests",
		},
		{
			name: "listener-prefixed socket server key",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "listener.name.plaintext.num.network.threads=x"},
			key:  "listener.name.plaintext.num.network.threads",
		},
		{
			name: "io threads",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "num.io.threads=0"},
			key:  "num.io.threads",
		},
		{
			name: "partitions",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "num.partitions=none"},
			key:  "num.partitions",
		},
		{
			name: "too many partitions",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "num.partitions=10001"},
			key:  "num.partitions",
		},
		{
			name: "auto create",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "auto.create.topics.enable=maybe"},
			key:  "auto.create.topics.enable",
		},
		{
			name: "delete topics",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "delete.topic.enable=maybe"},
			key:  "delete.topic.enable",
		},
		{
			name: "list connections key of another API",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "kafkanet.list.client.connections.api.key=3"},
			key:  "kafkanet.list.client.connections.api.key",
		},
		{
			name: "close connections key of another API",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "kafkanet.close.client.connections.api.key=0"},
			key:  "kafkanet.close.client.connections.api.key",
		},
		{
			name: "close connections key the list key",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "kafkanet.list.client.connections.api.key=1000",
				"-set", "kafkanet.close.client.connections.api.key=1000"},
			key: "kafkanet.close.client.connections.api.key",
		},
		{
			name: "offsets topic partitions",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "offsets.topic.num.partitions=0"},
			key:  "offsets.topic.num.partitions",
		},
		{
			name: "SASL listener without JAAS users",
			args: []string{"-set", "listeners=CLIENT://127.0.0.1:0", "-set", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT", "-set", "inter.broker.listener.name=CLIENT",
				"-set", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256"},
			key: "listener.name.client.plain.sasl.jaas.config",
		},
		{
			name: "SCRAM-only listener without JAAS users",
			args: []string{"-set", "listeners=CLIENT://127.0.0.1:0", "-set", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT", "-set", "inter.broker.listener.name=CLIENT",
				"-set", "sasl.enabled.mechanisms=SCRAM-SHA-256"},
			key: "listener.name.client.scram-sha-256.sasl.jaas.config",
		},
		{
			name: "SCRAM JAAS of another login module",
			args: []string{"-config", config, "-set", "listener.name.outside.sasl.enabled.mechanisms=SCRAM-SHA-512", "-set",
				`listener.name.outside.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";`},
			key: "listener.name.outside.scram-sha-512.sasl.jaas.config",
		},
		{
			name: "SASL listener with only the un-prefixed JAAS",
			args: []string{"-set", "listeners=CLIENT://127.0.0.1:0", "-set", "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT", "-set", "inter.broker.listener.name=CLIENT",
				"-set", "sasl.enabled.mechanisms=PLAIN", "-set", "sasl.jaas.config=" + defaultJAAS},
			key: "listener.name.client.plain.sasl.jaas.config",
		},
		{
			name: "JAAS of another login module",
			args: []string{"-config", config, "-set",
				`listener.name.outside.plain.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required user_alice="a";`},
			key: "listener.name.outside.plain.sasl.jaas.config",
		},
		{
			name: "JAAS user with an empty password",
			args: []string{"-config", config, "-set",
				`listener.name.outside.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="";`},
			key: "listener.name.outside.plain.sasl.jaas.config",
		},
		{
			name: "Kafka's default mechanism GSSAPI",
			args: []string{"-config", config, "-set", "sasl.enabled.mechanisms=GSSAPI"},
			key:  "sasl.enabled.mechanisms",
		},
		{
			name: "OAUTHBEARER without its JAAS configuration",
			args: []string{"-config", config, "-set", "listener.name.outside.sasl.enabled.mechanisms=PLAIN,OAUTHBEARER"},
			key:  "listener.name.outside.oauthbearer.sasl.jaas.config",
		},
		{
			name: "SASL_SSL without a key store",
			args: []string{"-config", config, "-set", "listener.security.protocol.map=INSIDE:PLAINTEXT,OUTSIDE:SASL_SSL"},
			key:  "ssl.keystore.location",
		},
		{
			name: "per-address connection creation rate with a host name",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "kafkanet.ip.connection.creation.rate.overrides=broker.example.com:5"},
			key:  "kafkanet.ip.connection.creation.rate.overrides",
		},
		{
			name: "node id",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "node.id=-1"},
			key:  "node.id",
		},
		{
			name: "broker id",
			args: []string{"-set", "listeners=PLAINTEXT://127.0.0.1:0", "-set", "broker.id=9999999999"},
			key:  "broker.id",
		},
	}
	for _, tt := range tests {
		for _, check := range []bool{true, false} {
			args := tt.args
			name := tt.name
			if check {
				args = append([]string{"-check"}, args...)
				name += " (check)"
			}
			t.Run(name, func(t *testing.T) {
				code, stdout, stderr := runBroker(t, args...)
				assert.Equal(t, 1, code)
				assert.Empty(t, stdout, "an invalid configuration prints no listeners")
				assert.True(t, strings.HasPrefix(stderr, "broker: invalid value "), "stderr: %q", stderr)
				assert.Contains(t, stderr, " for configuration "+tt.key+": ")
				assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line of error: %q", stderr)
			})
		}
	}
}

func TestRunMissingConfigFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.properties")
	code, stdout, stderr := runBroker(t, "-check", "-config", missing)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.True(t, strings.HasPrefix(stderr, "broker: "), "stderr: %q", stderr)
	assert.Contains(t, stderr, "absent.properties")
}

func TestRunBadFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined: -bogus"},
		{"set without =", []string{"-set", "listeners"}, `invalid value "listeners" for flag -set: want key=value`},
		{"set with empty key", []string{"-set", "=PLAINTEXT://:9092"}, `invalid value "=PLAINTEXT://:9092" for flag -set: want key=value`},
		{"config without a path", []string{"-config"}, "flag needs an argument: -config"},
		{"positional argument", []string{"-check", "server.properties"}, `broker: unexpected argument "server.properties"`},
		{"no brokers", []string{"-check", "-brokers", "0"}, "broker: -brokers 0: want 1 to 100"},
		{"brokers not a number", []string{"-brokers", "two"}, `invalid value "two" for flag -brokers`},
		{"unknown log level", []string{"-log-level", "trace"}, `invalid value "trace" for flag -log-level: want debug, info, warn or error`},
		{"negative TLS watch interval", []string{"-check", "-tls-watch-interval", "-1s"}, "broker: -tls-watch-interval -1s: want 0 (reload only on SIGHUP) or more"},
		{"negative TLS watch interval, serving", []string{"-tls-watch-interval", "-10ms", "-set", "listeners=PLAINTEXT://127.0.0.1:0"},
			"broker: -tls-watch-interval -10ms: want 0 (reload only on SIGHUP) or more"},
		{"metrics port out of range", []string{"-check", "-metrics-addr", "127.0.0.1:99999"}, `broker: -metrics-addr "127.0.0.1:99999": address 99999: invalid port`},
		{"metrics port out of range, serving", []string{"-metrics-addr", "127.0.0.1:99999", "-set", "listeners=PLAINTEXT://127.0.0.1:0"},
			`broker: -metrics-addr "127.0.0.1:99999": address 99999: invalid port`},
		{"metrics address without a port", []string{"-check", "-metrics-addr", "127.0.0.1"}, `broker: -metrics-addr "127.0.0.1": address 127.0.0.1: missing port in address`},
		{"metrics port not a port", []string{"-check", "-metrics-addr", "localhost:no-such-service"}, `broker: -metrics-addr "localhost:no-such-service": `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A bad flag stops run before it binds anything; should it
			// serve all the same, the ended context stops it at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, tt.args, &stdout, &stderr)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout.String())
			assert.Contains(t, stderr.String(), tt.wantStderr)
			assert.Contains(t, stderr.String(), "usage: broker [-check] [-config server.properties] [-set key=value]...")
		})
	}
}

func TestRunHelp(t *testing.T) {
	code, stdout, stderr := runBroker(t, "-h")
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "usage: broker")
	assert.Contains(t, stderr, "-set key=value")
	assert.Contains(t, stderr, "-log-level level")
	assert.Contains(t, stderr, "debug, info, warn or error")
}

// go doc and -h list every flag the command defines.
func TestUsageAndDocListEveryFlag(t *testing.T) {
	code, stdout, stderr := runBroker(t, "-h")
	require.Equal(t, 0, code)
	assert.Empty(t, stdout)
	flagdoc.Check(t, ".", flagSet(&options{}, io.Discard), stderr)
}

func TestDefaultPropertiesAreFresh(t *testing.T) {
	// Callers may modify the returned map without affecting later runs.
	p := defaultProperties()
	p["listeners"] = "PLAINTEXT://:1"
	assert.Equal(t, "REPLICATION", defaultProperties()["inter.broker.listener.name"])
	assert.Contains(t, defaultProperties()["listeners"], "CONTROLLER://127.0.0.1:9095")
}
