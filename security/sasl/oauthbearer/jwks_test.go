package oauthbearer_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
)

// syncBuffer is a log sink for a background goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startJWKS builds and starts a validator, closed when the test ends.
func startJWKS(t *testing.T, cfg security.OAuthBearerJWKS, opts ...oauthbearer.JWKSOption) (*oauthbearer.JWKSValidator, *syncBuffer) {
	t.Helper()
	v, err := oauthbearer.NewJWKSValidator(cfg, opts...)
	require.NoError(t, err)
	logs := &syncBuffer{}
	require.NoError(t, v.Start(context.Background(), slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(func() { require.NoError(t, v.Close()) })
	return v, logs
}

// Every accepted algorithm verifies with its key from the set, and the
// token's claims come back: Kafka's ValidatorAccessTokenValidator with
// jose4j's DISALLOW_NONE.
func TestJWKSValidatorAlgorithms(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	for _, alg := range oauthbearertest.Algorithms() {
		is.AddKey(t, "kid-"+alg, alg)
	}
	v, _ := startJWKS(t, security.OAuthBearerJWKS{URL: is.WriteJWKS(t)})
	for _, alg := range oauthbearertest.Algorithms() {
		t.Run(alg, func(t *testing.T) {
			claims := is.Claims("alice", time.Hour)
			claims["scope"] = "kafka:read kafka:write"
			tok, err := v.Validate(context.Background(), is.Sign(t, "kid-"+alg, claims))
			require.NoError(t, err)
			assert.Equal(t, "alice", tok.Principal)
			assert.Equal(t, claims["exp"], tok.Expiry.Unix())
			assert.Equal(t, claims["iat"], tok.IssuedAt.Unix())
			assert.Equal(t, []string{"kafka:read kafka:write"}, tok.Scope, "a scope string is one scope, as in Kafka")
		})
	}
}

// alterToken rewrites a token's header and claims without signing again.
func alterHeader(t *testing.T, token string, header map[string]any) string {
	t.Helper()
	parts := strings.Split(token, ".")
	b, err := json.Marshal(header)
	require.NoError(t, err)
	parts[0] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

// The refusals of Kafka's validator (jose4j's JwtConsumer as
// ValidatorAccessTokenValidator builds it, and its own claim checks), each
// with the sentinel it wraps.
func TestJWKSValidatorRefuses(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "RS256")
	is.AddKey(t, "k-ec", "ES256")
	url := is.WriteJWKS(t)
	other := oauthbearertest.NewIssuer(t, "https://idp.example")
	other.AddKey(t, "k1", "RS256") // same kid, another key
	other.AddKey(t, "k-unknown", "ES256")

	now := time.Now()
	claims := func(edit func(map[string]any)) map[string]any {
		c := is.Claims("alice", time.Hour)
		if edit != nil {
			edit(c)
		}
		return c
	}
	audience := security.OAuthBearerJWKS{URL: url, ExpectedAudience: []string{"kafka", "kafka-2"}}
	issuer := security.OAuthBearerJWKS{URL: url, ExpectedIssuer: "https://idp.example"}
	plain := security.OAuthBearerJWKS{URL: url}

	type tc struct {
		name  string
		cfg   security.OAuthBearerJWKS
		token func(t *testing.T) string
		err   error // nil: accepted
	}
	sign := func(c map[string]any) func(t *testing.T) string {
		return func(t *testing.T) string { return is.Sign(t, "k1", c) }
	}
	cases := []tc{
		{"valid", plain, sign(claims(nil)), nil},
		{"another key's signature under a known kid", plain, func(t *testing.T) string { return other.Sign(t, "k1", claims(nil)) }, oauthbearer.ErrUnknownKey},
		{"a key the JWKS does not hold", plain, func(t *testing.T) string { return other.Sign(t, "k-unknown", claims(nil)) }, oauthbearer.ErrUnknownKey},
		{"alg none", plain, func(t *testing.T) string {
			return oauthbearertest.UnsecuredToken(claims(nil))
		}, oauthbearer.ErrInvalidToken},
		{"alg none with a kid and a signature", plain, func(t *testing.T) string {
			return alterHeader(t, is.Sign(t, "k1", claims(nil)), map[string]any{"alg": "none", "kid": "k1"})
		}, oauthbearer.ErrInvalidToken},
		{"alg HS256, keyed with the public key (algorithm confusion)", plain, func(t *testing.T) string {
			return alterHeader(t, is.Sign(t, "k1", claims(nil)), map[string]any{"alg": "HS256", "kid": "k1"})
		}, oauthbearer.ErrInvalidToken},
		{"an ES256 key's kid under RS256", plain, func(t *testing.T) string {
			return alterHeader(t, is.Sign(t, "k1", claims(nil)), map[string]any{"alg": "RS256", "kid": "k-ec"})
		}, oauthbearer.ErrUnknownKey},
		{"a key embedded in the header is not trusted", plain, func(t *testing.T) string {
			tok := other.Sign(t, "k-unknown", claims(nil))
			set := jose.JSONWebKeySet{}
			require.NoError(t, json.Unmarshal(other.JWKS(), &set))
			return alterHeader(t, tok, map[string]any{"alg": "ES256", "jwk": set.Key("k-unknown")[0]})
		}, oauthbearer.ErrUnknownKey},
		{"no kid: any key that fits is tried", plain, func(t *testing.T) string { return is.SignWithoutKID(t, "k-ec", claims(nil)) }, nil},
		{"no kid, another key", plain, func(t *testing.T) string { return other.SignWithoutKID(t, "k1", claims(nil)) }, oauthbearer.ErrUnknownKey},
		{"expired", plain, sign(claims(func(c map[string]any) { c["iat"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-time.Minute).Unix() })), oauthbearer.ErrTokenExpired},
		{"expired within the default 30 s of clock skew", plain, sign(claims(func(c map[string]any) {
			c["iat"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-10*time.Second).Unix()
		})), nil},
		{"expired, no clock skew", security.OAuthBearerJWKS{URL: url, ClockSkew: -1}, sign(claims(func(c map[string]any) {
			c["iat"], c["exp"] = now.Add(-time.Hour).Unix(), now.Add(-2*time.Second).Unix()
		})), oauthbearer.ErrTokenExpired},
		{"no exp", plain, sign(claims(func(c map[string]any) { delete(c, "exp") })), oauthbearer.ErrInvalidToken},
		{"exp a string", plain, sign(claims(func(c map[string]any) { c["exp"] = "tomorrow" })), oauthbearer.ErrInvalidToken},
		{"not yet valid (nbf)", plain, sign(claims(func(c map[string]any) { c["nbf"] = now.Add(time.Minute).Unix() })), oauthbearer.ErrInvalidToken},
		{"nbf within the clock skew", plain, sign(claims(func(c map[string]any) { c["nbf"] = now.Add(10 * time.Second).Unix() })), nil},
		{"issued in the future (iat)", plain, sign(claims(func(c map[string]any) { c["iat"] = now.Add(time.Minute).Unix() })), oauthbearer.ErrInvalidToken},
		{"no iat", plain, sign(claims(func(c map[string]any) { delete(c, "iat") })), nil},
		{"exp before iat", plain, sign(claims(func(c map[string]any) {
			c["iat"], c["exp"] = now.Add(20*time.Second).Unix(), now.Add(10*time.Second).Unix()
		})), oauthbearer.ErrInvalidToken},
		{"iat negative", plain, sign(claims(func(c map[string]any) { c["iat"] = -1 })), oauthbearer.ErrInvalidToken},
		{"an aud claim with no expected audience (jose4j's default)", plain, sign(claims(func(c map[string]any) { c["aud"] = "kafka" })), oauthbearer.ErrInvalidToken},
		{"the expected audience", audience, sign(claims(func(c map[string]any) { c["aud"] = "kafka-2" })), nil},
		{"one of the audiences is expected", audience, sign(claims(func(c map[string]any) { c["aud"] = []string{"web", "kafka"} })), nil},
		{"another audience", audience, sign(claims(func(c map[string]any) { c["aud"] = "web" })), oauthbearer.ErrInvalidToken},
		{"no audience when one is expected", audience, sign(claims(nil)), oauthbearer.ErrInvalidToken},
		{"the expected issuer", issuer, sign(claims(nil)), nil},
		{"another issuer", issuer, sign(claims(func(c map[string]any) { c["iss"] = "https://evil.example" })), oauthbearer.ErrInvalidToken},
		{"no issuer when one is expected", issuer, sign(claims(func(c map[string]any) { delete(c, "iss") })), oauthbearer.ErrInvalidToken},
		{"no sub", plain, sign(claims(func(c map[string]any) { delete(c, "sub") })), oauthbearer.ErrInvalidToken},
		{"a blank sub", plain, sign(claims(func(c map[string]any) { c["sub"] = "  " })), oauthbearer.ErrInvalidToken},
		{"sub not a string", plain, sign(claims(func(c map[string]any) { c["sub"] = 42 })), oauthbearer.ErrInvalidToken},
		{"a scope list with a repeat", plain, sign(claims(func(c map[string]any) { c["scope"] = []string{"a", "a"} })), oauthbearer.ErrInvalidToken},
		{"an empty scope string", plain, sign(claims(func(c map[string]any) { c["scope"] = "" })), oauthbearer.ErrInvalidToken},
		{"not a JWS", plain, func(*testing.T) string { return "not-a-token" }, oauthbearer.ErrInvalidToken},
		{"claims not an object", plain, func(t *testing.T) string { return is.Sign(t, "k1", nil) }, oauthbearer.ErrInvalidToken},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, _ := startJWKS(t, c.cfg)
			oauthbearer.SetUnknownKIDRefreshGap(v, time.Hour) // a file does not change here
			tok, err := v.Validate(context.Background(), c.token(t))
			if c.err == nil {
				require.NoError(t, err)
				assert.Equal(t, "alice", tok.Principal)
				return
			}
			require.ErrorIs(t, err, c.err)
			assert.ErrorIs(t, err, oauthbearer.ErrInvalidToken)
		})
	}
}

