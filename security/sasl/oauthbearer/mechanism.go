package oauthbearer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/security/sasl"
)

// Name is the mechanism's name, as clients send it in SaslHandshake.
const Name = "OAUTHBEARER"

// The error statuses of RFC 7628's error challenge (and RFC 6750's) that
// Kafka's validators send.
const (
	StatusInvalidToken      = "invalid_token"
	StatusInsufficientScope = "insufficient_scope"
)

// Token is what a [Validator] learned from a valid token: Kafka's
// OAuthBearerToken.
type Token struct {
	// Principal is the name of the connection's principal
	// (User:<Principal> with the default principal builder). It must not
	// be empty.
	Principal string
	// Expiry is when the token expires; it ends the session (KIP-368) and
	// sets SaslAuthenticate's SessionLifetimeMs. Zero means it does not
	// expire.
	Expiry time.Time
	// IssuedAt is the token's iat, zero if it has none.
	IssuedAt time.Time
	// Scope is the token's scope, in no particular order.
	Scope []string
}

// Validator checks bearer tokens: Kafka's server callback handler for
// OAuthBearerValidatorCallback. Validate is called once per authentication,
// concurrently, with the token as the client sent it and a ctx that ends
// when the connection closes or its handshake deadline passes. It returns
// the token's principal and expiry, or an error, which refuses the token:
// the client gets RFC 7628's error challenge with the status of a
// [*StatusError] the error wraps, else invalid_token. The error's text is
// for the broker's log and must not contain the token.
//
// A Validator that has background work (refreshing keys) implements
// sasl.Service; the [Mechanism] passes its Start and Close on.
type Validator interface {
	Validate(ctx context.Context, token string) (Token, error)
}

// ValidatorFunc adapts a function to [Validator].
type ValidatorFunc func(ctx context.Context, token string) (Token, error)

// Validate calls f.
func (f ValidatorFunc) Validate(ctx context.Context, token string) (Token, error) {
	return f(ctx, token)
}

// StatusError sets the status of the error challenge a refused token gets,
// with the scope that was missing (insufficient_scope) and the identity
// provider's OpenID configuration URL, when known. Err is why, for the log.
type StatusError struct {
	Status              string
	Scope               string
	OpenIDConfiguration string
	Err                 error
}

func (e *StatusError) Error() string {
	if e.Err == nil {
		return e.Status
	}
	return e.Status + ": " + e.Err.Error()
}

func (e *StatusError) Unwrap() error { return e.Err }

// Sentinel errors of the package; test for them with errors.Is. Every
// error of the validators here for a refused token wraps ErrInvalidToken,
// and the more specific sentinel where there is one.
var (
	ErrInvalidToken = errors.New("invalid token")
	// ErrTokenExpired: the token's exp has passed (wraps ErrInvalidToken).
	ErrTokenExpired = fmt.Errorf("%w: expired", ErrInvalidToken)
	// ErrUnknownKey: no key of the JWKS verifies the token's signature
	// (wraps ErrInvalidToken).
	ErrUnknownKey = fmt.Errorf("%w: no key of the JWKS verifies it", ErrInvalidToken)
	// ErrInsufficientScope: the token lacks a scope the validator
	// requires; the client's challenge has the status insufficient_scope
	// (wraps ErrInvalidToken).
	ErrInsufficientScope = fmt.Errorf("%w: insufficient scope", ErrInvalidToken)
	// ErrNotStarted: a validator with background work was used before its
	// Start (or after its last Close).
	ErrNotStarted = errors.New("oauthbearer: validator not started")
)

// Mechanism is SASL/OAUTHBEARER (RFC 7628, KIP-255) as Kafka's
// OAuthBearerSaslServer implements it, over a [Validator]. It is a
// sasl.Mechanism and a sasl.Service: Start and Close are passed on to the
// validator if it is a sasl.Service, and do nothing otherwise.
type Mechanism struct {
	v        Validator
	warnings []string // logged by Start (FromSettings)
}

// New returns the OAUTHBEARER mechanism over v.
func New(v Validator) (*Mechanism, error) {
	if v == nil {
		return nil, errors.New("oauthbearer: New needs a Validator")
	}
	return &Mechanism{v: v}, nil
}

