package oauthbearer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
)

const genericFailure = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"

// hostValidator is a host's own validator: a function from a token to a
// principal and an expiry.
func hostValidator(expiry time.Time) oauthbearer.ValidatorFunc {
	return func(ctx context.Context, token string) (oauthbearer.Token, error) {
		switch token {
		case "tok-alice":
			return oauthbearer.Token{Principal: "alice", Expiry: expiry}, nil
		case "tok-noscope":
			return oauthbearer.Token{}, &oauthbearer.StatusError{Status: oauthbearer.StatusInsufficientScope, Scope: "write",
				OpenIDConfiguration: "https://idp.example/.well-known/openid-configuration", Err: errors.New("needs write")}
		case "tok-blank":
			return oauthbearer.Token{Principal: "  "}, nil
		}
		return oauthbearer.Token{}, fmt.Errorf("unknown token (%d bytes)", len(token))
	}
}

func newServer(t *testing.T, v oauthbearer.Validator) sasl.Server {
	t.Helper()
	m, err := oauthbearer.New(v)
	require.NoError(t, err)
	assert.Equal(t, "OAUTHBEARER", m.Name())
	return m.NewServer(sasl.Attempt{})
}

// The mechanism over a host's validator function, following Kafka's
// OAuthBearerSaslServerTest: success replies empty with the token's
// principal and expiry; a refused token gets the error challenge, with the
// validator's status; an authzid must be the principal.
func TestMechanismWithHostValidator(t *testing.T) {
	expiry := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	v := hostValidator(expiry)

	t.Run("success (noAuthorizationIdSpecified, negotiatedProperty)", func(t *testing.T) {
		s := newServer(t, v)
		reply, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage("tok-alice"))
		require.NoError(t, err)
		assert.NotNil(t, reply)
		assert.Empty(t, reply)
		assert.True(t, s.Complete())
		assert.Equal(t, "alice", s.AuthorizationID())
		assert.Equal(t, expiry, s.Negotiated().CredentialExpiry)
	})
	t.Run("extensions are accepted", func(t *testing.T) {
		s := newServer(t, v)
		_, err := s.Step(context.Background(), []byte("n,,\x01auth=Bearer tok-alice\x01logicalCluster=lkc-1\x01\x01"))
		require.NoError(t, err)
		assert.True(t, s.Complete())
	})
	t.Run("authzid equal to the principal (authorizationIdEqualsAuthenticationId)", func(t *testing.T) {
		s := newServer(t, v)
		_, err := s.Step(context.Background(), []byte("n,a=alice,\x01auth=Bearer tok-alice\x01\x01"))
		require.NoError(t, err)
		assert.Equal(t, "alice", s.AuthorizationID())
	})
	t.Run("authzid other than the principal (authorizationIdNotEqualsAuthenticationId)", func(t *testing.T) {
		s := newServer(t, v)
		_, err := s.Step(context.Background(), []byte("n,a=bob,\x01auth=Bearer tok-alice\x01\x01"))
		var se *sasl.Error
		require.ErrorAs(t, err, &se)
		assert.True(t, se.SendReason)
		assert.Nil(t, se.Challenge)
		assert.Equal(t, "Authentication failed: Client requested an authorization id (bob) that is different from the token's principal name (alice)",
			se.ClientMessage(false))
		assert.False(t, s.Complete())
	})
	t.Run("a refused token (illegalToken)", func(t *testing.T) {
		s := newServer(t, v)
		reply, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage("tok-mallory"))
		assert.Nil(t, reply)
		var se *sasl.Error
		require.ErrorAs(t, err, &se)
		assert.Equal(t, `{"status":"invalid_token"}`, string(se.Challenge))
		assert.Equal(t, `{"status":"invalid_token"}`, se.ClientMessage(false), "after the 0x01 the client is told the same JSON")
		assert.Contains(t, err.Error(), "unknown token (11 bytes)", "the cause is for the log")
		assert.NotContains(t, err.Error(), "tok-mallory")
		assert.False(t, s.Complete())
	})
	t.Run("a status, scope and OpenID configuration", func(t *testing.T) {
		s := newServer(t, v)
		_, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage("tok-noscope"))
		var se *sasl.Error
		require.ErrorAs(t, err, &se)
		assert.Equal(t, `{"status":"insufficient_scope", "scope":"write", "openid-configuration":"https://idp.example/.well-known/openid-configuration"}`,
			string(se.Challenge))
	})
	t.Run("a blank principal is refused", func(t *testing.T) {
		s := newServer(t, v)
		_, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage("tok-blank"))
		var se *sasl.Error
		require.ErrorAs(t, err, &se)
		assert.Equal(t, `{"status":"invalid_token"}`, string(se.Challenge))
		assert.False(t, s.Complete())
	})
	t.Run("a malformed message is a SaslException: the generic message, no challenge", func(t *testing.T) {
		for _, msg := range [][]byte{nil, {0x01}, []byte("n,,\x01auth=Basic eA==\x01\x01"), []byte("tok-alice")} {
			s := newServer(t, v)
			_, err := s.Step(context.Background(), msg)
			var se *sasl.Error
			require.ErrorAs(t, err, &se)
			assert.Nil(t, se.Challenge)
			assert.False(t, se.SendReason)
			assert.Equal(t, genericFailure, se.ClientMessage(false))
			assert.Contains(t, se.Reason, "Invalid OAUTHBEARER client first message", "Kafka's SaslException text, for the log")
		}
	})
	t.Run("no step after the exchange ended", func(t *testing.T) {
		s := newServer(t, v)
		_, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage("tok-alice"))
		require.NoError(t, err)
		_, err = s.Step(context.Background(), oauthbearertest.ClientFirstMessage("tok-alice"))
		require.ErrorIs(t, err, sasl.ErrAuthenticationFailed)
	})
	t.Run("the validator sees the step's context", func(t *testing.T) {
		type key struct{}
		var seen any
		s := newServer(t, oauthbearer.ValidatorFunc(func(ctx context.Context, _ string) (oauthbearer.Token, error) {
			seen = ctx.Value(key{})
			return oauthbearer.Token{Principal: "p"}, nil
		}))
		_, err := s.Step(context.WithValue(context.Background(), key{}, "conn"), oauthbearertest.ClientFirstMessage("t"))
		require.NoError(t, err)
		assert.Equal(t, "conn", seen)
		assert.True(t, s.Negotiated().CredentialExpiry.IsZero(), "no expiry: the session does not end with the token")
	})
	_, err := oauthbearer.New(nil)
	assert.Error(t, err)
}

