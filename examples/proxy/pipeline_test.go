package main

import (
	"bufio"
	"bytes"
	"net"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
)

// A client's requests of APIs forwarded raw go upstream as the client
// sends them, without waiting for the answers before them: an upstream
// that answers only once it holds three ListGroups requests gets them all,
// and the client its answers, in order. A proxy that forwarded one request
// at a time would wait forever for the first answer.
func TestRequestsPipelinedUpstream(t *testing.T) {
	const inFlight = 3
	require.GreaterOrEqual(t, pipelineDepth, inFlight)
	fake := startFakeUpstream(t)
	var held []int32
	var heldVersion int16
	fake.setAnswer(func(key kmsg.Key, corr int32, version int16) ([]byte, bool) {
		if key != kmsg.ListGroups {
			return fake.good(key, corr, version)
		}
		held, heldVersion = append(held, corr), version // serve's goroutine only
		if len(held) < inFlight {
			return nil, false // held: answered with the last
		}
		var out []byte
		for _, c := range held {
			b, _ := fake.good(key, c, heldVersion)
			out = append(out, b...)
		}
		held = nil
		return out, false
	})
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	c := dialRaw(t, p.addr(t, "PLAIN"))
	var corrs []int32
	for range inFlight {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 4
		corrs = append(corrs, c.send(t, req))
	}
	for _, corr := range corrs {
		resp := kmsg.NewPtrListGroupsResponse()
		resp.Version = 4
		c.read(t, resp, corr)
	}
	require.Equal(t, inFlight, fake.sent(kmsg.ListGroups))
}

// The proxy leaves its client sockets' buffers to the operating system
// unless Kafka's keys size them (osSocketBuffers).
func TestSocketBuffersLeftToTheSystem(t *testing.T) {
	for _, tt := range []struct {
		name          string
		props         config.Properties
		receive, send int
	}{
		{"neither key", config.Properties{}, -1, -1},
		{"the receive buffer set", config.Properties{"socket.receive.buffer.bytes": "65536"}, 65536, -1},
		{"both set, one to Kafka's default", config.Properties{"socket.receive.buffer.bytes": "102400", "socket.send.buffer.bytes": "131072"}, 102400, 131072},
		{"both left to the system explicitly", config.Properties{"socket.receive.buffer.bytes": "-1", "socket.send.buffer.bytes": "-1"}, -1, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			props := config.Properties{"listeners": "PLAIN://127.0.0.1:0", "listener.security.protocol.map": "PLAIN:PLAINTEXT", "inter.broker.listener.name": "PLAIN"}
			for k, v := range tt.props {
				props[k] = v
			}
			scfg, err := config.Server(props)
			require.NoError(t, err)
			osSocketBuffers(props, &scfg)
			require.Equal(t, tt.receive, scfg.ReceiveBufferBytes, "SO_RCVBUF")
			require.Equal(t, tt.send, scfg.SendBufferBytes, "SO_SNDBUF")
		})
	}
}

// listGroups is a ListGroups request, which the proxy forwards raw.
func listGroups() *kmsg.ListGroupsRequest {
	req := kmsg.NewPtrListGroupsRequest()
	req.Version = 4
	return req
}

// describeCluster is a DescribeCluster request, which the proxy decodes.
func describeCluster() *kmsg.DescribeClusterRequest {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	return req
}

// goroutinesIn counts the goroutines whose stacks hold fn, a function of
// this package's as "(*type).name".
func goroutinesIn(fn string) int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return bytes.Count(b.Bytes(), []byte(fn+"("))
}

// Once a client's pipelined requests are answered, the goroutine that read
// their answers waits in a read for the next one a while (linger), then
// ends; a request the proxy decodes, or a request of its own, reads its
// answer itself, so the proxy stops that wait first: with a wait of an
// hour, the decoded request is still answered at once, and raw ones after
// it as before.
func TestAnswerReaderLingersThenStops(t *testing.T) {
	fake := startFakeUpstream(t)
	t.Run("stopped by a decoded request", func(t *testing.T) {
		p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: time.Hour}, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		for range 3 {
			c.roundTrip(t, listGroups())
			require.Eventually(t, func() bool { return goroutinesIn("(*session).linger") == 1 }, 10*time.Second, time.Millisecond,
				"the answers' reader waits for the next answer")
			start := time.Now()
			resp := c.roundTrip(t, describeCluster()).(*kmsg.DescribeClusterResponse)
			require.Less(t, time.Since(start), 10*time.Second)
			require.Len(t, resp.Brokers, 1)
			require.Eventually(t, func() bool { return goroutinesIn("(*session).readAnswers") == 0 }, 10*time.Second, time.Millisecond,
				"the answers' reader ended")
		}
	})
	t.Run("ends after its wait", func(t *testing.T) {
		p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: 200 * time.Millisecond}, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		c.roundTrip(t, listGroups())
		require.Eventually(t, func() bool { return goroutinesIn("(*session).readAnswers") == 0 }, 10*time.Second, 10*time.Millisecond)
		c.roundTrip(t, listGroups()) // a new reader
	})
	t.Run("ending as a request comes", func(t *testing.T) {
		// The wait ends as the next request is queued, over and over: each
		// request is answered, whichever way the race goes.
		p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: 300 * time.Microsecond}, plaintextProxy...)
		c := dialRaw(t, p.addr(t, "PLAIN"))
		for i := range 300 {
			c.roundTrip(t, listGroups())
			time.Sleep(time.Duration(i%7) * 100 * time.Microsecond)
		}
	})
}

