package socketserver_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// hookEvent is one call of a hook, with the arguments that kind of call
// has.
type hookEvent struct {
	Kind     string
	Listener protocolmap.ListenerName
	Key      int16
	Bytes    int
	Dur      time.Duration // blocked (acceptor) or hold (rejected)
	Addr     netip.Addr
	Err      error
	Info     connregistry.Info
	Reason   connregistry.CloseReason
	Latency  socketserver.RequestLatency
	Reauth   bool
	Server   bool // done: RequestDone.ServerAnswered
	Closed   bool // done: RequestDone.Closed
}

// recorder implements every hook interface and records each call.
type recorder struct {
	mu     sync.Mutex
	events []hookEvent
}

var (
	_ socketserver.HookConnAccepted         = (*recorder)(nil)
	_ socketserver.HookConnRejected         = (*recorder)(nil)
	_ socketserver.HookAcceptorBlocked      = (*recorder)(nil)
	_ socketserver.HookConnCreated          = (*recorder)(nil)
	_ socketserver.HookConnClosed           = (*recorder)(nil)
	_ socketserver.HookRequestReceived      = (*recorder)(nil)
	_ socketserver.HookResponseSent         = (*recorder)(nil)
	_ socketserver.HookRequestDone          = (*recorder)(nil)
	_ socketserver.HookAuthenticated        = (*recorder)(nil)
	_ socketserver.HookAuthenticationFailed = (*recorder)(nil)
)

func (m *recorder) add(e hookEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
}

func (m *recorder) OnConnAccepted(l protocolmap.ListenerName) {
	m.add(hookEvent{Kind: "accepted", Listener: l, Key: -1})
}
func (m *recorder) OnConnRejected(l protocolmap.ListenerName, addr netip.Addr, err error, hold time.Duration) {
	m.add(hookEvent{Kind: "rejected", Listener: l, Key: -1, Addr: addr, Err: err, Dur: hold})
}
func (m *recorder) OnAcceptorBlocked(l protocolmap.ListenerName, blocked, _ time.Duration) {
	m.add(hookEvent{Kind: "blocked", Listener: l, Key: -1, Dur: blocked})
}
func (m *recorder) OnConnCreated(info connregistry.Info) {
	m.add(hookEvent{Kind: "created", Listener: info.Listener, Key: -1, Info: info})
}
func (m *recorder) OnConnClosed(info connregistry.Info, reason connregistry.CloseReason) {
	m.add(hookEvent{Kind: "closed", Listener: info.Listener, Key: -1, Info: info, Reason: reason})
}
func (m *recorder) OnRequestReceived(l protocolmap.ListenerName, key int16, n int) {
	m.add(hookEvent{Kind: "request", Listener: l, Key: key, Bytes: n})
}
func (m *recorder) OnResponseSent(l protocolmap.ListenerName, key int16, n int) {
	m.add(hookEvent{Kind: "response", Listener: l, Key: key, Bytes: n})
}
func (m *recorder) OnRequestDone(r *socketserver.RequestDone) {
	m.add(hookEvent{Kind: "done", Listener: r.Conn.Listener, Key: r.APIKey, Bytes: r.RequestBytes, Latency: r.Latency,
		Server: r.ServerAnswered, Closed: r.Closed})
}
func (m *recorder) OnAuthenticated(info connregistry.Info, reauth bool) {
	m.add(hookEvent{Kind: "authenticated", Listener: info.Listener, Key: -1, Info: info, Reauth: reauth})
}
func (m *recorder) OnAuthenticationFailed(info connregistry.Info, reauth bool, err error) {
	m.add(hookEvent{Kind: "authfailed", Listener: info.Listener, Key: -1, Info: info, Reauth: reauth, Err: err})
}

// of returns the events of kind, ordered by API key, then size.
func (m *recorder) of(kind string) []hookEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []hookEvent
	for _, e := range m.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b hookEvent) int {
		if a.Key != b.Key {
			return int(a.Key) - int(b.Key)
		}
		return a.Bytes - b.Bytes
	})
	return out
}

