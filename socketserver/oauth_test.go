package socketserver_test

import (
	"context"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

const (
	oauthJAAS      = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
	oauthClass     = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
	invalidToken   = `{"status":"invalid_token"}`
	oauthAudience  = "kafka"
	oauthIssuerURL = "https://idp.example"
)

// newOAuthIssuer is an identity provider with an RSA key k1.
func newOAuthIssuer(t *testing.T) *oauthbearertest.Issuer {
	is := oauthbearertest.NewIssuer(t, oauthIssuerURL)
	is.AddKey(t, "k1", "RS256")
	return is
}

// jwksProps configures the SASL_PLAINTEXT listener with OAUTHBEARER (and
// PLAIN) validated by Kafka's OAuthBearerValidatorCallbackHandler against
// the JWKS at url, audience kafka and the issuer's name, over extra.
func jwksProps(url string, extra config.Properties) config.Properties {
	return saslProps(merge(config.Properties{
		"sasl.enabled.mechanisms":            "OAUTHBEARER,PLAIN",
		oauthJAAS:                            config.OAuthBearerLoginModule + " required;",
		oauthClass:                           config.OAuthBearerValidatorCallbackHandler,
		"sasl.oauthbearer.jwks.endpoint.url": url,
		"sasl.oauthbearer.expected.audience": oauthAudience,
		"sasl.oauthbearer.expected.issuer":   oauthIssuerURL,
	}, extra))
}

// withOAuth is configure, then what a host that serves OAUTHBEARER adds:
// the mechanism of each listener whose properties configure one, as Kafka
// configures it (oauthbearer.AddMechanism). The server builds none.
func withOAuth(t testing.TB, configure func(*socketserver.Config)) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		configure(c)
		for _, l := range c.PerListener {
			var err error
			l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security)
			require.NoError(t, err)
		}
	}
}

// kafkaClaims are the claims of a token for sub, valid for ttl, for the
// audience the listeners expect.
func kafkaClaims(is *oauthbearertest.Issuer, sub string, ttl time.Duration) map[string]any {
	c := is.Claims(sub, ttl)
	c["aud"] = oauthAudience
	return c
}

// A kgo client (franz-go's pkg/sasl/oauth) authenticates with a token
// signed by a key of the JWKS file the test wrote; the connection's
// principal is User:<sub>, its mechanism OAUTHBEARER, and its session ends
// at the token's expiry. A kgo client with an expired token answers the
// error challenge with 0x01 and gets SASL_AUTHENTICATION_FAILED with the
// challenge's JSON.
func TestOAuthBearerKgoJWKS(t *testing.T) {
	is := newOAuthIssuer(t)
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, jwksProps(is.WriteJWKS(t), nil), withOAuth(t, withUsers(newUsers(t))), recording(seen))

	claims := kafkaClaims(is, "alice", time.Hour)
	cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: is.Sign(t, "k1", claims)}.AsMechanism()))
	require.NoError(t, kgoMetadata(cl))
	r := recv(t, seen)
	assert.Equal(t, alice, r.Conn.Principal)
	assert.Equal(t, "OAUTHBEARER", r.Conn.SASLMechanism)
	assert.InDelta(t, claims["exp"].(int64)*1000, r.Conn.SessionExpiry.UnixMilli(), 5, "the session ends at the token's exp")

	bad := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: is.Sign(t, "k1", kafkaClaims(is, "alice", -time.Hour))}.AsMechanism()))
	err := kgoMetadata(bad)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	assert.Contains(t, err.Error(), invalidToken)
}

