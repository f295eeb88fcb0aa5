package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/clientmatrix"
)

// quotaRate is the producer_byte_rate of the throttling tests: 1 MiB/s.
const quotaRate = 1 << 20

// quotaTolerance is how far a measured rate may be from quotaRate.
const quotaTolerance = 0.2

// quotaWindows are the sampling of the throttling tests: 2 windows of 1 s,
// so that the burst a quota lets through before it throttles (one window
// of the quota, Kafka's getMaxValueInQuotaWindow) is small next to a short
// run; Kafka's defaults (11 windows) let through ten.
var quotaWindows = []string{"quota.window.num=2", "quota.window.size.seconds=1"}

// quotaRunDuration is how long a throttled producer runs:
// KAFKANET_QUOTA_DURATION (a Go duration, such as 20s), else 5 s.
func quotaRunDuration(t *testing.T) time.Duration {
	if v := os.Getenv("KAFKANET_QUOTA_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "KAFKANET_QUOTA_DURATION")
		return d
	}
	return 5 * time.Second
}

// requireRate checks a measured rate against quotaRate and logs it.
func requireRate(t *testing.T, client string, bytes int64, elapsed time.Duration) {
	t.Helper()
	rate := float64(bytes) / elapsed.Seconds()
	t.Logf("%s: %d bytes in %v: %.3f MiB/s (quota %.3f MiB/s)", client, bytes, elapsed.Round(time.Millisecond), rate/(1<<20), float64(quotaRate)/(1<<20))
	assert.InEpsilon(t, float64(quotaRate), rate, quotaTolerance, "%s's rate", client)
}

// A kadm client sets producer_byte_rate for a client id with
// AlterClientQuotas and reads it back with DescribeClientQuotas; a kgo
// producer with that client id is then held to it (after the first
// window's burst, which the rate excludes), and its responses carry
// throttle times (HookBrokerThrottle).
func TestClientQuotaKgoProducer(t *testing.T) {
	c := startTestCluster(t, 1, quotaWindows...)
	bootstrap := addr(t, c, 0, "CLIENT")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const clientID = "quota-kgo"
	adm := kadm.NewClient(newClient(t, bootstrap))
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: kmsg.StringPtr(clientID)}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quotaRate}}}})
	require.NoError(t, err)
	require.Len(t, altered, 1)
	require.NoError(t, altered[0].Err, altered[0].ErrMessage)
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: kmsg.StringPtr(clientID), MatchType: kmsg.QuotasMatchTypeExact}})
	require.NoError(t, err)
	require.Equal(t, kadm.DescribedClientQuotas{{Entity: entity, Values: kadm.ClientQuotaValues{{Key: "producer_byte_rate", Value: quotaRate}}}}, described)

	_, err = adm.CreateTopic(ctx, 1, 1, nil, "quota-kgo")
	require.NoError(t, err)
	throttles := &throttleHook{}
	// Small batches and one request in flight, so that the producer's
	// waits are short and even, and a buffer of 1 MiB, so that it stops
	// soon after the run.
	producer := newClient(t, bootstrap, kgo.ClientID(clientID), kgo.DefaultProduceTopic("quota-kgo"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(throttles), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(128<<10), kgo.MaxProduceRequestsInflightPerBroker(1), kgo.MaxBufferedBytes(1<<20))
	value := make([]byte, 10<<10)
	run := quotaRunDuration(t)
	start := time.Now()
	var acked, lastAck atomic.Int64
	var failed atomic.Value
	for time.Since(start) < run {
		producer.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Store(err)
				return
			}
			acked.Add(int64(len(value)))
			lastAck.Store(int64(time.Since(start)))
		})
	}
	require.NoError(t, producer.Flush(ctx))
	if err, _ := failed.Load().(error); err != nil {
		require.NoError(t, err)
	}
	elapsed := time.Duration(lastAck.Load())
	t.Logf("kgo: %d bytes acknowledged in %v, %d throttled responses, %v of throttle in all", acked.Load(), elapsed.Round(time.Millisecond), throttles.count.Load(), time.Duration(throttles.total.Load()).Round(time.Millisecond))
	requireRate(t, "kgo (beyond the first window's burst)", acked.Load()-quotaRate, elapsed)
	assert.Positive(t, throttles.count.Load(), "no response carried a throttle time")

	// Removing the quota lifts it, and DescribeClientQuotas shows none.
	altered, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}})
	require.NoError(t, err)
	require.NoError(t, altered[0].Err)
	described, err = adm.DescribeClientQuotas(ctx, false, nil)
	require.NoError(t, err)
	assert.Empty(t, described)
}

// throttleHook counts the throttle times kgo reads from responses.
type throttleHook struct{ count, total atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	if d > 0 {
		h.count.Add(1)
		h.total.Add(int64(d))
	}
}

