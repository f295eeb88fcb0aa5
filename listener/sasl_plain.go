package listener

import (
	"bytes"
	"strconv"
)

// plainMechanism is SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer
// implements it.
type plainMechanism struct {
	store CredentialStore
}

func (plainMechanism) Name() string { return mechPlain }

func (m plainMechanism) NewSession() SASLSession { return &plainSession{store: m.store} }

type plainSession struct {
	store    CredentialStore
	finished bool // succeeded or failed
	identity string
}

// Step checks the single PLAIN message, authzid NUL authcid NUL passwd, in
// the order and with the messages of Kafka's PlainSaslServer. Malformed
// messages are SaslExceptions there (the client sees the generic message);
// a wrong password and a foreign authorization id are
// SaslAuthenticationExceptions, whose text the client sees.
func (s *plainSession) Step(token []byte) ([]byte, bool, error) {
	if s.finished {
		return nil, false, plainError("Unexpected SASL/PLAIN message after the exchange completed", false)
	}
	s.finished = true
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, plainError("Invalid SASL/PLAIN response: expected 3 tokens, got "+strconv.Itoa(len(parts)), false)
	}
	authzid, username, password := string(parts[0]), string(parts[1]), string(parts[2])
	if username == "" {
		return nil, false, plainError("Authentication failed: username not specified", false)
	}
	if password == "" {
		return nil, false, plainError("Authentication failed: password not specified", false)
	}
	if !s.store.CheckPlain(username, password) {
		return nil, false, plainError("Authentication failed: Invalid username or password", true)
	}
	if authzid != "" && authzid != username {
		return nil, false, plainError("Authentication failed: Client requested an authorization id that is different from username", true)
	}
	s.identity = username
	return []byte{}, true, nil
}

func (s *plainSession) Identity() string { return s.identity }

func plainError(reason string, send bool) error {
	return &SASLError{Mechanism: mechPlain, Reason: reason, SendReason: send}
}
