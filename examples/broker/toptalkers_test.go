package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/internal/testkit"
)

// Top talkers: two example brokers, three kgo producers
// sending 60, 15 and 3 records one at a time (a Produce request each)
// over real TCP. kafka-client-connections, built and run, with --sort-by
// requests --top 1 names the busiest producer's connection (its client id
// and its socket), on whichever broker it is, in the table and in JSON.
func TestTopTalkerNamedByTheCLI(t *testing.T) {
	kcc := buildClientConnections(t)
	c := startTestCluster(t, 2)
	bootstrap := addr(t, c, 0, "CLIENT") + "," + addr(t, c, 1, "CLIENT")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := map[string]*testkit.RecordingDialer{}
	for _, p := range []struct {
		id      string
		records int
	}{{"busy", 60}, {"steady", 15}, {"quiet", 3}} {
		dialed := &testkit.RecordingDialer{}
		clients[p.id] = dialed
		cl := newClient(t, addr(t, c, 0, "CLIENT"), kgo.ClientID(p.id), kgo.Dialer(dialed.Dial), kgo.DefaultProduceTopic("top-"+p.id),
			kgo.AllowAutoTopicCreation())
		for i := range p.records {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", p.id, i)}).FirstErr())
		}
	}

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, kcc, append([]string{"--bootstrap-server", bootstrap, "--list", "--sort-by", "requests", "--top", "1"}, args...)...).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("kafka-client-connections: %v: %s", err, ee.Stderr)
		}
		require.NoError(t, err)
		return string(out)
	}

	var brokers []struct {
		BrokerID    int32 `json:"BrokerId"`
		Error       string
		Connections []struct {
			ClientID      string `json:"ClientId"`
			ClientAddress string
			ClientPort    int
			Requests      int64
			RequestRate   float64
			Rank          int
		}
	}
	out := run("--output", "json")
	require.NoError(t, json.Unmarshal([]byte(out), &brokers), out)
	require.Len(t, brokers, 2, "both brokers are asked")
	var named []string
	for _, b := range brokers {
		require.Empty(t, b.Error)
		for _, conn := range b.Connections {
			named = append(named, conn.ClientID)
			assert.Equal(t, 1, conn.Rank)
			assert.GreaterOrEqual(t, conn.Requests, int64(60), "its 60 Produce requests at least")
			assert.Greater(t, conn.RequestRate, 60.0/60*0.9, "60 requests within the last seconds: about one a second over the minute")
			assert.True(t, slices.Contains(clients["busy"].Addrs(), fmt.Sprintf("%s:%d", conn.ClientAddress, conn.ClientPort)), "the busy producer's socket")
		}
	}
	assert.Equal(t, []string{"busy"}, named, "one connection, the busy producer's")

	// The table: one row, the same socket.
	lines := strings.Split(strings.TrimSpace(run()), "\n")
	require.Len(t, lines, 2, "a header and one row:\n%s", strings.Join(lines, "\n"))
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	require.Len(t, row, len(header))
	cell := map[string]string{}
	for i, h := range header {
		cell[h] = row[i]
	}
	assert.True(t, slices.Contains(clients["busy"].Addrs(), net.JoinHostPort(cell["CLIENT-ADDRESS"], cell["PORT"])), "%v", cell)
	assert.Contains(t, header, "REQ/S")
}
