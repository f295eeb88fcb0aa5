package socketserver_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// auditRecorder is a HookAudit that keeps every event; with gate set, each
// call first signals entered and waits for the gate to open.
type auditRecorder struct {
	mu      sync.Mutex
	events  []socketserver.AuditEvent
	gate    *gate
	entered chan struct{}
}

func (r *auditRecorder) OnAudit(e socketserver.AuditEvent) {
	if r.gate != nil {
		select {
		case r.entered <- struct{}{}:
		default:
		}
		r.gate.wait()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *auditRecorder) all() []socketserver.AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]socketserver.AuditEvent(nil), r.events...)
}

func (r *auditRecorder) of(kind socketserver.AuditKind) []socketserver.AuditEvent {
	var out []socketserver.AuditEvent
	for _, e := range r.all() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// printed is every event as %+v prints it, for the secret test.
func (r *auditRecorder) printed() string {
	var b strings.Builder
	for _, e := range r.all() {
		fmt.Fprintf(&b, "%+v\n", e)
	}
	return b.String()
}

func withAudit(r *auditRecorder, queue int) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		c.Hooks = append(c.Hooks, r)
		c.AuditQueueSize = queue
	}
}

func addrPortOf(t testing.TB, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	require.NoError(t, err)
	return ap
}

func TestAuditKindTokens(t *testing.T) {
	want := map[socketserver.AuditKind]string{
		socketserver.AuditAuthenticated:          "authenticated",
		socketserver.AuditAuthenticationFailed:   "authentication-failed",
		socketserver.AuditReauthenticated:        "reauthenticated",
		socketserver.AuditReauthenticationFailed: "reauthentication-failed",
		socketserver.AuditConnectionRefused:      "connection-refused",
		socketserver.AuditConnectionsClosed:      "connections-closed",
		socketserver.AuditThrottled:              "throttled",
		socketserver.AuditEventsDropped:          "events-dropped",
		socketserver.AuditHostAction:             "host-action",
		0:                                        "unknown",
		200:                                      "unknown",
	}
	for k, token := range want {
		assert.Equal(t, token, k.String())
		b, err := k.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, token, string(b))
	}
}

func TestAuditQueueSizeNegative(t *testing.T) {
	_, _, err := socketservertest.Start(nil, func(c *socketserver.Config) { c.AuditQueueSize = -1 }, answerAll)
	require.ErrorContains(t, err, "AuditQueueSize")
}

