package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
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

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/soak"
)

// relay stands for one upstream broker: the proxy dials it in the
// broker's place, and it passes whole frames both ways. stop makes the
// broker go away as a broker that is shut down does (Kafka's controlled
// shutdown, and examples/broker's Shutdown): it stops accepting, answers
// the requests it has already taken, takes no more, and closes its
// connections; start brings it back on the same port.
type relay struct {
	t      *testing.T
	target string
	addr   string

	mu     sync.Mutex
	ln     net.Listener
	conns  map[*relayConn]struct{}
	wg     sync.WaitGroup
	closed bool
}

type relayConn struct {
	client, server net.Conn
	mu             sync.Mutex
	stopping       bool
	requests       int // forwarded to the broker
	responses      int // returned to the proxy
	answered       chan struct{}
}

// relayHost is the loopback address relays listen on. A relay stopped
// and started again binds its port a second time; on 127.0.0.1 the
// kernel may meanwhile have given that port to one of the test's
// outgoing connections, as it never does on an address no socket dials
// from.
const relayHost = "127.0.0.67"

func newRelay(t *testing.T, target string) *relay {
	r := &relay{t: t, target: target, conns: map[*relayConn]struct{}{}}
	ln, err := net.Listen("tcp", relayHost+":0")
	require.NoError(t, err)
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(func() {
		r.stop()
		r.mu.Lock()
		r.closed = true
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

// start accepts connections again, on the same port.
func (r *relay) start() {
	ln, err := net.Listen("tcp", r.addr)
	require.NoError(r.t, err)
	r.serve(ln)
}

func (r *relay) serve(ln net.Listener) {
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	r.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", r.target)
			if err != nil {
				c.Close()
				continue
			}
			rc := &relayConn{client: c, server: s, answered: make(chan struct{}, 1)}
			r.mu.Lock()
			r.conns[rc] = struct{}{}
			r.mu.Unlock()
			r.wg.Go(func() { rc.requestsUp() })
			r.wg.Go(func() {
				rc.responsesDown()
				r.mu.Lock()
				delete(r.conns, rc)
				r.mu.Unlock()
			})
		}
	})
}