func withHooks(hs ...socketserver.Hook) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.Hooks = hs
	}
}

// The connection and request hooks: connections accepted, created and
// closed (with the reason and the connection's last description), each
// request and response with its API key and size (the frame size for
// requests, as Request.Size; the bytes written for responses), and each
// request's latency.
func TestHooks(t *testing.T) {
	m := &recorder{}
	srv := socketservertest.NewServer(t, nil, withHooks(m), echoMetadata)

	var wantReq, wantResp []hookEvent
	roundTrip := func(c net.Conn, req kmsg.Request, corr int32) {
		t.Helper()
		f := formatter.AppendRequest(nil, req, corr)
		write(t, c, f)
		resp := readRawFrame(t, c)
		require.Equal(t, corr, int32(resp[0])<<24|int32(resp[1])<<16|int32(resp[2])<<8|int32(resp[3]))
		wantReq = append(wantReq, hookEvent{Kind: "request", Listener: "PLAINTEXT", Key: req.Key(), Bytes: len(f) - 4})
		wantResp = append(wantResp, hookEvent{Kind: "response", Listener: "PLAINTEXT", Key: req.Key(), Bytes: len(resp) + 4})
	}
	c1 := socketservertest.Dial(t, srv, "PLAINTEXT")
	c2 := socketservertest.Dial(t, srv, "PLAINTEXT")
	roundTrip(c1, apiVersionsReq(3, "kafkanet-test", "0.1"), 1)
	roundTrip(c1, metadataReq(1), 2)
	roundTrip(c2, metadataReq(9), 3)
	big := metadataReq(9)
	for range 10 {
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("a-rather-long-topic-name")
		big.Topics = append(big.Topics, topic)
	}
	roundTrip(c2, big, 4)

	// A request closed by the handler is counted, with no response, and
	// done, closed.
	c3 := socketservertest.Dial(t, srv, "PLAINTEXT")
	f := formatter.AppendRequest(nil, kmsg.NewPtrFindCoordinatorRequest(), 5)
	write(t, c3, f)
	requireClosedNoResponse(t, c3)
	wantReq = append(wantReq, hookEvent{Kind: "request", Listener: "PLAINTEXT", Key: 10, Bytes: len(f) - 4})

	require.NoError(t, c1.Close())
	require.NoError(t, c2.Close())
	require.Eventually(t, func() bool { return len(m.of("closed")) == 3 }, 10*time.Second, 5*time.Millisecond)

	sortEvents := func(es []hookEvent) []hookEvent {
		slices.SortStableFunc(es, func(a, b hookEvent) int {
			if a.Key != b.Key {
				return int(a.Key) - int(b.Key)
			}
			return a.Bytes - b.Bytes
		})
		return es
	}
	assert.Equal(t, sortEvents(wantReq), m.of("request"))
	assert.Equal(t, sortEvents(wantResp), m.of("response"))
	assert.Len(t, m.of("accepted"), 3)

	created, closed := m.of("created"), m.of("closed")
	require.Len(t, created, 3)
	reasons := map[string]connregistry.CloseReason{}
	for _, e := range closed {
		assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), e.Listener)
		reasons[e.Info.ID] = e.Reason
	}
	for _, e := range created {
		assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), e.Listener)
		assert.Equal(t, connregistry.Anonymous(), e.Info.Principal)
		assert.Contains(t, reasons, e.Info.ID, "a created connection closes with the same id")
	}
	assert.Equal(t, []connregistry.CloseReason{connregistry.CloseByClient, connregistry.CloseByClient, connregistry.CloseByHandler},
		sortedReasons(reasons))
	software := map[string]string{}
	for _, e := range closed { // the connection as it ended: c1 sent its software
		software[e.Info.ClientAddr.String()] = e.Info.ClientSoftwareName
	}
	assert.Equal(t, "kafkanet-test", software[c1.LocalAddr().String()])
	assert.Empty(t, software[c2.LocalAddr().String()])

	done := m.of("done")
	require.Len(t, done, 5, "every request done once, the one closed too")
	assert.Equal(t, []int16{3, 3, 3, 10, 18}, []int16{done[0].Key, done[1].Key, done[2].Key, done[3].Key, done[4].Key})
	assert.Equal(t, []bool{false, false, false, true, false}, []bool{done[0].Closed, done[1].Closed, done[2].Closed, done[3].Closed, done[4].Closed})
	assert.Equal(t, []bool{false, false, false, false, true}, []bool{done[0].Server, done[1].Server, done[2].Server, done[3].Server, done[4].Server})
	for _, e := range done {
		assert.Positive(t, e.Latency.Total, "key %d", e.Key)
	}
}