// Authentications and re-authentications, succeeded and failed, are
// audited with the principal (or, on a failure, the user name tried), the
// mechanism, the listener, the client's address and the TLS client's
// subject; a made-up user name is cut to MaxAuditText; a client that only
// connects and leaves is no failure.
func TestAuditAuthentication(t *testing.T) {
	rec := &auditRecorder{}
	pki := newTestPKI(t)
	props := merge(saslProps(config.Properties{
		"connections.max.reauth.ms":                 "1000",
		"connection.failed.authentication.delay.ms": "0",
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "PLAINTEXT",
	}), pki.props("required"))
	srv := socketservertest.NewServer(t, props, func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		withAudit(rec, 0)(c)
	}, answerAll)

	ok := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Equal(t, int16(0), ok.login("SCRAM-SHA-256", "alice", alicePassword, 2).ErrorCode)
	reauthFails := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Equal(t, int16(0), reauthFails.login("PLAIN", "bob", bobPassword, 2).ErrorCode)
	wrong := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.NotZero(t, wrong.login("PLAIN", "alice", "wrong-Pw-1", 2).ErrorCode)
	unknown := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.NotZero(t, unknown.login("SCRAM-SHA-512", "mallory", "wrong-Pw-2", 2).ErrorCode)
	long := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.NotZero(t, long.login("PLAIN", strings.Repeat("é", 3000), "wrong-Pw-3", 2).ErrorCode)
	require.NoError(t, socketservertest.Dial(t, srv, "SASL_PLAINTEXT").Close()) // gone: no failure

	tc := tls.Client(socketservertest.Dial(t, srv, "SSL"), pki.clientConfig(pki.clientCert(aliceDN)))
	require.NoError(t, tc.Handshake())
	metadataRoundTrip(t, tc, 1, 1)

	time.Sleep(1100 * time.Millisecond) // the sessions expire: re-authentications are served
	require.Equal(t, int16(0), ok.login("SCRAM-SHA-256", "alice", alicePassword, 2).ErrorCode)
	require.NotZero(t, reauthFails.login("PLAIN", "bob", "wrong-Pw-4", 2).ErrorCode)

	require.Eventually(t, func() bool {
		return len(rec.of(socketserver.AuditAuthenticated)) == 3 && len(rec.of(socketserver.AuditAuthenticationFailed)) == 3 &&
			len(rec.of(socketserver.AuditReauthenticated)) == 1 && len(rec.of(socketserver.AuditReauthenticationFailed)) == 1
	}, 10*time.Second, 5*time.Millisecond, "%+v", rec.all())

	byConn := map[string][]socketserver.AuditEvent{}
	for _, e := range rec.all() {
		byConn[e.ConnID] = append(byConn[e.ConnID], e)
		assert.False(t, e.Time.IsZero())
		assert.NotEmpty(t, e.ConnID)
	}
	client := func(rc *rawClient) netip.AddrPort { return addrPortOf(t, rc.c.LocalAddr().String()) }
	find := func(rc *rawClient) []socketserver.AuditEvent {
		t.Helper()
		for _, es := range byConn {
			if es[0].ClientAddr == client(rc) {
				return es
			}
		}
		t.Fatalf("no event of the connection from %s", client(rc))
		return nil
	}

	es := find(ok)
	require.Len(t, es, 2)
	assert.Equal(t, []socketserver.AuditKind{socketserver.AuditAuthenticated, socketserver.AuditReauthenticated}, []socketserver.AuditKind{es[0].Kind, es[1].Kind})
	for _, e := range es {
		assert.Equal(t, "User:alice", e.Principal)
		assert.Equal(t, "SCRAM-SHA-256", e.Mechanism)
		assert.Equal(t, "SASL_PLAINTEXT", string(e.Listener))
		assert.Empty(t, e.Reason)
		assert.Empty(t, e.TLSSubject)
		assert.False(t, e.ProxyAddr.IsValid())
	}

	es = find(reauthFails)
	require.Len(t, es, 2)
	assert.Equal(t, socketserver.AuditReauthenticationFailed, es[1].Kind)
	assert.Equal(t, "User:bob", es[1].Principal, "the principal kept through the failed re-authentication")
	assert.Equal(t, "bob", es[1].User)
	assert.Contains(t, es[1].Reason, "Invalid username or password")

	es = find(wrong)
	require.Len(t, es, 1)
	assert.Equal(t, socketserver.AuditAuthenticationFailed, es[0].Kind)
	assert.Empty(t, es[0].Principal, "never authenticated")
	assert.Equal(t, "alice", es[0].User)
	assert.Equal(t, "PLAIN", es[0].Mechanism)
	assert.Contains(t, es[0].Reason, "Invalid username or password")

	es = find(unknown)
	require.Len(t, es, 1)
	assert.Equal(t, "mallory", es[0].User)
	assert.Equal(t, "SCRAM-SHA-512", es[0].Mechanism)

	es = find(long)
	require.Len(t, es, 1)
	assert.LessOrEqual(t, len(es[0].User), socketserver.MaxAuditText)
	assert.Greater(t, len(es[0].User), socketserver.MaxAuditText-2)
	assert.True(t, strings.HasPrefix(strings.Repeat("é", 3000), es[0].User), "cut at a character's start")

	var ssl socketserver.AuditEvent
	for _, e := range rec.of(socketserver.AuditAuthenticated) {
		if e.Listener == "SSL" {
			ssl = e
		}
	}
	assert.Equal(t, "CN=Alice,OU=Clients,O=Kafkanet Test", ssl.TLSSubject)
	assert.Equal(t, "User:CN=Alice,OU=Clients,O=Kafkanet Test", ssl.Principal)
	assert.Empty(t, ssl.Mechanism)
	assert.Equal(t, addrPortOf(t, tc.LocalAddr().String()), ssl.ClientAddr)
	assert.Zero(t, srv.Stats().AuditDropped)

	// Behind a load balancer that sends the PROXY protocol, a login's
	// events name the client the header gave and the balancer's socket.
	t.Run("PROXY", func(t *testing.T) {
		rec := &auditRecorder{}
		srv := socketservertest.NewServer(t, saslProps(proxyProps(config.Properties{
			"connection.failed.authentication.delay.ms": "0",
		})), func(c *socketserver.Config) {
			withUsers(newUsers(t))(c)
			withAudit(rec, 0)(c)
		}, answerAll)
		behind := func(src string) *rawClient {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			write(t, rc.c, v2(t, src))
			return rc
		}
		ok := behind("192.0.2.7:4567")
		require.Equal(t, int16(0), ok.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
		wrong := behind("198.51.100.9:6543")
		require.NotZero(t, wrong.login("SCRAM-SHA-256", "bob", "wrong-Pw-6", 2).ErrorCode)
		require.Eventually(t, func() bool {
			return len(rec.of(socketserver.AuditAuthenticated)) == 1 && len(rec.of(socketserver.AuditAuthenticationFailed)) == 1
		}, 10*time.Second, 5*time.Millisecond, "%+v", rec.all())

		e := rec.of(socketserver.AuditAuthenticated)[0]
		assert.Equal(t, "User:alice", e.Principal)
		assert.Equal(t, netip.MustParseAddrPort("192.0.2.7:4567"), e.ClientAddr, "the header's source")
		assert.Equal(t, addrPortOf(t, ok.c.LocalAddr().String()), e.ProxyAddr, "the balancer's socket")
		e = rec.of(socketserver.AuditAuthenticationFailed)[0]
		assert.Equal(t, "bob", e.User)
		assert.Equal(t, netip.MustParseAddrPort("198.51.100.9:6543"), e.ClientAddr, "the header's source")
		assert.Equal(t, addrPortOf(t, wrong.c.LocalAddr().String()), e.ProxyAddr, "the balancer's socket")
	})

	// A failed TLS handshake on a listener that requires a client
	// certificate is a failed authentication, with the listener and why,
	// and no subject: a certificate the handshake did not verify names no
	// one.
	t.Run("TLS handshake failed", func(t *testing.T) {
		rec := &auditRecorder{}
		srv := socketservertest.NewServer(t, merge(pki.props("required"), config.Properties{
			"listeners":                      "SSL://127.0.0.1:0",
			"security.inter.broker.protocol": "SSL",
		}), func(c *socketserver.Config) {
			c.APIs = allAPIs()
			withAudit(rec, 0)(c)
		}, answerAll)
		other := newTestPKI(t) // a CA the server does not trust
		clients := map[string]*tls.Config{
			"no certificate":        pki.clientConfig(),
			"untrusted certificate": pki.clientConfig(other.clientCert(aliceDN)),
		}
		from := map[netip.AddrPort]string{}
		for name, cfg := range clients {
			raw := socketservertest.Dial(t, srv, "SSL")
			from[addrPortOf(t, raw.LocalAddr().String())] = name
			c := tls.Client(raw, cfg)
			if c.Handshake() == nil { // TLS 1.3: the server's refusal comes after the client's end of the handshake
				_, _ = c.Read(make([]byte, 1))
			}
			readUntilClosed(t, raw, 10*time.Second)
		}
		require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditAuthenticationFailed)) == len(clients) },
			10*time.Second, 5*time.Millisecond, "%+v", rec.all())
		assert.Empty(t, rec.of(socketserver.AuditAuthenticated))
		for _, e := range rec.of(socketserver.AuditAuthenticationFailed) {
			name, ok := from[e.ClientAddr]
			require.True(t, ok, "an event of an unknown client: %+v", e)
			assert.Equal(t, "SSL", string(e.Listener), name)
			assert.NotEmpty(t, e.ConnID, name)
			assert.Contains(t, e.Reason, socketserver.ErrHandshake.Error(), name)
			assert.Empty(t, e.TLSSubject, name)
			assert.Empty(t, e.Principal, name)
			assert.Empty(t, e.User, name)
			assert.Empty(t, e.Mechanism, name)
			delete(from, e.ClientAddr)
		}
	})
}