// stop shuts the broker down: no new connections, the requests taken are
// answered (for at most 5 s), then every connection closes.
func (r *relay) stop() {
	r.mu.Lock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	conns := make([]*relayConn, 0, len(r.conns))
	for rc := range r.conns {
		conns = append(conns, rc)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, rc := range conns {
		wg.Go(func() {
			rc.mu.Lock()
			rc.stopping = true
			done := rc.responses >= rc.requests
			rc.mu.Unlock()
			if !done {
				select {
				case <-rc.answered:
				case <-time.After(5 * time.Second):
				}
			}
			rc.client.Close()
			rc.server.Close()
		})
	}
	wg.Wait()
}

// requestsUp forwards the proxy's requests until the broker stops.
func (rc *relayConn) requestsUp() {
	for {
		frame, err := readWhole(rc.client)
		if err != nil {
			rc.server.Close()
			return
		}
		rc.mu.Lock()
		if rc.stopping { // taken by no one: the broker has stopped reading
			rc.mu.Unlock()
			return
		}
		rc.requests++
		rc.mu.Unlock()
		if _, err := rc.server.Write(frame); err != nil {
			return
		}
	}
}

// responsesDown returns the broker's responses until either side closes.
func (rc *relayConn) responsesDown() {
	defer rc.client.Close()
	for {
		frame, err := readWhole(rc.server)
		if err != nil {
			return
		}
		if _, err := rc.client.Write(frame); err != nil {
			return
		}
		rc.mu.Lock()
		rc.responses++
		if rc.stopping && rc.responses >= rc.requests {
			select {
			case rc.answered <- struct{}{}:
			default:
			}
		}
		rc.mu.Unlock()
	}
}

// readWhole reads one size-prefixed frame, its size included.
func readWhole(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+int(binary.BigEndian.Uint32(size[:])))
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// dialVia makes the proxy dial the relay in place of the address it
// stands for.
func dialVia(replace map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := replace[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
}

// One upstream broker of three is stopped while producers and consumers
// run through the proxy (the soak's workload), and started again: the
// client connections routed to it are closed, the clients reconnect,
// refresh their metadata and go on, and every acknowledged record is
// consumed exactly once, at its acknowledged offset (the soak's check,
// through the proxy). An idle connection to the stopped broker's port is
// closed cleanly (EOF) without sending anything. Every client connection
// routed to the stopped broker, with a request in flight or not, closes
// for upstream-broker-unavailable.
func TestUpstreamBrokerStops(t *testing.T) {
	up := startUpstream(t, 3)
	broker1 := newRelay(t, up.Addr(1, "INTERNAL"))
	p := startProxy(t, up.Addr(0, "INTERNAL"), &proxyOptions{dial: dialVia(map[string]string{up.Addr(1, "INTERNAL"): broker1.addr})},
		plaintextProxy...)
	seed := p.addr(t, "PLAIN")

	const topic, partitions = "failover", 6
	admin := newClient(t, seed)
	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	create.Topics = append(create.Topics, rt)
	created, err := create.RequestWith(ctxFor(t, 10*time.Second), admin)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(created.Topics[0].ErrorCode))

	// An idle connection on broker 1's port, that has been served once.
	idle := dialRaw(t, p.nodeAddr(t, "PLAIN", 1))
	idle.roundTrip(t, metadataRequest(1))

	run := soak.Start(t, soak.Config{Seed: seed, Topic: topic, Partitions: partitions, Producers: 3, Consumers: 2,
		InFlight: 500, Duration: 7 * time.Second, Opts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}})
	defer run.Close()
	time.Sleep(2 * time.Second)

	// The client connections routed to broker 1 as it stops, those with a
	// request in flight among them, each to close for its absence.
	var routed []string
	inFlight := 0
	for _, s := range p.routedTo(1) {
		routed = append(routed, s.id)
		s.mu.Lock()
		if s.inFlight > 0 {
			inFlight++
		}
		s.mu.Unlock()
	}
	require.NotEmpty(t, routed)
	broker1.stop()
	t.Log("upstream broker 1 stopped")
	idle.requireClosed(t, 10*time.Second)
	var closed []connregistry.Conn
	require.Eventually(t, func() bool {
		closed = p.srv.Registry().Closed(connregistry.Filter{ConnectionIDs: routed})
		return len(closed) == len(routed)
	}, 15*time.Second, 10*time.Millisecond, "of the %d client connections routed to broker 1, some are still open", len(routed))
	for _, c := range closed {
		assert.Equal(t, upstreamCloseReason, c.CloseReason, "why %s, routed to broker 1, closed", c.ID)
	}
	t.Logf("%d client connections routed to broker 1 as it stopped, %d with a request in flight, closed", len(routed), inFlight)
	time.Sleep(2 * time.Second)
	broker1.start()
	t.Log("upstream broker 1 started again")

	t.Cleanup(func() { // on failure, the records around the first one out of place, as upstream stores them
		if b := run.Broke(); b != nil && t.Failed() {
			dumpPartition(t, up.Addr(0, "INTERNAL"), topic, b.Partition, b.Offset-20, 60)
		}
	})
	run.WaitProduced()
	until := highWatermarks(t, up.Addr(0, "INTERNAL"), topic, partitions)
	total := run.Finish(until)
	t.Logf("%d records produced and consumed exactly once; %d client connections closed for the broker's absence",
		total, len(closedFor(p, upstreamCloseReason)))
}

