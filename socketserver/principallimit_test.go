package socketserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

var bob = connregistry.Principal{Type: "User", Name: "bob"}

// loggedIn opens a connection to the SASL listener and logs user in with
// PLAIN; the server's answer to the exchange is successful either way: a
// connection over its principal's limit is closed after it.
func loggedIn(t *testing.T, srv *socketserver.Server, user, pass string) *rawClient {
	t.Helper()
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	resp := rc.login("PLAIN", user, pass, 1)
	require.Zero(t, resp.ErrorCode, "login of %s", user)
	return rc
}

// servesMetadata reports whether the connection answers a Metadata request; false
// when the server has closed it (without an answer).
func servesMetadata(t *testing.T, rc *rawClient) bool {
	t.Helper()
	rc.corr++
	_, err := rc.c.Write(formatter.AppendRequest(nil, metadataReq(1), rc.corr))
	if err != nil {
		return false
	}
	require.NoError(t, rc.c.SetReadDeadline(time.Now().Add(10*time.Second)))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		require.False(t, errors.Is(err, context.DeadlineExceeded) || isTimeout(err), "neither answered nor closed: %v", err)
		return false
	}
	return true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A principal over its limit (kafkanet.max.connections.per.principal.overrides)
// has its new connection closed once it has authenticated, before any
// request is served, listed with the reason principal-limit; its other
// connections keep being served, another principal is not affected, a
// closed connection gives its place back, and SetQuotas applies a changed
// limit to the next connection. User:ANONYMOUS is limited only by an
// override, here on the PLAINTEXT listener alone.
func TestPrincipalLimit(t *testing.T) {
	reasons := &closeReasons{} // HookConnClosed's: how the plugins count closes by reason
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		config.KeyMaxConnectionsPerPrincipal:                                       "3",
		config.KeyMaxConnectionsPerPrincipalOverrides:                              "User:alice:2",
		"listener.name.plaintext." + config.KeyMaxConnectionsPerPrincipalOverrides: "User:ANONYMOUS:1",
	}), func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.Hooks = append(c.Hooks, reasons)
	}, echoMetadata)

	// Each connection is counted once its login's answer is written, before
	// it reads its first request: a Metadata request orders them.
	a1 := loggedIn(t, srv, "alice", alicePassword)
	require.True(t, servesMetadata(t, a1))
	a2 := loggedIn(t, srv, "alice", alicePassword)
	require.True(t, servesMetadata(t, a2))
	a3 := loggedIn(t, srv, "alice", alicePassword)
	assert.False(t, servesMetadata(t, a3), "alice's third connection was served over her limit of 2")
	assert.True(t, servesMetadata(t, a1), "alice's first connection stopped being served")
	assert.True(t, servesMetadata(t, a2), "alice's second connection stopped being served")
	var bobs []*rawClient
	for i := range 3 {
		bobs = append(bobs, loggedIn(t, srv, "bob", bobPassword))
		require.True(t, servesMetadata(t, bobs[i]), "bob's connection %d (limit 3)", i+1)
	}
	assert.False(t, servesMetadata(t, loggedIn(t, srv, "bob", bobPassword)), "bob's fourth connection was served over the limit of 3")

	closed := srv.Registry().Closed(connregistry.Filter{})
	var refused []connregistry.Conn
	for _, c := range closed {
		if c.CloseReason == connregistry.ClosePrincipalLimit {
			refused = append(refused, c)
		}
	}
	require.Len(t, refused, 2, "closed: %+v", closed)
	assert.Equal(t, alice, refused[0].Principal)
	assert.Equal(t, bob, refused[1].Principal)
	assert.EqualValues(t, 2, refused[0].Requests, "a refused connection served a request beyond its SaslHandshake and SaslAuthenticate")
	assert.Equal(t, map[connregistry.Principal]int{alice: 2, bob: 3}, socketserver.PrincipalCounts(srv))
	require.Eventually(t, func() bool { // HookConnClosed runs after the close the registry records
		return countReason(reasons.get(), connregistry.ClosePrincipalLimit) == 2
	}, 10*time.Second, 10*time.Millisecond, "HookConnClosed saw %v", reasons.get())
	assert.Len(t, reasons.get(), 2, "HookConnClosed saw another close")

	// A closed connection gives its place back.
	require.NoError(t, a1.c.Close())
	require.Eventually(t, func() bool { return socketserver.PrincipalCounts(srv)[alice] == 1 }, 10*time.Second, 10*time.Millisecond)
	a4 := loggedIn(t, srv, "alice", alicePassword)
	assert.True(t, servesMetadata(t, a4), "alice's connection within her limit again")

	// A limit changed at run time applies to the next connection; those
	// open stay.
	q := socketserver.DefaultConnectionQuotas()
	q.MaxConnectionsPerPrincipal = socketserver.PrincipalLimits{Max: 3, Overrides: map[connregistry.Principal]int{alice: 3}}
	q.ListenerMaxConnectionsPerPrincipal = map[protocolmap.ListenerName]socketserver.PrincipalLimits{
		"PLAINTEXT": {Max: socketserver.Unlimited, Overrides: map[connregistry.Principal]int{connregistry.Anonymous(): 1}},
	}
	require.NoError(t, srv.SetConnectionQuotas(t.Context(), q))
	assert.True(t, servesMetadata(t, loggedIn(t, srv, "alice", alicePassword)), "a raised limit does not apply")
	assert.False(t, servesMetadata(t, loggedIn(t, srv, "alice", alicePassword)), "alice's fourth connection with a limit of 3")
	q.MaxConnectionsPerPrincipal.Overrides[alice] = 1
	require.NoError(t, srv.SetConnectionQuotas(t.Context(), q))
	assert.False(t, servesMetadata(t, loggedIn(t, srv, "alice", alicePassword)), "a lowered limit does not apply")
	assert.True(t, servesMetadata(t, a2), "a lowered limit closed an open connection")

	// User:ANONYMOUS: its override on PLAINTEXT.
	p1 := dialRaw(t, srv, "PLAINTEXT")
	assert.True(t, servesMetadata(t, p1))
	p2 := dialRaw(t, srv, "PLAINTEXT")
	assert.False(t, servesMetadata(t, p2), "a second anonymous connection over the override of 1")
	assert.True(t, servesMetadata(t, p1))
}