func sortedReasons(m map[string]connregistry.CloseReason) []connregistry.CloseReason {
	var out []connregistry.CloseReason
	for _, r := range m {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// HookRequestDone splits a request's time as Kafka's RequestMetrics do: the
// wait in the request channel for a Serve worker, the handler, the wait
// for the connection to take up the answer, and the write. A request the
// server answers itself has no queue: its work and its write.
func TestHookRequestLatency(t *testing.T) {
	const hold = 60 * time.Millisecond
	m := &recorder{}
	first := make(chan struct{})
	var n atomic.Int32
	srv := socketservertest.NewServer(t, config.Properties{"num.io.threads": "1"}, withHooks(m),
		socketserver.HandlerFunc(func(r *socketserver.Request) {
			if n.Add(1) == 1 {
				close(first) // the second request waits in the channel meanwhile
			}
			time.Sleep(hold)
			_ = r.Respond(kmsg.NewPtrMetadataResponse())
		}))
	a := socketservertest.Dial(t, srv, "PLAINTEXT")
	b := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, a, metadataReq(1), 1)
	<-first
	send(t, b, metadataReq(1), 2)
	readRawFrame(t, a)
	readRawFrame(t, b)
	apiVersionsRoundTrip(t, a, apiVersionsReq(3, "latency", "1.0"), 3)

	require.Eventually(t, func() bool { return len(m.of("done")) == 3 }, 5*time.Second, 5*time.Millisecond)
	done := m.of("done")
	byQueue := done[:2]
	slices.SortFunc(byQueue, func(x, y hookEvent) int { return int(x.Latency.Queue - y.Latency.Queue) })
	for _, e := range byQueue {
		l := e.Latency
		assert.GreaterOrEqual(t, l.Handler, hold, "the handler's time")
		assert.GreaterOrEqual(t, l.ResponseQueue, time.Duration(0))
		assert.Positive(t, l.Send)
		sum := l.Queue + l.Handler + l.ResponseQueue + l.Send
		assert.InDelta(t, float64(l.Total), float64(sum), float64(time.Millisecond), "the parts add up to the total: %+v", l)
	}
	assert.Less(t, byQueue[0].Latency.Queue, hold/2, "the first request did not wait")
	assert.GreaterOrEqual(t, byQueue[1].Latency.Queue, hold/2, "the second waited for the only worker")

	av := done[2]
	assert.Equal(t, int16(18), av.Key)
	assert.True(t, av.Server)
	assert.Positive(t, av.Latency.Total)
	assert.Positive(t, av.Latency.Send)
	assert.Zero(t, av.Latency.Queue, "answered by the server: no queue")
	assert.Zero(t, av.Latency.ResponseQueue, "answered by the server: no queue")
	assert.GreaterOrEqual(t, av.Latency.Total, av.Latency.Handler+av.Latency.Send)
}

// A host that reads the request channel itself, without Serve: the time
// until it answers counts as the handler's, and Queue is zero.
func TestHookRequestLatencyWithoutServe(t *testing.T) {
	m := &recorder{}
	srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}, withHooks(m))
	require.NoError(t, srv.Start(context.Background()))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, metadataReq(1), 1)
	r := <-socketserver.Requests(srv, protocolmap.DataPlane)
	time.Sleep(30 * time.Millisecond)
	require.NoError(t, r.Respond(kmsg.NewPtrMetadataResponse()))
	readRawFrame(t, c)
	require.Eventually(t, func() bool { return len(m.of("done")) == 1 }, 5*time.Second, 5*time.Millisecond)
	l := m.of("done")[0].Latency
	assert.Zero(t, l.Queue)
	assert.GreaterOrEqual(t, l.Handler, 30*time.Millisecond)
}