// Every client connection routed to an upstream broker that goes away
// closes for upstream-broker-unavailable, as docs/proxy.md and the
// listings say, whatever it was doing: idle; holding a request upstream
// when the broker is killed, decoded (DescribeCluster) or raw
// (ListGroups), the session's first (which its writer forwards) or a
// later one (forwarded inline); or holding one that upstream answers after
// the proxy has found the broker gone, the client then sending another
// request or nothing more, or having sent another meanwhile (pipelined):
// the answer to the one held reaches the client before the close.
func TestEveryConnectionOfABrokerGoneClosesForIt(t *testing.T) {
	// What happens once the client's requests are upstream.
	const (
		killed            = iota // the broker is killed
		answeredThenAsk          // the proxy finds the broker gone, then the held request is answered; the client sends another
		answeredThenIdle         // the same, and the client sends nothing more
		askedThenAnswered        // the proxy finds the broker gone, the client sends another request, then the held one is answered
	)
	for _, tc := range []struct {
		name   string
		req    func() kmsg.Request
		before int  // requests answered before
		hold   bool // one more sent, held upstream
		then   int
	}{
		{"idle", func() kmsg.Request { return describeCluster() }, 1, false, killed},
		{"decoded, the first request held", func() kmsg.Request { return describeCluster() }, 0, true, killed},
		{"decoded, a later request held", func() kmsg.Request { return describeCluster() }, 1, true, killed},
		{"raw, the first request held", func() kmsg.Request { return listGroups() }, 0, true, killed},
		{"raw, a later request held", func() kmsg.Request { return listGroups() }, 1, true, killed},
		{"decoded, answered after, then another request", func() kmsg.Request { return describeCluster() }, 1, true, answeredThenAsk},
		{"raw, answered after, then another request", func() kmsg.Request { return listGroups() }, 1, true, answeredThenAsk},
		{"decoded, answered after, then nothing", func() kmsg.Request { return describeCluster() }, 1, true, answeredThenIdle},
		{"raw, answered after, then nothing", func() kmsg.Request { return listGroups() }, 1, true, answeredThenIdle},
		{"raw, another request sent, then the held one answered", func() kmsg.Request { return listGroups() }, 1, true, askedThenAnswered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := startFakeUpstream(t)
			release := make(chan struct{})
			var answered atomic.Int32
			fake.setAnswer(func(key kmsg.Key, corr int32, v int16) ([]byte, bool) {
				if int(answered.Add(1)) <= tc.before {
					return fake.good(key, corr, v)
				}
				select {
				case <-release:
					return fake.good(key, corr, v)
				case <-fake.quit:
					return nil, true
				}
			})
			p := startProxy(t, fake.addr(), nil, plaintextProxy...)
			c := dialRaw(t, p.nodeAddr(t, "PLAIN", 0))
			for range tc.before {
				c.roundTrip(t, tc.req())
			}
			var held int32
			if tc.hold {
				held = c.send(t, tc.req())
				key := kmsg.Key(tc.req().Key())
				require.Eventually(t, func() bool { return fake.sent(key) == tc.before+1 }, 10*time.Second, 5*time.Millisecond,
					"the request did not reach the broker")
			}
			switch tc.then {
			case killed:
				fake.kill()
			default:
				p.closeIdle(p.routedTo(0)) // as the broker's watch does when it cannot reach it (setDown)
				if tc.then == askedThenAnswered {
					c.send(t, tc.req())
					require.Eventually(t, func() bool {
						conns := p.srv.Registry().Snapshot(connregistry.Filter{})
						return len(conns) == 1 && conns[0].Requests == int64(tc.before+2)
					}, 10*time.Second, 5*time.Millisecond, "the proxy did not read the request")
				}
				close(release)
				resp := tc.req().ResponseKind()
				resp.SetVersion(tc.req().GetVersion())
				c.read(t, resp, held)
				if tc.then == answeredThenAsk {
					c.send(t, tc.req())
				}
			}
			requireClosedFor(t, p, c, upstreamCloseReason)
		})
	}
}

// A large answer moved socket to socket (RespondRawFrom) to a client that
// reads it slowly arrives whole when the proxy finds the broker gone while
// it is on its way, and the connection then closes for the broker gone:
// the session counted the answer done when it was handed over, and the
// close that follows a broker's last answer by its grace cut it short.
func TestLargeAnswerToABrokerGoneArrivesWhole(t *testing.T) {
	fake := startFakeUpstream(t)
	fake.mu.Lock()
	fake.headFirst = true
	fake.mu.Unlock()
	release := make(chan struct{})
	big := kmsg.NewPtrListGroupsResponse()
	for i := range 200_000 {
		big.Groups = append(big.Groups, kmsg.ListGroupsResponseGroup{Group: fmt.Sprintf("group-%07d", i), ProtocolType: "consumer"})
	}
	var calls atomic.Int32
	fake.setAnswer(func(key kmsg.Key, corr int32, v int16) ([]byte, bool) {
		if calls.Add(1) == 1 {
			return fake.good(key, corr, v)
		}
		select {
		case <-release:
		case <-fake.quit:
			return nil, true
		}
		resp := *big
		resp.SetVersion(v)
		return responseBytes(&resp, corr), false
	})
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	c := dialRaw(t, p.nodeAddr(t, "PLAIN", 0))
	req := listGroups()
	req.Version = 2 // no tagged fields: the body may move socket to socket
	c.roundTrip(t, req)
	held := c.send(t, req)
	require.Eventually(t, func() bool { return fake.sent(kmsg.ListGroups) == 2 }, 10*time.Second, 5*time.Millisecond,
		"the request did not reach the broker")
	p.closeIdle(p.routedTo(0)) // as the broker's watch does when it cannot reach it (setDown)
	close(release)
	time.Sleep(4 * answerGrace) // the answer waits on the client, which reads nothing yet
	resp := kmsg.NewPtrListGroupsResponse()
	resp.SetVersion(2)
	c.read(t, resp, held)
	assert.Len(t, resp.Groups, len(big.Groups), "the answer arrived whole")
	requireClosedFor(t, p, c, upstreamCloseReason)
}

