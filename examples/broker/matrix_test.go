package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

var matrixColumns = []string{noSASL, "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", groupColumn}

// matrixUser is who logs in with each mechanism: both demo users of the
// built-in settings get a turn.
var matrixUser = map[string][2]string{
	"PLAIN":         {"alice", "alice-secret"},
	"SCRAM-SHA-256": {"bob", "bob-secret"},
	"SCRAM-SHA-512": {"alice", "alice-secret"},
}

// matrixCluster is a cluster the matrix runs against: the built-in
// settings, CLIENT (SASL_PLAINTEXT) for the SASL cells and INTERNAL
// (PLAINTEXT) for the others, with topics of matrixPartitions partitions
// when a client (kcat) has them created on first use, and no initial
// rebalance delay for consumer groups.
type matrixCluster struct {
	brokers  int
	c        *cluster
	verifier *kgo.Client // on INTERNAL, to check what the clients did
}

func startMatrixCluster(t *testing.T, brokers int) *matrixCluster {
	c := startClusterWith(t, brokers, defaultProperties(),
		"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"num.partitions="+strconv.Itoa(matrixPartitions),
		// As in Kafka's own tests: a group's first member need not wait
		// 3 s for others.
		"group.initial.rebalance.delay.ms=0")
	return &matrixCluster{brokers: brokers, c: c, verifier: newClient(t, addr(t, c, 0, "INTERNAL"))}
}

// verify checks with the verifier that the cell's topic holds
// matrixRecords records in matrixPartitions partitions and, for a group
// cell, that the group committed the end of every partition.
func (mc *matrixCluster) verify(ctx context.Context, c cell) error {
	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = c.topic
	for p := range int32(matrixPartitions) {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
	}
	list.Topics = append(list.Topics, lt)
	listed, err := list.RequestWith(ctx, mc.verifier)
	if err != nil {
		return fmt.Errorf("verify: ListOffsets: %w", err)
	}
	high := map[int32]int64{}
	var total int64
	for _, rt := range listed.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("verify: ListOffsets %s[%d]: %w", c.topic, rp.Partition, err)
			}
			high[rp.Partition] = rp.Offset
			total += rp.Offset
		}
	}
	if len(high) != matrixPartitions || total != matrixRecords {
		return fmt.Errorf("verify: the topic's high watermarks are %v, want %d records in %d partitions", high, matrixRecords, matrixPartitions)
	}
	if c.group == "" {
		return nil
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = c.group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = c.topic, []int32{0, 1, 2}
	fetch.Topics = append(fetch.Topics, ft)
	fetched, err := fetch.RequestWith(ctx, mc.verifier)
	if err == nil {
		err = kerr.ErrorForCode(fetched.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("verify: OffsetFetch: %w", err)
	}
	committed := map[int32]int64{}
	for _, rt := range fetched.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("verify: OffsetFetch %s[%d]: %w", c.topic, rp.Partition, err)
			}
			committed[rp.Partition] = rp.Offset
		}
	}
	for p, h := range high {
		if committed[p] != h {
			return fmt.Errorf("verify: group %s committed %v, want the high watermarks %v", c.group, committed, high)
		}
	}
	return nil
}

// matrixResults collects the cells' outcomes, keyed by client, brokers and
// column.
type matrixResults struct {
	mu    sync.Mutex
	cells map[string]string
}

func (r *matrixResults) set(client string, brokers int, column, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cells[fmt.Sprintf("%s/%d/%s", client, brokers, column)] = outcome
}

func (r *matrixResults) get(client string, brokers int, column string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cells[fmt.Sprintf("%s/%d/%s", client, brokers, column)]
}

var brokersLine = regexp.MustCompile(`\bbrokers=(\d+)\b`)