// The claims named by sasl.oauthbearer.sub.claim.name and
// sasl.oauthbearer.scope.claim.name hold the principal and the scope.
func TestJWKSValidatorClaimNames(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	v, _ := startJWKS(t, security.OAuthBearerJWKS{URL: is.WriteJWKS(t), SubClaimName: "client_id", ScopeClaimName: "scp"})
	c := is.Claims("ignored", time.Hour)
	c["client_id"], c["scp"] = " svc-orders ", []string{"orders:write", "orders:read"}
	tok, err := v.Validate(context.Background(), is.Sign(t, "k1", c))
	require.NoError(t, err)
	assert.Equal(t, "svc-orders", tok.Principal, "trimmed, as Kafka's ClaimValidationUtils.validateSubject")
	assert.Equal(t, []string{"orders:write", "orders:read"}, tok.Scope)
	delete(c, "client_id")
	_, err = v.Validate(context.Background(), is.Sign(t, "k1", c))
	assert.ErrorIs(t, err, oauthbearer.ErrInvalidToken)
}

// Key rotation over https: a token signed with a key the set did not hold
// at start starts a refresh, which its validation waits for, and is then
// accepted, without a restart (Kafka's RefreshingHttpsJwks.maybeExpediteRefresh,
// but here the login that found the new kid succeeds). Unknown kids cause
// at most one refresh each per minute, and refreshes for unknown kids are
// at least the gap apart.
func TestJWKSValidatorKeyRotation(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "RS256")
	srv := is.Serve(t)
	v, logs := startJWKS(t, security.OAuthBearerJWKS{URL: srv.URL + "/jwks.json"}, oauthbearer.WithHTTPClient(srv.Client()))
	require.EqualValues(t, 1, is.Fetches(), "Start reads the set")
	_, err := v.Validate(context.Background(), is.Sign(t, "k1", is.Claims("alice", time.Hour)))
	require.NoError(t, err)

	is.AddKey(t, "k2", "PS256")
	tok, err := v.Validate(context.Background(), is.Sign(t, "k2", is.Claims("bob", time.Hour)))
	require.NoError(t, err, "the new key was fetched")
	assert.Equal(t, "bob", tok.Principal)
	assert.EqualValues(t, 2, is.Fetches())
	assert.Contains(t, logs.String(), "JWKS refreshed")

	// Another unknown kid within the gap: refused at once, no fetch.
	start := time.Now()
	_, err = v.Validate(context.Background(), forged(t, "k3"))
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	assert.Less(t, time.Since(start), time.Second)
	assert.EqualValues(t, 2, is.Fetches())

	// Past the gap, a new unknown kid refreshes again; the same kid within
	// its minute does not.
	oauthbearer.SetUnknownKIDRefreshGap(v, 0)
	_, err = v.Validate(context.Background(), forged(t, "k3"))
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	assert.EqualValues(t, 3, is.Fetches())
	_, err = v.Validate(context.Background(), forged(t, "k3"))
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	assert.EqualValues(t, 3, is.Fetches(), "k3 asked within its minute")

	// A burst of tokens with distinct unknown kids, at once: one refresh
	// runs; the others wait for it, or are refused at once after it.
	oauthbearer.SetUnknownKIDRefreshGap(v, time.Hour)
	oauthbearer.ForgetUnknownKIDRefresh(v)
	before := is.Fetches()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := v.Validate(context.Background(), forged(t, "burst-"+string(rune('a'+i))))
			assert.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
		})
	}
	wg.Wait()
	assert.Equal(t, before+1, is.Fetches())

	// A removed key is refused after the next refresh.
	tokK1 := is.Sign(t, "k1", is.Claims("alice", time.Hour))
	is.RemoveKey("k1")
	oauthbearer.SetUnknownKIDRefreshGap(v, 0)
	_, err = v.Validate(context.Background(), forged(t, "k4")) // any refresh will do
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	_, err = v.Validate(context.Background(), tokK1)
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	_, err = v.Validate(context.Background(), is.Sign(t, "k2", is.Claims("bob", time.Hour)))
	require.NoError(t, err)
}