// A hook that blocks holds no connection: logins go on, events beyond the
// queue are dropped and counted, and the drop is reported, in order, as
// soon as the queue has room; the queue never holds more than its size.
func TestAuditSlowHookHoldsNothing(t *testing.T) {
	const queue, logins = 4, 20
	rec := &auditRecorder{gate: newGate(), entered: make(chan struct{}, 1)}
	defer rec.gate.open()
	srv := socketservertest.NewServer(t, saslProps(config.Properties{"connection.failed.authentication.delay.ms": "0"}), func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		withAudit(rec, queue)(c)
	}, answerAll)

	login := func(i int) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.NoError(t, rc.c.SetDeadline(time.Now().Add(10*time.Second)))
		require.NotZero(t, rc.login("PLAIN", fmt.Sprintf("user-%d", i), "wrong-Pw-5", 2).ErrorCode, "login %d answered", i)
		requireClosedNoResponse(t, rc.c)
	}
	login(0)
	select {
	case <-rec.entered: // the goroutine holds the first event, in the blocked hook
	case <-time.After(10 * time.Second):
		t.Fatal("the hook was not called")
	}
	for i := 1; i < logins; i++ {
		login(i)
	}
	require.Eventually(t, func() bool { return srv.Stats().AuditDropped == logins-1-queue }, 10*time.Second, 5*time.Millisecond,
		"dropped: %d", srv.Stats().AuditDropped)
	assert.Empty(t, rec.all(), "the hook is still blocked")

	rec.gate.open()
	// The report follows the events queued without another being recorded.
	require.Eventually(t, func() bool { return len(rec.all()) == 1+queue+1 }, 10*time.Second, 5*time.Millisecond)
	srv.Audit(socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Action: "after"})
	require.Eventually(t, func() bool { return len(rec.all()) == 1+queue+2 }, 10*time.Second, 5*time.Millisecond)
	got := rec.all()
	for i, e := range got[:1+queue] {
		assert.Equal(t, socketserver.AuditAuthenticationFailed, e.Kind)
		assert.Equal(t, fmt.Sprintf("user-%d", i), e.User, "delivered in the order recorded")
	}
	assert.Equal(t, socketserver.AuditEventsDropped, got[1+queue].Kind)
	assert.Equal(t, logins-1-queue, got[1+queue].Count)
	assert.Equal(t, "after", got[2+queue].Action)
	assert.False(t, got[2+queue].Time.IsZero(), "Audit sets the time")
	assert.Equal(t, int64(logins-1-queue), srv.Stats().AuditDropped, "the report is no drop")
}

