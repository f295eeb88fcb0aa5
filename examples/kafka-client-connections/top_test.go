package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
)

// Top talkers across a cluster of two: alice sends 40 Metadata requests
// to broker 1, bob 20 to broker 0. --sort-by requests --top 2 shows
// alice's connection then bob's, with their rates, though broker 0 is
// listed first without an order; --top alone sorts by requests too;
// --output json numbers them.
func TestSortByAndTop(t *testing.T) {
	c := startCluster(t, 2, nil)
	alice, aliceAddr := connectClient(t, c.Brokers[1], "PLAIN", "alice")
	bob, bobAddr := connectClient(t, c.Brokers[0], "SCRAM-SHA-256", "bob")
	send(t, alice, 40)
	send(t, bob, 20)
	admin := commandConfig(t, "PLAIN", "admin")

	for _, args := range [][]string{{"--sort-by", "requests", "--top", "2"}, {"--top", "2"}} {
		res := runCLI(t, append([]string{"--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", admin}, args...)...)
		require.Equal(t, 0, res.code, res.stderr)
		header, rows := table(t, res.stdout)
		assert.Equal(t, tableHeader, header)
		require.Len(t, rows, 2, res.stdout)
		at := func(r map[string]string) string { return net.JoinHostPort(r["CLIENT-ADDRESS"], r["PORT"]) }
		assert.Equal(t, aliceAddr, at(rows[0]), "%v: alice's connection, the busiest, first", args)
		assert.Equal(t, "1", rows[0]["BROKER"])
		assert.Equal(t, bobAddr, at(rows[1]), "%v: then bob's", args)
		assert.Equal(t, "0", rows[1]["BROKER"])
		first, err := strconv.ParseFloat(rows[0]["REQ/S"], 64)
		require.NoError(t, err)
		second, err := strconv.ParseFloat(rows[1]["REQ/S"], 64)
		require.NoError(t, err)
		assert.Greater(t, first, second)
		assert.Greater(t, first, 40.0/60*0.9, "40 requests within seconds: about 40/60 per second")
	}

	res := runCLI(t, "--bootstrap-server", c.Brokers[0].Client, "--list", "--command-config", admin, "--sort-by", "bytes-out", "--top", "1", "--output", "json")
	require.Equal(t, 0, res.code, res.stderr)
	var brokers []jsonBroker
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &brokers))
	require.Len(t, brokers, 2)
	assert.Empty(t, brokers[0].Connections, "the cluster's top 1 is on broker 1")
	require.Len(t, brokers[1].Connections, 1)
	top := brokers[1].Connections[0]
	assert.Equal(t, aliceAddr, net.JoinHostPort(top.ClientAddress, strconv.Itoa(int(top.ClientPort))))
	assert.Equal(t, 1, top.Rank)
	assert.Positive(t, top.BytesOutRate)
	assert.Positive(t, top.BytesInRate)
	assert.Positive(t, top.RequestRate)
}

// send sends n Metadata requests on cl's one connection.
func send(t *testing.T, cl *kgo.Client, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range n {
		_, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
		require.NoError(t, err)
	}
}

// The rates in both formats, from records; a listing without an order
// has no Rank.
func TestRatesShown(t *testing.T) {
	results := []connadmin.BrokerResult{{NodeID: 1, Connections: []connregistry.ConnectionRecord{
		{ConnectionID: "busy", Principal: "User:a", ClientAddress: "127.0.0.1", ClientPort: 1, ListenerName: "L", SecurityProtocol: "PLAINTEXT", ConnectedSince: 1,
			RequestRate: 12.345, BytesInRate: 2048, BytesOutRate: 0.5},
		{ConnectionID: "old", Principal: "User:a", ClientAddress: "127.0.0.1", ClientPort: 2, ListenerName: "L", SecurityProtocol: "PLAINTEXT", ConnectedSince: 1},
	}}}
	var b bytes.Buffer
	require.NoError(t, printTable(&b, results, false))
	_, rows := table(t, b.String())
	require.Len(t, rows, 2)
	assert.Equal(t, []string{"12.35", "2048.00", "0.50"}, []string{rows[0]["REQ/S"], rows[0]["IN-B/S"], rows[0]["OUT-B/S"]})
	assert.Equal(t, []string{"0.00", "0.00", "0.00"}, []string{rows[1]["REQ/S"], rows[1]["IN-B/S"], rows[1]["OUT-B/S"]}, "a broker that predates the rates")
	b.Reset()
	require.NoError(t, printJSON(&b, results))
	var got []jsonBroker
	require.NoError(t, json.Unmarshal(b.Bytes(), &got))
	require.Len(t, got[0].Connections, 2)
	assert.Equal(t, 12.345, got[0].Connections[0].RequestRate)
	assert.Equal(t, 2048.0, got[0].Connections[0].BytesInRate)
	assert.Equal(t, 0.5, got[0].Connections[0].BytesOutRate)
	assert.Zero(t, got[0].Connections[0].Rank)
	assert.Contains(t, b.String(), `"RequestRate": 0,`, "a zero rate is shown, not left out")
}