// Refused with SASL_AUTHENTICATION_FAILED (58), as Kafka's
// OAuthBearerSaslServer and SaslServerAuthenticator refuse them: a refused
// token gets the error challenge as an ordinary SaslAuthenticate reply,
// at once; the client's 0x01 then gets 58 with that JSON, after the
// failed-authentication delay (KIP-306), and the connection closes. A
// malformed message gets 58 with the generic message directly. The log
// says why each token was refused.
func TestOAuthBearerRefusals(t *testing.T) {
	const delay = 150 * time.Millisecond
	is := newOAuthIssuer(t)
	other := oauthbearertest.NewIssuer(t, oauthIssuerURL)
	other.AddKey(t, "k1", "RS256") // the same kid, another key
	logs, logger := newLogCapture()
	srv := socketservertest.NewServer(t, jwksProps(is.WriteJWKS(t), config.Properties{
		"connection.failed.authentication.delay.ms": "150",
	}), withOAuth(t, func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.Logger = logger
	}), echoMetadata)

	for _, tc := range []struct {
		name, token, logged string
	}{
		{"another key's signature", other.Sign(t, "k1", kafkaClaims(is, "alice", time.Hour)), "does not verify with the JWKS's keys"},
		{"expired", is.Sign(t, "k1", merge2(kafkaClaims(is, "alice", time.Hour), map[string]any{
			"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})), "expired at"},
		{"another audience", is.Sign(t, "k1", merge2(kafkaClaims(is, "alice", time.Hour), map[string]any{"aud": "web"})), `holds none of the expected ["kafka"]`},
		{"another issuer", is.Sign(t, "k1", merge2(kafkaClaims(is, "alice", time.Hour), map[string]any{"iss": "https://evil.example"})), "is not the expected"},
		{"alg none", oauthbearertest.UnsecuredToken(kafkaClaims(is, "alice", time.Hour)), "not a JWS signed with an accepted algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
			start := time.Now()
			resp := rc.authenticate(2, oauthbearertest.ClientFirstMessage(tc.token))
			assert.Less(t, time.Since(start), delay, "the challenge is no failure yet")
			require.Zero(t, resp.ErrorCode)
			assert.Equal(t, invalidToken, string(resp.SASLAuthBytes))
			assert.Zero(t, resp.SessionLifetimeMillis)

			start = time.Now()
			resp = rc.authenticate(2, []byte{oauthbearer.Separator})
			assert.GreaterOrEqual(t, time.Since(start), delay, "KIP-306")
			assert.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
			require.NotNil(t, resp.ErrorMessage)
			assert.Equal(t, invalidToken, *resp.ErrorMessage)
			requireClosedNoResponse(t, rc.c)
			requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
			assert.Contains(t, logs.String(), tc.logged, "the log says why")
		})
	}
	for _, msg := range [][]byte{
		[]byte("n,,\x01auth=Basic YWxpY2U6cHc=\x01\x01"),
		[]byte("garbage"),
		{oauthbearer.Separator},
		[]byte("n,,\x01auth=Bearer " + is.Sign(t, "k1", kafkaClaims(is, "alice", time.Hour)) + "\x01"), // no closing separator
	} {
		t.Run("malformed message", func(t *testing.T) {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
			start := time.Now()
			resp := rc.authenticate(2, msg)
			assert.GreaterOrEqual(t, time.Since(start), delay)
			assert.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
			require.NotNil(t, resp.ErrorMessage)
			assert.Equal(t, sasl.GenericMessage("OAUTHBEARER", false), *resp.ErrorMessage)
			requireClosedNoResponse(t, rc.c)
		})
	}
	// The valid token still works, with SaslHandshake v0's raw frames too
	// (kafka-python): an empty frame answers success.
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.handshake(0, "OAUTHBEARER").ErrorCode)
	write(t, rc.c, frame(oauthbearertest.ClientFirstMessage(is.Sign(t, "k1", kafkaClaims(is, "alice", time.Hour)))))
	assert.Empty(t, readRawFrame(t, rc.c))
	rc.roundTrip(metadataReq(9))
}

func merge2(a, b map[string]any) map[string]any {
	for k, v := range b {
		a[k] = v
	}
	return a
}

// KIP-368: SaslAuthenticate's SessionLifetimeMs is no greater than the
// token's remaining life, or connections.max.reauth.ms when that comes
// first; once the session has expired, any request but a SaslHandshake
// closes the connection (Kafka's SocketServer), while a
// re-authentication with a fresh token goes on with the connection.
func TestOAuthBearerSessionLifetime(t *testing.T) {
	is := newOAuthIssuer(t)
	url := is.WriteJWKS(t)
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, jwksProps(url, nil), withOAuth(t, withUsers(newUsers(t))), recording(seen))

	login := func(rc *rawClient, ttl time.Duration) (lifetime, remaining time.Duration) {
		t.Helper()
		claims := kafkaClaims(is, "alice", ttl)
		exp := time.Unix(claims["exp"].(int64), 0)
		tok := is.Sign(t, "k1", claims)
		require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
		remaining = time.Until(exp)
		resp := rc.authenticate(2, oauthbearertest.ClientFirstMessage(tok))
		require.Zero(t, resp.ErrorCode)
		return time.Duration(resp.SessionLifetimeMillis) * time.Millisecond, remaining
	}

	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	lifetime, remaining := login(rc, 3*time.Second)
	assert.LessOrEqual(t, lifetime, remaining, "SessionLifetimeMs is no greater than the token's remaining life")
	assert.Greater(t, lifetime, remaining-time.Second)
	rc.roundTrip(metadataReq(9))
	r := recv(t, seen)
	assert.Equal(t, lifetime, r.Conn.SessionExpiry.Sub(r.Conn.AuthenticatedAt))
	time.Sleep(time.Until(r.Conn.SessionExpiry) + 50*time.Millisecond)

	// Expired: a re-authentication with a fresh token goes on.
	lifetime, remaining = login(rc, time.Hour)
	assert.LessOrEqual(t, lifetime, remaining)
	assert.Greater(t, lifetime, 59*time.Minute)
	rc.roundTrip(metadataReq(9))
	r2 := recv(t, seen)
	assert.Equal(t, r.Conn.ID, r2.Conn.ID, "the same connection")
	assert.True(t, r2.Conn.AuthenticatedAt.After(r.Conn.AuthenticatedAt))

	// Expired without re-authentication: the next request closes it.
	rc = dialRaw(t, srv, "SASL_PLAINTEXT")
	_, _ = login(rc, 2*time.Second)
	rc.roundTrip(metadataReq(9))
	r = recv(t, seen)
	time.Sleep(time.Until(r.Conn.SessionExpiry) + 50*time.Millisecond)
	rc.send(metadataReq(9))
	requireClosedNoResponse(t, rc.c)
	assert.Empty(t, seen)

	// connections.max.reauth.ms ends the session first when it is sooner.
	short := socketservertest.NewServer(t, jwksProps(url, config.Properties{"connections.max.reauth.ms": "1500"}), withOAuth(t, withUsers(newUsers(t))), echoMetadata)
	rc = dialRaw(t, short, "SASL_PLAINTEXT")
	lifetime, _ = login(rc, time.Hour)
	assert.Equal(t, 1500*time.Millisecond, lifetime)
}