// Drops are reported once the queue frees, with no further event: behind
// a hook that blocks, events beyond the queue are dropped; unblocked, the
// hook gets the events queued, then the report with their count, once
// (the next event follows it), although nothing more was recorded.
func TestAuditDropsReportedWhenTheQueueFrees(t *testing.T) {
	const queue, recorded = 4, 11
	rec := &auditRecorder{gate: newGate(), entered: make(chan struct{}, 1)}
	defer rec.gate.open()
	srv := socketservertest.NewServer(t, nil, withAudit(rec, queue), answerAll)
	record := func(detail string) {
		srv.Audit(socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Action: "a", Detail: detail})
	}
	record("0")
	select {
	case <-rec.entered: // the goroutine holds the first event, in the blocked hook
	case <-time.After(10 * time.Second):
		t.Fatal("the hook was not called")
	}
	for i := 1; i < recorded; i++ {
		record(fmt.Sprint(i))
	}
	const dropped = recorded - 1 - queue
	require.Equal(t, int64(dropped), srv.Stats().AuditDropped)

	rec.gate.open()
	require.Eventually(t, func() bool { return len(rec.all()) == 1+queue+1 }, 10*time.Second, 5*time.Millisecond,
		"the report did not come")
	got := rec.all()
	for i, e := range got[:1+queue] {
		assert.Equal(t, fmt.Sprint(i), e.Detail, "the events queued first, in order")
	}
	report := got[1+queue]
	assert.Equal(t, socketserver.AuditEventsDropped, report.Kind)
	assert.Equal(t, dropped, report.Count)
	assert.False(t, report.Time.IsZero())

	record("next")
	require.Eventually(t, func() bool { return len(rec.all()) == 1+queue+2 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, "next", rec.all()[2+queue].Detail, "reported once")
	assert.Equal(t, int64(dropped), srv.Stats().AuditDropped, "the report is no drop")
}

