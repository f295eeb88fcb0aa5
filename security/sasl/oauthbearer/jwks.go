package oauthbearer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/kafkanet/kafkanet/internal/oauthsettings"
	"github.com/kafkanet/kafkanet/security"
)

// Kafka's defaults for the JWKS validator's keys.
const (
	DefaultJWKSRefresh         = oauthsettings.JWKSRefresh         // sasl.oauthbearer.jwks.endpoint.refresh.ms: 1 h
	DefaultJWKSRetryBackoff    = oauthsettings.JWKSRetryBackoff    // sasl.oauthbearer.jwks.endpoint.retry.backoff.ms: 100 ms
	DefaultJWKSRetryBackoffMax = oauthsettings.JWKSRetryBackoffMax // sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms: 10 s
	DefaultClockSkew           = oauthsettings.ClockSkew           // sasl.oauthbearer.clock.skew.seconds: 30 s
	DefaultScopeClaimName      = oauthsettings.ScopeClaimName      // sasl.oauthbearer.scope.claim.name: scope
	DefaultSubClaimName        = oauthsettings.SubClaimName        // sasl.oauthbearer.sub.claim.name: sub
)

// Limits of the JWKS validator.
const (
	// maxJWKSBytes bounds a JWKS document.
	maxJWKSBytes = 1 << 20
	// fetchTimeout bounds one fetch of a JWKS over HTTP.
	fetchTimeout = 10 * time.Second
	// unknownKIDWindow is how long a key id that was not found waits before
	// it may cause another refresh (Kafka's
	// RefreshingHttpsJwks.MISSING_KEY_ID_CACHE_IN_FLIGHT_MS), and
	// unknownKIDs how many such ids are remembered (its
	// MISSING_KEY_ID_CACHE_MAX_ENTRIES).
	unknownKIDWindow = time.Minute
	unknownKIDs      = 16
	// maxRefreshKIDLen: longer key ids cause no refresh (Kafka's
	// MISSING_KEY_ID_MAX_KEY_LENGTH).
	maxRefreshKIDLen = 1000
	// defaultUnknownKIDRefreshGap is the least time between two refreshes
	// caused by unknown key ids, whatever the ids: the ids come from
	// unauthenticated clients.
	defaultUnknownKIDRefreshGap = 10 * time.Second
)

// algorithms are the signature algorithms the JWKS validator accepts: RSA
// PKCS #1 v1.5 and PSS, ECDSA and Ed25519. "none" and the HMAC algorithms
// are refused: a key set publishes public keys.
var algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// JWKSOption is an option of [NewJWKSValidator].
type JWKSOption func(*JWKSValidator)

// WithHTTPClient fetches the key set with c instead of the validator's own
// client (the settings' TLS is then ignored). c's idle connections are the
// caller's to close.
func WithHTTPClient(c *http.Client) JWKSOption {
	return func(v *JWKSValidator) { v.client = c }
}