// A kgo client whose token provider mints short-lived tokens
// re-authenticates on its own connection before each token expires
// (SessionLifetimeMs tells it when), and every request succeeds.
func TestOAuthBearerKgoReauthenticates(t *testing.T) {
	is := newOAuthIssuer(t)
	seen := make(chan *socketserver.Request, 100)
	srv := socketservertest.NewServer(t, jwksProps(is.WriteJWKS(t), nil), withOAuth(t, withUsers(newUsers(t))), recording(seen))
	var minted atomic.Int32
	cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		minted.Add(1)
		return oauth.Auth{Token: is.Sign(t, "k1", kafkaClaims(is, "alice", 3*time.Second))}, nil
	})))
	authenticatedAt := map[string]map[time.Time]bool{}
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		require.NoError(t, kgoMetadata(cl))
		for len(seen) > 0 {
			r := <-seen
			if authenticatedAt[r.Conn.ID] == nil {
				authenticatedAt[r.Conn.ID] = map[time.Time]bool{}
			}
			authenticatedAt[r.Conn.ID][r.Conn.AuthenticatedAt] = true
			assert.True(t, time.Now().Before(r.Conn.SessionExpiry), "a request is served within its session")
		}
		time.Sleep(200 * time.Millisecond)
	}
	reauthenticated := false
	for _, times := range authenticatedAt {
		reauthenticated = reauthenticated || len(times) >= 2
	}
	assert.True(t, reauthenticated, "some connection authenticated again: %v", authenticatedAt)
	assert.GreaterOrEqual(t, minted.Load(), int32(3))
}

