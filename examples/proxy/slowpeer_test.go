package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"net"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// A peer that stalls holds none of the inline slots (queued.max.requests)
// that every client's forwarding shares: with one slot, another client's
// Metadata is answered within 2 s, again and again, while a client stalls
// in the middle of a large Produce's body, while upstream stops reading a
// client's Produces, while dialing upstream hangs, and while upstream
// leaves the proxy's SASL renewal unanswered. Each stalled connection is
// closed, with a reason that says why, once its deadline has passed:
// upstream.write.timeout.ms for the request's writing (a streamed body's
// arrival included), upstream.socket.connection.setup.timeout.ms for the
// dial and the renewal. Before, the proxy's inline handler held the slot
// while it waited on the peer, with no deadline: the other client waited
// until connections.max.idle.ms.
func TestSlowPeersHoldNoSlot(t *testing.T) {
	base := testkit.TakeGoroutineBaseline()
	oneSlot := append([]string{"queued.max.requests=1", keyUpstreamWriteTimeout + "=2000",
		keyUpstreamSetupTimeout + "=3000"}, plaintextProxy...)

	t.Run("a client stalled in a Produce body", func(t *testing.T) {
		fake := startFakeUpstream(t)
		fake.serveProduce(func(int32, int16) []byte { return nil }) // never asked: the body never arrives
		p := startProxy(t, fake.addr(), nil, oneSlot...)
		other := dialRaw(t, p.addr(t, "PLAIN"))
		other.roundTrip(t, metadataRequest(12)) // its upstream connection is up

		stalled := dialRaw(t, p.addr(t, "PLAIN"))
		frame := formatter.AppendRequest(nil, produceOfSize(1<<20), 1) // streamed (above 64 KiB)
		_, err := stalled.Write(frame[:256<<10])
		require.NoError(t, err)
		requireServedUntilClosed(t, p, other, stalled, forwardTimeoutReason)
	})

	t.Run("an upstream that stops reading", func(t *testing.T) {
		fake := startFakeUpstream(t)
		fake.serveProduce(func(int32, int16) []byte { return nil })
		p := startProxy(t, fake.addr(), &proxyOptions{dial: smallSendBuffers}, oneSlot...)
		other := dialRaw(t, p.addr(t, "PLAIN"))
		other.roundTrip(t, metadataRequest(12))

		fake.stopReadingAt(kmsg.Produce, 4<<10)
		stalled := dialRaw(t, p.addr(t, "PLAIN"))
		for range pipelineDepth { // read whole (under 64 KiB), and pipelined: all go upstream, and fill the sockets
			stalled.send(t, produceOfSize(60<<10))
		}
		requireServedUntilClosed(t, p, other, stalled, upstreamTimeoutReason)
	})

	t.Run("a dial that hangs", func(t *testing.T) {
		fake := startFakeUpstream(t)
		var hang atomic.Bool
		dialing := make(chan struct{}, 1)
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			if hang.Load() {
				dialing <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		p := startProxy(t, fake.addr(), &proxyOptions{dial: dial}, oneSlot...)
		other := dialRaw(t, p.addr(t, "PLAIN"))
		other.roundTrip(t, metadataRequest(12))

		hang.Store(true)
		stalled := dialRaw(t, p.addr(t, "PLAIN"))
		stalled.send(t, metadataRequest(12))
		select {
		case <-dialing:
		case <-time.After(10 * time.Second):
			t.Fatal("the proxy did not dial upstream")
		}
		requireServedUntilClosed(t, p, other, stalled, upstreamCloseReason)
	})

	t.Run("a renewal left unanswered", func(t *testing.T) {
		fake := startFakeUpstream(t)
		p := startProxy(t, fake.addr(), nil, append([]string{"upstream.security.protocol=SASL_PLAINTEXT",
			"upstream.sasl.username=proxy", "upstream.sasl.password=proxy-secret"}, oneSlot...)...)
		other := dialRaw(t, p.addr(t, "PLAIN"))
		other.roundTrip(t, metadataRequest(12)) // logged in for ever

		fake.stallRenewalsAfter(200 * time.Millisecond)
		stalled := dialRaw(t, p.addr(t, "PLAIN"))
		stalled.roundTrip(t, metadataRequest(12)) // logged in for 200 ms
		time.Sleep(300 * time.Millisecond)
		stalled.send(t, metadataRequest(12)) // renews first
		requireServedUntilClosed(t, p, other, stalled, upstreamTimeoutReason)
		require.Positive(t, fake.sent(kmsg.SASLAuthenticate))
	})

	base.RequireReturned(t)
}

// requireServedUntilClosed sends other's Metadata requests, one after the
// other, each answered within 2 s, until the proxy has closed stalled's
// connection (10 s at most); it must be closed for reason.
func requireServedUntilClosed(t *testing.T, p *testProxy, other, stalled *rawConn, reason connregistry.CloseReason) {
	t.Helper()
	start := time.Now()
	for n := 0; ; n++ {
		if c, ok := closedConn(p, stalled); ok {
			require.Equal(t, reason, c.CloseReason, "why the stalled connection closed")
			t.Logf("the stalled connection closed after %v (%s); %d Metadata requests answered meanwhile",
				time.Since(start).Round(time.Millisecond), c.CloseReason, n)
			return
		}
		require.Less(t, time.Since(start), 10*time.Second, "the stalled connection is still open")
		sent := time.Now()
		corr := other.send(t, metadataRequest(12))
		require.NoError(t, other.SetReadDeadline(sent.Add(2*time.Second)))
		frame, err := readFrame(other, 1<<20)
		require.NoError(t, err, "Metadata %d not answered within 2 s while a peer stalls", n)
		require.Equal(t, corr, int32(binary.BigEndian.Uint32(frame)), "correlation id")
		time.Sleep(100 * time.Millisecond)
	}
}

// closedConn returns the listing of c's connection at the proxy once it
// has closed.
func closedConn(p *testProxy, c *rawConn) (connregistry.Conn, bool) {
	_, port := hostPort(c.LocalAddr().String())
	for _, conn := range p.srv.Registry().Closed(connregistry.Filter{}) {
		if strconv.Itoa(int(conn.ClientAddr.Port())) == port {
			return conn, true
		}
	}
	return connregistry.Conn{}, false
}

// produceOfSize is a Produce v10 (acks=1) with n bytes of records, which
// nothing here decodes.
func produceOfSize(n int) *kmsg.ProduceRequest {
	req := produceTo("t", 0, 1)
	req.Version = 10
	req.Topics[0].Partitions[0].Records = make([]byte, n)
	return req
}

// smallSendBuffers dials upstream with an 8 KiB send buffer, so that an
// upstream that stops reading blocks the proxy's writes soon.
func smallSendBuffers(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		_ = c.(*net.TCPConn).SetWriteBuffer(8 << 10)
	}
	return c, err
}