// JWKSValidator validates signed JWTs against the keys of a JSON Web Key
// Set, as Kafka's OAuthBearerValidatorCallbackHandler does:
//
//   - the signature must be RS256, RS384, RS512, PS256, PS384, PS512,
//     ES256, ES384, ES512 or EdDSA (never none, nor an HMAC algorithm),
//     made with a key of the set: the one with the token's kid, or,
//     without a kid, any key fit for the algorithm (its use, if given,
//     must be sig, and its alg, if given, the token's);
//   - exp is required, and the token is refused once now minus the clock
//     skew reaches it; nbf, if present, must not be after now plus the
//     skew; iat, if present, must not be after now plus the skew, nor
//     after exp (Kafka requires iat; this validator does not);
//   - aud and iss are checked as [security.OAuthBearerJWKS] says;
//   - the subject claim must be a string that is not blank: the principal,
//     trimmed; the scope claim, if a string, is one scope, if a list of
//     strings, the scope, without blanks or repeats.
//
// The key set is read by [JWKSValidator.Start] (an error there means the
// set could not be read) and refreshed in the background every Refresh
// until [JWKSValidator.Close]; a refresh that fails keeps the keys in use.
// A token whose kid is not in the set starts a refresh at once, which its
// validation waits for, unless that kid did so in the last minute or
// another unknown kid did so in the last 10 seconds: a client cannot make
// the validator hammer the identity provider. The keys from a file are
// read again on the same schedule, so that a rotated file is picked up too.
//
// A JWKSValidator is a sasl.Service: the socket server starts and closes
// it with the OAUTHBEARER [Mechanism] that uses it. Start and Close are
// counted; the refresher runs from the first Start to the last Close.
type JWKSValidator struct {
	cfg      security.OAuthBearerJWKS // resolved: Kafka's defaults filled in, none as zero
	location string                   // the URL, for messages
	file     string                   // the path of a file: URL; "" for http(s)
	client   *http.Client
	ownTr    *http.Transport // the transport of the validator's own client
	skew     time.Duration
	scope    string
	sub      string
	gap      time.Duration // least time between refreshes for unknown kids

	keys atomic.Pointer[[]jose.JSONWebKey] // nil unless started

	// life serialises Start and Close, each whole: a Start cannot begin
	// while a Close waits for the refresher. mu guards the fields below
	// it; the refresher takes mu only.
	life      sync.Mutex
	mu        sync.Mutex
	starts    int
	logger    *slog.Logger
	stop      context.CancelFunc // ends the refresher
	done      chan struct{}      // closed when the refresher has ended
	wake      chan struct{}      // asks the refresher for a refresh now
	pending   chan struct{}      // closed when the refresh asked for or running ends; nil when none
	missing   map[string]time.Time
	lastAsked time.Time // when an unknown kid last asked for a refresh
}

// NewJWKSValidator checks c and returns a validator: c's zero fields take
// Kafka's defaults, its negative durations but Refresh turn their feature
// off (see [security.OAuthBearerJWKS]; a negative Refresh is refused, as
// a key set must be refreshed), whether config.OAuthBearer read them
// from Kafka's keys or the host set them. It reads nothing: the key set is
// read by Start.
func NewJWKSValidator(c security.OAuthBearerJWKS, opts ...JWKSOption) (*JWKSValidator, error) {
	v := &JWKSValidator{cfg: c, location: c.URL, gap: defaultUnknownKIDRefreshGap}
	if c.URL == "" {
		return nil, errors.New("oauthbearer: OAuthBearerJWKS.URL is required")
	}
	var err error
	if v.file, err = oauthsettings.JWKSFile(c.URL); err != nil {
		return nil, fmt.Errorf("oauthbearer: %w", err)
	}
	if c.Refresh < 0 {
		return nil, fmt.Errorf("oauthbearer: OAuthBearerJWKS.Refresh is negative (%s)", c.Refresh)
	}
	if v.cfg.Refresh == 0 {
		v.cfg.Refresh = DefaultJWKSRefresh
	}
	if v.cfg.RetryBackoff == 0 {
		v.cfg.RetryBackoff = DefaultJWKSRetryBackoff
	}
	if v.cfg.RetryBackoffMax == 0 {
		v.cfg.RetryBackoffMax = DefaultJWKSRetryBackoffMax
	}
	v.cfg.RetryBackoff, v.cfg.RetryBackoffMax = max(v.cfg.RetryBackoff, 0), max(v.cfg.RetryBackoffMax, 0)
	if v.cfg.RetryBackoffMax < v.cfg.RetryBackoff {
		return nil, fmt.Errorf("oauthbearer: OAuthBearerJWKS.RetryBackoffMax (%s) is less than RetryBackoff (%s)", v.cfg.RetryBackoffMax, v.cfg.RetryBackoff)
	}
	v.skew = c.ClockSkew
	switch {
	case v.skew == 0:
		v.skew = DefaultClockSkew
	case v.skew < 0:
		v.skew = 0
	}
	v.scope, v.sub = claimName(c.ScopeClaimName, DefaultScopeClaimName), claimName(c.SubClaimName, DefaultSubClaimName)
	if v.scope == "" || v.sub == "" {
		return nil, errors.New("oauthbearer: OAuthBearerJWKS.ScopeClaimName and SubClaimName must not be blank")
	}
	v.cfg.ExpectedAudience = slices.Clone(c.ExpectedAudience)
	for _, o := range opts {
		o(v)
	}
	if v.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c.TLS.Clone()
		tr.DisableKeepAlives = true // a fetch an hour: no connection is kept, no goroutine waits on one
		v.ownTr = tr
		v.client = &http.Client{Transport: tr, Timeout: fetchTimeout}
	}
	return v, nil
}