// Over TLS client authentication (ssl.client.auth=required) the
// principal is the certificate's subject, in RFC 2253 form, and an
// override names it so, commas and all: bob's second connection is closed
// once its handshake is done, listed with the reason principal-limit and
// his DN; his first keeps being served, and another certificate's
// principal is not affected.
func TestPrincipalLimitOverTLSClientAuth(t *testing.T) {
	pki := newTestPKI(t)
	const bobDN = "CN=bob,O=acme"
	srv := socketservertest.NewServer(t, merge(pki.props("required"), config.Properties{
		"listeners":                                   "SSL://127.0.0.1:0",
		"security.inter.broker.protocol":              "SSL",
		config.KeyMaxConnectionsPerPrincipalOverrides: "User:" + bobDN + ":1",
	}), withAPIs, echoMetadata)
	bobCert := pki.clientCert(pkix.Name{CommonName: "bob", Organization: []string{"acme"}})
	dial := func(cert tls.Certificate) *rawClient {
		c := tls.Client(socketservertest.Dial(t, srv, "SSL"), pki.clientConfig(cert))
		require.NoError(t, c.Handshake())
		return &rawClient{t: t, c: c}
	}
	b1 := dial(bobCert)
	require.True(t, servesMetadata(t, b1))
	assert.False(t, servesMetadata(t, dial(bobCert)), "bob's second connection was served over his limit of 1")
	assert.True(t, servesMetadata(t, b1), "bob's first connection stopped being served")
	assert.True(t, servesMetadata(t, dial(pki.clientCert(aliceDN))), "another principal was limited")

	refused := closedFor(srv, connregistry.ClosePrincipalLimit)
	require.Len(t, refused, 1, "closed: %+v", srv.Registry().Closed(connregistry.Filter{}))
	assert.Equal(t, connregistry.Principal{Type: "User", Name: bobDN}, refused[0].Principal)
	assert.Equal(t, map[connregistry.Principal]int{{Type: "User", Name: bobDN}: 1, {Type: "User", Name: "CN=Alice,OU=Clients,O=Kafkanet Test"}: 1},
		socketserver.PrincipalCounts(srv))
}

