package socketserver_test

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// dialFrom connects to the listener from a chosen loopback source address
// (127.0.0.0/8 all reaches this machine), so that per-IP limits can be told
// apart; the connection is closed when the test ends.
func dialFrom(t testing.TB, srv *socketserver.Server, listenerName, source string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", srv.Addr(protocolmap.ListenerName(listenerName)).String())
	require.NoError(t, err)
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	t.Cleanup(func() { c.Close() })
	return c
}

// served reports whether a Metadata request on c is answered within d: a
// connection that an acceptor holds back is open at the TCP level but not
// yet served.
func served(t testing.TB, c net.Conn, corr int32, d time.Duration) bool {
	t.Helper()
	send(t, c, metadataReq(1), corr)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	var size [4]byte
	_, err := c.Read(size[:1])
	require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Minute)))
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		t.Fatalf("connection failed: %v", err)
	}
	frame := readRawFrame(t, &prefixed{first: size[0], Conn: c})
	require.GreaterOrEqual(t, len(frame), 4)
	return true
}

// prefixed re-reads one byte already taken from the connection.
type prefixed struct {
	net.Conn
	first byte
	used  bool
}

func (p *prefixed) Read(b []byte) (int, error) {
	if !p.used && len(b) > 0 {
		p.used = true
		b[0] = p.first
		return 1, nil
	}
	return p.Conn.Read(b)
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func quotaTotal(srv *socketserver.Server) int {
	n, _, _ := socketserver.QuotaCounts(srv)
	return n
}

// Over max.connections.per.ip a new connection is closed at once; an
// override raises the limit for one address; existing connections stay.
func TestPerIPLimitClosesAtOnce(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"max.connections.per.ip":           "2",
		"max.connections.per.ip.overrides": "127.0.0.2:4",
	}, withAPIs, answerAll)

	for _, tc := range []struct {
		source string
		limit  int
	}{{"127.0.0.1", 2}, {"127.0.0.2", 4}} {
		t.Run(tc.source, func(t *testing.T) {
			var open []net.Conn
			for i := range tc.limit {
				c := dialFrom(t, srv, "PLAINTEXT", tc.source)
				require.True(t, served(t, c, int32(i), 5*time.Second))
				open = append(open, c)
			}
			extra := dialFrom(t, srv, "PLAINTEXT", tc.source)
			start := time.Now()
			requireClosedNoResponse(t, extra)
			assert.Less(t, time.Since(start), time.Second, "closed at once")
			for i, c := range open {
				assert.True(t, served(t, c, int32(100+i), 5*time.Second), "an existing connection was disturbed")
			}
			_, _, byIP := socketserver.QuotaCounts(srv)
			assert.Equal(t, tc.limit, byIP[netip.MustParseAddr(tc.source)])
		})
	}
}

// At the listener's or the broker's max.connections the acceptor waits: the
// next connection is served once another closes.
func TestConnectionLimitAcceptorWaits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props config.Properties
	}{
		{"listener limit", config.Properties{"listener.name.plaintext.max.connections": "2"}},
		{"broker limit", config.Properties{"max.connections": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &recorder{}
			srv := socketservertest.NewServer(t, tc.props, withHooks(m), answerAll)
			first := socketservertest.Dial(t, srv, "PLAINTEXT")
			second := socketservertest.Dial(t, srv, "PLAINTEXT")
			require.True(t, served(t, first, 1, 5*time.Second))
			require.True(t, served(t, second, 2, 5*time.Second))

			waiting := socketservertest.Dial(t, srv, "PLAINTEXT")
			assert.False(t, served(t, waiting, 3, 300*time.Millisecond), "served beyond the limit")
			first.Close()
			// The request sent while waiting is read once the connection is accepted.
			require.NoError(t, waiting.SetReadDeadline(time.Now().Add(5*time.Second)))
			resp := readRawFrame(t, waiting)
			assert.Equal(t, []byte{0, 0, 0, 3}, resp[:4], "correlation id of the waiting request")
			waitFor(t, time.Second, func() bool { return len(m.of("blocked")) == 1 }, "AcceptorBlocked not reported")
			assert.GreaterOrEqual(t, m.of("blocked")[0].Dur, 250*time.Millisecond)
		})
	}
}