// Key rotation over https, through the listener's properties: a key the
// identity provider adds after the server started is picked up when a
// token names it, without a restart. The JWKS endpoint is trusted through
// the JAAS options' PEM trust store.
func TestOAuthBearerKeyRotation(t *testing.T) {
	is := newOAuthIssuer(t)
	https := is.Serve(t)
	ca := filepath.Join(t.TempDir(), "idp-ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: https.Certificate().Raw}), 0o600))
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, jwksProps(https.URL+"/jwks.json", config.Properties{
		oauthJAAS: config.OAuthBearerLoginModule + ` required ssl.truststore.type="PEM" ssl.truststore.location="` + ca + `";`,
	}), withOAuth(t, withUsers(newUsers(t))), recording(seen))
	fetched := is.Fetches()
	require.EqualValues(t, 1, fetched, "Server.Start read the key set")

	is.AddKey(t, "k2", "ES256")
	cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: is.Sign(t, "k2", kafkaClaims(is, "bob", time.Hour))}.AsMechanism()))
	require.NoError(t, kgoMetadata(cl))
	assert.Equal(t, connregistry.Principal{Type: "User", Name: "bob"}, recv(t, seen).Conn.Principal)
	assert.EqualValues(t, 2, is.Fetches(), "one refresh, for the new kid")
}

// With no callback handler class, OAUTHBEARER is Kafka's unsecured
// validator: the server warns at start, naming the listener, and accepts
// an unsigned token with the JAAS options' principal claim.
func TestOAuthBearerUnsecured(t *testing.T) {
	logs, logger := newLogCapture()
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"sasl.enabled.mechanisms": "OAUTHBEARER",
		oauthJAAS:                 config.OAuthBearerLoginModule + ` required unsecuredValidatorPrincipalClaimName="user";`,
	}), withOAuth(t, func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.Logger = logger
	}), recording(seen))
	var warned bool
	for _, r := range logs.atLeast(0) {
		if strings.Contains(r.msg, "UNSIGNED tokens") {
			warned = true
			assert.Equal(t, "SASL_PLAINTEXT", r.attrs["listener"])
		}
	}
	assert.True(t, warned, "a warning at start: %s", logs.String())

	tok := oauthbearertest.UnsecuredToken(map[string]any{"user": "carol", "exp": float64(time.Now().Add(time.Hour).UnixMilli()) / 1000})
	cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()))
	require.NoError(t, kgoMetadata(cl))
	assert.Equal(t, connregistry.Principal{Type: "User", Name: "carol"}, recv(t, seen).Conn.Principal)
}

// ListClientConnections (KIP-1329) lists an OAUTHBEARER connection with
// its principal, mechanism, authentication time and session expiry (the
// token's exp).
func TestOAuthBearerListClientConnections(t *testing.T) {
	is := newOAuthIssuer(t)
	const listKey = 1000 // kmsg knows another API under KIP-1329's 93
	srv := socketservertest.NewServer(t, jwksProps(is.WriteJWKS(t), nil), withOAuth(t, func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.APIs = append(c.APIs, socketserver.ListClientConnectionsAPI(listKey, nil))
	}), echoMetadata)
	claims := kafkaClaims(is, "alice", time.Hour)
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
	before := time.Now()
	auth := rc.authenticate(2, oauthbearertest.ClientFirstMessage(is.Sign(t, "k1", claims)))
	require.Zero(t, auth.ErrorCode)
	resp := rc.roundTrip(&connregistry.ListClientConnectionsRequest{APIKey: listKey}).(*connregistry.ListClientConnectionsResponse)
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Connections, 1)
	c := resp.Connections[0]
	assert.Equal(t, "User:alice", c.Principal)
	assert.Equal(t, "OAUTHBEARER", c.SASLMechanism)
	assert.Equal(t, "SASL_PLAINTEXT", c.SecurityProtocol)
	assert.GreaterOrEqual(t, c.AuthenticatedAt, before.UnixMilli())
	assert.Equal(t, c.AuthenticatedAt+auth.SessionLifetimeMillis, c.SessionExpiry)
	assert.InDelta(t, claims["exp"].(int64)*1000, c.SessionExpiry, 1000, "the session expires with the token")
}