// AlterClientQuotas and DescribeClientQuotas as Kafka answers them: what it
// refuses, ValidateOnly, the filters, and super.users.
func TestClientQuotaAdminAPIs(t *testing.T) {
	c := startTestCluster(t, 1, clientQuotasProperty+"=users/<default>:consumer_byte_rate=2097152;users/alice/clients/<default>:request_percentage=50")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, addr(t, c, 0, "CLIENT")))
	name := kmsg.StringPtr
	for _, tc := range []struct {
		name    string
		entity  kadm.ClientQuotaEntity
		ops     []kadm.AlterClientQuotaOp
		wantErr error
	}{
		{"fractional byte rate", kadm.ClientQuotaEntity{{Type: "user", Name: name("bob")}}, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}, kerr.InvalidRequest},
		{"zero", kadm.ClientQuotaEntity{{Type: "user", Name: name("bob")}}, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 0}}, kerr.InvalidRequest},
		{"unknown key", kadm.ClientQuotaEntity{{Type: "user", Name: name("bob")}}, []kadm.AlterClientQuotaOp{{Key: "fetch_rate", Value: 1}}, kerr.InvalidRequest},
		{"duplicate key", kadm.ClientQuotaEntity{{Type: "user", Name: name("bob")}}, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}, {Key: "producer_byte_rate", Value: 2}}, kerr.InvalidRequest},
		{"empty name", kadm.ClientQuotaEntity{{Type: "client-id", Name: name("")}}, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}, kerr.InvalidRequest},
		{"duplicate type", kadm.ClientQuotaEntity{{Type: "user", Name: name("a")}, {Type: "user", Name: name("b")}}, []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}, kerr.InvalidRequest},
		{"ip", kadm.ClientQuotaEntity{{Type: "ip", Name: name("127.0.0.1")}}, []kadm.AlterClientQuotaOp{{Key: "connection_creation_rate", Value: 1}}, kerr.InvalidRequest},
		{"user and client id", kadm.ClientQuotaEntity{{Type: "user", Name: name("bob")}, {Type: "client-id", Name: name("c1")}}, []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 12.5}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries := []kadm.AlterClientQuotaEntry{{Entity: tc.entity, Ops: tc.ops}}
			validated, err := adm.ValidateAlterClientQuotas(ctx, entries)
			require.NoError(t, err)
			require.Len(t, validated, 1)
			assert.ErrorIs(t, validated[0].Err, tc.wantErr)
			altered, err := adm.AlterClientQuotas(ctx, entries)
			require.NoError(t, err)
			require.Len(t, altered, 1)
			assert.ErrorIs(t, altered[0].Err, tc.wantErr, altered[0].ErrMessage)
		})
	}

	user := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "user", Name: n}
	}
	client := func(n *string) kadm.ClientQuotaEntityComponent {
		return kadm.ClientQuotaEntityComponent{Type: "client-id", Name: n}
	}
	defaultUser := kadm.DescribedClientQuota{Entity: kadm.ClientQuotaEntity{user(nil)}, Values: kadm.ClientQuotaValues{{Key: "consumer_byte_rate", Value: 2097152}}}
	aliceDefault := kadm.DescribedClientQuota{Entity: kadm.ClientQuotaEntity{user(name("alice")), client(nil)}, Values: kadm.ClientQuotaValues{{Key: "request_percentage", Value: 50}}}
	bobC1 := kadm.DescribedClientQuota{Entity: kadm.ClientQuotaEntity{user(name("bob")), client(name("c1"))}, Values: kadm.ClientQuotaValues{{Key: "request_percentage", Value: 12.5}}}
	for _, tc := range []struct {
		name       string
		strict     bool
		components []kadm.DescribeClientQuotaComponent
		want       kadm.DescribedClientQuotas
	}{
		{"everything", false, nil, kadm.DescribedClientQuotas{defaultUser, aliceDefault, bobC1}},
		{"default user", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeDefault}}, kadm.DescribedClientQuotas{defaultUser}},
		{"any user, strict", true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}}, kadm.DescribedClientQuotas{defaultUser}},
		{"any user", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}}, kadm.DescribedClientQuotas{defaultUser, aliceDefault, bobC1}},
		{"bob", false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: name("bob"), MatchType: kmsg.QuotasMatchTypeExact}}, kadm.DescribedClientQuotas{bobC1}},
		{"default client id", false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchType: kmsg.QuotasMatchTypeDefault}}, kadm.DescribedClientQuotas{aliceDefault}},
		{"no such client", false, []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: name("c9"), MatchType: kmsg.QuotasMatchTypeExact}}, nil},
	} {
		t.Run("describe "+tc.name, func(t *testing.T) {
			got, err := adm.DescribeClientQuotas(ctx, tc.strict, tc.components)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeExact}})
	assert.ErrorIs(t, err, kerr.InvalidRequest, "exact with a null name")
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "group", MatchType: kmsg.QuotasMatchTypeAny}})
	assert.ErrorIs(t, err, kerr.UnsupportedVersion)
}