// max.connection.creation.rate delays connections beyond the rate, then
// accepts them. With 2 windows of 1 s and 5 per second, a burst measures
// over one window: 5 connections pass at once, the 6th waits
// round((6-5)/5*1000) = 200 ms, and so on.
func TestCreationRateDelays(t *testing.T) {
	m := &recorder{}
	srv := socketservertest.NewServer(t, config.Properties{
		"max.connection.creation.rate": "5",
		"quota.window.num":             "2",
		"quota.window.size.seconds":    "1",
	}, withHooks(m), answerAll)

	start := time.Now()
	for i := range 5 {
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		require.True(t, served(t, c, int32(i), 5*time.Second))
	}
	burst := time.Since(start)
	assert.Less(t, burst, 150*time.Millisecond, "the first 5 connections must not wait")
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	sixth := time.Now()
	require.True(t, served(t, c, 6, 5*time.Second), "delayed connections are accepted, not refused")
	waited := time.Since(sixth)
	assert.GreaterOrEqual(t, waited, 150*time.Millisecond)
	assert.Less(t, waited, 1100*time.Millisecond, "a delay is at most one window")
	require.Len(t, m.of("blocked"), 1)
	assert.Empty(t, m.of("rejected"))
}

// The per-address creation rate holds a connection beyond it for the
// throttle delay, then closes it.
func TestPerIPCreationRateHoldsThenCloses(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"kafkanet.ip.connection.creation.rate": "2",
		"quota.window.num":                     "2",
	}, withAPIs, answerAll)
	for i := range 2 {
		c := dialFrom(t, srv, "PLAINTEXT", "127.0.0.3")
		require.True(t, served(t, c, int32(i), 5*time.Second))
	}
	held := dialFrom(t, srv, "PLAINTEXT", "127.0.0.3")
	start := time.Now()
	requireClosedNoResponse(t, held)
	// (3-2)/2 * 1000 ms.
	// Within 100 to 900 ms: held, then closed; a loaded machine runs late.
	assert.InDelta(t, 500, time.Since(start).Milliseconds(), 400)
	other := dialFrom(t, srv, "PLAINTEXT", "127.0.0.4")
	assert.True(t, served(t, other, 9, 5*time.Second), "other addresses are not throttled")
}

// The inter-broker listener is exempt from max.connections when there are
// several listeners; once it takes the count over the limit, another
// listener's least recently active connection is closed promptly.
func TestInterBrokerListenerProtected(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name":     "REPLICATION",
		"max.connections":                "3",
		// Each processor closes its own least recently active connection,
		// as in Kafka; one processor makes that the listener's.
		"listener.name.client.num.network.threads": "1",
	}, withAPIs, answerAll)
	var clients []net.Conn
	for i := range 3 {
		c := socketservertest.Dial(t, srv, "CLIENT")
		require.True(t, served(t, c, int32(i), 5*time.Second))
		clients = append(clients, c)
	}
	// Make clients[0] the least recently active.
	for i, c := range clients[1:] {
		require.True(t, served(t, c, int32(10+i), 5*time.Second))
	}
	waitingClient := socketservertest.Dial(t, srv, "CLIENT")
	assert.False(t, served(t, waitingClient, 20, 200*time.Millisecond), "the client listener is full")

	replica := socketservertest.Dial(t, srv, "REPLICATION")
	start := time.Now()
	require.True(t, served(t, replica, 30, 5*time.Second), "the inter-broker listener must be served while the broker is full")
	// One client connection is closed promptly for the quota: the least
	// recently active one as the server recorded it, which is clients[0]
	// unless the machine starved the goroutine recording its last response.
	var shed []connregistry.Conn
	waitFor(t, time.Second, func() bool {
		shed = srv.Registry().Closed(connregistry.Filter{})
		return len(shed) > 0
	}, "no connection was closed for the broker-wide limit")
	assert.Less(t, time.Since(start), time.Second, "the excess connection must be closed promptly")
	require.Len(t, shed, 1, "one connection closed, one at a time")
	assert.Equal(t, connregistry.CloseQuota, shed[0].CloseReason)
	assert.Equal(t, protocolmap.ListenerName("CLIENT"), shed[0].Listener)
	open := 0
	for i, c := range clients {
		if c.LocalAddr().String() == shed[0].ClientAddr.String() {
			requireClosedNoResponse(t, c)
			continue
		}
		assert.True(t, served(t, c, int32(40+i), 5*time.Second), "only one connection goes")
		open++
	}
	assert.Equal(t, 2, open)
	// Processors shed until the count is back at the limit (Kafka allows it
	// to be over in between, one close per processor iteration).
	waitFor(t, 2*time.Second, func() bool {
		_, byListener, _ := socketserver.QuotaCounts(srv)
		return byListener["CLIENT"] == 2 && byListener["REPLICATION"] == 1
	}, "the broker-wide count did not come back to max.connections")
}

