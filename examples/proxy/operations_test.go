package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// adminProxy are the settings of a proxy with a SASL_PLAINTEXT data
// listener, SASL, and an admin listener, ADMIN, where only admin may list
// and close connections.
var adminProxy = []string{
	"listeners=SASL://127.0.0.1:0,ADMIN://127.0.0.1:0",
	"listener.security.protocol.map=SASL:SASL_PLAINTEXT,ADMIN:SASL_PLAINTEXT",
	"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
	"listener.name.sasl.plain.sasl.jaas.config=" + proxyJAAS,
	"listener.name.admin.plain.sasl.jaas.config=" + proxyJAAS,
	"proxy.admin.listener.name=ADMIN",
	"super.users=User:admin",
}

// kcc runs examples/kafka-client-connections as an operator does.
func kcc(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exampleproc.Build(t, "kafka-client-connections"), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("kafka-client-connections: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// commandConfig writes a client properties file that logs in as user.
func commandConfig(t *testing.T, user, password string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), user+".properties")
	require.NoError(t, os.WriteFile(path, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username="+user+
		"\nsasl.password="+password+"\n"), 0o600))
	return path
}

// jsonBroker is one broker of the command's JSON output.
type jsonBroker struct {
	BrokerId    int32
	Host        string
	Port        int32
	Error       string
	Connections []struct {
		ConnectionId, Principal, ClientAddress, ListenerName, SecurityProtocol, SoftwareName, ClientId, SaslMechanism, State string
		ClientPort                                                                                                           int32
		Requests                                                                                                             int64
		RequestRate                                                                                                          float64
		Rank                                                                                                                 int
	}
}

