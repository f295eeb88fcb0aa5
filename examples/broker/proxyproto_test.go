package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
)

// haproxyHost is the loopback address HAProxy's frontend listens on: not
// 127.0.0.1, where the brokers' listeners take ports the kernel chooses,
// which could be the one freePort found free before HAProxy starts.
const haproxyHost = "127.0.0.4"

// freePort returns a port of haproxyHost that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(haproxyHost, "0"))
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startHAProxy runs HAProxy in TCP mode on haproxyHost:port in front of
// backend, its server line's options after the address being server:
// send-proxy (v1) or send-proxy-v2 (v2) sends the PROXY header on every
// connection, its health checks' included (check inter ...). Its
// configuration is written in the test's temporary directory, with lines
// added to the backend section; it is killed when the test ends. It
// returns the frontend's address and HAProxy's log.
func startHAProxy(t *testing.T, port int, backend, server string, lines ...string) (string, *testkit.SyncBuffer) {
	t.Helper()
	haproxy := requireTool(t, "haproxy", "apt-get install haproxy")
	frontend := net.JoinHostPort(haproxyHost, strconv.Itoa(port))
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(cfg, []byte(`global
    maxconn 256

defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend kafka
    bind `+frontend+`
    default_backend broker

backend broker
`+strings.Join(append(lines, "server broker0 "+backend+" "+server), "\n")+`
`), 0o600))
	out, err := exec.Command(haproxy, "-c", "-f", cfg).CombinedOutput()
	require.NoError(t, err, "haproxy -c: %s", out)
	cmd := exec.Command(haproxy, "-db", "-f", cfg)
	logs := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("haproxy:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", frontend, time.Second)
		if err == nil {
			c.Close()
			return frontend, logs
		}
		select {
		case err := <-exited:
			t.Fatalf("haproxy exited (%v):\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy does not listen on %s:\n%s", frontend, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialerFrom is a kgo dialer whose connections leave from source, a
// loopback address (127.0.0.0/8 all reaches this machine).
func dialerFrom(source string) kgo.Opt {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 10 * time.Second}
	return kgo.Dialer(d.DialContext)
}

// dialRawFrom is dialRaw from a chosen loopback source address.
func dialRawFrom(t *testing.T, addr, source string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn}
}

// apiVersions reports whether an ApiVersions request on c is answered: a
// connection the broker refused is closed without a response (through
// HAProxy, which closes the client's side when the broker closes its own).
func (c *rawConn) apiVersions() bool {
	c.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1"
	corr := c.send(req)
	frame, err := c.readFrame()
	if err != nil {
		return false
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	decode(c.t, frame, resp, corr)
	return resp.ErrorCode == 0
}

// listing runs the kafka-client-connections command (built once into the
// test's temporary directory) against bootstrap and returns broker 0's
// connections.
func listing(t *testing.T, kcc, bootstrap string, args ...string) []jsonListed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcc, append([]string{"--bootstrap-server", bootstrap, "--list", "--output", "json"}, args...)...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("kafka-client-connections: %v: %s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var brokers []struct {
		BrokerID    int32
		Error       string
		Connections []jsonListed
	}
	require.NoError(t, json.Unmarshal(out, &brokers), "%s", out)
	require.Len(t, brokers, 1)
	require.Empty(t, brokers[0].Error)
	return brokers[0].Connections
}

// jsonListed is what the tests read of a connection the command lists.
type jsonListed struct {
	ConnectionID  string `json:"ConnectionId"`
	ClientAddress string
	ClientPort    int32
	ProxyAddress  string
	SoftwareName  string
	CloseReason   string
}