// SetConnectionQuotas changes limits while the server runs: raising a limit lets the
// waiting acceptor go on; lowering one applies to new connections only.
func TestSetQuotasWhileRunning(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{"max.connections": "1"}, withAPIs, answerAll)
	first := socketservertest.Dial(t, srv, "PLAINTEXT")
	require.True(t, served(t, first, 1, 5*time.Second))
	waiting := socketservertest.Dial(t, srv, "PLAINTEXT")
	assert.False(t, served(t, waiting, 2, 200*time.Millisecond))

	q := socketserver.DefaultConnectionQuotas()
	q.MaxConnections = 3
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	require.NoError(t, waiting.SetReadDeadline(time.Now().Add(5*time.Second)))
	readRawFrame(t, waiting)

	q.MaxConnectionsPerIP = 1
	q.MaxConnectionsPerIPOverrides = nil
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	assert.True(t, served(t, first, 3, 5*time.Second), "lowering a limit leaves existing connections alone")
	requireClosedNoResponse(t, socketservertest.Dial(t, srv, "PLAINTEXT"))

	q.MaxConnectionsPerIP = 0
	assert.ErrorIs(t, srv.SetConnectionQuotas(context.Background(), q), socketserver.ErrInvalidConnectionQuotas)
}

// Every admitted connection gives its slot back exactly once, however it
// ends: client close, a bad frame, idle expiry, handler close, shutdown.
func TestQuotaCountsReturnToZeroUnderChurn(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"connections.max.idle.ms": "150",
		"max.connections.per.ip":  "1000",
	}, withAPIs, socketserver.HandlerFunc(func(r *socketserver.Request) {
		if r.CorrelationID%2 == 0 {
			_ = r.CloseConnection()
			return
		}
		_ = respondEmpty(r)
	}))
	const workers, each = 20, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				c, err := net.Dial("tcp", srv.Addr("PLAINTEXT").String())
				if err != nil {
					t.Error(err)
					return
				}
				switch (w + i) % 4 {
				case 0: // close at once
				case 1: // a request answered, or closed by the handler
					_, _ = c.Write(requestFrame(metadataReq(1), int32(i), nil))
					_, _ = c.Read(make([]byte, 64))
				case 2: // a frame the server rejects
					_, _ = c.Write([]byte{0xff, 0xff, 0xff, 0xff})
					_, _ = c.Read(make([]byte, 1))
				case 3: // left idle until the server expires it
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, _ = c.Read(make([]byte, 1))
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	waitFor(t, 10*time.Second, func() bool { return quotaTotal(srv) == 0 }, "connection counts did not return to zero")
	total, byListener, byIP := socketserver.QuotaCounts(srv)
	assert.Zero(t, total)
	assert.Zero(t, byListener["PLAINTEXT"])
	assert.Empty(t, byIP)
}

func TestQuotaConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		props config.Properties
		key   string
	}{
		{config.Properties{"max.connections.per.ip": "0"}, "max.connections.per.ip"},
		{config.Properties{"max.connections": "-1"}, "max.connections"},
		{config.Properties{"listener.name.plaintext.max.connections": "x"}, "listener.name.plaintext.max.connections"},
		{config.Properties{"max.connection.creation.rate": "-5"}, "max.connection.creation.rate"},
		{config.Properties{"max.connections.per.ip.overrides": "bad/host:3"}, "max.connections.per.ip.overrides"},
		{config.Properties{"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides"},
		{config.Properties{"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"},
		{config.Properties{"quota.window.num": "0"}, "quota.window.num"},
	} {
		t.Run(tc.key, func(t *testing.T) {
			props := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}
			for k, v := range tc.props {
				props[k] = v
			}
			_, err := config.Server(props)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
		})
	}
	// Zero per IP is valid with overrides.
	cfg, err := config.Server(config.Properties{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "::1:5,localhost:2"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"::1": 5, "localhost": 2}, cfg.ConnectionQuotas.MaxConnectionsPerIPOverrides)
}

// The control-plane listener is counted and limited like any listener.
func TestControlPlaneListenerLimited(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                                "CLIENT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map":           "CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":               "CLIENT",
		"control.plane.listener.name":              "CONTROLLER",
		"listener.name.controller.max.connections": "1",
	}, withAPIs, answerAll)
	first := socketservertest.Dial(t, srv, "CONTROLLER")
	require.True(t, served(t, first, 1, 5*time.Second))
	second := socketservertest.Dial(t, srv, "CONTROLLER")
	assert.False(t, served(t, second, 2, 300*time.Millisecond), "the control plane's limit was not applied")
	_, byListener, _ := socketserver.QuotaCounts(srv)
	assert.Equal(t, 1, byListener["CONTROLLER"])
	first.Close()
	require.NoError(t, second.SetReadDeadline(time.Now().Add(5*time.Second)))
	readRawFrame(t, second)
}