// A request refused just after the session's last answer (its broker
// found gone meanwhile) is held for that answer's grace, and the
// connection then closes, though no answer is on its way whose end would
// close it: refuse schedules the close itself. closeIdle is called alone
// here, without setDown's later pass, as when that pass came too soon
// after a late answer (a streamed Produce written long after setDown).
func TestRefusedAfterTheLastAnswerCloses(t *testing.T) {
	fake := startFakeUpstream(t)
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	c := dialRaw(t, p.nodeAddr(t, "PLAIN", 0))
	c.roundTrip(t, listGroups())
	p.closeIdle(p.routedTo(0)) // answered a moment ago: not closed yet
	c.send(t, listGroups())
	requireClosedFor(t, p, c, upstreamCloseReason)
}

// requireClosedFor waits until the proxy has closed c, and checks the
// reason its registry lists.
func requireClosedFor(t *testing.T, p *testProxy, c *rawConn, reason connregistry.CloseReason) {
	t.Helper()
	c.requireClosed(t, 10*time.Second)
	var closed connregistry.Conn
	require.Eventually(t, func() bool {
		var ok bool
		closed, ok = closedConn(p, c)
		return ok
	}, 5*time.Second, 5*time.Millisecond, "the connection is not listed as closed")
	assert.Equal(t, reason, closed.CloseReason)
}

// routedTo returns the sessions routed to node id of the default cluster.
func (tp *testProxy) routedTo(id int32) []*session {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []*session
	for s := range tp.def.nodes[id].sessions {
		out = append(out, s)
	}
	return out
}

// closedFor returns the proxy's closed connections with the given reason.
func closedFor(p *testProxy, reason connregistry.CloseReason) []connregistry.Conn {
	var out []connregistry.Conn
	for _, c := range p.srv.Registry().Closed(connregistry.Filter{}) {
		if c.CloseReason == reason {
			out = append(out, c)
		}
	}
	return out
}

// highWatermarks asks the cluster at seed, directly, for the end of each
// partition of topic.
func highWatermarks(t *testing.T, seed, topic string, partitions int) map[int32]int64 {
	t.Helper()
	cl := newClient(t, seed)
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	shards := cl.RequestSharded(ctxFor(t, 20*time.Second), req)
	out := map[int32]int64{}
	for _, s := range shards {
		require.NoError(t, s.Err)
		for _, rt := range s.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range rt.Partitions {
				require.NoError(t, kerr.ErrorForCode(rp.ErrorCode))
				out[rp.Partition] = rp.Offset
			}
		}
	}
	require.Len(t, out, partitions)
	return out
}

// dumpPartition logs n records of a partition from offset on, read from
// the cluster at seed directly.
func dumpPartition(t *testing.T, seed, topic string, partition int32, offset int64, n int) {
	cl := newClient(t, seed, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(max(offset, 0))}}))
	ctx := ctxFor(t, 10*time.Second)
	for seen := 0; seen < n && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if seen < n {
				t.Logf("upstream %s[%d] offset %d: %s (producer id %d, epoch %d, at %s)", topic, r.Partition, r.Offset, r.Value,
					r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"))
			}
			seen++
		})
	}
}