// Upstream over TLS, every request goes through the connection's writer
// (a TLS write that times out cannot go on, so the handler writes none
// itself): decoded ones, whose answers the writer awaits, raw ones, and a
// streamed Produce, whose body goes from the client's socket into the TLS
// connection. kgo produces and consumes through the proxy with a group,
// and a record of 300 KiB comes back whole.
func TestUpstreamOverTLS(t *testing.T) {
	cert := socketservertest.NewServerCert(t, "127.0.0.1")
	up := startUpstream(t, 1,
		"listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,REPLICATION://127.0.0.1:0,SECURE://127.0.0.1:0",
		"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT,SECURE:SSL",
		"listener.name.secure.ssl.keystore.type=PEM", "listener.name.secure.ssl.keystore.location="+cert.KeyStoreFile)
	p := startProxy(t, up.Addr(0, "SECURE"), nil, append([]string{"upstream.security.protocol=SSL",
		"upstream.ssl.truststore.location=" + cert.CAFile}, plaintextProxy...)...)
	produceConsume(t, p.addr(t, "PLAIN"), "over-tls", "over-tls-group")

	big := make([]byte, 300<<10)
	_, _ = rand.Read(big)
	ctx := ctxFor(t, 30*time.Second)
	producer := newClient(t, p.addr(t, "PLAIN"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, producer.ProduceSync(ctx, &kgo.Record{Topic: "over-tls", Partition: 1, Value: big}).FirstErr())
	consumer := newClient(t, p.addr(t, "PLAIN"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"over-tls": {1: kgo.NewOffset().AtStart()}}), kgo.FetchMaxPartitionBytes(1<<20))
	for {
		fetches := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "the large record did not come back")
		require.NoError(t, fetches.Err())
		for _, r := range fetches.Records() {
			if len(r.Value) == len(big) {
				require.True(t, bytes.Equal(big, r.Value), "the large record came back changed")
				return
			}
		}
	}
}

