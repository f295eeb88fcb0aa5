package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/flagdoc"
)

// cliResult is what one run of the command did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command in-process, as a shell would, with a deadline.
func runCLI(t testing.TB, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// go doc and -h list every flag the command defines.
func TestUsageAndDocListEveryFlag(t *testing.T) {
	res := runCLI(t, "-h")
	require.Equal(t, 0, res.code)
	assert.Empty(t, res.stdout)
	flagdoc.Check(t, ".", flagSet(&options{}, io.Discard), res.stderr)
}

// table splits the command's table output into its header and rows, each
// a list of tokens (no cell holds white space).
func table(t testing.TB, out string) (header []string, rows []map[string]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	header = strings.Fields(lines[0])
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		require.Len(t, f, len(header), "row %q", l)
		row := map[string]string{}
		for i, h := range header {
			row[h] = f[i]
		}
		rows = append(rows, row)
	}
	return header, rows
}

func rowAt(rows []map[string]string, addr string) (map[string]string, bool) {
	for _, r := range rows {
		if net.JoinHostPort(r["CLIENT-ADDRESS"], r["PORT"]) == addr {
			return r, true
		}
	}
	return nil, false
}

var (
	tableHeader = []string{"BROKER", "CONNECTION-ID", "PRINCIPAL", "CLIENT-ADDRESS", "PORT", "LISTENER", "PROTOCOL", "SERVER-NAME", "SOFTWARE", "CONNECTED-SINCE", "THROTTLED-UNTIL", "REQ/S", "IN-B/S", "OUT-B/S"}
	software    = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9.-]*/[a-zA-Z0-9][a-zA-Z0-9.-]*$`)
)

// parseSince checks a CONNECTED-SINCE cell: RFC 3339 in UTC, within
// [from, to] at the second's precision the table shows.
func parseSince(t testing.TB, s string, from, to time.Time) {
	t.Helper()
	assert.True(t, strings.HasSuffix(s, "Z"), "%q is not UTC", s)
	ts, err := time.Parse(time.RFC3339, s)
	if assert.NoError(t, err) {
		assert.False(t, ts.Before(from.Truncate(time.Second)), "%s before %s", ts, from)
		assert.False(t, ts.After(to), "%s after %s", ts, to)
	}
}

// The table of a cluster of three: a BROKER column, then KIP-1329's fields;
// each broker lists its own clients.
func TestTableSeveralBrokers(t *testing.T) {
	c := startCluster(t, 3, nil)
	start := time.Now()
	_, aliceAddr := connectClient(t, c.Brokers[0], "PLAIN", "alice")
	_, bobAddr := connectClient(t, c.Brokers[2], "SCRAM-SHA-256", "bob")
	res := runCLI(t, "--bootstrap-server", c.Brokers[1].Client, "--list", "--command-config", commandConfig(t, "PLAIN", "admin"))
	end := time.Now()
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stderr)

	header, rows := table(t, res.stdout)
	assert.Equal(t, tableHeader, header)
	brokers := map[string]bool{}
	for _, r := range rows {
		brokers[r["BROKER"]] = true
		assert.True(t, software.MatchString(r["SOFTWARE"]), "SOFTWARE %q is not name/version", r["SOFTWARE"])
		parseSince(t, r["CONNECTED-SINCE"], start, end)
		assert.Equal(t, "127.0.0.1", r["CLIENT-ADDRESS"])
		assert.Contains(t, r["CONNECTION-ID"], "-"+net.JoinHostPort(r["CLIENT-ADDRESS"], r["PORT"])+"-")
	}
	assert.Equal(t, map[string]bool{"0": true, "1": true, "2": true}, brokers, "every broker lists the command's own connection")

	alice, ok := rowAt(rows, aliceAddr)
	require.True(t, ok, "alice's connection %s is missing:\n%s", aliceAddr, res.stdout)
	assert.Equal(t, "0", alice["BROKER"])
	assert.Equal(t, "User:alice", alice["PRINCIPAL"])
	assert.Equal(t, "CLIENT", alice["LISTENER"])
	assert.Equal(t, "SASL_PLAINTEXT", alice["PROTOCOL"])
	assert.True(t, strings.HasPrefix(alice["SOFTWARE"], "kgo/"), alice["SOFTWARE"])

	bob, ok := rowAt(rows, bobAddr)
	require.True(t, ok, "bob's connection %s is missing:\n%s", bobAddr, res.stdout)
	assert.Equal(t, "2", bob["BROKER"])
	assert.Equal(t, "User:bob", bob["PRINCIPAL"])

	// Filters narrow the table.
	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", commandConfig(t, "PLAIN", "admin"),
		"--principal", "User:bob", "--client-address", "127.0.0.0/8", "--listener", "client")
	require.Equal(t, 0, res.code, res.stderr)
	_, rows = table(t, res.stdout)
	require.Len(t, rows, 1, res.stdout)
	assert.Equal(t, "2", rows[0]["BROKER"])
	assert.Equal(t, bobAddr, net.JoinHostPort(rows[0]["CLIENT-ADDRESS"], rows[0]["PORT"]))

	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", commandConfig(t, "PLAIN", "admin"),
		"--client-address", "::1")
	require.Equal(t, 0, res.code, res.stderr)
	header, rows = table(t, res.stdout)
	assert.Equal(t, tableHeader, header)
	assert.Empty(t, rows)
}

// With one broker there is no BROKER column.
func TestTableOneBroker(t *testing.T) {
	c := startCluster(t, 1, nil)
	start := time.Now()
	_, bobAddr := connectClient(t, c.Brokers[0], "SCRAM-SHA-256", "bob")
	res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", commandConfig(t, "SCRAM-SHA-256", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	header, rows := table(t, res.stdout)
	assert.Equal(t, tableHeader[1:], header)
	bob, ok := rowAt(rows, bobAddr)
	require.True(t, ok, res.stdout)
	assert.Equal(t, "User:bob", bob["PRINCIPAL"])
	assert.True(t, software.MatchString(bob["SOFTWARE"]), bob["SOFTWARE"])
	parseSince(t, bob["CONNECTED-SINCE"], start, time.Now())
	var admins int
	for _, r := range rows {
		if r["PRINCIPAL"] == "User:admin" {
			admins++
		}
	}
	assert.Positive(t, admins, "the command's own SCRAM connection is listed")
}

// kipConnection has exactly KIP-1329's field names.
type kipConnection struct {
	ConnectionId     string
	Principal        string
	PrincipalType    string
	ClientAddress    string
	ClientPort       int32
	ListenerName     string
	SecurityProtocol string
	SoftwareName     string
	SoftwareVersion  string
	ConnectedSince   string
}

// --output json gives, per broker, its id and its connections under
// KIP-1329's field names.
func TestJSON(t *testing.T) {
	c := startCluster(t, 3, nil)
	start := time.Now()
	_, aliceAddr := connectClient(t, c.Brokers[1], "PLAIN", "alice")
	res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--output", "json", "--command-config", commandConfig(t, "PLAIN", "admin"))
	end := time.Now()
	require.Equal(t, 0, res.code, res.stderr)

	var raw []map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &raw), res.stdout)
	require.Len(t, raw, 3)
	for i, b := range raw {
		var id int32
		require.NoError(t, json.Unmarshal(b["BrokerId"], &id))
		assert.Equal(t, int32(i), id)
		assert.NotContains(t, b, "Error")
		var conns []map[string]any
		require.NoError(t, json.Unmarshal(b["Connections"], &conns))
		require.NotEmpty(t, conns)
		for _, conn := range conns {
			for _, k := range []string{"ConnectionId", "Principal", "PrincipalType", "ClientAddress", "ClientPort",
				"ListenerName", "SecurityProtocol", "SoftwareName", "SoftwareVersion", "ConnectedSince"} {
				assert.Contains(t, conn, k)
			}
		}
	}

	var brokers []struct {
		BrokerId    int32
		Connections []kipConnection
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &brokers))
	var alice *kipConnection
	for i, conn := range brokers[1].Connections {
		if net.JoinHostPort(conn.ClientAddress, strconv.Itoa(int(conn.ClientPort))) == aliceAddr {
			alice = &brokers[1].Connections[i]
		}
	}
	require.NotNil(t, alice, "alice's connection %s is not on broker 1:\n%s", aliceAddr, res.stdout)
	assert.Equal(t, "User:alice", alice.Principal)
	assert.Equal(t, "User", alice.PrincipalType)
	assert.Equal(t, "CLIENT", alice.ListenerName)
	assert.Equal(t, "SASL_PLAINTEXT", alice.SecurityProtocol)
	assert.Equal(t, "kgo", alice.SoftwareName)
	assert.NotEmpty(t, alice.SoftwareVersion)
	assert.Contains(t, alice.ConnectionId, "-"+aliceAddr+"-")
	parseSince(t, alice.ConnectedSince, start, end)
	for _, b := range []int{0, 2} {
		for _, conn := range brokers[b].Connections {
			assert.NotEqual(t, "User:alice", conn.Principal, "broker %d", b)
		}
	}

	// The extras are there too, under their own names.
	var extras []struct {
		Connections []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &extras))
	for _, conn := range extras[1].Connections {
		if conn["Principal"] == "User:alice" {
			assert.Equal(t, "PLAIN", conn["SaslMechanism"])
			assert.Equal(t, "ready", conn["State"])
			assert.Equal(t, "data", conn["Plane"])
			assert.Equal(t, "kgo", conn["ClientId"])
			assert.NotContains(t, conn, "ClosedAt")
		}
	}
}

// A principal without DESCRIBE on CLUSTER: exit status 1, every refusal on
// standard error naming the principal and the broker, and what the brokers
// that allow it answered still printed.
func TestNotAuthorized(t *testing.T) {
	c := startCluster(t, 3, func(i int, o *brokerOptions) {
		if i == 1 {
			o.SuperUsers = "User:admin;User:alice"
		}
	})
	_, bobAddr := connectClient(t, c.Brokers[1], "SCRAM-SHA-256", "bob")
	res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", commandConfig(t, "PLAIN", "alice"))
	assert.Equal(t, 1, res.code)
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	require.Len(t, lines, 2, res.stderr)
	for i, b := range []string{"0", "2"} {
		assert.Contains(t, lines[i], "not authorized")
		assert.Contains(t, lines[i], "User:alice")
		assert.Contains(t, lines[i], "broker "+b)
		assert.Contains(t, lines[i], "DESCRIBE on CLUSTER")
	}
	assert.NotContains(t, res.stderr, "broker 1")

	header, rows := table(t, res.stdout)
	assert.Equal(t, tableHeader, header)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		assert.Equal(t, "1", r["BROKER"], "only broker 1 answered")
	}
	_, ok := rowAt(rows, bobAddr)
	assert.True(t, ok, "broker 1's connections are printed:\n%s", res.stdout)

	// In JSON the refusals are in each broker's Error.
	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--output", "json", "--command-config", commandConfig(t, "PLAIN", "alice"))
	assert.Equal(t, 1, res.code)
	var brokers []struct {
		BrokerId    int32
		Error       string
		Connections []kipConnection
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &brokers), res.stdout)
	require.Len(t, brokers, 3)
	assert.Contains(t, brokers[0].Error, "CLUSTER_AUTHORIZATION_FAILED")
	assert.Empty(t, brokers[0].Connections)
	assert.Empty(t, brokers[1].Error)
	assert.NotEmpty(t, brokers[1].Connections)
	assert.Contains(t, brokers[2].Error, "CLUSTER_AUTHORIZATION_FAILED")
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--list"},
		{"--bootstrap-server", "127.0.0.1:9"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--output", "xml"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--api-key", "-1"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--api-key", "32768"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--api-key", "ninety-three"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--no-such-flag"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "extra"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--close"},
		{"--bootstrap-server", "127.0.0.1:9", "--close"},
		{"--bootstrap-server", "127.0.0.1:9", "--close", "--principal", "User:a", "--include-closed"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--connection-id", "x"},
		{"--bootstrap-server", "127.0.0.1:9", "--close", "--principal", "User:a", "--close-api-key", "40000"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--sort-by", "busiest"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--sort-by", "Requests"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--top", "0"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--top", "-3"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--top", "2", "--include-closed"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--sort-by", "idle", "--include-closed"},
		{"--bootstrap-server", "127.0.0.1:9", "--close", "--principal", "User:a", "--sort-by", "age"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--principal", "alice"},
		{"--bootstrap-server", "127.0.0.1:9", "--close", "--client-address", "not-an-ip"},
		{"--bootstrap-server", "127.0.0.1:9", "--list", "--listener", ""},
	} {
		res := runCLI(t, args...)
		assert.Equal(t, 2, res.code, "%q", args)
		assert.NotEmpty(t, res.stderr, "%q", args)
		assert.Empty(t, res.stdout, "%q", args)
	}
	res := runCLI(t, "-h")
	assert.Equal(t, 0, res.code)
	assert.Contains(t, res.stderr, "--include-closed")
}

// A bad flag value is reported naming the flag, the value and what it
// must be, before any broker is dialled (127.0.0.1:9 refuses): a filter
// the brokers would refuse with INVALID_REQUEST is a bad flag too.
func TestBadFlagValues(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"principal without a type", []string{"--list", "--principal", "alice"},
			`kafka-client-connections: --principal: connregistry: invalid filter: principal "alice": expected a string in format principalType:principalName`},
		{"client address not an address", []string{"--close", "--client-address", "not-an-ip"},
			`kafka-client-connections: --client-address: connregistry: invalid filter: client address "not-an-ip"`},
		{"bad CIDR prefix", []string{"--list", "--client-address", "10.0.0.0/33"},
			`kafka-client-connections: --client-address: connregistry: invalid filter: client address "10.0.0.0/33"`},
		{"blank listener", []string{"--close", "--listener", " "},
			"kafka-client-connections: --listener: connregistry: invalid filter: listener name is blank"},
		{"api key above the range", []string{"--list", "--api-key", "32768"},
			"kafka-client-connections: --api-key 32768: want 0 to 32767"},
		{"negative api key", []string{"--list", "--api-key", "-1"},
			"kafka-client-connections: --api-key -1: want 0 to 32767"},
		{"close api key above the range", []string{"--close", "--principal", "User:a", "--close-api-key", "40000"},
			"kafka-client-connections: --close-api-key 40000: want 0 to 32767"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, append([]string{"--bootstrap-server", "127.0.0.1:9"}, tt.args...)...)
			assert.Equal(t, 2, res.code)
			assert.Empty(t, res.stdout)
			assert.True(t, strings.HasPrefix(res.stderr, tt.want), "stderr: %q", res.stderr)
			assert.Equal(t, 1, strings.Count(res.stderr, "\n"), "one line: %q", res.stderr)
		})
	}
}

// usageOf returns each flag's help text in the usage -h prints.
func usageOf(t *testing.T) map[string]string {
	t.Helper()
	res := runCLI(t, "-h")
	require.Equal(t, 0, res.code)
	help := map[string]string{}
	entry := regexp.MustCompile(`(?m)^  --(\S+).*\n    \t(.*)$`)
	for _, m := range entry.FindAllStringSubmatch(res.stderr, -1) {
		help[m[1]] = m[2]
	}
	require.NotEmpty(t, help, res.stderr)
	return help
}

// The usage says what each flag takes and goes with, and shows no default
// the command would refuse.
func TestUsageTexts(t *testing.T) {
	help := usageOf(t)
	for _, tt := range []struct {
		flag    string
		want    []string
		notWant []string
	}{
		{flag: "top", want: []string{"with --list", "at least 1"}, notWant: []string{"(default 0)"}},
		{flag: "include-closed", want: []string{"with --list"}},
		{flag: "api-key", want: []string{"0 to 32767", "(default 93)"}},
		{flag: "close-api-key", want: []string{"0 to 32767", "(default 1093)"}},
		{flag: "output", want: []string{"(default table)"}},
		{flag: "command-config", want: []string{"librdkafka's sasl.username, sasl.password"}},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			text, ok := help[tt.flag]
			require.True(t, ok, "no --%s in the usage", tt.flag)
			for _, w := range tt.want {
				assert.Contains(t, text, w)
			}
			for _, w := range tt.notWant {
				assert.NotContains(t, text, w)
			}
		})
	}
}

// The package documentation says whose keys --command-config reads:
// sasl.username and sasl.password are librdkafka's, not Kafka's Java
// client's, which takes the user from sasl.jaas.config.
func TestDocNamesWhoseKeysCommandConfigReads(t *testing.T) {
	doc := strings.Join(strings.Fields(flagdoc.Doc(t, ".")), " ")
	assert.Contains(t, doc, "librdkafka's keys sasl.username and sasl.password")
}

// Errors the command finds before any broker answers: exit status 1.
func TestSetupErrors(t *testing.T) {
	c := startCluster(t, 1, nil)
	dir := t.TempDir()
	n := 0
	bad := func(content string) string {
		n++
		path := filepath.Join(dir, fmt.Sprintf("bad%d.properties", n))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	for name, tc := range map[string]struct {
		config string
		want   string
	}{
		"missing file":   {filepath.Join(dir, "missing.properties"), "missing.properties"},
		"mechanism":      {bad("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.username=admin\n"), "GSSAPI"},
		"protocol":       {bad("security.protocol=TLS\n"), "TLS"},
		"no username":    {bad("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"), "sasl.username"},
		"wrong password": {bad("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\nsasl.password=nope\n"), "finding the brokers"},
	} {
		t.Run(name, func(t *testing.T) {
			res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", tc.config)
			assert.Equal(t, 1, res.code)
			assert.Contains(t, res.stderr, tc.want)
			assert.Empty(t, res.stdout)
		})
	}
}

// --include-closed adds when and why each connection closed.
func TestIncludeClosed(t *testing.T) {
	c := startCluster(t, 1, nil)
	start := time.Now()
	alice, aliceAddr := connectClient(t, c.Brokers[0], "PLAIN", "alice")
	alice.Close()
	f := connregistry.Filter{Principal: ptr("User:alice")}
	require.NoError(t, f.Validate())
	require.Eventually(t, func() bool { return len(c.Brokers[0].Registry.Closed(f)) == 1 }, 10*time.Second, 10*time.Millisecond)

	res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--include-closed", "--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	header, rows := table(t, res.stdout)
	assert.Equal(t, append(slices.Clone(tableHeader[1:]), "CLOSED-AT", "CLOSE-REASON"), header)
	closed, ok := rowAt(rows, aliceAddr)
	require.True(t, ok, res.stdout)
	assert.Equal(t, "User:alice", closed["PRINCIPAL"])
	assert.Equal(t, "client-closed", closed["CLOSE-REASON"])
	parseSince(t, closed["CLOSED-AT"], start, time.Now())
	for _, r := range rows {
		if r["PRINCIPAL"] == "User:admin" {
			assert.Equal(t, "-", r["CLOSED-AT"], "a live connection")
			assert.Equal(t, "-", r["CLOSE-REASON"])
		}
	}

	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--principal", "User:alice", "--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	_, rows = table(t, res.stdout)
	assert.Empty(t, rows, "without --include-closed a closed connection is not listed")

	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--include-closed", "--output", "json", "--principal", "User:alice",
		"--command-config", commandConfig(t, "PLAIN", "admin"))
	require.Equal(t, 0, res.code, res.stderr)
	var brokers []struct{ Connections []map[string]any }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &brokers))
	require.Len(t, brokers, 1)
	require.Len(t, brokers[0].Connections, 1)
	assert.Equal(t, "client-closed", brokers[0].Connections[0]["CloseReason"])
	assert.Equal(t, "closing", brokers[0].Connections[0]["State"])
	assert.NotEmpty(t, brokers[0].Connections[0]["ClosedAt"])
}

// --api-key must be the key the brokers serve ListClientConnections under.
func TestAPIKey(t *testing.T) {
	c := startCluster(t, 2, func(_ int, o *brokerOptions) { o.APIKey = 200 })
	admin := commandConfig(t, "PLAIN", "admin")

	res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", admin)
	assert.Equal(t, 1, res.code, "the default key, 93, is not served")
	for _, b := range []string{"broker 0", "broker 1"} {
		assert.Contains(t, res.stderr, b)
	}
	assert.Contains(t, res.stderr, "API key 93")
	assert.Contains(t, res.stderr, "--api-key")
	header, rows := table(t, res.stdout)
	assert.Equal(t, tableHeader, header)
	assert.Empty(t, rows)

	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", admin, "--api-key", "200")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Empty(t, res.stderr)
	_, rows = table(t, res.stdout)
	assert.NotEmpty(t, rows)

	// And the other way round: brokers on 93, the command on another key.
	c = startCluster(t, 1, nil)
	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", admin, "--api-key", "94")
	assert.Equal(t, 1, res.code)
	assert.Contains(t, res.stderr, "API key 94")
	res = runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", admin, "--api-key", "93")
	assert.Equal(t, 0, res.code, res.stderr)
}

// An anonymous client on the PLAINTEXT listener lists as User:ANONYMOUS,
// which super.users names here.
func TestPlaintextWithoutCommandConfig(t *testing.T) {
	c := startCluster(t, 2, nil)
	res := runCLI(t, "--bootstrap-server", c.Brokers[1].Plain, "--list", "--listener", "PLAIN")
	require.Equal(t, 0, res.code, res.stderr)
	_, rows := table(t, res.stdout)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		assert.Equal(t, "User:ANONYMOUS", r["PRINCIPAL"])
		assert.Equal(t, "PLAINTEXT", r["PROTOCOL"])
	}
}

func ptr(s string) *string { return &s }
