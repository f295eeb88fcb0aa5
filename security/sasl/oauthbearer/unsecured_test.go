package oauthbearer_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
)

// rawToken builds an unsecured token from header and claims JSON as
// given.
func rawToken(header, claims string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims)) + "."
}

// Kafka's OAuthBearerUnsecuredValidatorCallbackHandlerTest
// (validToken, badOrMissingPrincipal, tooEarlyExpirationTime,
// includesRequiredScope, missingRequiredScope) and the rules of
// OAuthBearerUnsecuredJws.
func TestUnsecuredValidator(t *testing.T) {
	now := time.Now()
	exp := float64(now.Add(time.Hour).UnixMilli()) / 1000 // fractional seconds, as librdkafka writes them
	iat := float64(now.UnixMilli()) / 1000
	principalOpts := security.OAuthBearerUnsecured{PrincipalClaimName: "principal", AllowableClockSkew: time.Millisecond}
	scope1 := security.OAuthBearerUnsecured{RequiredScope: []string{"scope1"}}
	scope12 := security.OAuthBearerUnsecured{RequiredScope: []string{"scope1", "scope2"}}

	for _, tc := range []struct {
		name   string
		cfg    security.OAuthBearerUnsecured
		token  string
		want   oauthbearer.Token
		status string // the challenge's status; "" for success
		scope  string // the challenge's scope
	}{
		{name: "validToken, with iat", cfg: principalOpts,
			token: oauthbearertest.UnsecuredToken(map[string]any{"principal": "username", "exp": exp, "iat": iat}),
			want:  oauthbearer.Token{Principal: "username", Expiry: time.UnixMilli(int64(exp * 1000)), IssuedAt: time.UnixMilli(int64(iat * 1000))}},
		{name: "validToken, without iat", cfg: principalOpts,
			token: oauthbearertest.UnsecuredToken(map[string]any{"principal": "username", "exp": exp}),
			want:  oauthbearer.Token{Principal: "username", Expiry: time.UnixMilli(int64(exp * 1000))}},
		{name: "librdkafka's token: sub, fractional iat and exp", token: rawToken(`{"alg":"none"}`,
			`{"sub":"alice","iat":`+ftoa(iat)+`,"exp":`+ftoa(exp)+`}`),
			want: oauthbearer.Token{Principal: "alice", Expiry: time.UnixMilli(int64(exp * 1000)), IssuedAt: time.UnixMilli(int64(iat * 1000))}},
		{name: "padded base64url", token: base64.URLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." +
			base64.URLEncoding.EncodeToString([]byte(`{"sub":"alice","exp":`+ftoa(exp)+`}`)) + ".",
			want: oauthbearer.Token{Principal: "alice", Expiry: time.UnixMilli(int64(exp * 1000))}},
		{name: "base64url's - and _ (KAFKA-17089)", token: rawToken(`{"alg":"none"}`, `{"sub":"alice","exp":`+ftoa(exp)+`,"x":">>>___<<<---???"}`),
			want: oauthbearer.Token{Principal: "alice", Expiry: time.UnixMilli(int64(exp * 1000))}},
		{name: "the principal is trimmed", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": " alice ", "exp": exp}),
			want: oauthbearer.Token{Principal: "alice", Expiry: time.UnixMilli(int64(exp * 1000))}},
		{name: "includesRequiredScope", cfg: scope1,
			token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "username", "exp": exp, "scope": "scope1"}),
			want:  oauthbearer.Token{Principal: "username", Expiry: time.UnixMilli(int64(exp * 1000)), Scope: []string{"scope1"}}},
		{name: "a scope list", cfg: scope12,
			token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": exp, "scope": []string{"scope2", " ", "scope1"}}),
			want:  oauthbearer.Token{Principal: "u", Expiry: time.UnixMilli(int64(exp * 1000)), Scope: []string{"scope2", "scope1"}}},
		{name: "missingRequiredScope", cfg: scope12, status: "insufficient_scope", scope: "[scope1, scope2]",
			token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "username", "exp": exp, "scope": "scope1"})},
		{name: "badOrMissingPrincipal: not a string", cfg: principalOpts, status: "invalid_token",
			token: oauthbearertest.UnsecuredToken(map[string]any{"principal": 1, "exp": exp})},
		{name: "badOrMissingPrincipal: missing", cfg: principalOpts, status: "invalid_token",
			token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "username", "exp": exp})},
		{name: "a blank principal", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": " ", "exp": exp})},
		{name: "tooEarlyExpirationTime", cfg: principalOpts, status: "invalid_token",
			token: oauthbearertest.UnsecuredToken(map[string]any{"principal": "username", "iat": iat, "exp": 0})},
		{name: "expired", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": now.Add(-time.Second).Unix()})},
		{name: "no exp", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u"})},
		{name: "exp not a number", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": "tomorrow"})},
		{name: "iat in the future", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": exp, "iat": now.Add(time.Minute).Unix()})},
		{name: "exp not after iat", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": exp, "iat": exp})},
		{name: "a signed token", status: "invalid_token", token: rawToken(`{"alg":"RS256"}`, `{"sub":"u","exp":`+ftoa(exp)+`}`)},
		{name: "no alg", status: "invalid_token", token: rawToken(`{}`, `{"sub":"u","exp":`+ftoa(exp)+`}`)},
		{name: "a signature", status: "invalid_token", token: rawToken(`{"alg":"none"}`, `{"sub":"u","exp":`+ftoa(exp)+`}`) + "c2ln"},
		{name: "two parts", status: "invalid_token", token: base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + ".e30"},
		{name: "'..'", status: "invalid_token", token: "e30..e30."},
		{name: "standard base64's +", status: "invalid_token", token: rawToken(`{"alg":"none"}`, `{"sub":"u","exp":1}`) + "+"},
		{name: "claims not an object", status: "invalid_token", token: rawToken(`{"alg":"none"}`, `[1,2]`)},
		{name: "scope of another type", status: "invalid_token", token: oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": exp, "scope": 7})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := oauthbearer.NewUnsecuredValidator(tc.cfg)
			require.NoError(t, err)
			tok, err := v.Validate(context.Background(), tc.token)
			if tc.status == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want.Principal, tok.Principal)
				assert.Equal(t, tc.want.Expiry.UnixMilli(), tok.Expiry.UnixMilli())
				assert.Equal(t, tc.want.IssuedAt.UnixMilli(), tok.IssuedAt.UnixMilli())
				assert.ElementsMatch(t, tc.want.Scope, tok.Scope)
				return
			}
			require.Error(t, err)
			s := newServer(t, v)
			_, serr := s.Step(context.Background(), oauthbearertest.ClientFirstMessage(tc.token))
			want := `{"status":"` + tc.status + `"`
			if tc.scope != "" {
				want += `, "scope":"` + tc.scope + `"`
			}
			var se interface{ Error() string }
			require.ErrorAs(t, serr, &se)
			assert.Contains(t, serr.Error(), want+"}")
			assert.ErrorIs(t, err, oauthbearer.ErrInvalidToken, "every refused token's error")
			if tc.status == "insufficient_scope" {
				assert.ErrorIs(t, err, oauthbearer.ErrInsufficientScope)
			}
		})
	}
}

func ftoa(f float64) string { return formatFloat(f) }

// Kafka checks the unsecured validator's options when it validates a
// token; this validator checks them when it is built.
func TestUnsecuredValidatorConfig(t *testing.T) {
	for _, c := range []security.OAuthBearerUnsecured{
		{AllowableClockSkew: -time.Millisecond},
		{RequiredScope: []string{"has space"}},
		{RequiredScope: []string{`quote"`}},
		{RequiredScope: []string{""}},
		{PrincipalClaimName: "   "},
	} {
		_, err := oauthbearer.NewUnsecuredValidator(c)
		assert.Error(t, err, "%+v", c)
	}
	_, err := oauthbearer.NewUnsecuredValidator(security.OAuthBearerUnsecured{RequiredScope: []string{"kafka:read/x!", "#[]~"}})
	assert.NoError(t, err)
	_, err = oauthbearer.NewUnsecuredValidator(security.OAuthBearerUnsecured{RequiredScope: []string{`a\b`}})
	assert.Error(t, err)
}

// An expired token's error is ErrTokenExpired, which is ErrInvalidToken.
func TestUnsecuredExpiredIs(t *testing.T) {
	v, err := oauthbearer.NewUnsecuredValidator(security.OAuthBearerUnsecured{AllowableClockSkew: time.Minute})
	require.NoError(t, err)
	_, err = v.Validate(context.Background(), oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": time.Now().Add(-30 * time.Second).Unix()}))
	require.NoError(t, err, "within the allowable clock skew")
	_, err = v.Validate(context.Background(), oauthbearertest.UnsecuredToken(map[string]any{"sub": "u", "exp": time.Now().Add(-2 * time.Minute).Unix()}))
	require.ErrorIs(t, err, oauthbearer.ErrTokenExpired)
	assert.True(t, errors.Is(err, oauthbearer.ErrInvalidToken))
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) }