// Events recorded from many goroutines at once through a small queue,
// behind a hook that blocks first and then keeps up as it can: the
// reports (by the next event or by the delivery goroutine) add up to the
// drops, each counted once, and each goroutine's events keep their order.
func TestAuditDropReportsAddUp(t *testing.T) {
	const writers, each = 8, 300
	rec := &auditRecorder{gate: newGate(), entered: make(chan struct{}, 1)}
	srv, stop, err := socketservertest.Start(nil, withAudit(rec, 2), answerAll)
	require.NoError(t, err)
	defer func() { require.NoError(t, stop()) }()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				srv.Audit(socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Action: fmt.Sprint(w), Count: i})
			}
		})
	}
	require.Eventually(t, func() bool { return srv.Stats().AuditDropped > 0 }, 10*time.Second, time.Millisecond)
	rec.gate.open() // while the writers may still write
	wg.Wait()
	require.NoError(t, srv.Shutdown(context.Background()))

	delivered, reported := 0, 0
	last := map[string]int{}
	for _, e := range rec.all() {
		switch e.Kind {
		case socketserver.AuditEventsDropped:
			assert.Positive(t, e.Count)
			reported += e.Count
		case socketserver.AuditHostAction:
			delivered++
			if prev, ok := last[e.Action]; ok {
				assert.Greater(t, e.Count, prev, "writer %s's events in order", e.Action)
			}
			last[e.Action] = e.Count
		}
	}
	dropped := int(srv.Stats().AuditDropped)
	t.Logf("%d recorded: %d delivered, %d dropped, reported in %d events", writers*each, delivered, dropped, len(rec.of(socketserver.AuditEventsDropped)))
	assert.Positive(t, dropped)
	assert.Equal(t, dropped, reported, "every drop reported once")
	assert.Equal(t, writers*each, delivered+dropped)
}

// Shutdown delivers the events waiting before it returns, and the audit
// goroutine ends with the server (the package's leak check).
func TestAuditShutdownDrains(t *testing.T) {
	rec := &auditRecorder{gate: newGate(), entered: make(chan struct{}, 1)}
	srv, stop, err := socketservertest.Start(nil, withAudit(rec, 0), answerAll)
	require.NoError(t, err)
	defer func() { require.NoError(t, stop()) }()
	for i := range 10 {
		srv.Audit(socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Action: "a", Detail: fmt.Sprint(i)})
	}
	<-rec.entered
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while events waited", err)
	case <-time.After(100 * time.Millisecond):
	}
	rec.gate.open()
	require.NoError(t, <-done)
	got := rec.all()
	require.Len(t, got, 10)
	for i, e := range got {
		assert.Equal(t, fmt.Sprint(i), e.Detail)
	}
}

// Close delivers nothing more than the call in progress, and counts the
// rest as dropped; events recorded after are dropped too.
func TestAuditCloseDrops(t *testing.T) {
	rec := &auditRecorder{gate: newGate(), entered: make(chan struct{}, 1)}
	srv, stop, err := socketservertest.Start(nil, withAudit(rec, 0), answerAll)
	require.NoError(t, err)
	for range 5 {
		srv.Audit(socketserver.AuditEvent{Kind: socketserver.AuditHostAction})
	}
	<-rec.entered
	closed := make(chan error, 1)
	go func() { closed <- stop() }()
	time.Sleep(50 * time.Millisecond)
	rec.gate.open()
	require.NoError(t, <-closed)
	assert.LessOrEqual(t, len(rec.all()), 1, "only the call in progress")
	assert.Equal(t, int64(5-len(rec.all())), srv.Stats().AuditDropped)
}

