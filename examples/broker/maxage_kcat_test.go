package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
)

// With kafkanet.connections.max.age.ms=1000, a kcat producer fed a line
// every 20 ms for 5 s and a kcat consumer reading at the same time have
// their connections closed for their age several times: librdkafka
// reconnects, every message produced is consumed exactly once and in
// order, both exit 0 and print nothing on standard error, and
// ListClientConnections lists kcat's connections closed with the reason
// max-age.
func TestMaxAgeWithKcat(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 5 s")
	}
	kcat := requireTool(t, "kcat", "apt-get install kcat")
	c := startDefaultCluster(t, "kafkanet.connections.max.age.ms=1000")
	client := addr(t, c, 0, "CLIENT")
	const topic = "aging-kcat"
	createTopic(t, dialRaw(t, addr(t, c, 0, "REPLICATION")), topic, 1)
	// librdkafka takes a close by the broker of a connection younger than a
	// minute for an error: it logs it and hands the application an error
	// event, unless log.connection.close=false, its setting for brokers that
	// close connections on purpose (Kafka's connections.max.idle.ms). Its
	// ALL_BROKERS_DOWN event, raised whenever its last open connection
	// closes, whoever closes it, kcat prints and, without -E, exits on; with
	// -E it goes on, as librdkafka itself does (it reconnects).
	alice := []string{"-b", client, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
		"-X", "sasl.username=alice", "-X", "sasl.password=alice-secret", "-X", "log.connection.close=false", "-E"}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const lines, every = 250, 20 * time.Millisecond // 5 s: at least four ages of each connection
	var consumerOut, consumerErr bytes.Buffer
	consumer := exec.CommandContext(ctx, kcat, append([]string{"-C", "-t", topic, "-o", "beginning", "-c", fmt.Sprint(lines), "-q"}, alice...)...)
	consumer.Stdout, consumer.Stderr = &consumerOut, &consumerErr
	require.NoError(t, consumer.Start())
	consumed := make(chan error, 1)
	go func() { consumed <- consumer.Wait() }()

	var producerErr bytes.Buffer
	producer := exec.CommandContext(ctx, kcat, append([]string{"-P", "-t", topic}, alice...)...)
	producer.Stderr = &producerErr
	stdin, err := producer.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, producer.Start())
	var want []string
	for i := range lines {
		want = append(want, fmt.Sprintf("message %03d", i))
		if _, err := fmt.Fprintln(stdin, want[i]); err != nil {
			t.Fatalf("the kcat producer ended (%v) after %d messages: %s", producer.Wait(), i, producerErr.String())
		}
		time.Sleep(every)
	}
	require.NoError(t, stdin.Close())
	require.NoError(t, producer.Wait(), "the kcat producer: %s", producerErr.String())
	requireOnlyAllBrokersDown(t, "producer", producerErr.String())
	select {
	case err := <-consumed:
		require.NoError(t, err, "the kcat consumer: %s", consumerErr.String())
	case <-ctx.Done():
		t.Fatalf("the kcat consumer did not get every message: %d lines\n%s", strings.Count(consumerOut.String(), "\n"), consumerErr.String())
	}
	requireOnlyAllBrokersDown(t, "consumer", consumerErr.String())
	assert.Equal(t, want, strings.Split(strings.TrimSuffix(consumerOut.String(), "\n"), "\n"), "each message consumed once, in order")
	// The log holds each message once: its end is the count produced.
	lister := newClient(t, addr(t, c, 0, "REPLICATION"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey))
	requireHighWatermark(t, lister, topic, lines)

	principal := "User:alice"
	res, err := connadmin.New(lister, 0, 0).List(ctx, connregistry.Filter{Principal: &principal}, true)
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)
	aged := 0
	for _, conn := range res[0].Connections {
		if conn.CloseReason != string(connregistry.CloseMaxAge) {
			continue
		}
		aged++
		assert.Equal(t, "librdkafka", conn.SoftwareName)
		age := time.Duration(conn.ClosedAt-conn.ConnectedSince) * time.Millisecond
		assert.GreaterOrEqual(t, age, 850*time.Millisecond, "closed before its age less the jitter")
	}
	assert.GreaterOrEqual(t, aged, 4, "kcat's connections were not closed for their age several times")
}

// allBrokersDown is the line kcat prints for librdkafka's ALL_BROKERS_DOWN
// event, which -E makes it survive.
var allBrokersDown = regexp.MustCompile(`^% ERROR: Local: All broker connections are down: 1/1 brokers are down$`)

// requireOnlyAllBrokersDown fails unless kcat's standard error holds
// nothing but ALL_BROKERS_DOWN notices: no failed delivery, no transport
// error, no other log line.
func requireOnlyAllBrokersDown(t *testing.T, which, stderr string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if line == "" {
			continue
		}
		require.Regexp(t, allBrokersDown, line, "the kcat %s printed an error:\n%s", which, stderr)
		n++
	}
	t.Logf("the kcat %s saw its only connection closed and reported ALL_BROKERS_DOWN %d times", which, n)
}
