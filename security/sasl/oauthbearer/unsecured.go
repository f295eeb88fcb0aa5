package oauthbearer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/internal/oauthsettings"
	"github.com/kafkanet/kafkanet/security"
)

// UnsecuredValidator accepts unsigned JWTs (alg "none"), as Kafka's
// default OAUTHBEARER validator, OAuthBearerUnsecuredValidatorCallbackHandler,
// does: it is for development and tests, since anyone can write a token
// for anyone. A token is a compact JWS whose header has "alg":"none" and
// whose signature is empty (header.claims. in base64url, padding
// optional), with:
//
//   - an exp claim, a number of seconds (fractions allowed), after now
//     minus the skew;
//   - the principal claim, a string that is not blank;
//   - an iat claim, if present, a number not after now plus the skew, and
//     before exp;
//   - a scope (a string, one scope, or a list) that holds every required
//     scope, or the token gets insufficient_scope.
//
// Its Start logs a warning that the listener accepts unsigned tokens.
type UnsecuredValidator struct {
	principal, scope string
	required         []string
	skew             time.Duration
}

// NewUnsecuredValidator checks c and returns the validator: c's zero
// fields take Kafka's defaults (see [security.OAuthBearerUnsecured]).
func NewUnsecuredValidator(c security.OAuthBearerUnsecured) (*UnsecuredValidator, error) {
	v := &UnsecuredValidator{
		principal: claimName(c.PrincipalClaimName, DefaultSubClaimName),
		scope:     claimName(c.ScopeClaimName, DefaultScopeClaimName),
		skew:      c.AllowableClockSkew,
	}
	if v.principal == "" || v.scope == "" {
		return nil, fmt.Errorf("oauthbearer: the unsecured validator's claim names must not be blank")
	}
	if v.skew < 0 {
		return nil, fmt.Errorf("oauthbearer: Allowable clock skew millis must not be negative: %d", c.AllowableClockSkew.Milliseconds())
	}
	for _, s := range c.RequiredScope {
		if !oauthsettings.ValidScopeToken(s) {
			return nil, fmt.Errorf("oauthbearer: Invalid scope value: %q", s)
		}
		v.required = append(v.required, s)
	}
	return v, nil
}

// Start logs that the listener accepts unsigned tokens. It starts nothing.
func (v *UnsecuredValidator) Start(_ context.Context, logger *slog.Logger) error {
	if logger != nil {
		logger.Warn("OAUTHBEARER accepts UNSIGNED tokens (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler): " +
			"any client can log in as any principal; use it for development only, and validate tokens against " +
			"your identity provider's JWKS in production (Kafka's OAuthBearerValidatorCallbackHandler)")
	}
	return nil
}

// Close does nothing.
func (v *UnsecuredValidator) Close() error { return nil }

// Validate checks an unsigned token, as the type's documentation says,
// with the checks and in the order of Kafka's OAuthBearerUnsecuredJws and
// OAuthBearerUnsecuredValidatorCallbackHandler.
func (v *UnsecuredValidator) Validate(_ context.Context, token string) (Token, error) {
	if strings.Contains(token, "..") {
		return Token{}, invalid("malformed compact serialization contains '..'")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Token{}, invalid("unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
	}
	header, err := decodeSegment(parts[0])
	if err != nil {
		return Token{}, err
	}
	claimsJSON, err := decodeSegment(parts[1])
	if err != nil {
		return Token{}, err
	}
	var h map[string]any
	if err := json.Unmarshal(header, &h); err != nil || h == nil {
		return Token{}, invalid("the header is not a JSON object")
	}
	if alg, _ := h["alg"].(string); alg != "none" {
		return Token{}, invalid("unsecured JWS must have 'none' for an algorithm")
	}
	if parts[2] != "" {
		return Token{}, invalid("unsecured JWS must not contain a digital signature")
	}
	c, err := decodeClaims(claimsJSON)
	if err != nil {
		return Token{}, err
	}
	scope, err := v.scopeOf(c)
	if err != nil {
		return Token{}, err
	}
	exp, expSecs, ok, err := c.millis("exp")
	switch {
	case err != nil:
		return Token{}, err
	case !ok:
		return Token{}, invalid("no expiration time in JWT")
	}
	principal, err := c.nonBlankString(v.principal)
	if err != nil {
		return Token{}, err
	}
	iat, iatSecs, hasIAT, err := c.millis("iat")
	if err != nil {
		return Token{}, err
	}
	now := time.Now()
	if hasIAT && iat.After(now.Add(v.skew)) {
		return Token{}, invalid("the Issued At value (%f seconds) was after the indicated time plus allowable clock skew (%d ms)", iatSecs, v.skew.Milliseconds())
	}
	if !now.Add(-v.skew).Before(exp) {
		return Token{}, fmt.Errorf("%w at %s: the indicated time minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)",
			ErrTokenExpired, exp.UTC().Format(time.RFC3339Nano), v.skew.Milliseconds(), expSecs)
	}
	if hasIAT && expSecs <= iatSecs {
		return Token{}, invalid("the Expiration Time (%f seconds) was not after the Issued At time (%f seconds)", expSecs, iatSecs)
	}
	for _, want := range v.required {
		if !containsString(scope, want) {
			return Token{}, &StatusError{Status: StatusInsufficientScope, Scope: javaList(v.required), Err: fmt.Errorf(
				"%w: the provided scope %s was missing a required scope (%s); all required scope elements: %s",
				ErrInsufficientScope, javaList(scope), want, javaList(v.required))}
		}
	}
	t := Token{Principal: principal, Expiry: exp, Scope: scope}
	if hasIAT {
		t.IssuedAt = iat
	}
	return t, nil
}

// scopeOf reads the scope as OAuthBearerUnsecuredJws does: a string is one
// scope (none if blank), a list holds the scope (blank entries dropped).
func (v *UnsecuredValidator) scopeOf(c claimSet) ([]string, error) {
	var scope []string
	switch s := c[v.scope].(type) {
	case nil:
	case string:
		if s = strings.TrimSpace(s); s != "" {
			scope = []string{s}
		}
	case []any:
		for _, e := range s {
			str, ok := e.(string)
			if !ok { // Jackson would read a number's or boolean's text; a list of strings is what is meant
				return nil, invalid("the %s claim holds a value that is not a string", v.scope)
			}
			if str = strings.TrimSpace(str); str != "" && !containsString(scope, str) {
				scope = append(scope, str)
			}
		}
	default:
		return nil, invalid("the %s claim is neither a string nor a list", v.scope)
	}
	return scope, nil
}

// decodeSegment decodes a base64url segment of a JWS, padding optional.
func decodeSegment(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, invalid("malformed Base64 URL encoded value")
	}
	return b, nil
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// javaList writes a list as Java's List.toString does, as Kafka puts the
// required scope in its insufficient_scope challenge: [a, b].
func javaList(l []string) string { return "[" + strings.Join(l, ", ") + "]" }