// Connections refused by the per-address quotas and by the PROXY
// protocol's rules are audited with the client's address and why.
func TestAuditConnectionRefused(t *testing.T) {
	t.Run("quotas", func(t *testing.T) {
		rec := &auditRecorder{}
		srv := socketservertest.NewServer(t, config.Properties{
			"max.connections.per.ip":               "1",
			"kafkanet.ip.connection.creation.rate": "2",
			"quota.window.num":                     "2",
		}, func(c *socketserver.Config) {
			c.APIs = allAPIs()
			withAudit(rec, 0)(c)
		}, answerAll)
		kept := dialFrom(t, srv, "PLAINTEXT", "127.0.0.5")
		require.True(t, served(t, kept, 1, 5*time.Second))
		over := dialFrom(t, srv, "PLAINTEXT", "127.0.0.5")
		requireClosedNoResponse(t, over)
		throttled := dialFrom(t, srv, "PLAINTEXT", "127.0.0.5")
		requireClosedNoResponse(t, throttled)
		require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditConnectionRefused)) == 2 }, 5*time.Second, 5*time.Millisecond)
		got := rec.of(socketserver.AuditConnectionRefused)
		assert.Equal(t, addrPortOf(t, over.LocalAddr().String()), got[0].ClientAddr)
		assert.Contains(t, got[0].Reason, socketserver.ErrTooManyConnections.Error())
		assert.Zero(t, got[0].Throttle)
		assert.Equal(t, addrPortOf(t, throttled.LocalAddr().String()), got[1].ClientAddr)
		assert.Contains(t, got[1].Reason, socketserver.ErrConnectionThrottled.Error())
		assert.Positive(t, got[1].Throttle)
		for _, e := range got {
			assert.Equal(t, "PLAINTEXT", string(e.Listener))
			assert.Empty(t, e.ConnID)
		}
	})
	t.Run("PROXY untrusted", func(t *testing.T) {
		rec := &auditRecorder{}
		srv := proxyServer(t, &proxyRecorder{}, config.Properties{config.KeyProxyProtocolTrustedNetworks: "127.0.0.2/32"}, withAudit(rec, 0))
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		requireClosedNoResponse(t, c)
		require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditConnectionRefused)) == 1 }, 5*time.Second, 5*time.Millisecond)
		e := rec.of(socketserver.AuditConnectionRefused)[0]
		assert.Equal(t, addrPortOf(t, c.LocalAddr().String()), e.ClientAddr)
		assert.Contains(t, e.Reason, socketserver.ErrProxyUntrusted.Error())
	})
	t.Run("PROXY header refused", func(t *testing.T) {
		rec := &auditRecorder{}
		srv := proxyServer(t, &proxyRecorder{}, nil, withAudit(rec, 0))
		c := socketservertest.Dial(t, srv, "PLAINTEXT")
		write(t, c, requestFrame(metadataReq(9), 1, nil))
		requireClosedNoResponse(t, c)
		require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditConnectionRefused)) == 1 }, 5*time.Second, 5*time.Millisecond)
		e := rec.of(socketserver.AuditConnectionRefused)[0]
		assert.Equal(t, addrPortOf(t, c.LocalAddr().String()), e.ProxyAddr, "the balancer's")
		assert.False(t, e.ClientAddr.IsValid(), "the client is unknown")
		assert.Contains(t, e.Reason, socketserver.ErrProxyHeader.Error())
	})
	t.Run("principal limit", func(t *testing.T) {
		rec := &auditRecorder{}
		srv := socketservertest.NewServer(t, saslProps(config.Properties{
			config.KeyMaxConnectionsPerPrincipalOverrides: "User:alice:1",
		}), func(c *socketserver.Config) {
			withUsers(newUsers(t))(c)
			withAudit(rec, 0)(c)
		}, echoMetadata)
		first := loggedIn(t, srv, "alice", alicePassword)
		require.True(t, servesMetadata(t, first))
		over := loggedIn(t, srv, "alice", alicePassword)
		require.False(t, servesMetadata(t, over))
		require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditConnectionRefused)) == 1 }, 5*time.Second, 5*time.Millisecond)
		e := rec.of(socketserver.AuditConnectionRefused)[0]
		assert.Equal(t, addrPortOf(t, over.c.LocalAddr().String()), e.ClientAddr)
		assert.Equal(t, "User:alice", e.Principal)
		assert.Equal(t, "PLAIN", e.Mechanism)
		assert.NotEmpty(t, e.ConnID)
		assert.Equal(t, "SASL_PLAINTEXT", string(e.Listener))
		assert.NotEmpty(t, e.Reason)
		assert.Len(t, rec.of(socketserver.AuditAuthenticated), 2, "both logins succeeded")
	})
}