// Without an override, User:ANONYMOUS is not limited by
// kafkanet.max.connections.per.principal: the per-address limits cover
// unauthenticated connections. Every connection is counted all the same,
// so that an override set at run time measures those open.
func TestPrincipalLimitLeavesAnonymous(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                          "PLAINTEXT://127.0.0.1:0",
		config.KeyMaxConnectionsPerPrincipal: "1",
	}, func(c *socketserver.Config) { c.APIs = allAPIs() }, echoMetadata)
	var conns []*rawClient
	for range 3 {
		rc := dialRaw(t, srv, "PLAINTEXT")
		require.True(t, servesMetadata(t, rc))
		conns = append(conns, rc)
	}
	assert.Equal(t, map[connregistry.Principal]int{connregistry.Anonymous(): 3}, socketserver.PrincipalCounts(srv))
	q := socketserver.DefaultConnectionQuotas()
	q.MaxConnectionsPerPrincipal = socketserver.PrincipalLimits{Max: 1, Overrides: map[connregistry.Principal]int{connregistry.Anonymous(): 3}}
	require.NoError(t, srv.SetConnectionQuotas(t.Context(), q))
	assert.False(t, servesMetadata(t, dialRaw(t, srv, "PLAINTEXT")), "the run-time override does not count the connections open")
	require.NoError(t, conns[0].c.Close())
	require.Eventually(t, func() bool { return socketserver.PrincipalCounts(srv)[connregistry.Anonymous()] == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.True(t, servesMetadata(t, dialRaw(t, srv, "PLAINTEXT")))
}

// A listener's own limit (listener.name.<l>.kafkanet.max.connections.per.principal)
// counts the principal's connections on that listener, in addition to the
// broker-wide one.
func TestPrincipalLimitPerListener(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
		"listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
		"inter.broker.listener.name":     "OTHER",
		"listener.name.sasl_plaintext." + config.KeyMaxConnectionsPerPrincipal: "1",
		config.KeyMaxConnectionsPerPrincipal:                                   "2",
	}, withUsers(newUsers(t)), echoMetadata)
	other := func() *rawClient {
		rc := &rawClient{t: t, c: socketservertest.Dial(t, srv, "OTHER")}
		require.Zero(t, rc.login("PLAIN", "alice", alicePassword, 1).ErrorCode)
		return rc
	}
	assert.True(t, servesMetadata(t, loggedIn(t, srv, "alice", alicePassword)))
	assert.False(t, servesMetadata(t, loggedIn(t, srv, "alice", alicePassword)), "the listener's limit of 1")
	assert.True(t, servesMetadata(t, other()), "the listener's limit counted another listener's connection")
	assert.False(t, servesMetadata(t, other()), "the broker-wide limit of 2")
}

// The overrides' syntax: entries separated by semicolons, as super.users
// separates principals, the count after the last colon, so that a TLS
// distinguished name with commas and colons can be named.
func TestPrincipalOverridesSyntax(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  map[connregistry.Principal]int
		err   string
	}{
		{"User:alice:2;User:CN=bob,O=acme:50", map[connregistry.Principal]int{
			alice: 2, {Type: "User", Name: "CN=bob,O=acme"}: 50}, ""},
		{" User:alice:0 ; ;User:ANONYMOUS: 3 ;", map[connregistry.Principal]int{alice: 0, connregistry.Anonymous(): 3}, ""},
		{"User:a:b:c:7", map[connregistry.Principal]int{{Type: "User", Name: "a:b:c"}: 7}, ""},
		{"User:alice:2147483647", map[connregistry.Principal]int{alice: socketserver.Unlimited}, ""},
		{"", nil, ""},
		{"alice:2", nil, "is not a principal"},
		{"User::2", nil, "is not a principal"},
		{":alice:2", nil, "is not a principal"},
		{"User:alice", nil, "is not a principal"},
		{"User:alice:-1", nil, "is not an integer from 0"},
		{"User:alice:2147483648", nil, "is not an integer from 0"},
		{"User:alice:x", nil, "is not an integer from 0"},
		{"User:alice:1;User:alice:2", nil, "more than once"},
		{"alice", nil, "is not principal:count"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cfg, err := config.Server(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0",
				config.KeyMaxConnectionsPerPrincipalOverrides: tc.value})
			var got map[connregistry.Principal]int
			if err == nil {
				got = cfg.ConnectionQuotas.MaxConnectionsPerPrincipal.Overrides
			}
			if tc.err != "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, socketserver.ErrInvalidConnectionQuotas)
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, config.KeyMaxConnectionsPerPrincipalOverrides, ce.Key)
				assert.Equal(t, tc.value, ce.Value)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The keys, as config.Server reads them: errors name the key as