// TestClientMatrix runs independently written Kafka clients against the
// example broker, with one broker and with three: franz-go kgo, IBM/sarama
// and segmentio/kafka-go (Go, in this process), kcat and
// confluent-kafka-python (librdkafka), kafka-python, kafkajs and
// @platformatic/kafka. Each cell reads metadata, creates a topic, produces
// and consumes, on a PLAINTEXT listener or with a SASL mechanism on a
// SASL_PLAINTEXT one; the group column consumes through a consumer group
// and commits (kafkajs, which consumes only through groups, does so in
// every cell). What the client did is then checked with kgo: the high
// watermarks, and the offsets a group committed. Each client must also
// fail fast on a wrong password, with an authentication error rather than
// a timeout. The matrix is logged as a markdown table.
//
// A client that is not installed is skipped, unless CI is set: then it
// fails the test.
func TestClientMatrix(t *testing.T) {
	clusters := []*matrixCluster{startMatrixCluster(t, 1), startMatrixCluster(t, 3)}
	results := &matrixResults{cells: map[string]string{}}
	versions := map[string]string{}
	wrongPassword := map[string]string{}
	slowestRefusal := map[string]time.Duration{}
	var wrongMu sync.Mutex

	type job struct {
		name string
		run  func(t *testing.T)
	}
	var jobs, wrongJobs []job
	for _, client := range matrixClients {
		version, missing := client.probe()
		if missing != "" {
			t.Run(client.name, func(t *testing.T) {
				if os.Getenv("CI") == "" {
					t.Skipf("%s (%s); in CI this fails", missing, client.install)
				}
				t.Fatalf("%s is required in CI: %s (%s)", client.name, missing, client.install)
			})
			versions[client.name] = "not installed"
			continue
		}
		versions[client.name] = version
		for _, mc := range clusters {
			for _, column := range matrixColumns {
				mech := column
				if column == groupColumn {
					mech = noSASL
				}
				if why, ok := client.lacks[mech]; ok {
					results.set(client.name, mc.brokers, column, "n/a: "+why)
					continue
				}
				c := cell{
					bootstrap: addr(t, mc.c, 0, "INTERNAL"), mech: mech,
					topic: fmt.Sprintf("matrix-%s-%d-%s", sanitize(client.name), mc.brokers, strings.ToLower(column)),
				}
				if mech != noSASL {
					c.bootstrap = addr(t, mc.c, 0, "CLIENT")
					c.user, c.password = matrixUser[mech][0], matrixUser[mech][1]
				} else {
					c.user, c.password = "-", "-"
				}
				if column == groupColumn || client.groupOnly {
					c.group = c.topic + "-group"
				}
				jobs = append(jobs, job{fmt.Sprintf("%s/%d brokers/%s", client.name, mc.brokers, column), func(t *testing.T) {
					outcome := "FAIL"
					defer func() { results.set(client.name, mc.brokers, column, outcome) }()
					ctx, cancel := context.WithTimeout(context.Background(), matrixCellTimeout)
					defer cancel()
					start := time.Now()
					out, err := client.run(ctx, c)
					t.Logf("%s in %v: %s", client.name, time.Since(start).Round(time.Millisecond), strings.TrimSpace(out))
					require.NoError(t, err)
					require.True(t, strings.HasPrefix(out, "OK "+client.name+" "), "output: %s", out)
					m := brokersLine.FindStringSubmatch(out)
					require.NotNil(t, m, "output names no broker count: %s", out)
					assert.Equal(t, strconv.Itoa(mc.brokers), m[1], "brokers in the client's metadata")
					require.NoError(t, mc.verify(ctx, c))
					if !t.Failed() {
						outcome = "ok"
					}
				}})
			}
		}
		for _, wrong := range []struct{ mech, user string }{{"PLAIN", "alice"}, {"SCRAM-SHA-256", "bob"}} {
			if _, ok := client.lacks[wrong.mech]; ok {
				continue
			}
			wrongJobs = append(wrongJobs, job{fmt.Sprintf("%s/wrong password/%s", client.name, wrong.mech), func(t *testing.T) {
				var refused time.Duration // 0: the check failed
				defer func() {            // the slowest refusal, or a failure
					wrongMu.Lock()
					defer wrongMu.Unlock()
					if prev, ok := slowestRefusal[client.name]; !ok || prev != 0 && (refused == 0 || refused > prev) {
						slowestRefusal[client.name] = refused
						wrongPassword[client.name] = "FAIL"
						if refused != 0 {
							wrongPassword[client.name] = fmt.Sprintf("refused in %.1f s", refused.Seconds())
						}
					}
				}()
				mc := clusters[0]
				c := cell{bootstrap: addr(t, mc.c, 0, "CLIENT"), mech: wrong.mech, user: wrong.user, password: "wrong-password",
					topic: fmt.Sprintf("matrix-%s-wrong-%s", sanitize(client.name), strings.ToLower(wrong.mech))}
				ctx, cancel := context.WithTimeout(context.Background(), matrixCellTimeout)
				defer cancel()
				start := time.Now()
				out, err := client.run(ctx, c)
				elapsed := time.Since(start)
				t.Logf("%s failed after %v: %v", client.name, elapsed.Round(time.Millisecond), err)
				require.Error(t, err, "a wrong password was accepted: %s", out)
				assert.Contains(t, err.Error(), authFailed)
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

	// t.Run may be called from several goroutines at once; a semaphore
	// bounds them rather than t.Parallel, whose bound (-parallel, GOMAXPROCS
	// by default) suits CPU-bound tests.
	// The wrong passwords go first: their time is checked, and the cells
	// load the machine.
	sem := make(chan struct{}, matrixParallel)
	var wg sync.WaitGroup
	for _, j := range append(wrongJobs, jobs...) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t.Run(j.name, j.run)
		})
	}
	wg.Wait()

	t.Log("client compatibility matrix:\n" + matrixTable(results, clusters, versions, wrongPassword))
}

// sanitize makes a client's name usable in a topic name.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '-'
	}, name)
}

// matrixTable renders the results as a markdown table.
func matrixTable(r *matrixResults, clusters []*matrixCluster, versions, wrongPassword map[string]string) string {
	var b strings.Builder
	b.WriteString("| client | version |")
	for _, mc := range clusters {
		for _, column := range matrixColumns {
			name := column
			if column == noSASL {
				name = "plaintext"
			}
			fmt.Fprintf(&b, " %d broker%s: %s |", mc.brokers, map[bool]string{true: "s"}[mc.brokers > 1], name)
		}
	}
	b.WriteString(" wrong password |\n|---|---|")
	b.WriteString(strings.Repeat("---|", len(clusters)*len(matrixColumns)+1))
	b.WriteString("\n")
	for _, client := range matrixClients {
		fmt.Fprintf(&b, "| %s | %s |", client.name, versions[client.name])
		for _, mc := range clusters {
			for _, column := range matrixColumns {
				outcome := r.get(client.name, mc.brokers, column)
				if outcome == "" {
					outcome = "skipped"
				}
				fmt.Fprintf(&b, " %s |", outcome)
			}
		}
		outcome := wrongPassword[client.name]
		if outcome == "" {
			outcome = "skipped"
		}
		fmt.Fprintf(&b, " %s |\n", outcome)
	}
	return b.String()
}