// buildClientConnections builds the kafka-client-connections command into
// the test's temporary directory.
func buildClientConnections(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kafka-client-connections")
	out, err := exec.Command("go", "build", "-o", bin, "../kafka-client-connections").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// The example broker behind a real load balancer: HAProxy in TCP mode,
// sending the PROXY protocol v1 (send-proxy) or v2 (send-proxy-v2, also
// with its CRC32C field, which the broker checks), its health checks
// included, to a CLIENT listener that requires it from
// 127.0.0.1 and advertises HAProxy's address. kcat and kgo produce and
// consume through it; kafka-client-connections lists each client under
// its own address (kgo from 127.0.0.3 and raw clients from 127.0.0.2,
// all behind HAProxy's one socket address) with HAProxy's as
// ProxyAddress; max.connections.per.ip.overrides limits 127.0.0.2 to one
// connection while 127.0.0.3 is not limited; a connection to the broker
// without a header, or from an address outside the trusted network, is
// refused and listed as closed with that reason. HAProxy's health checks
// are never refused.
func TestHAProxy(t *testing.T) {
	requireTool(t, "haproxy", "apt-get install haproxy")
	requireTool(t, "kcat", "apt-get install kcat")
	kcc := buildClientConnections(t)
	for _, sendProxy := range []string{"send-proxy", "send-proxy-v2", "send-proxy-v2 proxy-v2-options crc32c"} {
		t.Run(sendProxy, func(t *testing.T) {
			port := freePort(t)
			c := startTestCluster(t, 1,
				fmt.Sprintf("advertised.listeners=CLIENT://"+haproxyHost+":%d,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", port),
				"listener.name.client.kafkanet.proxy.protocol=required",
				"listener.name.client.kafkanet.proxy.protocol.trusted.networks=127.0.0.1/32",
				"max.connections.per.ip.overrides=127.0.0.2:1",
			)
			direct := addr(t, c, 0, "CLIENT")
			lb, _ := startHAProxy(t, port, direct, sendProxy+" check inter 300ms")

			// kcat: metadata, produce and consume through HAProxy.
			kcat := func(stdin string, args ...string) string {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", lb}, args...)...)
				cmd.Stdin = strings.NewReader(stdin)
				out, err := cmd.Output()
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("kcat %v: %v: %s", args, err, ee.Stderr)
				}
				require.NoError(t, err)
				return string(out)
			}
			assert.Contains(t, kcat("", "-L"), "broker 0 at "+lb, "the broker advertises HAProxy")
			lines := []string{"one", "two", "three"}
			kcat(strings.Join(lines, "\n")+"\n", "-P", "-t", "via-kcat")
			got := kcat("", "-C", "-t", "via-kcat", "-o", "beginning", "-e")
			assert.Equal(t, lines, strings.Split(strings.TrimSuffix(got, "\n"), "\n"))

			// kgo from 127.0.0.3, which no limit applies to.
			cl := newClient(t, lb, dialerFrom("127.0.0.3"), kgo.ConsumeTopics("via-kgo"), kgo.DefaultProduceTopic("via-kgo"),
				kgo.AllowAutoTopicCreation(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for i := range 5 {
				require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("kgo-" + strconv.Itoa(i))}).FirstErr())
			}
			var values []string
			for len(values) < 5 {
				fetches := cl.PollFetches(ctx)
				require.NoError(t, ctx.Err(), "consumed %v", values)
				fetches.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
			}
			assert.Equal(t, []string{"kgo-0", "kgo-1", "kgo-2", "kgo-3", "kgo-4"}, values)

			// 127.0.0.2 may hold one connection: its second is refused,
			// while 127.0.0.3, behind the same HAProxy, opens more.
			first := dialRawFrom(t, lb, "127.0.0.2")
			require.True(t, first.apiVersions(), "127.0.0.2's first connection")
			second := dialRawFrom(t, lb, "127.0.0.2")
			assert.False(t, second.apiVersions(), "127.0.0.2's second connection is over its limit")
			more := dialRawFrom(t, lb, "127.0.0.3")
			require.True(t, more.apiVersions(), "127.0.0.3 is not limited")

			// The listing: each client under its own address, HAProxy as the proxy.
			conns := listing(t, kcc, lb)
			byAddr := map[string][]jsonListed{}
			for _, conn := range conns {
				byAddr[conn.ClientAddress] = append(byAddr[conn.ClientAddress], conn)
				host, port, err := net.SplitHostPort(conn.ProxyAddress)
				require.NoError(t, err, "ProxyAddress %q", conn.ProxyAddress)
				assert.Equal(t, "127.0.0.1", host, "HAProxy's address")
				assert.NotEqual(t, strconv.Itoa(int(conn.ClientPort)), port)
				assert.Contains(t, conn.ConnectionID, fmt.Sprintf("-%s:%d-", conn.ClientAddress, conn.ClientPort), "the id has the client's address")
			}
			t.Logf("listed: %+v", conns)
			require.Len(t, byAddr["127.0.0.2"], 1, "127.0.0.2's one connection")
			assert.Equal(t, "raw", byAddr["127.0.0.2"][0].SoftwareName)
			require.NotEmpty(t, byAddr["127.0.0.3"], "kgo's and the raw client's connections from 127.0.0.3")
			kgoListed := false
			for _, conn := range byAddr["127.0.0.3"] {
				kgoListed = kgoListed || conn.SoftwareName == "kgo"
			}
			assert.True(t, kgoListed, "kgo's connections are listed under 127.0.0.3")
			assert.NotEmpty(t, byAddr["127.0.0.1"], "the command's own connection, from 127.0.0.1")
			// With crc32c, every header has a checksum, which the broker
			// checked: the field is among the connection's.
			checksummed := 0
			for _, info := range c.brokers[0].srv.Registry().Snapshot(connregistry.Filter{}) {
				for _, tlv := range info.ProxyTLVs {
					if tlv.Type == 0x03 && len(tlv.Value) == 4 {
						checksummed++
					}
				}
			}
			if strings.Contains(sendProxy, "crc32c") {
				assert.Positive(t, checksummed, "connections whose PROXY header has HAProxy's CRC32C field")
			} else {
				assert.Zero(t, checksummed, "connections with a CRC32C field, HAProxy not asked for one")
			}

			// Straight to the broker: without a header, and from an untrusted address.
			noHeader := dialRaw(t, direct)
			noHeader.send(kmsg.NewPtrApiVersionsRequest())
			noHeader.requireClosed()
			untrusted := dialRawFrom(t, direct, "127.0.0.9")
			untrusted.requireClosed()

			closed := listing(t, kcc, lb, "--include-closed")
			refused := map[string]int{}
			for _, conn := range closed {
				if conn.CloseReason == string(connregistry.CloseProxyRefused) {
					refused[conn.ClientAddress]++
				}
			}
			assert.Equal(t, map[string]int{"127.0.0.1": 1, "127.0.0.9": 1}, refused,
				"the two refused connections, under the socket's address; never a health check")
		})
	}
}