// An operator's close is audited: who asked, from which connection, with
// which filter, how many closed; a refused one with why.
func TestAuditOperatorClose(t *testing.T) {
	for _, tc := range []struct {
		name      string
		authorize connregistry.Authorizer
		count     int
		reason    string
	}{
		{"closed", nil, 1, ""},
		{"refused", connregistry.SuperUsers("User:admin"), 0, "Cluster authorization failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &auditRecorder{}
			srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
				c.APIs = []socketserver.API{socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, tc.authorize)}
				withAudit(rec, 0)(c)
			}, answerAll)
			socketservertest.Dial(t, srv, "PLAINTEXT")
			require.Eventually(t, func() bool { return srv.Registry().Len() == 1 }, 5*time.Second, 5*time.Millisecond)
			admin := socketservertest.Dial(t, srv, "PLAINTEXT")
			send(t, admin, &connregistry.CloseClientConnectionsRequest{ListenerFilter: strp("PLAINTEXT"), ConnectionIDs: []string{"a", "b"}}, 1)
			readResponse(t, admin, &connregistry.CloseClientConnectionsResponse{}, 1)
			require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditConnectionsClosed)) == 1 }, 5*time.Second, 5*time.Millisecond)
			e := rec.of(socketserver.AuditConnectionsClosed)[0]
			assert.Equal(t, "User:ANONYMOUS", e.Principal)
			assert.Equal(t, addrPortOf(t, admin.LocalAddr().String()), e.ClientAddr)
			assert.NotEmpty(t, e.ConnID)
			assert.Equal(t, "listener=PLAINTEXT connection_ids=a,b", e.Filter)
			assert.Equal(t, 0, e.Count, "the ids match no connection")
			if tc.reason != "" {
				assert.Contains(t, e.Reason, tc.reason)
				return
			}
			assert.Empty(t, e.Reason)
			send(t, admin, &connregistry.CloseClientConnectionsRequest{ListenerFilter: strp("PLAINTEXT")}, 2)
			readResponse(t, admin, &connregistry.CloseClientConnectionsResponse{}, 2)
			require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditConnectionsClosed)) == 2 }, 5*time.Second, 5*time.Millisecond)
			e = rec.of(socketserver.AuditConnectionsClosed)[1]
			assert.Equal(t, "listener=PLAINTEXT", e.Filter)
			assert.Equal(t, tc.count, e.Count)
		})
	}
}

// A throttle begun is audited after the connection's authentication, in
// order, with the throttle's length and the principal.
func TestAuditThrottle(t *testing.T) {
	rec := &auditRecorder{}
	srv := socketservertest.NewServer(t, saslProps(nil), func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		withAudit(rec, 0)(c)
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		_ = r.Throttle(200 * time.Millisecond)
		_ = respondEmpty(r)
	}))
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Equal(t, int16(0), rc.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
	rc.roundTrip(metadataReq(9))
	require.Eventually(t, func() bool { return len(rec.of(socketserver.AuditThrottled)) == 1 }, 5*time.Second, 5*time.Millisecond)
	got := rec.all()
	require.Len(t, got, 2)
	assert.Equal(t, socketserver.AuditAuthenticated, got[0].Kind)
	e := got[1]
	assert.Equal(t, socketserver.AuditThrottled, e.Kind)
	assert.Equal(t, got[0].ConnID, e.ConnID)
	assert.Equal(t, "User:alice", e.Principal)
	assert.Positive(t, e.Throttle)
	assert.LessOrEqual(t, e.Throttle, 200*time.Millisecond)
}
