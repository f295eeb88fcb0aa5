package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/internal/testkit"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/inorder"
)

// plainLogin opens a connection to addr and logs user in with PLAIN
// (SaslHandshake v1, SaslAuthenticate v1).
func plainLogin(t *testing.T, addr, user, password string) *rawConn {
	t.Helper()
	c := dialRaw(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	require.Zero(t, roundTrip[*kmsg.SASLHandshakeResponse](c, hs).ErrorCode)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version, auth.SASLAuthBytes = 1, []byte("\x00"+user+"\x00"+password)
	require.Zero(t, roundTrip[*kmsg.SASLAuthenticateResponse](c, auth).ErrorCode, "login of %s", user)
	return c
}

// producesOn sends a Produce request (acks=1) on c and requires its success.
func producesOn(t *testing.T, c *rawConn, topic, value string) {
	t.Helper()
	resp := roundTrip[*kmsg.ProduceResponse](c, produceRequest(1, topic, 0, value))
	require.Len(t, resp.Topics, 1)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
}

// alice is limited to 2 connections
// (kafkanet.max.connections.per.principal.overrides): her two keep
// producing while her third, a kgo producer's, is closed each time it
// has logged in, listed with the reason principal-limit; kgo backs off and
// retries rather than fail. bob is not affected. A reload (SIGHUP) that
// raises her limit applies to new connections: the kgo producer's retry
// gets in, and its record is acknowledged.
func TestPrincipalLimitWithKgo(t *testing.T) {
	var log testkit.SyncBuffer
	users := `user_alice="alice-secret" user_bob="bob-secret"`
	path := writeProperties(t, saslFile(users, "kafkanet.max.connections.per.principal.overrides=User:alice:2"))
	c, load := startFromFile(t, path, 1, &log)
	client := addr(t, c, 0, "CLIENT")
	createTopic(t, dialRaw(t, addr(t, c, 0, "REPLICATION")), "limited", 1)

	a1 := plainLogin(t, client, "alice", "alice-secret")
	producesOn(t, a1, "limited", "a1")
	a2 := plainLogin(t, client, "alice", "alice-secret")
	producesOn(t, a2, "limited", "a2")

	third := newClient(t, client, kgo.SASL(saslMechanism("SCRAM-SHA-256", "alice", "alice-secret")),
		kgo.DefaultProduceTopic("limited"), kgo.RecordDeliveryTimeout(time.Minute))
	acked := make(chan error, 1)
	refusing := time.Now()
	third.Produce(context.Background(), &kgo.Record{Value: []byte("third")}, func(_ *kgo.Record, err error) { acked <- err })

	reg := c.brokers[0].srv.Registry()
	refused := func() []connregistry.Conn {
		var out []connregistry.Conn
		for _, conn := range reg.Closed(connregistry.Filter{}) {
			if conn.CloseReason == connregistry.ClosePrincipalLimit {
				out = append(out, conn)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(refused()) >= 2 }, 20*time.Second, 20*time.Millisecond,
		"alice's third connection is not closed for her limit")
	for _, conn := range refused() {
		assert.Equal(t, "alice", conn.Principal.Name)
		assert.Equal(t, "SCRAM-SHA-256", conn.SASLMechanism, "one of her first two was closed")
	}
	select {
	case err := <-acked:
		t.Fatalf("the record of alice's third connection was answered over her limit: %v", err)
	default:
	}
	for i := range 5 { // her first two keep producing
		producesOn(t, a1, "limited", "a1-"+strconv.Itoa(i))
		producesOn(t, a2, "limited", "a2-"+strconv.Itoa(i))
	}
	bob := newClient(t, client, kgo.SASL(saslMechanism("PLAIN", "bob", "bob-secret")), kgo.DefaultProduceTopic("limited"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		require.NoError(t, bob.ProduceSync(ctx, &kgo.Record{Value: []byte("bob-" + strconv.Itoa(i))}).FirstErr(), "bob affected by alice's limit")
	}

	// The refusals so far, without flooding: one line, and one more for
	// each ten seconds the test has run (a loaded machine may take that
	// long; the retries after the reload are not refused).
	refusals := strings.Count(log.String(), "its principal already has the configured maximum of connections")
	assert.GreaterOrEqual(t, refusals, 1, "no refusal logged")
	assert.LessOrEqual(t, refusals, 1+int(time.Since(refusing)/(10*time.Second)), "refusals logged more than once within ten seconds")
	assert.Contains(t, log.String(), "principal=User:alice")

	// Raised at run time: the kgo producer's next attempt gets in.
	require.NoError(t, os.WriteFile(path, []byte(saslFile(users, "kafkanet.max.connections.per.principal.overrides=User:alice:10")), 0o600))
	require.NoError(t, c.reload(context.Background(), load))
	assert.Contains(t, log.String(), "max_connections_per_principal_overrides=1", "the reload's log line omits the per-principal limits")
	select {
	case err := <-acked:
		require.NoError(t, err, "alice's kgo producer failed instead of retrying")
	case <-time.After(30 * time.Second):
		t.Fatal("alice's kgo producer was not let in after her limit was raised")
	}
}

// With kafkanet.connections.max.age.ms=2000, a kgo producer that runs for
// 10 s has its connections closed for their age several times, and
// reconnects without an error reaching the application: every record is
// acknowledged once, and the log holds each once, in order. The producer
// is not idempotent (acks=all, one request in flight, so that its retries
// keep the order): the broker would not drop a batch sent again, so an
// answer lost at a close shows in the log as a record written twice.
func TestMaxAgeWithKgoProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 10 s")
	}
	var log testkit.SyncBuffer
	path := writeProperties(t, saslFile(`user_alice="alice-secret"`, "kafkanet.connections.max.age.ms=2000"))
	c, _ := startFromFile(t, path, 1, &log)
	createTopic(t, dialRaw(t, addr(t, c, 0, "REPLICATION")), "aging", 1)
	cl := newClient(t, addr(t, c, 0, "REPLICATION"), inorder.ProducerOpts("aging")...)
	sent := inorder.Produce(t, cl, 10*time.Second)
	inorder.CheckAged(t, c.brokers[0].srv.Registry().Closed(connregistry.Filter{}), 1800*time.Millisecond, 4)

	// The log holds every record once, in order.
	conn := dialRaw(t, addr(t, c, 0, "REPLICATION"))
	var got []string
	for offset := int64(0); len(got) < sent; {
		resp := roundTrip[*kmsg.FetchResponse](conn, fetchRequest(time.Second, "aging", 0, offset))
		require.Len(t, resp.Topics, 1)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
		recs, _ := recordValues(t, resp.Topics[0].Partitions[0].RecordBatches)
		require.NotEmpty(t, recs, "the log ends at %d of %d records", len(got), sent)
		got = append(got, recs...)
		offset += int64(len(recs))
	}
	inorder.CheckLog(t, got, sent)
}
