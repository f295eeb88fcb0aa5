package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/examples/internal/clientmatrix"
)

// matrixParallel bounds the cells that run at once. Most of a cell's time
// is spent waiting (process start-up, client back-offs, group joins), so
// more cells than cores run at once.
const matrixParallel = 6

// matrixCellTimeout bounds one cell.
const matrixCellTimeout = 60 * time.Second

// wrongPasswordBound bounds how long a client takes to give up on a wrong
// password.
const wrongPasswordBound = 30 * time.Second

// The columns of the matrix for each cluster size: no SASL, each SASL
// mechanism, and consuming through a consumer group.
const groupColumn = "group"

var matrixColumns = []string{clientmatrix.NoSASL, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", groupColumn}

// wrongColumn is the matrix's last column: how fast each client gave up on
// a wrong password.
const wrongColumn = "wrong password"

// matrixUser is who logs in with each mechanism: both demo users of the
// built-in settings get a turn.
var matrixUser = map[string][2]string{
	"PLAIN":         {"alice", "alice-secret"},
	"SCRAM-SHA-256": {"bob", "bob-secret"},
	"SCRAM-SHA-512": {"alice", "alice-secret"},
}

// matrixCluster is a cluster the matrix runs against: the built-in
// settings, CLIENT (SASL_PLAINTEXT) for the SASL cells and INTERNAL
// (PLAINTEXT) for the others, with topics of clientmatrix.Partitions
// partitions when a client (kcat) has them created on first use, and no
// initial rebalance delay for consumer groups.
type matrixCluster struct {
	brokers  int
	c        *cluster
	verifier *kgo.Client // on INTERNAL, to check what the clients did
}

func startMatrixCluster(t *testing.T, brokers int) *matrixCluster {
	c := startClusterWith(t, brokers, defaultProperties(),
		"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"num.partitions="+strconv.Itoa(clientmatrix.Partitions),
		// As in Kafka's own tests: a group's first member need not wait
		// 3 s for others.
		"group.initial.rebalance.delay.ms=0")
	return &matrixCluster{brokers: brokers, c: c, verifier: newClient(t, addr(t, c, 0, "INTERNAL"))}
}

// TestClientMatrix runs independently written Kafka clients against the
// example broker, with one broker and with three: franz-go kgo, IBM/sarama
// and segmentio/kafka-go (Go, in this process), kcat and
// confluent-kafka-python (librdkafka), kafka-python, kafkajs and
// @platformatic/kafka (examples/internal/clientmatrix). Each cell reads
// metadata, creates a topic, produces and consumes, on a PLAINTEXT
// listener or with a SASL mechanism on a SASL_PLAINTEXT one; the group
// column consumes through a consumer group and commits (kafkajs, which
// consumes only through groups, does so in every cell). What the client
// did is then checked with kgo: the high watermarks, and the offsets a
// group committed. Each client must also fail fast on a wrong password,
// with an authentication error rather than a timeout. The matrix is logged
// as a markdown table.
//
// A client that is not installed is skipped, unless CI is set: then it
// fails the test.
func TestClientMatrix(t *testing.T) {
	clusters := []*matrixCluster{startMatrixCluster(t, 1), startMatrixCluster(t, 3)}
	results := &clientmatrix.Results{}
	versions := map[string]string{}
	slowestRefusal := map[string]time.Duration{}
	var wrongMu sync.Mutex
	var columns []string
	headings := map[string]string{}
	for _, mc := range clusters {
		for _, column := range matrixColumns {
			key := fmt.Sprintf("%d/%s", mc.brokers, column)
			columns = append(columns, key)
			name := column
			if column == clientmatrix.NoSASL {
				name = "plaintext"
			}
			headings[key] = fmt.Sprintf("%d broker%s: %s", mc.brokers, map[bool]string{true: "s"}[mc.brokers > 1], name)
		}
	}
	columns = append(columns, wrongColumn)

	var jobs, wrongJobs []clientmatrix.Job
	for _, client := range clientmatrix.Clients {
		version, ok := clientmatrix.Require(t, client.Name, client.Install, client.Probe)
		if !ok {
			versions[client.Name] = "not installed"
			continue
		}
		versions[client.Name] = version
		for _, mc := range clusters {
			for _, column := range matrixColumns {
				key := fmt.Sprintf("%d/%s", mc.brokers, column)
				mech := column
				if column == groupColumn {
					mech = clientmatrix.NoSASL
				}
				if why, ok := client.Lacks[mech]; ok {
					results.Set(client.Name, key, "n/a: "+why)
					continue
				}
				c := clientmatrix.Cell{
					Bootstrap: addr(t, mc.c, 0, "INTERNAL"), Mechanism: mech,
					Topic: clientmatrix.TopicName("matrix", client.Name, strconv.Itoa(mc.brokers), column),
				}
				if mech != clientmatrix.NoSASL {
					c.Bootstrap = addr(t, mc.c, 0, "CLIENT")
					c.User, c.Password = matrixUser[mech][0], matrixUser[mech][1]
				} else {
					c.User, c.Password = "-", "-"
				}
				if column == groupColumn || client.GroupOnly {
					c.Group = c.Topic + "-group"
				}
				jobs = append(jobs, clientmatrix.Job{Name: fmt.Sprintf("%s/%d brokers/%s", client.Name, mc.brokers, column), Run: func(t *testing.T) {
					outcome := "FAIL"
					defer func() { results.Set(client.Name, key, outcome) }()
					ctx, cancel := context.WithTimeout(context.Background(), matrixCellTimeout)
					defer cancel()
					start := time.Now()
					out, err := client.Run(ctx, c)
					t.Logf("%s in %v: %s", client.Name, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
					require.NoError(t, err)
					require.True(t, strings.HasPrefix(out, "OK "+client.Name+" "), "output: %s", out)
					brokers, ok := clientmatrix.Brokers(out)
					require.True(t, ok, "output names no broker count: %s", out)
					assert.Equal(t, mc.brokers, brokers, "brokers in the client's metadata")
					require.NoError(t, clientmatrix.Verify(ctx, mc.verifier, c))
					if !t.Failed() {
						outcome = "ok"
					}
				}})
			}
		}
		for _, wrong := range []struct{ mech, user string }{{"PLAIN", "alice"}, {"SCRAM-SHA-256", "bob"}} {
			if _, ok := client.Lacks[wrong.mech]; ok {
				continue
			}
			wrongJobs = append(wrongJobs, clientmatrix.Job{Name: fmt.Sprintf("%s/wrong password/%s", client.Name, wrong.mech), Run: func(t *testing.T) {
				var refused time.Duration // 0: the check failed
				defer func() {            // the slowest refusal, or a failure
					wrongMu.Lock()
					defer wrongMu.Unlock()
					if prev, ok := slowestRefusal[client.Name]; !ok || prev != 0 && (refused == 0 || refused > prev) {
						slowestRefusal[client.Name] = refused
						outcome := "FAIL"
						if refused != 0 {
							outcome = fmt.Sprintf("refused in %.1f s", refused.Seconds())
						}
						results.Set(client.Name, wrongColumn, outcome)
					}
				}()
				mc := clusters[0]
				c := clientmatrix.Cell{Bootstrap: addr(t, mc.c, 0, "CLIENT"), Mechanism: wrong.mech, User: wrong.user, Password: "wrong-password",
					Topic: clientmatrix.TopicName("matrix", client.Name, "wrong", wrong.mech)}
				ctx, cancel := context.WithTimeout(context.Background(), matrixCellTimeout)
				defer cancel()
				start := time.Now()
				out, err := client.Run(ctx, c)
				elapsed := time.Since(start)
				t.Logf("%s failed after %v: %v", client.Name, elapsed.Round(time.Millisecond), err)
				require.Error(t, err, "a wrong password was accepted: %s", out)
				assert.Contains(t, err.Error(), clientmatrix.AuthFailed)
				assert.NotContains(t, err.Error(), "timed out")
				// The scripts' steps time out after 20 s and say so; the
				// bound leaves room for a loaded machine's slow start-up.
				assert.Less(t, elapsed, wrongPasswordBound, "the failure took as long as a timeout")
				if !t.Failed() {
					refused = max(elapsed, time.Millisecond)
				}
			}})
		}
	}

	// The wrong passwords go first: their time is checked, and the cells
	// load the machine.
	clientmatrix.RunParallel(t, matrixParallel, append(wrongJobs, jobs...))
	t.Log("client compatibility matrix:\n" + results.Table(versions, columns, headings))
}