// The properties may leave OAUTHBEARER to the host (no JAAS and no class,
// or a class this library does not implement): config.Server
// succeeds, and New fails naming the key unless the host gives the
// listener its own mechanism.
func TestOAuthBearerLeftToTheHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props config.Properties
		key   string
	}{
		{"nothing configured", nil, oauthJAAS},
		{"another class", config.Properties{oauthClass: "com.example.IntrospectionHandler"}, oauthClass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Server(saslProps(merge(config.Properties{"sasl.enabled.mechanisms": "OAUTHBEARER"}, tc.props)))
			require.NoError(t, err)
			l := cfg.PerListener["SASL_PLAINTEXT"]
			assert.Nil(t, l.Security.OAuthBearer)
			require.ErrorIs(t, l.Security.OAuthBearerNotConfigured, security.ErrOAuthBearerNotConfigured)
			l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security)
			require.NoError(t, err)
			assert.Empty(t, l.Mechanisms, "Kafka's validators are not configured: nothing to add")
			_, err = socketserver.New(cfg)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
			assert.ErrorIs(t, err, security.ErrOAuthBearerNotConfigured)
			assert.ErrorIs(t, err, security.ErrSASLMechanism)

			m, err := oauthbearer.New(oauthbearer.ValidatorFunc(func(_ context.Context, tok string) (oauthbearer.Token, error) {
				if tok == "introspected" {
					return oauthbearer.Token{Principal: "dave", Expiry: time.Now().Add(time.Hour)}, nil
				}
				return oauthbearer.Token{}, errors.New("inactive token")
			}))
			require.NoError(t, err)
			l.Mechanisms = []sasl.Mechanism{m}
			cfg.APIs = allAPIs()
			srv, err := socketserver.New(cfg)
			require.NoError(t, err)
			require.NoError(t, srv.Start(context.Background()))
			defer srv.Close()
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
			resp := rc.authenticate(2, oauthbearertest.ClientFirstMessage("introspected"))
			require.Zero(t, resp.ErrorCode)
			assert.Positive(t, resp.SessionLifetimeMillis)
		})
	}
	// A hand-built Config whose listener could have had OAUTHBEARER from
	// its properties is told where it comes from.
	is := newOAuthIssuer(t)
	props := jwksProps(is.WriteJWKS(t), nil)
	lc, err := config.Listeners(props)
	require.NoError(t, err)
	sec, err := config.Security(props, lc, "SASL_PLAINTEXT")
	require.NoError(t, err)
	_, err = socketserver.New(socketserver.Config{Listeners: lc, Credentials: newUsers(t),
		PerListener: map[protocolmap.ListenerName]*socketserver.ListenerConfig{"SASL_PLAINTEXT": {Security: sec}}})
	require.ErrorIs(t, err, security.ErrSASLMechanism)
	assert.Contains(t, err.Error(), "oauthbearer.AddMechanism(l.Mechanisms, l.Security)")
	// And one whose Security is built in code, without OAUTHBEARER
	// settings, is told how to give a mechanism.
	_, err = socketserver.New(socketserver.Config{Listeners: lc, Credentials: newUsers(t),
		PerListener: map[protocolmap.ListenerName]*socketserver.ListenerConfig{"SASL_PLAINTEXT": {Security: security.Settings{EnabledMechanisms: []string{"OAUTHBEARER"}}}}})
	require.ErrorIs(t, err, security.ErrSASLMechanism)
	assert.Contains(t, err.Error(), "listener SASL_PLAINTEXT enables SASL mechanism OAUTHBEARER")
	assert.Contains(t, err.Error(), "oauthbearer.New")
}