// HAProxy's health checks are probes, not incidents: behind HAProxy
// checking every 500 ms for 10 s, the broker logs nothing at Info about
// them, keeps none in its history of closed connections, and counts each
// one that reached it in Stats.ProbesClosed and
// kafkanet_connection_probes_total; every check passes. With send-proxy-v2
// a check sends a LOCAL header, then resets the connection; with
// send-proxy (v1) a header with the check's own addresses; a TCP check
// with linger (tcp-check connect linger) connects and closes with a FIN.
// HAProxy's plain TCP check resets the connection before its handshake
// completes (it holds back the last ACK), so the broker never accepts it.
func TestHAProxyHealthChecks(t *testing.T) {
	requireTool(t, "haproxy", "apt-get install haproxy")
	const (
		inter  = 500 * time.Millisecond
		period = 10 * time.Second
		checks = int(period / inter)
	)
	for _, tc := range []struct {
		name, server string
		backend      []string
		proxy        bool // the listener requires the PROXY protocol
		reached      bool // the checks reach the broker
		local        bool // their header is LOCAL
	}{
		{name: "plain TCP check", server: "check"},
		{name: "TCP check with linger", server: "check", backend: []string{"option tcp-check", "tcp-check connect linger"}, reached: true},
		{name: "send-proxy", server: "send-proxy check", proxy: true, reached: true},
		{name: "send-proxy-v2", server: "send-proxy-v2 check", proxy: true, reached: true, local: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			sets := append(slices.Clone(testSettings),
				fmt.Sprintf("advertised.listeners=CLIENT://"+haproxyHost+":%d,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", port))
			if tc.proxy {
				sets = append(sets, "listener.name.client.kafkanet.proxy.protocol=required",
					"listener.name.client.kafkanet.proxy.protocol.trusted.networks=127.0.0.1/32")
			}
			props, err := config.Properties{}.With(sets...)
			require.NoError(t, err)
			logs := &testkit.SyncBuffer{}
			c, err := startCluster(context.Background(), props, 1, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			scrape := serveTestMetrics(t, c)
			srv := c.brokers[0].srv

			started := len(logs.String())
			_, haproxyLog := startHAProxy(t, port, addr(t, c, 0, "CLIENT"), tc.server+" inter "+inter.String(), tc.backend...)
			time.Sleep(period)

			// Every connection the broker accepted (the checks, and
			// startHAProxy's own, relayed) closed as a probe.
			values := parseMetrics(t, scrape())
			accepted := values[`kafka_server_socket_server_metrics_connection_accept_total{listener="CLIENT",node_id="0"}`]
			probes := values[`kafkanet_connection_probes_total{listener="CLIENT",node_id="0"}`]
			t.Logf("%v connections accepted, %v probes, in %v of checks every %v", accepted, probes, period, inter)
			assert.Positive(t, probes, "startHAProxy's connection")
			if tc.reached {
				// HAProxy's checks are timed: on a loaded machine it ran 13 of
				// 20 in the period. What must hold is that every one that
				// reached the broker is a probe (below); half is a floor that
				// still shows the checks reached it.
				assert.GreaterOrEqual(t, probes, float64(checks/2), "probes counted")
				assert.LessOrEqual(t, probes, float64(checks+3), "probes counted")
			} else {
				assert.LessOrEqual(t, accepted, 2.0, "checks accepted")
			}
			assert.GreaterOrEqual(t, probes, accepted-1, "every connection accepted is a probe (one may still be open)")
			assert.LessOrEqual(t, probes, float64(srv.Stats().ProbesClosed["CLIENT"]), "the metric reads Stats")
			assert.Empty(t, srv.Registry().Closed(connregistry.Filter{}), "health checks in the history of closed connections")
			during := logs.String()[started:]
			for _, line := range strings.Split(during, "\n") {
				assert.NotRegexp(t, `level=(INFO|WARN|ERROR)`, line, "a log line at Info or above during the health checks")
			}
			debug := strings.Count(during, `msg="probe closed by its client"`) + strings.Count(during, `msg="connection closed before its PROXY header"`)
			assert.GreaterOrEqual(t, debug, int(probes), "a Debug line a probe")
			local := strings.Count(during, "proxy_local=true")
			if tc.local {
				assert.GreaterOrEqual(t, local, checks/2, "probes with a LOCAL header")
			} else {
				assert.Zero(t, local, "probes with a LOCAL header")
			}
			assert.NotContains(t, haproxyLog.String(), "is DOWN", "HAProxy's checks failed")
		})
	}
}