func claimName(name, def string) string {
	if name == "" {
		return def
	}
	return strings.TrimSpace(name)
}

// URL returns the key set's URL.
func (v *JWKSValidator) URL() string { return v.location }

// Start reads the key set, once, and starts the refresher; ctx bounds the
// reading. It fails if the set cannot be read or holds no JSON Web Key Set,
// as Kafka's broker fails to start. A Start after the first only counts.
func (v *JWKSValidator) Start(ctx context.Context, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	v.life.Lock()
	defer v.life.Unlock()
	v.mu.Lock()
	if v.starts > 0 {
		v.starts++
		v.mu.Unlock()
		return nil
	}
	v.mu.Unlock()
	keys, skipped, err := v.fetch(ctx)
	if err != nil {
		return err
	}
	logger.Info("OAUTHBEARER: JWKS read; refreshing it in the background", "url", v.location, "keys", keyIDs(keys),
		"skipped_keys", skipped, "refresh", v.cfg.Refresh)
	if len(keys) == 0 {
		logger.Warn("OAUTHBEARER: the JWKS holds no key to verify signatures with: every token is refused until a refresh finds one", "url", v.location)
	}
	runCtx, stop := context.WithCancel(context.Background())
	v.mu.Lock()
	v.keys.Store(&keys)
	v.starts, v.logger, v.stop = 1, logger, stop
	v.done, v.wake = make(chan struct{}), make(chan struct{}, 1)
	v.missing, v.lastAsked = map[string]time.Time{}, time.Time{}
	done := v.done
	v.mu.Unlock()
	go v.refresher(runCtx, done)
	return nil
}

// Close ends the refresher, and waits for it, when it matches the first
// Start; an earlier Close only counts. Validations waiting for a refresh
// are released, and every later one fails with ErrNotStarted.
func (v *JWKSValidator) Close() error {
	v.life.Lock()
	defer v.life.Unlock()
	v.mu.Lock()
	if v.starts == 0 {
		v.mu.Unlock()
		return nil
	}
	v.starts--
	if v.starts > 0 {
		v.mu.Unlock()
		return nil
	}
	stop, done := v.stop, v.done
	v.mu.Unlock()
	stop()
	<-done // the refresher has ended: nothing stores keys any more
	v.mu.Lock()
	v.keys.Store(nil)
	if v.pending != nil {
		close(v.pending)
		v.pending = nil
	}
	v.mu.Unlock()
	if v.ownTr != nil {
		v.ownTr.CloseIdleConnections()
	}
	return nil
}

// refresher refreshes the key set every Refresh, and when asked, until
// ctx ends.
func (v *JWKSValidator) refresher(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(v.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			v.refresh(ctx)
			t.Reset(v.cfg.Refresh)
		case <-v.wake:
			v.refresh(ctx)
		}
	}
}