// serviceValidator counts its starts and closes.
type serviceValidator struct {
	oauthbearer.ValidatorFunc
	starts, closes int
	logged         *slog.Logger
}

func (s *serviceValidator) Start(_ context.Context, l *slog.Logger) error {
	s.starts++
	s.logged = l
	return nil
}
func (s *serviceValidator) Close() error { s.closes++; return nil }

// The mechanism passes Start and Close on to a validator that is a
// sasl.Service, and is one itself either way.
func TestMechanismPassesTheLifecycleOn(t *testing.T) {
	sv := &serviceValidator{ValidatorFunc: hostValidator(time.Time{})}
	m, err := oauthbearer.New(sv)
	require.NoError(t, err)
	var svc sasl.Service = m
	logger := slog.New(slog.DiscardHandler)
	require.NoError(t, svc.Start(context.Background(), logger))
	require.NoError(t, svc.Close())
	assert.Equal(t, 1, sv.starts)
	assert.Equal(t, 1, sv.closes)
	assert.Same(t, logger, sv.logged)

	plain, err := oauthbearer.New(hostValidator(time.Time{}))
	require.NoError(t, err)
	require.NoError(t, plain.Start(context.Background(), logger))
	require.NoError(t, plain.Close())
}

// The unsecured validator logs a warning when it starts.
func TestUnsecuredValidatorWarnsAtStart(t *testing.T) {
	v, err := oauthbearer.NewUnsecuredValidator(security.OAuthBearerUnsecured{})
	require.NoError(t, err)
	var buf bytes.Buffer
	m, err := oauthbearer.New(v)
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background(), slog.New(slog.NewTextHandler(&buf, nil))))
	assert.Contains(t, buf.String(), "level=WARN")
	assert.Contains(t, buf.String(), "UNSIGNED tokens")
	require.NoError(t, m.Close())
}