// Name returns "OAUTHBEARER".
func (m *Mechanism) Name() string { return Name }

// Validator returns the mechanism's validator.
func (m *Mechanism) Validator() Validator { return m.v }

// NewServer starts one authentication exchange.
func (m *Mechanism) NewServer(sasl.Attempt) sasl.Server { return &server{v: m.v} }

// Start starts the validator if it is a sasl.Service. A mechanism of
// [FromSettings] first logs the settings' warnings.
func (m *Mechanism) Start(ctx context.Context, logger *slog.Logger) error {
	if logger != nil {
		for _, w := range m.warnings {
			logger.Warn("OAUTHBEARER: " + w)
		}
	}
	if s, ok := m.v.(sasl.Service); ok {
		return s.Start(ctx, logger)
	}
	return nil
}

// Close closes the validator if it is a sasl.Service.
func (m *Mechanism) Close() error {
	if s, ok := m.v.(sasl.Service); ok {
		return s.Close()
	}
	return nil
}

var _ sasl.Service = (*Mechanism)(nil)

// server is one exchange: the client's first message, then either success
// (an empty reply) or the error challenge, whose answer the connection
// reads before it fails the exchange (sasl.Error.Challenge).
type server struct {
	v        Validator
	finished bool
	token    Token
}

// Step follows OAuthBearerSaslServer.evaluateResponse: a message that does
// not parse fails as a SaslException (the client is told the generic
// message); a token the validator refuses gets the error challenge
// {"status":"..."}, then SASL_AUTHENTICATION_FAILED with that text; an
// authzid other than the token's principal fails with Kafka's message.
// Extensions are accepted, as Kafka's own validators accept them.
func (s *server) Step(ctx context.Context, response []byte) ([]byte, error) {
	if s.finished {
		return nil, &sasl.Error{Mechanism: Name, Reason: "Unexpected OAUTHBEARER message after the exchange ended"}
	}
	s.finished = true
	msg, err := ParseClientFirstMessage(response)
	if err != nil {
		return nil, &sasl.Error{Mechanism: Name, Reason: err.Error()}
	}
	tok, err := s.v.Validate(ctx, msg.Token)
	if err == nil && strings.TrimSpace(tok.Principal) == "" {
		err = &StatusError{Status: StatusInvalidToken, Err: fmt.Errorf("%w: the validator gave no principal", ErrInvalidToken)}
	}
	if err != nil {
		status := challengeJSON(err)
		return nil, &sasl.Error{Mechanism: Name, Reason: status, SendReason: true, Challenge: []byte(status), Err: err}
	}
	if msg.AuthorizationID != "" && msg.AuthorizationID != tok.Principal {
		return nil, &sasl.Error{Mechanism: Name, SendReason: true, Reason: fmt.Sprintf(
			"Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)",
			msg.AuthorizationID, tok.Principal)}
	}
	s.token = tok
	return []byte{}, nil
}

func (s *server) Complete() bool          { return s.token.Principal != "" }
func (s *server) AuthorizationID() string { return s.token.Principal }
func (s *server) Negotiated() sasl.Negotiated {
	return sasl.Negotiated{CredentialExpiry: s.token.Expiry}
}

// challengeJSON is Kafka's error challenge for err:
// {"status":"<status>"[, "scope":"<scope>"][, "openid-configuration":"<url>"]},
// written as OAuthBearerSaslServer writes it (with its spaces, and without
// escaping, which the values' syntax makes unnecessary; characters that
// would need it are dropped).
func challengeJSON(err error) string {
	st := &StatusError{Status: StatusInvalidToken}
	if se := (*StatusError)(nil); errors.As(err, &se) && se.Status != "" {
		st = se
	}
	var b strings.Builder
	b.WriteString(`{"status":"` + jsonSafe(st.Status) + `"`)
	if st.Scope != "" {
		b.WriteString(`, "scope":"` + jsonSafe(st.Scope) + `"`)
	}
	if st.OpenIDConfiguration != "" {
		b.WriteString(`, "openid-configuration":"` + jsonSafe(st.OpenIDConfiguration) + `"`)
	}
	b.WriteString("}")
	return b.String()
}

// jsonSafe drops what would need escaping in a JSON string.
func jsonSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == '"' || r == '\\' || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