// With super.users set (the example's stand-in for an authorizer) only a
// super user may describe or alter client quotas.
func TestClientQuotaAuthorization(t *testing.T) {
	c := startDefaultCluster(t, "super.users=User:alice")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entries := []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id"}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1000}}}}
	for _, tc := range []struct {
		user, password string
		wantErr        error
	}{
		{"bob", "bob-secret", kerr.ClusterAuthorizationFailed},
		{"alice", "alice-secret", nil},
	} {
		t.Run(tc.user, func(t *testing.T) {
			adm := kadm.NewClient(newClient(t, addr(t, c, 0, "CLIENT"), kgo.SASL(saslMechanism("PLAIN", tc.user, tc.password))))
			altered, err := adm.AlterClientQuotas(ctx, entries)
			require.NoError(t, err)
			require.Len(t, altered, 1)
			assert.ErrorIs(t, altered[0].Err, tc.wantErr)
			described, err := adm.DescribeClientQuotas(ctx, false, nil)
			assert.ErrorIs(t, err, tc.wantErr)
			if tc.wantErr == nil {
				assert.Len(t, described, 1)
			}
		})
	}
}

// Quotas from kafkanet.client.quotas, and what it refuses.
func TestReadQuotaSettings(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    int // quotas read
		wantErr string
	}{
		{"", 0, ""},
		{"clients/<default>:producer_byte_rate=1048576;users/alice:consumer_byte_rate=2097152,request_percentage=200", 3, ""},
		{"users/alice/clients/c1:producer_byte_rate=10 ; users/<default>/clients/<default>:request_percentage=0.5", 2, ""},
		{"users/alice", 0, "want <entity>:<key>=<value>"},
		{"topics/a:producer_byte_rate=1", 0, "want users/<user>"},
		{"users/:producer_byte_rate=1", 0, "empty user"},
		{"users/alice:producer_byte_rate=1.5", 0, "fractional"},
		{"users/alice:producer_byte_rate", 0, "want <key>=<value>"},
		{"users/alice:fetch_rate=1", 0, "invalid configuration key"},
		{"users/alice:request_percentage=-1", 0, "greater than 0"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			props, err := config.Properties{}.With(clientQuotasProperty + "=" + tc.value)
			require.NoError(t, err)
			s, err := readQuotaSettings(props)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				assert.ErrorContains(t, err, clientQuotasProperty)
				return
			}
			require.NoError(t, err)
			assert.Len(t, s.initial, tc.want)
		})
	}
}

// kcat (librdkafka) producing as a client id with a producer_byte_rate
// quota from kafkanet.client.quotas is held to it: its rate beyond the
// first window's burst (one window of the quota) is the quota's.
// librdkafka 2.0.2 reads throttle_time_ms but sends its next Produce
// regardless: the muted connection holds it.
func TestClientQuotaKcat(t *testing.T) {
	requireTool(t, "kcat", "apt-get install kcat")
	c := startTestCluster(t, 1, append(quotaWindows, clientQuotasProperty+"=clients/quota-kcat:producer_byte_rate="+strconv.Itoa(quotaRate))...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bytes := int64(quotaRunDuration(t)/time.Second+1) * quotaRate
	line := strings.Repeat("k", 10<<10-1) + "\n"
	input := strings.Repeat(line, int(bytes)/len(line))
	cmd := exec.CommandContext(ctx, "kcat", "-b", addr(t, c, 0, "CLIENT"), "-P", "-t", "quota-kcat", "-p", "0",
		"-X", "client.id=quota-kcat", "-X", "compression.codec=none", "-X", "linger.ms=5", "-X", "batch.size=131072")
	cmd.Stdin = strings.NewReader(input)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	require.NoError(t, err, "%s", out)
	requireRate(t, "kcat (beyond the first window's burst)", int64(len(input))-quotaRate, elapsed)
}

// kafkajs, a client stack of its own (pure JavaScript), is held to a
// default client-id quota the same way.
func TestClientQuotaKafkajs(t *testing.T) {
	client := "kafkajs"
	_, ok := clientmatrix.Require(t, client, clientmatrix.NodeInstall, clientmatrix.ProbeNode("kafkajs"))
	if !ok {
		return
	}
	c := startTestCluster(t, 1, append(quotaWindows, clientQuotasProperty+"=clients/<default>:producer_byte_rate="+strconv.Itoa(quotaRate))...)
	dir, err := clientmatrix.Dir()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bytes := int64(quotaRunDuration(t)/time.Second+1) * quotaRate
	out, err := clientmatrix.RunProgram(ctx, client, "node", dir+"/kafkajs_produce_rate.js", addr(t, c, 0, "CLIENT"), "quota-kafkajs", "quota-kafkajs", strconv.FormatInt(bytes, 10))
	require.NoError(t, err)
	m := regexp.MustCompile(`bytes=(\d+) elapsed_ms=(\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "%s", out)
	sent, _ := strconv.ParseInt(m[1], 10, 64)
	ms, _ := strconv.Atoi(m[2])
	requireRate(t, fmt.Sprintf("kafkajs (beyond the first window's burst; %s)", strings.TrimSpace(out)), sent-quotaRate, time.Duration(ms)*time.Millisecond)
}