// written, its listener prefix included.
func TestPrincipalLimitConfig(t *testing.T) {
	base := config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}
	cfg, err := config.Server(merge(base, config.Properties{
		config.KeyMaxConnectionsPerPrincipalOverrides:                                   "User:alice:2;User:CN=bob,O=acme:50",
		"listener.name.sasl_plaintext." + config.KeyMaxConnectionsPerPrincipalOverrides: "User:alice:1",
	}))
	require.NoError(t, err)
	assert.Equal(t, socketserver.PrincipalLimits{Max: socketserver.Unlimited, Overrides: map[connregistry.Principal]int{
		alice: 2, {Type: "User", Name: "CN=bob,O=acme"}: 50}}, cfg.ConnectionQuotas.MaxConnectionsPerPrincipal)
	assert.Equal(t, map[protocolmap.ListenerName]socketserver.PrincipalLimits{
		"SASL_PLAINTEXT": {Max: socketserver.Unlimited, Overrides: map[connregistry.Principal]int{alice: 1}},
	}, cfg.ConnectionQuotas.ListenerMaxConnectionsPerPrincipal)

	cfg, err = config.Server(base)
	require.NoError(t, err)
	assert.Equal(t, socketserver.DefaultConnectionQuotas().MaxConnectionsPerPrincipal, cfg.ConnectionQuotas.MaxConnectionsPerPrincipal)
	assert.Nil(t, cfg.ConnectionQuotas.ListenerMaxConnectionsPerPrincipal)

	for _, tc := range []struct {
		props config.Properties
		key   string
	}{
		{config.Properties{config.KeyMaxConnectionsPerPrincipal: "0"}, config.KeyMaxConnectionsPerPrincipal},
		{config.Properties{config.KeyMaxConnectionsPerPrincipal: "-1"}, config.KeyMaxConnectionsPerPrincipal},
		{config.Properties{"listener.name.plaintext." + config.KeyMaxConnectionsPerPrincipal: "x"}, "listener.name.plaintext." + config.KeyMaxConnectionsPerPrincipal},
		{config.Properties{"listener.name.plaintext." + config.KeyMaxConnectionsPerPrincipalOverrides: "alice:1"}, "listener.name.plaintext." + config.KeyMaxConnectionsPerPrincipalOverrides},
	} {
		_, err := config.Server(merge(base, tc.props))
		var ce *config.Error
		require.ErrorAs(t, err, &ce, "%v", tc.props)
		assert.Equal(t, tc.key, ce.Key)
	}
	// With overrides, zero admits only the principals they name.
	cfg, err = config.Server(merge(base, config.Properties{
		config.KeyMaxConnectionsPerPrincipal: "0", config.KeyMaxConnectionsPerPrincipalOverrides: "User:alice:5",
	}))
	require.NoError(t, err)
	assert.Zero(t, cfg.ConnectionQuotas.MaxConnectionsPerPrincipal.Max)

	// Values built in code are checked as New checks the other quotas.
	q := socketserver.DefaultConnectionQuotas()
	q.ListenerMaxConnectionsPerPrincipal = map[protocolmap.ListenerName]socketserver.PrincipalLimits{"PLAINTEXT": {}}
	srv := socketservertest.NewServer(t, nil, nil, echoMetadata)
	assert.ErrorIs(t, srv.SetConnectionQuotas(t.Context(), q), socketserver.ErrInvalidConnectionQuotas)
}

// A client that retries a refused connection in a loop does not flood the
// log: the first refusal is logged, the next within ten seconds are
// counted for the next line.
func TestPrincipalLimitLogsWithoutFlooding(t *testing.T) {
	var log testkit.SyncBuffer
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		config.KeyMaxConnectionsPerPrincipalOverrides: "User:alice:0",
	}), func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	}, echoMetadata)
	for range 5 {
		assert.False(t, servesMetadata(t, loggedIn(t, srv, "alice", alicePassword)))
	}
	require.Eventually(t, func() bool {
		return len(srv.Registry().Closed(connregistry.Filter{})) == 5
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, strings.Count(log.String(), "its principal already has the configured maximum of connections"), log.String())
	assert.Contains(t, log.String(), fmt.Sprintf("principal=%s", alice))
	assert.Contains(t, log.String(), "refused_unlogged=0 ", "the first refusal's line counts none held back")
}

// countReason counts reason among reasons.
func countReason(reasons []connregistry.CloseReason, reason connregistry.CloseReason) int {
	n := 0
	for _, r := range reasons {
		if r == reason {
			n++
		}
	}
	return n
}