// NoResponse (acks=0) reports the request's latency with no send time.
func TestHookRequestLatencyNoResponse(t *testing.T) {
	m := &recorder{}
	srv := socketservertest.NewServer(t, nil, withHooks(m), socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.APIKey == 0 {
			_ = r.NoResponse()
			return
		}
		_ = respondEmpty(r)
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks = 7, 0
	send(t, c, produce, 1)
	metadataRoundTrip(t, c, 1, 2) // answered after the produce: it has been served
	require.Eventually(t, func() bool { return len(m.of("done")) == 2 }, 5*time.Second, 5*time.Millisecond)
	done := m.of("done")
	assert.Equal(t, int16(0), done[0].Key)
	assert.Zero(t, done[0].Latency.Send)
	assert.Positive(t, done[0].Latency.Total)
	assert.Len(t, m.of("response"), 1, "no response for the produce")
}

// createdCounter implements one hook interface, HookConnCreated, and
// nothing else.
type createdCounter struct{ n atomic.Int32 }

func (c *createdCounter) OnConnCreated(connregistry.Info) { c.n.Add(1) }

var _ socketserver.HookConnCreated = (*createdCounter)(nil)

// A hook implementing a single interface is called for that event, beside
// other hooks, and the server runs as usual; a value implementing no hook
// interface is refused by New, naming its place and type.
func TestHookImplementingOneInterface(t *testing.T) {
	one, all := &createdCounter{}, &recorder{}
	srv := socketservertest.NewServer(t, nil, withHooks(one, all), echoMetadata)
	for i := range 3 {
		metadataRoundTrip(t, socketservertest.Dial(t, srv, "PLAINTEXT"), 1, int32(i))
	}
	assert.Equal(t, int32(3), one.n.Load())
	assert.Len(t, all.of("created"), 3, "both hooks see the event")

	lc, err := config.Listeners(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	require.NoError(t, err)
	for _, bad := range []socketserver.Hook{nil, "not a hook", struct{}{}} {
		_, err = socketserver.New(socketserver.Config{Listeners: lc, Hooks: []socketserver.Hook{one, bad}})
		require.Error(t, err, "%T", bad)
		assert.Contains(t, err.Error(), "Config.Hooks[1]")
	}
	// A hook written for the HookRequestDone of before the request log's
	// hook replaced it would never be called: New says so, even beside
	// interfaces it still implements.
	_, err = socketserver.New(socketserver.Config{Listeners: lc, Hooks: []socketserver.Hook{one, oldRequestDone{}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Config.Hooks[1]")
	assert.Contains(t, err.Error(), "OnRequestDone(*RequestDone)")
}

// oldRequestDone has the OnRequestDone of before, beside a hook the
// server still calls.
type oldRequestDone struct{}

func (oldRequestDone) OnConnCreated(connregistry.Info)                                            {}
func (oldRequestDone) OnRequestDone(protocolmap.ListenerName, int16, socketserver.RequestLatency) {}

// The per-address quotas report to HookConnRejected with the address and
// the quota's error: max.connections.per.ip with no hold, the per-address
// creation rate with the hold.
func TestHookConnRejected(t *testing.T) {
	m := &recorder{}
	srv := socketservertest.NewServer(t, config.Properties{
		"max.connections.per.ip":               "1",
		"kafkanet.ip.connection.creation.rate": "2",
		"quota.window.num":                     "2",
	}, withHooks(m), answerAll)
	kept := dialFrom(t, srv, "PLAINTEXT", "127.0.0.5")
	require.True(t, served(t, kept, 1, 5*time.Second))
	requireClosedNoResponse(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.5"))
	requireClosedNoResponse(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.5")) // third in the window: throttled

	require.Eventually(t, func() bool { return len(m.of("rejected")) == 2 }, 5*time.Second, 5*time.Millisecond)
	rejected := m.of("rejected")
	slices.SortFunc(rejected, func(a, b hookEvent) int { return int(a.Dur - b.Dur) })
	assert.ErrorIs(t, rejected[0].Err, socketserver.ErrTooManyConnections)
	assert.Zero(t, rejected[0].Dur)
	assert.ErrorIs(t, rejected[1].Err, socketserver.ErrConnectionThrottled)
	assert.Positive(t, rejected[1].Dur)
	for _, e := range rejected {
		assert.Equal(t, netip.MustParseAddr("127.0.0.5"), e.Addr)
		assert.Equal(t, protocolmap.ListenerName("PLAINTEXT"), e.Listener)
	}
}

// The authentication hooks: a SASL success with the principal and
// mechanism, a failure with the mechanism and the error, a re-authentication
// (KIP-368) marked as such, a TLS handshake that fails; a client that only
// connects and goes away is no failure.
func TestHookAuthentication(t *testing.T) {
	m := &recorder{}
	pki := newTestPKI(t)
	props := merge(saslProps(config.Properties{
		"connections.max.reauth.ms":                 "1000",
		"connection.failed.authentication.delay.ms": "0",
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "PLAINTEXT",
	}), pki.props("none"))
	srv := socketservertest.NewServer(t, props, func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.Hooks = []socketserver.Hook{m}
	}, answerAll)

	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Equal(t, int16(0), rc.login("SCRAM-SHA-256", "alice", alicePassword, 2).ErrorCode)
	time.Sleep(1100 * time.Millisecond) // the session expires: only a re-authentication is served
	require.Equal(t, int16(0), rc.login("SCRAM-SHA-256", "alice", alicePassword, 2).ErrorCode)
	rc.roundTrip(metadataReq(9))

	bad := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.NotZero(t, bad.login("PLAIN", "alice", "wrong", 2).ErrorCode)

	tc := tls.Client(socketservertest.Dial(t, srv, "SSL"), pki.clientConfig())
	require.NoError(t, tc.Handshake())
	metadataRoundTrip(t, tc, 1, 1)
	write(t, socketservertest.Dial(t, srv, "SSL"), []byte("not a TLS record, not at all")) // fails the handshake

	require.NoError(t, socketservertest.Dial(t, srv, "SASL_PLAINTEXT").Close()) // gone: no failure
	require.NoError(t, socketservertest.Dial(t, srv, "SSL").Close())

	require.Eventually(t, func() bool { return len(m.of("authfailed")) == 2 }, 10*time.Second, 5*time.Millisecond)
	ok := m.of("authenticated")
	require.Len(t, ok, 3)
	assert.Equal(t, []bool{false, true, false}, []bool{ok[0].Reauth, ok[1].Reauth, ok[2].Reauth})
	for _, e := range ok[:2] {
		assert.Equal(t, protocolmap.ListenerName("SASL_PLAINTEXT"), e.Listener)
		assert.Equal(t, "SCRAM-SHA-256", e.Info.SASLMechanism)
		assert.Equal(t, alice, e.Info.Principal)
	}
	assert.Equal(t, ok[0].Info.ID, ok[1].Info.ID, "re-authenticated on the same connection")
	assert.Equal(t, protocolmap.ListenerName("SSL"), ok[2].Listener)
	assert.Empty(t, ok[2].Info.SASLMechanism)
	assert.NotZero(t, ok[2].Info.TLSVersion)

	byListener := map[protocolmap.ListenerName]hookEvent{}
	for _, e := range m.of("authfailed") {
		byListener[e.Listener] = e
	}
	sasl := byListener["SASL_PLAINTEXT"]
	assert.ErrorIs(t, sasl.Err, socketserver.ErrAuthentication)
	assert.Equal(t, "PLAIN", sasl.Info.SASLMechanism, "the mechanism the client chose")
	assert.Equal(t, connregistry.Anonymous(), sasl.Info.Principal)
	assert.False(t, sasl.Reauth)
	assert.ErrorIs(t, byListener["SSL"].Err, socketserver.ErrHandshake)
	time.Sleep(100 * time.Millisecond) // the clients that went away are not reported late
	assert.Len(t, m.of("authfailed"), 2)
}

// TestGuardAllocationsPerRequestWithHooks: the hooks run off the
// per-request path's budget (see guards_test.go): with a hook
// implementing every interface, HookRequestDone included, a request costs
// what it costs without (TestGuardAllocationsPerRequest): the RequestDone
// is lent from a pool, and its client id is the registry entry's copy,
// made when the connection's client id changes (an ApiVersions request
// answered from the read buffer copied it for each request, one
// allocation, when the request log was a hook of its own).
func TestGuardAllocationsPerRequestWithHooks(t *testing.T) {
	if raceEnabled {
		t.Skip(raceSkip)
	}
	resp := kmsg.NewPtrMetadataResponse()
	reuse := socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.Respond(resp) })
	noClientID := kmsg.NewRequestFormatter()
	for _, tt := range []struct {
		name   string
		req    kmsg.Request
		format *kmsg.RequestFormatter
		hooks  []socketserver.Hook
		budget perRequest // allocations and bytes per request
	}{
		{"ApiVersions answered by the server", apiVersionsReq(3, "allocs", "1.0"), formatter, []socketserver.Hook{nopHooks{}}, answeredInPlace},
		{"Metadata through the request channel", metadataReq(12), formatter, []socketserver.Hook{nopHooks{}}, smallDecoded},
		{"ApiVersions without a client id", apiVersionsReq(3, "allocs", "1.0"), noClientID, []socketserver.Hook{nopHooks{}}, answeredInPlace},
		{"two HookRequestDone", apiVersionsReq(3, "allocs", "1.0"), formatter, []socketserver.Hook{nopHooks{}, socketserver.SlogRequestLog(slog.New(slog.DiscardHandler))}, answeredInPlace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withHooks(tt.hooks...), reuse)
			bc := newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req)
			bc.req = tt.format.AppendRequest(nil, tt.req, 0)
			requirePerRequest(t, bc, tt.budget)
		})
	}
}

// nopHooks implements every hook interface and does nothing.
type nopHooks struct{}

func (nopHooks) OnConnAccepted(protocolmap.ListenerName)                                   {}
func (nopHooks) OnConnRejected(protocolmap.ListenerName, netip.Addr, error, time.Duration) {}
func (nopHooks) OnAcceptorBlocked(protocolmap.ListenerName, time.Duration, time.Duration)  {}
func (nopHooks) OnConnCreated(connregistry.Info)                                           {}
func (nopHooks) OnConnClosed(connregistry.Info, connregistry.CloseReason)                  {}
func (nopHooks) OnRequestReceived(protocolmap.ListenerName, int16, int)                    {}
func (nopHooks) OnResponseSent(protocolmap.ListenerName, int16, int)                       {}
func (nopHooks) OnRequestDone(*socketserver.RequestDone)                                   {}
func (nopHooks) OnAuthenticated(connregistry.Info, bool)                                   {}
func (nopHooks) OnAuthenticationFailed(connregistry.Info, bool, error)                     {}