// An upstream that sends an answer no request awaits, while the answers'
// reader waits for the next: the client's next request, raw or decoded,
// closes its connection (its answer cannot be told apart), and a client
// that leaves ends the wait, so that the proxy closes cleanly.
func TestAnswerNoRequestAwaits(t *testing.T) {
	fake := startFakeUpstream(t)
	fake.setAnswer(func(key kmsg.Key, corr int32, version int16) ([]byte, bool) {
		good, _ := fake.good(key, corr, version)
		if key != kmsg.ListGroups {
			return good, false
		}
		return append(good, good...), false // the second is no one's
	})
	for _, tt := range []struct {
		name string
		next kmsg.Request // nil: the client leaves
	}{
		{"a raw request follows", listGroups()},
		{"a decoded request follows", describeCluster()},
		{"the client leaves", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startProxy(t, fake.addr(), &proxyOptions{answerLinger: time.Hour}, plaintextProxy...)
			c := dialRaw(t, p.addr(t, "PLAIN"))
			c.roundTrip(t, listGroups())
			if tt.next == nil {
				require.NoError(t, c.Close())
				closed := make(chan struct{})
				go func() { p.close(); close(closed) }()
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					t.Fatal("the proxy did not close: the answers' reader still waits")
				}
				return
			}
			c.send(t, tt.next)
			c.requireClosed(t, 10*time.Second)
		})
	}
}

// lingerOver runs linger on a fresh upstream connection over one end of a
// pipe, as readAnswers does once no answer is awaited, and returns the
// connection, the pipe's other end (upstream's side) and linger's result.
func lingerOver(t *testing.T, wait time.Duration) (*session, *upConn, net.Conn, <-chan bool) {
	t.Helper()
	ours, theirs := net.Pipe()
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	s := &session{p: &proxy{answerLinger: wait}}
	up := &upConn{nc: ours, br: bufio.NewReaderSize(ours, upReadBuf)}
	up.idle.L, up.queued.L = &up.mu, &up.mu
	done := make(chan bool, 1)
	go func() {
		up.mu.Lock()
		up.reading = true
		ok := s.linger(up)
		up.mu.Unlock()
		done <- ok
	}()
	return s, up, theirs, done
}

// lingerResult waits for linger's result.
func lingerResult(t *testing.T, done <-chan bool) bool {
	t.Helper()
	select {
	case ok := <-done:
		return ok
	case <-time.After(10 * time.Second):
		t.Fatal("linger still waits")
		return false
	}
}

// A head that has begun to arrive while linger waits is an answer's when a
// request has been queued since, even if a SASL renewal then stops the
// wait (awaitAnswers): it is read whole and answered. Bytes no request
// awaits close the connection, after a wait a little longer at most.
func TestLingerPartialHead(t *testing.T) {
	head := []byte{0, 0, 0, 12, 0, 0, 0, 7} // size and correlation id
	t.Run("its request queued, then the wait stopped", func(t *testing.T) {
		_, up, upstream, done := lingerOver(t, time.Hour)
		_, err := upstream.Write(head[:3]) // returns once linger has read them
		require.NoError(t, err)
		up.mu.Lock()
		up.pending = append(up.pending, &socketserver.Request{}) // pipeline
		up.stop = true                                           // awaitAnswers, before a renewal
		require.True(t, up.lingering)
		require.NoError(t, up.nc.SetReadDeadline(time.Unix(1, 0)))
		up.mu.Unlock()
		_, err = upstream.Write(head[3:])
		require.NoError(t, err)
		require.True(t, lingerResult(t, done), "the queued request is to be answered")
		up.mu.Lock()
		defer up.mu.Unlock()
		require.False(t, up.closed, "the answer of a queued request was taken for stray bytes")
		require.Equal(t, lingerHead, up.headN)
	})
	t.Run("no request awaits them", func(t *testing.T) {
		_, up, upstream, done := lingerOver(t, 20*time.Millisecond)
		_, err := upstream.Write(head[:3])
		require.NoError(t, err)
		require.False(t, lingerResult(t, done))
		up.mu.Lock()
		defer up.mu.Unlock()
		require.True(t, up.closed, "stray bytes leave the connection open")
		require.Zero(t, up.headN)
	})
}
