package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/examples/internal/clientmatrix"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// matrixParallel bounds the cells that run at once: most of a cell's time
// is spent waiting (process start-up, group joins).
const matrixParallel = 4

// proxyColumn is one way of standing the proxy in front of the cluster.
type proxyColumn struct {
	name      string
	mechanism string // at the proxy
	user      string
	tls       bool // the proxy's listener speaks SASL_SSL
}

var proxyColumns = []proxyColumn{
	{name: "SASL_PLAINTEXT at the proxy, PLAINTEXT upstream", mechanism: "SCRAM-SHA-256", user: "bob"},
	{name: "SASL_SSL at the proxy, SASL upstream", mechanism: "PLAIN", user: "alice", tls: true},
}

// TestClientMatrixThroughProxy runs the eight client stacks of
// examples/internal/clientmatrix through the proxy in front of
// examples/broker -brokers 3: with SASL_PLAINTEXT at the proxy (SCRAM-SHA-256)
// and PLAINTEXT upstream, and with SASL_SSL at the proxy (PLAIN) and
// SASL_PLAINTEXT upstream, where the proxy logs in as its own user
// (SCRAM-SHA-512). Each client reads metadata (three brokers, at the
// proxy's ports), creates a topic, produces, consumes through a consumer
// group and commits; a kgo client connected to the cluster directly, not
// through the proxy, then checks the high watermarks and the committed
// offsets. The matrix is logged as a markdown table.
//
// A client that is not installed is skipped, unless CI is set: then it
// fails the test.
func TestClientMatrixThroughProxy(t *testing.T) {
	up := startUpstream(t, 3)
	pki := socketservertest.NewPKI(t)
	plainProxy := startProxy(t, up.Addr(0, "INTERNAL"), nil,
		"listeners=SASL://127.0.0.1:0",
		"listener.security.protocol.map=SASL:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl.plain.sasl.jaas.config="+proxyJAAS)
	tlsProxy := startProxy(t, up.Addr(0, "CLIENT"), nil,
		"listeners=SECURE://127.0.0.1:0",
		"listener.security.protocol.map=SECURE:SASL_SSL",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.secure.plain.sasl.jaas.config="+proxyJAAS,
		"listener.name.secure.ssl.keystore.type=PEM",
		"listener.name.secure.ssl.keystore.location="+pki.ServerFile,
		"upstream.security.protocol=SASL_PLAINTEXT",
		"upstream.sasl.mechanism=SCRAM-SHA-512",
		"upstream.sasl.username=proxy",
		"upstream.sasl.password=proxy-secret")
	bootstrap := []string{plainProxy.addr(t, "SASL"), tlsProxy.addr(t, "SECURE")}
	verifier := newClient(t, up.Addr(0, "INTERNAL"))
	passwords := map[string]string{"alice": "alice-secret", "bob": "bob-secret"}

	results := &clientmatrix.Results{}
	versions := map[string]string{}
	var jobs []clientmatrix.Job
	for _, client := range clientmatrix.Clients {
		version, ok := clientmatrix.Require(t, client.Name, client.Install, client.Probe)
		if !ok {
			versions[client.Name] = "not installed"
			continue
		}
		versions[client.Name] = version
		for i, col := range proxyColumns {
			c := clientmatrix.Cell{Bootstrap: bootstrap[i], Mechanism: col.mechanism, User: col.user, Password: passwords[col.user],
				Topic: clientmatrix.TopicName("proxy", client.Name, fmt.Sprint(i))}
			c.Group = c.Topic + "-group"
			if col.tls {
				c.TLSCA = pki.CAFile
			}
			jobs = append(jobs, clientmatrix.Job{Name: fmt.Sprintf("%s/%s", client.Name, col.name), Run: func(t *testing.T) {
				outcome := "FAIL"
				defer func() { results.Set(client.Name, col.name, outcome) }()
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				start := time.Now()
				out, err := client.Run(ctx, c)
				t.Logf("%s in %v: %s", client.Name, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
				require.NoError(t, err)
				require.True(t, strings.HasPrefix(out, "OK "+client.Name+" "), "output: %s", out)
				brokers, ok := clientmatrix.Brokers(out)
				require.True(t, ok, "output names no broker count: %s", out)
				assert.Equal(t, 3, brokers, "brokers in the client's metadata")
				require.NoError(t, clientmatrix.Verify(ctx, verifier, c), "checked on the cluster itself")
				if !t.Failed() {
					outcome = "ok"
				}
			}})
		}
	}
	clientmatrix.RunParallel(t, matrixParallel, jobs)
	var columns []string
	for _, col := range proxyColumns {
		columns = append(columns, col.name)
	}
	t.Log("client compatibility matrix through the proxy:\n" + results.Table(versions, columns, nil))
}