// refresh fetches the key set, retrying with exponential backoff for up
// to RetryBackoffMax as Kafka's Retry does, and swaps it in; on failure
// the keys in use stay. Those waiting for a refresh are released after.
func (v *JWKSValidator) refresh(ctx context.Context) {
	v.mu.Lock()
	if v.pending == nil {
		v.pending = make(chan struct{})
	}
	logger := v.logger
	v.mu.Unlock()
	defer func() { // release those waiting for this refresh
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.pending != nil {
			close(v.pending)
			v.pending = nil
		}
	}()

	end := time.Now().Add(v.cfg.RetryBackoffMax)
	wait := v.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		keys, skipped, err := v.fetch(ctx)
		if err == nil {
			v.mu.Lock()
			for _, k := range keys {
				delete(v.missing, k.KeyID)
			}
			v.keys.Store(&keys)
			v.mu.Unlock()
			logger.Info("OAUTHBEARER: JWKS refreshed", "url", v.location, "keys", keyIDs(keys), "skipped_keys", skipped)
			return
		}
		w := min(wait, time.Until(end))
		if ctx.Err() != nil {
			return
		}
		if w <= 0 {
			logger.Warn("OAUTHBEARER: JWKS refresh failed; keeping the keys in use", "url", v.location, "attempts", attempt, "err", err)
			return
		}
		logger.Warn("OAUTHBEARER: JWKS refresh attempt failed; retrying", "url", v.location, "attempt", attempt, "retry_in", w, "err", err)
		t := time.NewTimer(w)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		wait *= 2
	}
}

// awaitRefresh asks for a refresh because a token's kid is not in the set,
// and returns a channel closed when it (or the refresh already running)
// has ended; nil when the kid may not cause one now.
func (v *JWKSValidator) awaitRefresh(kid string) <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.starts == 0 {
		return nil
	}
	if v.pending != nil { // one is coming: wait for it rather than ask again
		return v.pending
	}
	now := time.Now()
	if len(kid) > maxRefreshKIDLen || now.Before(v.missing[kid]) || !v.lastAsked.IsZero() && now.Sub(v.lastAsked) < v.gap {
		return nil
	}
	if len(v.missing) >= unknownKIDs { // forget the id that may ask again soonest
		oldest := ""
		for id, at := range v.missing {
			if oldest == "" || at.Before(v.missing[oldest]) {
				oldest = id
			}
		}
		delete(v.missing, oldest)
	}
	v.missing[kid] = now.Add(unknownKIDWindow)
	v.lastAsked = now
	v.pending = make(chan struct{})
	select {
	case v.wake <- struct{}{}:
	default:
	}
	return v.pending
}

// fetch reads the key set and returns the keys fit to verify signatures,
// and how many keys it skipped (undecodable, for encryption).
func (v *JWKSValidator) fetch(ctx context.Context) ([]jose.JSONWebKey, int, error) {
	var body []byte
	var err error
	if v.file != "" {
		body, err = readLimited(v.file)
	} else {
		body, err = v.get(ctx)
	}
	if err != nil {
		return nil, 0, err
	}
	keys, skipped, err := parseJWKS(body)
	if err != nil {
		return nil, 0, fmt.Errorf("oauthbearer: the JWKS at %s: %w", v.location, err)
	}
	return keys, skipped, nil
}

func (v *JWKSValidator) get(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("oauthbearer: fetching the JWKS from %s: %w", v.location, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauthbearer: fetching the JWKS: %w", err) // the error names the URL
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("oauthbearer: fetching the JWKS from %s: HTTP status %s", v.location, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("oauthbearer: fetching the JWKS from %s: %w", v.location, err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("oauthbearer: the JWKS at %s is larger than %d bytes", v.location, maxJWKSBytes)
	}
	return body, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("oauthbearer: reading the JWKS: %w", err)
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("oauthbearer: reading the JWKS: %w", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("oauthbearer: the JWKS file %s is larger than %d bytes", path, maxJWKSBytes)
	}
	return body, nil
}

// parseJWKS reads a JSON Web Key Set (RFC 7517 section 5). Like jose4j, it
// skips the keys it cannot read rather than refusing the set; it also
// skips keys for encryption and keeps only the public half of a private
// key.
func parseJWKS(body []byte) ([]jose.JSONWebKey, int, error) {
	var doc struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&doc); err != nil {
		return nil, 0, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	if doc.Keys == nil {
		return nil, 0, errors.New("not a JSON Web Key Set: it has no keys member")
	}
	var keys []jose.JSONWebKey
	skipped := 0
	for _, raw := range *doc.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() || k.Use != "" && k.Use != "sig" {
			skipped++
			continue
		}
		if !k.IsPublic() {
			k = k.Public()
		}
		switch k.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
			keys = append(keys, k)
		default: // a symmetric key, say
			skipped++
		}
	}
	return keys, skipped, nil
}