// A producer's streamed requests, each the writer's, are written by one
// goroutine: once the queue is empty the writer waits for the next request
// (answerLinger, as the answers' reader does), then ends; a client that
// leaves ends its wait at once. Before, the writer ended after each
// request, and the next one started another goroutine, which grew its
// stack again to the depth of a splice.
func TestWriterLingersThenEnds(t *testing.T) {
	fake := startFakeUpstream(t)
	host, portText, _ := net.SplitHostPort(fake.addr())
	port, _ := strconv.Atoi(portText)
	fake.serveProduce(func(corr int32, version int16) []byte {
		resp := produceAnswer(false, false, host, int32(port))
		resp.SetVersion(version)
		return responseBytes(resp, corr)
	})
	// writerID is the goroutine id of the session's writer, "" when none
	// runs.
	writerID := func() string {
		var b bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		for g := range strings.SplitSeq(b.String(), "\n\n") {
			if strings.Contains(g, "(*session).writeQueued(") {
				id, _, _ := strings.Cut(strings.TrimPrefix(g, "goroutine "), " ")
				return id
			}
		}
		return ""
	}
	produce := func(t *testing.T, c *rawConn) {
		resp := c.roundTrip(t, produceOfSize(256<<10)).(*kmsg.ProduceResponse) // streamed (above 64 KiB): the writer's
		require.Len(t, resp.Topics, 1)
	}

	t.Run("one writer for a producer", func(t *testing.T) {
		p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: time.Hour}, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		var first string
		for i := range 5 {
			produce(t, c)
			require.Eventually(t, func() bool { return goroutinesIn("(*session).awaitQueued") == 1 }, 10*time.Second, time.Millisecond,
				"the writer waits for the next request")
			if i == 0 {
				first = writerID()
			}
			require.Equal(t, first, writerID(), "request %d was written by another goroutine", i)
		}
		c.roundTrip(t, metadataRequest(12)) // inline, beside the waiting writer
		require.Equal(t, first, writerID())
		require.NoError(t, c.Close())
		require.Eventually(t, func() bool { return writerID() == "" }, 10*time.Second, time.Millisecond,
			"the writer still waits after its client left")
	})
	t.Run("ends after its wait", func(t *testing.T) {
		p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: 200 * time.Millisecond}, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		produce(t, c)
		require.Eventually(t, func() bool { return writerID() == "" }, 10*time.Second, 10*time.Millisecond)
		produce(t, c) // a new writer
	})
	t.Run("ending as a request comes", func(t *testing.T) {
		// The wait ends as the next request is queued, over and over: each
		// request is answered, whichever way the race goes.
		p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: 300 * time.Microsecond}, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		for i := range 100 {
			produce(t, c)
			time.Sleep(time.Duration(i%7) * 100 * time.Microsecond)
		}
	})
}
