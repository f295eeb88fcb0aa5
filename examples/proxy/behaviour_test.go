package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// produceTo returns a Produce request (v7, acks=1) of one record to a
// partition.
func produceTo(topic string, partition int32, acks int16) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, acks, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	var batch []byte
	{
		r := kmsg.Record{Value: []byte("routed")}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		records := r.AppendTo(nil)
		now := time.Now().UnixMilli()
		b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: records}
		b.Length = int32(49 + len(records))
		batch = b.AppendTo(nil)
		binary.BigEndian.PutUint32(batch[17:21], crc32.Checksum(batch[21:], crc32.MakeTable(crc32.Castagnoli)))
	}
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// A request on an upstream broker's port goes to that broker: a Produce
// to the partition broker 1 leads succeeds on broker 1's port and gets
// NOT_LEADER_OR_FOLLOWER on broker 0's, as it would from the brokers
// themselves; and an acks=0 Produce is forwarded without an answer, the
// connection going on with the next request in order.
func TestRequestsGoToTheirBroker(t *testing.T) {
	up := startUpstream(t, 3)
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil, plaintextProxy...)
	produceConsume(t, p.addr(t, "PLAIN"), "routed", "routed-group")

	on1 := dialRaw(t, p.nodeAddr(t, "PLAIN", 1))
	resp := on1.roundTrip(t, produceTo("routed", 1, 1)).(*kmsg.ProduceResponse)
	assert.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, "broker 1 leads partition 1")
	on0 := dialRaw(t, p.nodeAddr(t, "PLAIN", 0))
	resp = on0.roundTrip(t, produceTo("routed", 1, 1)).(*kmsg.ProduceResponse)
	assert.Equal(t, kerr.NotLeaderForPartition.Code, resp.Topics[0].Partitions[0].ErrorCode, "broker 0 does not lead partition 1")

	// acks=0, then a request answered: the answer is the second request's.
	on1.send(t, produceTo("routed", 1, 0))
	meta := metadataRequest(1, "routed")
	got := kmsg.NewPtrMetadataResponse()
	got.Version = 1
	on1.read(t, got, on1.send(t, meta))
	require.Len(t, got.Topics, 1)
	high := highWatermarks(t, up.Addr(0, "INTERNAL"), "routed", 3)
	assert.Equal(t, int64(3+2), high[1], "3 records produced through the group test, then two through broker 1's port")
}

// The proxy's ApiVersions answer is what every upstream broker and the
// proxy support: the fake upstream's Metadata, ListGroups and
// DescribeCluster at its versions, and ApiVersions and SASL at the proxy's
// own (it answers them); nothing else. A client's SASL request on a
// PLAINTEXT listener is never forwarded.
func TestApiVersionsIntersectUpstream(t *testing.T) {
	fake := startFakeUpstream(t)
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	c := dialRaw(t, p.addr(t, "PLAIN"))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp := c.roundTrip(t, req).(*kmsg.ApiVersionsResponse)
	require.Zero(t, resp.ErrorCode)
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	assert.Equal(t, map[int16][2]int16{
		int16(kmsg.Metadata): {0, 12}, int16(kmsg.ListGroups): {0, 4}, int16(kmsg.DescribeCluster): {0, 1},
		int16(kmsg.ApiVersions): {0, 4}, int16(kmsg.SASLHandshake): {0, 1}, int16(kmsg.SASLAuthenticate): {0, 2},
	}, got)

	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	sasl := dialRaw(t, p.addr(t, "PLAIN"))
	sasl.send(t, hs)
	_, _ = readFrame(sasl, 1<<20) // answered or closed by the proxy, never forwarded
	sasl.Close()
	assert.Zero(t, fake.sent(kmsg.SASLHandshake), "a client's SaslHandshake reached upstream")
	assert.Zero(t, fake.sent(kmsg.SASLAuthenticate))
}

// Connection quotas and KIP-306 apply at the proxy: a wrong password is
// refused with SASL_AUTHENTICATION_FAILED after
// connection.failed.authentication.delay.ms, and a client address with
// max.connections.per.ip connections has its next one closed at once.
func TestQuotasAndFailedAuthenticationDelay(t *testing.T) {
	up := startUpstream(t, 1)
	const delay = 800 * time.Millisecond
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil,
		"listeners=SASL://127.0.0.1:0",
		"listener.security.protocol.map=SASL:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=PLAIN",
		"listener.name.sasl.plain.sasl.jaas.config="+proxyJAAS,
		"connection.failed.authentication.delay.ms="+fmt.Sprint(delay.Milliseconds()),
		"max.connections.per.ip=2")
	addr := p.addr(t, "SASL")

	cl := newClient(t, addr, socketservertest.KgoSASL("PLAIN", "alice", "wrong"), kgo.RequestRetries(0))
	start := time.Now()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 10*time.Second), cl)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	assert.GreaterOrEqual(t, elapsed, delay, "the refusal came before connection.failed.authentication.delay.ms")
	cl.Close()
	require.Eventually(t, func() bool { return p.srv.Registry().Len() == 0 }, 5*time.Second, 10*time.Millisecond)

	for range 2 {
		dialRaw(t, addr).roundTrip(t, kmsg.NewPtrApiVersionsRequest())
	}
	third := dialRaw(t, addr)
	third.send(t, kmsg.NewPtrApiVersionsRequest())
	third.requireRefused(t, 5*time.Second)
}