// forged is a token with kid, signed by a key no one publishes.
func forged(t *testing.T, kid string) string {
	t.Helper()
	is := oauthbearertest.NewIssuer(t, "x")
	is.AddKey(t, kid, "ES256")
	return is.Sign(t, kid, is.Claims("mallory", time.Hour))
}

// The set is also refreshed on its schedule (sasl.oauthbearer.jwks.endpoint.refresh.ms),
// with no unknown kid asking: a key added to the set is accepted once a
// scheduled refresh has run, even when refreshes for unknown kids are
// held back.
func TestJWKSValidatorScheduledRefresh(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	srv := is.Serve(t)
	v, _ := startJWKS(t, security.OAuthBearerJWKS{URL: srv.URL + "/jwks.json", Refresh: 200 * time.Millisecond}, oauthbearer.WithHTTPClient(srv.Client()))
	oauthbearer.SetUnknownKIDRefreshGap(v, time.Hour)
	_, err := v.Validate(context.Background(), forged(t, "warm-up")) // uses up the unknown-kid refresh
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	is.AddKey(t, "k2", "ES384")
	before := is.Fetches()
	require.Eventually(t, func() bool { return is.Fetches() >= before+2 }, 10*time.Second, 20*time.Millisecond)
	_, err = v.Validate(context.Background(), is.Sign(t, "k2", is.Claims("alice", time.Hour)))
	require.NoError(t, err)
}