// The operations of the issue, with examples/kafka-client-connections on
// the proxy's admin listener: ListClientConnections lists the proxy's
// clients (KIP-1329's fields and the extras), never upstream's; --sort-by
// requests --top 1 names the connection of the client that sent the most
// requests (bob's 40 Produce requests, one at a time, over the one
// connection kgo produces on); --close --principal closes a principal's
// connections, which reconnect;
// --close --client-address closes an address's; and a principal that is
// not a super user may do neither. The data listener serves neither API.
func TestOperationsOnTheAdminListener(t *testing.T) {
	up := startUpstream(t, 3)
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil, adminProxy...)
	data, admin := p.addr(t, "SASL"), p.addr(t, "ADMIN")

	// bob holds connections to the bootstrap port and the brokers' ports,
	// alice one.
	bobDialer := &testkit.RecordingDialer{}
	bob := newClient(t, data, socketservertest.KgoSASL("SCRAM-SHA-256", "bob", "bob-secret"), kgo.Dialer(bobDialer.Dial),
		kgo.ConnIdleTimeout(time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceConsume(t, data, "ops", "ops-group", socketservertest.KgoSASL("PLAIN", "alice", "alice-secret"))
	for i := range 40 {
		require.NoError(t, bob.ProduceSync(ctxFor(t, 20*time.Second), &kgo.Record{Topic: "ops", Partition: 1, Value: []byte("x" + strconv.Itoa(i))}).FirstErr())
	}
	_, alice := socketservertest.ConnectKgo(t, data, socketservertest.KgoSASL("PLAIN", "alice", "alice-secret"))
	adminConfig := commandConfig(t, "admin", "admin-secret")

	code, stdout, stderr := kcc(t, "--bootstrap-server", admin, "--list", "--command-config", adminConfig, "--output", "json")
	require.Equal(t, 0, code, stderr)
	var brokers []jsonBroker
	require.NoError(t, json.Unmarshal([]byte(stdout), &brokers), stdout)
	require.Len(t, brokers, 1, "the admin listener names the proxy as the only broker")
	adminHost, adminPort := hostPort(admin)
	assert.Equal(t, adminHost, brokers[0].Host)
	assert.Equal(t, adminPort, strconv.Itoa(int(brokers[0].Port)))
	byAddr := map[string]int{}
	for i, c := range brokers[0].Connections {
		byAddr[net.JoinHostPort(c.ClientAddress, strconv.Itoa(int(c.ClientPort)))] = i
		for _, u := range []string{up.Addr(0, "INTERNAL"), up.Addr(1, "INTERNAL"), up.Addr(2, "INTERNAL")} {
			assert.NotContains(t, c.ConnectionId, u, "an upstream connection is listed")
		}
	}
	require.NotEmpty(t, bobDialer.Addrs())
	for _, a := range bobDialer.Addrs() {
		i, ok := byAddr[a]
		require.True(t, ok, "bob's connection from %s is not listed:\n%s", a, stdout)
		c := brokers[0].Connections[i]
		assert.Equal(t, "User:bob", c.Principal)
		assert.Equal(t, "SASL", c.ListenerName)
		assert.Equal(t, "SASL_PLAINTEXT", c.SecurityProtocol)
		assert.Equal(t, "SCRAM-SHA-256", c.SaslMechanism)
		assert.Equal(t, "kgo", c.SoftwareName)
		assert.Equal(t, "ready", c.State)
	}
	_, ok := byAddr[alice]
	assert.True(t, ok, "alice's connection is not listed")

	// The busiest connection: bob's that carried his Produce requests, the
	// one with the most requests in the listing above.
	busiest := brokers[0].Connections[0]
	for _, c := range brokers[0].Connections {
		if c.Requests > busiest.Requests {
			busiest = c
		}
	}
	assert.Equal(t, "User:bob", busiest.Principal)
	assert.GreaterOrEqual(t, busiest.Requests, int64(40), "bob's 40 Produce requests")
	code, stdout, stderr = kcc(t, "--bootstrap-server", admin, "--list", "--sort-by", "requests", "--top", "1", "--command-config", adminConfig, "--output", "json")
	require.Equal(t, 0, code, stderr)
	var top []jsonBroker
	require.NoError(t, json.Unmarshal([]byte(stdout), &top), stdout)
	require.Len(t, top, 1)
	require.Len(t, top[0].Connections, 1, "--top 1 lists one connection:\n%s", stdout)
	named := top[0].Connections[0]
	assert.Equal(t, 1, named.Rank)
	assert.Equal(t, net.JoinHostPort(busiest.ClientAddress, strconv.Itoa(int(busiest.ClientPort))),
		net.JoinHostPort(named.ClientAddress, strconv.Itoa(int(named.ClientPort))), "not the busiest connection")
	assert.Greater(t, named.RequestRate, 40.0/60*0.9, "40 requests within seconds: about 40/60 per second over the minute")

	// Close bob's connections.
	code, stdout, stderr = kcc(t, "--bootstrap-server", admin, "--close", "--principal", "User:bob", "--command-config", adminConfig, "--output", "json")
	require.Equal(t, 0, code, stderr)
	brokers = nil
	require.NoError(t, json.Unmarshal([]byte(stdout), &brokers), stdout)
	require.Len(t, brokers, 1)
	assert.Len(t, brokers[0].Connections, len(bobDialer.Addrs()), "every connection of bob's is closed:\n%s", stdout)
	for _, c := range brokers[0].Connections {
		assert.Equal(t, "User:bob", c.Principal)
	}
	bobFilter := connregistry.Filter{Principal: strp("User:bob")}
	require.NoError(t, bobFilter.Validate())
	require.Eventually(t, func() bool { return len(p.srv.Registry().Snapshot(bobFilter)) == 0 }, 5*time.Second, 10*time.Millisecond)
	for _, c := range p.srv.Registry().Closed(bobFilter) {
		assert.Equal(t, connregistry.CloseByOperator, c.CloseReason)
	}
	// bob's client reconnects.
	require.NoError(t, bob.ProduceSync(ctxFor(t, 20*time.Second), &kgo.Record{Topic: "ops", Partition: 2, Value: []byte("y")}).FirstErr())

	// Close by address, on the data listener only (the command's own
	// connection is never closed anyway).
	code, _, stderr = kcc(t, "--bootstrap-server", admin, "--close", "--client-address", "127.0.0.0/8", "--listener", "SASL", "--command-config", adminConfig)
	require.Equal(t, 0, code, stderr)
	all := connregistry.Filter{Listener: strp("SASL")}
	require.NoError(t, all.Validate())
	require.Eventually(t, func() bool { return len(p.srv.Registry().Snapshot(all)) == 0 }, 5*time.Second, 10*time.Millisecond)

	// alice is no super user.
	aliceConfig := commandConfig(t, "alice", "alice-secret")
	code, _, stderr = kcc(t, "--bootstrap-server", admin, "--list", "--command-config", aliceConfig)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "DESCRIBE on CLUSTER")
	code, _, stderr = kcc(t, "--bootstrap-server", admin, "--close", "--principal", "User:bob", "--command-config", aliceConfig)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "ALTER on CLUSTER")

	// The data listener neither lists nor closes, nor forwards either API
	// to upstream, which would list upstream's connections.
	code, _, stderr = kcc(t, "--bootstrap-server", data, "--list", "--command-config", adminConfig)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "does not advertise API key 93")
}

func strp(s string) *string { return &s }