// The proxy's upstream SASL session ends after the broker's
// connections.max.reauth.ms (KIP-368), and the broker closes a
// connection that goes on after it; the proxy logs in again on the same
// connection before, so a client's connection keeps being served.
func TestUpstreamReauthentication(t *testing.T) {
	up := startUpstream(t, 1, "listener.name.client.connections.max.reauth.ms=1500")
	p := startProxy(t, up.Addr(0, "CLIENT"), nil, append([]string{
		"upstream.security.protocol=SASL_PLAINTEXT", "upstream.sasl.mechanism=SCRAM-SHA-256",
		"upstream.sasl.username=proxy", "upstream.sasl.password=proxy-secret",
	}, plaintextProxy...)...)
	c := dialRaw(t, p.addr(t, "PLAIN"))
	deadline := time.Now().Add(4 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		resp := c.roundTrip(t, metadataRequest(4)).(*kmsg.MetadataResponse)
		require.Len(t, resp.Brokers, 1)
		n++
		time.Sleep(300 * time.Millisecond)
	}
	t.Logf("%d requests over one client connection across two upstream session lifetimes", n)
}

// Shutdown drains as the broker does: a long-poll Fetch waiting upstream
// is answered before its connection closes, producers' acknowledged
// records are all upstream, and nothing is left running.
func TestShutdownDrains(t *testing.T) {
	up := startUpstream(t, 3)
	base := testkit.TakeGoroutineBaseline()
	p := startProxy(t, up.Addr(0, "INTERNAL"), nil, plaintextProxy...)
	seed := p.addr(t, "PLAIN")
	produceConsume(t, seed, "drain", "drain-group")
	produceConsume(t, seed, "drain-idle", "drain-idle-group")

	// A long poll on broker 0's port for a partition no record comes to:
	// it waits 2 s.
	poll := dialRaw(t, p.nodeAddr(t, "PLAIN", 0))
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version, fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MinBytes, fetch.SessionEpoch = 11, -1, 2000, 1, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "drain-idle"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, 3, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	pollCorr := poll.send(t, fetch)

	type ack struct {
		partition int32
		offset    int64
	}
	var (
		mu   sync.Mutex
		acks = map[string]ack{}
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	var clients []*kgo.Client
	for i := range 3 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.DefaultProduceTopic("drain"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(3*time.Second), kgo.RetryTimeout(3*time.Second), kgo.MaxBufferedRecords(200))
		require.NoError(t, err)
		clients = append(clients, cl)
		wg.Go(func() {
			for j := 0; !stop.Load(); j++ {
				v := fmt.Sprintf("p%d-%d", i, j)
				r := kgo.StringRecord(v)
				r.Partition = int32(j % 3)
				cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
					if err == nil {
						mu.Lock()
						acks[v] = ack{r.Partition, r.Offset}
						mu.Unlock()
					}
				})
			}
		})
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(acks) > 1000 }, 20*time.Second, 5*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // the long poll is upstream by now

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, p.Shutdown(ctx))
	took := time.Since(start)
	t.Logf("Shutdown took %v with a long poll and producers in flight", took)
	assert.Greater(t, took, time.Second, "Shutdown did not wait for the long poll")
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	poll.read(t, resp, pollCorr)
	assert.Zero(t, resp.ErrorCode, "the long poll is answered before its connection closes")
	poll.requireClosed(t, 5*time.Second)
	_, err := net.DialTimeout("tcp", seed, time.Second)
	assert.Error(t, err, "the proxy still accepts connections")

	stop.Store(true)
	for _, cl := range clients {
		cl.Close()
	}
	wg.Wait()
	p.close()
	base.RequireReturned(t)

	// Every acknowledged record is upstream, at its offset.
	mu.Lock()
	defer mu.Unlock()
	stored := map[ack]string{}
	consumer := newClient(t, up.Addr(0, "INTERNAL"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"drain": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	high := highWatermarks(t, up.Addr(0, "INTERNAL"), "drain", 3)
	total := high[0] + high[1] + high[2]
	cctx := ctxFor(t, 30*time.Second)
	for int64(len(stored)) < total {
		fetches := consumer.PollFetches(cctx)
		require.NoError(t, cctx.Err())
		fetches.EachRecord(func(r *kgo.Record) { stored[ack{r.Partition, r.Offset}] = string(r.Value) })
	}
	for v, a := range acks {
		require.Equal(t, v, stored[a], "acknowledged record %s at %d/%d", v, a.partition, a.offset)
	}
	t.Logf("%d acknowledged records all upstream", len(acks))
}