// A JWKS file is read again on the schedule too, so that a rotated file
// (a mounted secret, say) is picked up without a restart.
func TestJWKSValidatorFileRotation(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	url := is.WriteJWKS(t)
	path := strings.TrimPrefix(url, "file://")
	v, _ := startJWKS(t, security.OAuthBearerJWKS{URL: url, Refresh: 100 * time.Millisecond})
	oauthbearer.SetUnknownKIDRefreshGap(v, time.Hour)
	is.AddKey(t, "k2", "EdDSA")
	tok := is.Sign(t, "k2", is.Claims("alice", time.Hour))
	_, err := v.Validate(context.Background(), tok)
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey, "not yet in the file")
	is.WriteJWKSTo(t, path)
	require.Eventually(t, func() bool {
		_, err := v.Validate(context.Background(), tok)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
}

// A refresh that fails (after its retries) keeps the keys in use, and is
// logged.
func TestJWKSValidatorFailedRefreshKeepsKeys(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	var broken atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write(is.JWKS())
	}))
	defer srv.Close()
	v, logs := startJWKS(t, security.OAuthBearerJWKS{URL: srv.URL,
		RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond}, oauthbearer.WithHTTPClient(srv.Client()))
	broken.Store(true)
	oauthbearer.SetUnknownKIDRefreshGap(v, 0)
	_, err := v.Validate(context.Background(), forged(t, "kx"))
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	assert.Contains(t, logs.String(), "JWKS refresh failed; keeping the keys in use")
	assert.Contains(t, logs.String(), "503")
	_, err = v.Validate(context.Background(), is.Sign(t, "k1", is.Claims("alice", time.Hour)))
	require.NoError(t, err)
}