func keyIDs(keys []jose.JSONWebKey) []string {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.KeyID
	}
	return ids
}

// fits reports whether k can verify a signature of algorithm alg.
func fits(k jose.JSONWebKey, alg string) bool {
	if k.Algorithm != "" && k.Algorithm != alg {
		return false
	}
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case string(jose.ES256):
			return pub.Curve == elliptic.P256()
		case string(jose.ES384):
			return pub.Curve == elliptic.P384()
		case string(jose.ES512):
			return pub.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == string(jose.EdDSA)
	}
	return false
}

// Validate checks a signed JWT, as the type's documentation says.
func (v *JWKSValidator) Validate(ctx context.Context, token string) (Token, error) {
	jws, err := jose.ParseSignedCompact(token, algorithms)
	if err != nil {
		return Token{}, invalid("the token is not a JWS signed with an accepted algorithm: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return Token{}, invalid("the token has %d signatures", len(jws.Signatures))
	}
	h := jws.Signatures[0].Header
	payload, err := v.verify(ctx, jws, h)
	if err != nil {
		return Token{}, err
	}
	return v.claims(payload)
}

// verify checks the signature with the key set's keys for the token's kid
// and algorithm, refreshing the set once if the kid is unknown.
func (v *JWKSValidator) verify(ctx context.Context, jws *jose.JSONWebSignature, h jose.Header) ([]byte, error) {
	for refreshed := false; ; refreshed = true {
		keys := v.keys.Load()
		if keys == nil {
			return nil, ErrNotStarted
		}
		found := false
		for _, k := range *keys {
			if h.KeyID != "" && k.KeyID != h.KeyID {
				continue
			}
			found = true
			if !fits(k, h.Algorithm) {
				continue
			}
			if payload, err := jws.Verify(k.Key); err == nil {
				return payload, nil
			}
		}
		if found || h.KeyID == "" {
			return nil, fmt.Errorf("%w: the signature (%s) does not verify with the JWKS's keys%s", ErrUnknownKey, h.Algorithm, kidNote(h.KeyID))
		}
		if refreshed {
			return nil, fmt.Errorf("%w: no key has the token's kid %s", ErrUnknownKey, quoteKID(h.KeyID))
		}
		ch := v.awaitRefresh(h.KeyID)
		if ch == nil {
			return nil, fmt.Errorf("%w: no key has the token's kid %s (a refresh for unknown kids was made recently)", ErrUnknownKey, quoteKID(h.KeyID))
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no key has the token's kid %s; gave up waiting for the JWKS refresh: %w", ErrUnknownKey, quoteKID(h.KeyID), ctx.Err())
		}
	}
}

func kidNote(kid string) string {
	if kid == "" {
		return " (the token has no kid)"
	}
	return " for kid " + quoteKID(kid)
}

// quoteKID quotes a key id from a client's token for a log, shortened.
func quoteKID(kid string) string {
	const max = 64
	if len(kid) > max {
		return fmt.Sprintf("%q... (%d bytes)", kid[:max], len(kid))
	}
	return fmt.Sprintf("%q", kid)
}

// claims checks the verified payload's claims.
func (v *JWKSValidator) claims(payload []byte) (Token, error) {
	c, err := decodeClaims(payload)
	if err != nil {
		return Token{}, err
	}
	now := time.Now()
	exp, ok, err := c.seconds("exp")
	switch {
	case err != nil:
		return Token{}, err
	case !ok:
		return Token{}, invalid("the token has no exp claim")
	}
	iat, hasIAT, err := c.seconds("iat")
	if err != nil {
		return Token{}, err
	}
	nbf, hasNBF, err := c.seconds("nbf")
	if err != nil {
		return Token{}, err
	}
	if !now.Add(-v.skew).Before(exp) {
		return Token{}, fmt.Errorf("%w at %s (clock skew %s)", ErrTokenExpired, exp.UTC().Format(time.RFC3339), v.skew)
	}
	if hasIAT && exp.Before(iat) {
		return Token{}, invalid("exp (%s) is before iat (%s)", exp.UTC().Format(time.RFC3339), iat.UTC().Format(time.RFC3339))
	}
	if hasNBF && exp.Before(nbf) {
		return Token{}, invalid("exp (%s) is before nbf (%s)", exp.UTC().Format(time.RFC3339), nbf.UTC().Format(time.RFC3339))
	}
	if hasNBF && now.Add(v.skew).Before(nbf) {
		return Token{}, invalid("it is not valid before %s (nbf; clock skew %s)", nbf.UTC().Format(time.RFC3339), v.skew)
	}
	if hasIAT && now.Add(v.skew).Before(iat) {
		return Token{}, invalid("it was issued in the future, at %s (iat; clock skew %s)", iat.UTC().Format(time.RFC3339), v.skew)
	}
	if err := v.checkAudience(c); err != nil {
		return Token{}, err
	}
	if v.cfg.ExpectedIssuer != "" {
		iss, ok := c["iss"].(string)
		switch {
		case c["iss"] == nil:
			return Token{}, invalid("the token has no iss claim; expected %q", v.cfg.ExpectedIssuer)
		case !ok:
			return Token{}, invalid("the iss claim is not a string")
		case iss != v.cfg.ExpectedIssuer:
			return Token{}, invalid("the issuer (iss) %q is not the expected %q", iss, v.cfg.ExpectedIssuer)
		}
	}
	scope, err := v.scopeClaim(c)
	if err != nil {
		return Token{}, err
	}
	sub, err := c.nonBlankString(v.sub)
	if err != nil {
		return Token{}, err
	}
	t := Token{Principal: sub, Expiry: exp, Scope: scope}
	if hasIAT {
		t.IssuedAt = iat
	}
	return t, nil
}

// checkAudience follows jose4j's AudValidator as Kafka configures it.
func (v *JWKSValidator) checkAudience(c claimSet) error {
	raw, present := c["aud"]
	if !present || raw == nil {
		if len(v.cfg.ExpectedAudience) > 0 {
			return invalid("the token has no aud claim; expected one of %q", v.cfg.ExpectedAudience)
		}
		return nil
	}
	var auds []string
	switch a := raw.(type) {
	case string:
		auds = []string{a}
	case []any:
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return invalid("the aud claim holds a value that is not a string")
			}
			auds = append(auds, s)
		}
	default:
		return invalid("the aud claim is neither a string nor a list of strings")
	}
	if len(v.cfg.ExpectedAudience) == 0 {
		return invalid("the token is for the audience %q, but no expected audience is configured (sasl.oauthbearer.expected.audience)", auds)
	}
	for _, a := range auds {
		if slices.Contains(v.cfg.ExpectedAudience, a) {
			return nil
		}
	}
	return invalid("the token's audience %q holds none of the expected %q", auds, v.cfg.ExpectedAudience)
}

// scopeClaim reads the scope as Kafka's validator does.
func (v *JWKSValidator) scopeClaim(c claimSet) ([]string, error) {
	var raw []any
	switch s := c[v.scope].(type) {
	case string:
		raw = []any{s}
	case []any:
		raw = s
	default:
		return nil, nil
	}
	scope := make([]string, 0, len(raw))
	for _, e := range raw {
		s, ok := e.(string)
		if !ok {
			return nil, invalid("the %s claim holds a value that is not a string", v.scope)
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, invalid("the %s claim holds a blank scope", v.scope)
		}
		if slices.Contains(scope, s) {
			return nil, invalid("the %s claim holds %q twice", v.scope, s)
		}
		scope = append(scope, s)
	}
	return scope, nil
}

// invalid returns an error for a refused token, wrapping ErrInvalidToken.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidToken}, args...)...)
}

var _ interface {
	Validator
	Start(context.Context, *slog.Logger) error
	Close() error
} = (*JWKSValidator)(nil)