// The server builds no OAUTHBEARER mechanism, so as not to link its
// validators into every program: config.Server reads a listener's
// settings once (Security.OAuthBearer), and until the host builds the
// mechanism from them (oauthbearer.AddMechanism, or FromSettings) New
// fails, naming the listener and saying how. A mechanism of the host's
// own is kept.
func TestOAuthBearerMechanismIsTheHosts(t *testing.T) {
	is := newOAuthIssuer(t)
	for _, tc := range []struct {
		name      string
		props     config.Properties
		validator string
	}{
		{"JWKS", jwksProps(is.WriteJWKS(t), nil), "JWKS validator"},
		{"unsecured", saslProps(config.Properties{"sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN", oauthJAAS: config.OAuthBearerLoginModule + " required;"}), "unsecured validator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Server(tc.props)
			require.NoError(t, err)
			cfg.Credentials, cfg.APIs = newUsers(t), allAPIs()
			l := cfg.PerListener["SASL_PLAINTEXT"]
			settings := l.Security.OAuthBearer
			require.NotNil(t, settings)
			assert.Equal(t, protocolmap.ListenerName("SASL_PLAINTEXT"), settings.Listener)
			assert.Equal(t, tc.name == "JWKS", settings.JWKS != nil)
			assert.Nil(t, cfg.PerListener["PLAINTEXT"].Security.OAuthBearer)
			assert.Empty(t, l.Mechanisms, "config.Server builds no mechanism")

			_, err = socketserver.New(cfg)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "sasl.enabled.mechanisms", ce.Key)
			assert.ErrorIs(t, err, security.ErrSASLMechanism)
			assert.NotErrorIs(t, err, security.ErrOAuthBearerNotConfigured)
			for _, want := range []string{"listener SASL_PLAINTEXT enables SASL mechanism OAUTHBEARER", "Kafka's " + tc.validator,
				"oauthbearer.AddMechanism(l.Mechanisms, l.Security)", `cfg.PerListener["SASL_PLAINTEXT"]`} {
				assert.Contains(t, ce.Rule, want)
			}

			given := l.Mechanisms
			l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security)
			require.NoError(t, err)
			assert.Nil(t, given, "AddMechanism changes no slice of the caller's")
			require.Len(t, l.Mechanisms, 1)
			m := l.Mechanisms[0].(*oauthbearer.Mechanism)
			if tc.name == "JWKS" {
				assert.IsType(t, &oauthbearer.JWKSValidator{}, m.Validator())
			} else {
				assert.IsType(t, &oauthbearer.UnsecuredValidator{}, m.Validator())
			}
			srv, err := socketserver.New(cfg)
			require.NoError(t, err)
			require.NoError(t, srv.Start(context.Background()))
			srv.Close()

			// A host's own OAUTHBEARER mechanism is kept.
			own, err := oauthbearer.New(oauthbearer.ValidatorFunc(func(context.Context, string) (oauthbearer.Token, error) {
				return oauthbearer.Token{}, errors.New("no")
			}))
			require.NoError(t, err)
			mine := []sasl.Mechanism{own}
			got, err := oauthbearer.AddMechanism(mine, l.Security)
			require.NoError(t, err)
			assert.Equal(t, mine, got)
		})
	}
}

// The JWKS refresher is the server's: it starts with Server.Start (which
// fails, binding nothing, when the key set cannot be read) and ends when
// the server stops. No goroutine is left.
func TestOAuthBearerRefresherEndsWithTheServer(t *testing.T) {
	base := testkit.TakeGoroutineBaseline()
	is := newOAuthIssuer(t)
	https := is.Serve(t)
	ca := filepath.Join(t.TempDir(), "idp-ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: https.Certificate().Raw}), 0o600))
	props := jwksProps(https.URL+"/jwks.json", config.Properties{
		oauthJAAS: config.OAuthBearerLoginModule + ` required ssl.truststore.type="PEM" ssl.truststore.location="` + ca + `";`,
		"sasl.oauthbearer.jwks.endpoint.refresh.ms": "50",
	})
	srv, stop, err := socketservertest.Start(props, withOAuth(t, withUsers(newUsers(t))), echoMetadata)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return is.Fetches() >= 3 }, 10*time.Second, 10*time.Millisecond, "the refresher runs")
	cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: is.Sign(t, "k1", kafkaClaims(is, "alice", time.Hour))}.AsMechanism()))
	require.NoError(t, kgoMetadata(cl))
	cl.Close()
	require.NoError(t, stop())
	<-srv.Done()
	after := is.Fetches()
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, after, is.Fetches(), "no refresh after the server stopped")
	https.Close()
	base.RequireReturned(t)

	// A key set that cannot be read fails Start.
	cfg, err := config.Server(jwksProps(https.URL+"/jwks.json", nil))
	require.NoError(t, err)
	cfg.Credentials, cfg.APIs = newUsers(t), allAPIs()
	l := cfg.PerListener["SASL_PLAINTEXT"]
	l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security)
	require.NoError(t, err)
	failing, err := socketserver.New(cfg)
	require.NoError(t, err)
	defer failing.Close()
	err = failing.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SASL mechanism OAUTHBEARER failed to start")
	assert.Nil(t, failing.Addr("SASL_PLAINTEXT"))
}