// A validation that waits for a refresh gives up when its context ends
// (the connection closed, the handshake deadline passed), and Close ends
// a refresh in flight.
func TestJWKSValidatorWaitEndsWithContext(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) > 1 {
			select { // hang until the client gives up or the test ends
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		_, _ = w.Write(is.JWKS())
	}))
	defer srv.Close()
	defer close(release)
	v, err := oauthbearer.NewJWKSValidator(security.OAuthBearerJWKS{URL: srv.URL}, oauthbearer.WithHTTPClient(srv.Client()))
	require.NoError(t, err)
	require.NoError(t, v.Start(context.Background(), nil))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = v.Validate(ctx, forged(t, "slow"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, oauthbearer.ErrUnknownKey)
	assert.Less(t, time.Since(start), 5*time.Second)
	closed := make(chan struct{})
	go func() { _ = v.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the refresh in flight")
	}
}

// Start reads the set and fails when it cannot, naming what it read; the
// validator refuses every token before Start and after the last Close;
// Start and Close are counted.
func TestJWKSValidatorLifecycle(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	url := is.WriteJWKS(t)
	dir := t.TempDir()
	notJWKS := dir + "/not-jwks.json"
	require.NoError(t, os.WriteFile(notJWKS, []byte(`{"issuer":"x"}`), 0o600))
	notJSON := dir + "/not-json"
	require.NoError(t, os.WriteFile(notJSON, []byte("<html>"), 0o600))
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()

	for _, tc := range []struct{ url, msg string }{
		{"file://" + dir + "/missing.json", "no such file"},
		{"file://" + notJWKS, "no keys member"},
		{"file://" + notJSON, "not a JSON Web Key Set"},
		{notFound.URL + "/jwks.json", "404"},
	} {
		v, err := oauthbearer.NewJWKSValidator(security.OAuthBearerJWKS{URL: tc.url})
		require.NoError(t, err)
		err = v.Start(context.Background(), nil)
		require.Error(t, err, tc.url)
		assert.Contains(t, err.Error(), tc.msg)
		require.NoError(t, v.Close(), "a Close without a Start does nothing")
	}

	v, err := oauthbearer.NewJWKSValidator(security.OAuthBearerJWKS{URL: url})
	require.NoError(t, err)
	tok := is.Sign(t, "k1", is.Claims("alice", time.Hour))
	_, err = v.Validate(context.Background(), tok)
	require.ErrorIs(t, err, oauthbearer.ErrNotStarted)
	var svc sasl.Service = v
	require.NoError(t, svc.Start(context.Background(), nil))
	require.NoError(t, svc.Start(context.Background(), nil))
	require.NoError(t, svc.Close())
	_, err = v.Validate(context.Background(), tok)
	require.NoError(t, err, "one Start is still outstanding")
	require.NoError(t, svc.Close())
	_, err = v.Validate(context.Background(), tok)
	require.ErrorIs(t, err, oauthbearer.ErrNotStarted)
	require.NoError(t, svc.Start(context.Background(), nil), "it starts again")
	_, err = v.Validate(context.Background(), tok)
	require.NoError(t, err)
	require.NoError(t, svc.Close())
}

