package sasl

import (
	"bytes"
	"context"
	"errors"
	"strconv"
)

// NewPlain returns SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer
// implements it, checking passwords with store.
func NewPlain(store CredentialStore) (Mechanism, error) {
	if store == nil {
		return nil, errors.New("sasl: mechanism " + Plain + " needs a credential store")
	}
	return plainMechanism{store: store}, nil
}

type plainMechanism struct {
	store CredentialStore
}

func (plainMechanism) Name() string { return Plain }

func (m plainMechanism) NewServer(Attempt) Server { return &plainServer{store: m.store} }

type plainServer struct {
	store    CredentialStore
	finished bool // succeeded or failed
	identity string
}

// plainMaxTokens is how many NUL-separated tokens Kafka's PlainSaslServer
// looks for: it stops splitting after the fourth, so a message with more
// separators still counts as 4 tokens.
const plainMaxTokens = 4

// Step checks the single PLAIN message, authzid NUL authcid NUL passwd, in
// the order and with the messages of Kafka's PlainSaslServer. Every
// failure there is a SaslAuthenticationException, so the client is told
// each one: a wrong token count, a missing user name or password, a wrong
// password and an authorization id other than the user.
func (s *plainServer) Step(_ context.Context, token []byte) ([]byte, error) {
	if s.finished {
		return nil, plainError("Unexpected SASL/PLAIN message after the exchange completed")
	}
	s.finished = true
	parts := bytes.SplitN(token, []byte{0}, plainMaxTokens+1)
	if len(parts) != 3 {
		return nil, plainError("Invalid SASL/PLAIN response: expected 3 tokens, got " + strconv.Itoa(min(len(parts), plainMaxTokens)))
	}
	authzid, username, password := string(parts[0]), string(parts[1]), string(parts[2])
	if username == "" {
		return nil, plainError("Authentication failed: username not specified")
	}
	if password == "" {
		return nil, plainUserError(username, "Authentication failed: password not specified")
	}
	if !s.store.CheckPlain(username, password) {
		return nil, plainUserError(username, "Authentication failed: Invalid username or password")
	}
	if authzid != "" && authzid != username {
		return nil, plainUserError(username, "Authentication failed: Client requested an authorization id that is different from username")
	}
	s.identity = username
	return []byte{}, nil
}

func (s *plainServer) Complete() bool          { return s.identity != "" }
func (s *plainServer) AuthorizationID() string { return s.identity }
func (s *plainServer) Negotiated() Negotiated  { return Negotiated{} }

func plainError(reason string) error { return plainUserError("", reason) }

// plainUserError is a failure of user's login.
func plainUserError(user, reason string) error {
	return &Error{Mechanism: Plain, Reason: reason, SendReason: true, User: user}
}