// fakeResolver answers host-name lookups from a table, counting them; with
// block set, a lookup waits until its context ends.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	lookups []string
	block   bool
}

func (r *fakeResolver) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.lookups = append(r.lookups, host)
	block, addrs := r.block, r.answers[host]
	r.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if addrs == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func (r *fakeResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lookups)
}

// New does no DNS: the host names of max.connections.per.ip.overrides are
// resolved by Start, within Start's context, before anything is bound; a
// Start whose resolution failed binds nothing and may be called again.
func TestOverrideHostNamesResolvedByStart(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{"clients.example": {netip.MustParseAddr("127.0.0.7")}}, block: true}
	port := freePort(t)
	srv := newUnstarted(t, config.Properties{
		"listeners":                        "PLAINTEXT://" + fixedHost + ":" + strconv.Itoa(port),
		"max.connections.per.ip.overrides": "clients.example:1",
	}, func(c *socketserver.Config) { socketserver.SetLookupNetIP(c, res.lookup) })
	assert.Zero(t, res.count(), "New resolved a host name")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := srv.Start(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, socketserver.ErrInvalidConnectionQuotas)
	assert.Contains(t, err.Error(), "clients.example")
	assert.Less(t, time.Since(start), 5*time.Second, "Start honours its context")
	assert.Nil(t, srv.Addr("PLAINTEXT"))
	requireBindable(t, port)

	res.mu.Lock()
	res.block = false
	res.mu.Unlock()
	require.NoError(t, srv.Start(context.Background()))
	assert.Equal(t, 2, res.count())
}

// Kafka resolves an override's host name to one address
// (ConnectionQuotas.updateMaxConnectionsPerIpOverride, with
// InetAddress.getByName): the limit applies to that address, not to every
// address of the name. Java, by default, prefers an IPv4 address.
func TestOverrideHostNameLimitsOneAddress(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"clients.example": {netip.MustParseAddr("::1"), netip.MustParseAddr("127.0.0.7"), netip.MustParseAddr("127.0.0.8")},
	}}
	srv := socketservertest.NewServer(t, config.Properties{
		"max.connections.per.ip.overrides": "clients.example:1",
	}, func(c *socketserver.Config) {
		withAPIs(c)
		socketserver.SetLookupNetIP(c, res.lookup)
	}, answerAll)
	first := dialFrom(t, srv, "PLAINTEXT", "127.0.0.7")
	require.True(t, served(t, first, 1, 5*time.Second))
	requireClosedNoResponse(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.7"))
	for i := range 3 { // the name's other addresses have the default limit
		require.True(t, served(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.8"), int32(10+i), 5*time.Second),
			"127.0.0.8 limited by an override of a name that resolved to it second")
	}
}

// SetConnectionQuotas resolves its host names within its context; quotas set before
// Start are not replaced by Start's resolution of the configured ones.
func TestSetQuotasResolvesHostNames(t *testing.T) {
	res := &fakeResolver{answers: map[string][]netip.Addr{
		"old.example": {netip.MustParseAddr("127.0.0.9")},
		"new.example": {netip.MustParseAddr("127.0.0.10")},
	}}
	srv := newUnstarted(t, config.Properties{"num.io.threads": "1",
		"listeners":                        "PLAINTEXT://127.0.0.1:0",
		"max.connections.per.ip.overrides": "old.example:1",
	}, func(c *socketserver.Config) { socketserver.SetLookupNetIP(c, res.lookup) })
	q := socketserver.DefaultConnectionQuotas()
	q.MaxConnectionsPerIPOverrides = map[string]int{"new.example": 1}
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	require.NoError(t, srv.Start(context.Background()))
	go func() { _ = srv.Serve(context.Background(), protocolmap.DataPlane, answerAll) }()
	assert.Equal(t, []string{"new.example"}, res.lookups, "Start resolved quotas that SetConnectionQuotas had replaced")
	require.True(t, served(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.10"), 1, 5*time.Second))
	requireClosedNoResponse(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.10"))
	for i := range 2 {
		require.True(t, served(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.9"), int32(2+i), 5*time.Second))
	}

	res.mu.Lock()
	res.block = true
	res.mu.Unlock()
	q.MaxConnectionsPerIPOverrides = map[string]int{"old.example": 0}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, srv.SetConnectionQuotas(ctx, q), context.DeadlineExceeded)
	require.True(t, served(t, dialFrom(t, srv, "PLAINTEXT", "127.0.0.9"), 5, 5*time.Second), "a failed SetConnectionQuotas changed nothing")
}