// Keys the validator cannot use are skipped, as jose4j skips them, and
// the rest of the set serves.
func TestJWKSValidatorSkipsUnusableKeys(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	var set struct{ Keys []json.RawMessage }
	require.NoError(t, json.Unmarshal(is.JWKS(), &set))
	set.Keys = append(set.Keys,
		json.RawMessage(`{"kty":"oct","kid":"secret","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}`),
		json.RawMessage(`{"kty":"XYZ","kid":"future"}`),
		json.RawMessage(`{"kty":"EC","kid":"broken","crv":"P-256","x":"AA","y":"AA"}`),
	)
	var enc map[string]any
	require.NoError(t, json.Unmarshal(set.Keys[0], &enc))
	enc["use"], enc["kid"] = "enc", "k-enc"
	b, _ := json.Marshal(enc)
	set.Keys = append(set.Keys, b)
	doc, err := json.Marshal(map[string]any{"keys": set.Keys})
	require.NoError(t, err)
	path := t.TempDir() + "/jwks.json"
	require.NoError(t, os.WriteFile(path, doc, 0o600))
	v, logs := startJWKS(t, security.OAuthBearerJWKS{URL: "file://" + path})
	assert.Contains(t, logs.String(), "skipped_keys=4")
	_, err = v.Validate(context.Background(), is.Sign(t, "k1", is.Claims("alice", time.Hour)))
	require.NoError(t, err)
	// An HMAC token keyed with the oct key is refused: HS256 is not accepted.
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("secret-secret-secret-secret-secret")},
		(&jose.SignerOptions{}).WithHeader("kid", "secret"))
	require.NoError(t, err)
	payload, _ := json.Marshal(is.Claims("alice", time.Hour))
	jws, err := hs.Sign(payload)
	require.NoError(t, err)
	compact, err := jws.CompactSerialize()
	require.NoError(t, err)
	_, err = v.Validate(context.Background(), compact)
	require.ErrorIs(t, err, oauthbearer.ErrInvalidToken)
}

// NewJWKSValidator checks its configuration.
func TestJWKSSettings(t *testing.T) {
	for _, tc := range []struct {
		cfg security.OAuthBearerJWKS
		msg string
	}{
		{security.OAuthBearerJWKS{}, "URL is required"},
		{security.OAuthBearerJWKS{URL: "ftp://idp/jwks"}, "only http, https and file"},
		{security.OAuthBearerJWKS{URL: "idp.example/jwks"}, "missing the protocol"},
		{security.OAuthBearerJWKS{URL: "https:///jwks"}, "no host"},
		{security.OAuthBearerJWKS{URL: "file:jwks.json"}, "absolute path"},
		{security.OAuthBearerJWKS{URL: "file://otherhost/jwks.json"}, "absolute path"},
		{security.OAuthBearerJWKS{URL: "https://idp", Refresh: -1}, "negative"},
		{security.OAuthBearerJWKS{URL: "https://idp", RetryBackoff: time.Second, RetryBackoffMax: time.Millisecond}, "less than RetryBackoff"},
		{security.OAuthBearerJWKS{URL: "https://idp", SubClaimName: " "}, "must not be blank"},
	} {
		_, err := oauthbearer.NewJWKSValidator(tc.cfg)
		require.Error(t, err, "%+v", tc.cfg)
		assert.Contains(t, err.Error(), tc.msg)
	}
	v, err := oauthbearer.NewJWKSValidator(security.OAuthBearerJWKS{URL: "file:///etc/kafka/jwks.json"})
	require.NoError(t, err)
	assert.Equal(t, "file:///etc/kafka/jwks.json", v.URL())
}
