package main

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// ports returns the ports the proxy serves listener name on: its
// bootstrap port and the port of each upstream broker.
func (tp *testProxy) ports(name string) map[string]bool {
	tp.mu.Lock()
	ps := tp.listeners[protocolName(name)]
	tp.mu.Unlock()
	out := map[string]bool{}
	if ps == nil {
		return out
	}
	_, port, _ := net.SplitHostPort(ps.Addr().String())
	out[port] = true
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for p := range ps.byPort {
		out[strconv.Itoa(p)] = true
	}
	return out
}

// No upstream address ever reaches a client: a kgo client produces,
// consumes through a consumer group and commits, and asks for the
// cluster's metadata, its description and a group's coordinator, at the
// API versions of Kafka 0.11, 2.4, 3.0 and the newest; every response it
// receives is decoded (wiretap), and each holds only the proxy's
// addresses, never one of upstream's, in any field.
func TestNoUpstreamAddressReachesAClient(t *testing.T) {
	up := startUpstream(t, 3)
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil, plaintextProxy...)
	var upstream []string
	for i := range 3 {
		for _, l := range []string{"CLIENT", "INTERNAL", "REPLICATION"} {
			upstream = append(upstream, up.Addr(i, l))
		}
	}
	tap := &wiretap{check: noUpstreamAddress(upstream, func() map[string]bool { return p.ports("PLAIN") }, "127.0.0.1")}
	for _, tc := range []struct {
		name     string
		versions *kversion.Versions
	}{
		{"0.11", kversion.V0_11_0()}, {"2.4", kversion.V2_4_0()}, {"3.0", kversion.V3_0_0()}, {"newest", kversion.Stable()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "rewrite-" + tc.name
			produceConsume(t, p.addr(t, "PLAIN"), topic, "group-"+tc.name, kgo.Dialer(tap.Dial), kgo.MaxVersions(tc.versions))
			cl := newClient(t, p.addr(t, "PLAIN"), kgo.Dialer(tap.Dial), kgo.MaxVersions(tc.versions))
			ctx := ctxFor(t, 20*time.Second)
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey, fc.CoordinatorKeys = "group-"+tc.name, []string{"group-" + tc.name}
			_, err := fc.RequestWith(ctx, cl)
			require.NoError(t, err)
			if _, ok := tc.versions.LookupMaxKeyVersion(int16(kmsg.DescribeCluster)); ok {
				_, err = kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
				require.NoError(t, err)
			}
			_, err = kmsg.NewPtrListGroupsRequest().RequestWith(ctx, cl)
			require.NoError(t, err)
		})
	}
	tap.mu.Lock()
	failures := tap.failures
	tap.mu.Unlock()
	require.Empty(t, failures, "responses that show upstream's addresses")
	seen := tap.seen()
	t.Logf("responses decoded: %v", seen)
	for _, api := range []string{"Metadata", "FindCoordinator", "DescribeCluster", "Produce", "Fetch", "JoinGroup", "OffsetCommit"} {
		assert.Positive(t, seen[api], "no %s response was seen", api)
	}
}

// produceConsume creates topic with 3 partitions through the proxy at
// seed, produces 9 records to it, consumes them through group and
// commits, each client with opts.
func produceConsume(t *testing.T, seed, topic, group string, opts ...kgo.Opt) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 3, 1
	create.Topics = append(create.Topics, rt)
	created, err := create.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(created.Topics[0].ErrorCode))
	var records []*kgo.Record
	for i := range 9 {
		records = append(records, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	require.NoError(t, cl.ProduceSync(ctx, records...).FirstErr())

	consumer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit()}, opts...)...)
	require.NoError(t, err)
	defer consumer.Close()
	got := 0
	for got < 9 {
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of 9", got)
		require.NoError(t, fetches.Err())
		got += fetches.NumRecords()
	}
	require.NoError(t, consumer.CommitUncommittedOffsets(ctx))

}
