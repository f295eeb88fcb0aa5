package sasl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// Sentinel errors of the package; test for them with errors.Is.
var (
	// ErrAuthenticationFailed is wrapped by every [*Error]: the client's
	// credentials or messages were refused.
	ErrAuthenticationFailed = errors.New("SASL authentication failed")
	// ErrUnsupportedMechanism is wrapped by the error [Builtin] returns for
	// a mechanism name it does not implement. Its text is Kafka's:
	// "Unsupported SASL mechanism <name>".
	ErrUnsupportedMechanism = errors.New("Unsupported SASL mechanism") // capitalised as Kafka's
	// ErrInvalidUsers is wrapped by the errors of [NewUsers] and
	// [Users.Replace] for an empty user name or password.
	ErrInvalidUsers = errors.New("invalid SASL users")
)

// The names of the built-in mechanisms, as clients send them in
// SaslHandshake. Mechanism names are case-sensitive, as in Kafka.
const (
	Plain       = "PLAIN"
	SCRAMSHA256 = "SCRAM-SHA-256"
	SCRAMSHA512 = "SCRAM-SHA-512"
)

// Builtins returns the names of the mechanisms [Builtin] implements, in a
// new slice.
func Builtins() []string { return []string{Plain, SCRAMSHA256, SCRAMSHA512} }

const genericFailStart = "Authentication failed during "

// Mechanism is one server-side SASL mechanism, such as PLAIN, SCRAM-SHA-256
// or a host's OAUTHBEARER, GSSAPI or AWS_MSK_IAM. It is Java's
// SaslServerFactory for one mechanism. A Mechanism is safe for concurrent
// use: each authentication attempt gets a [Server] of its own.
type Mechanism interface {
	// Name returns the mechanism's name as clients send it in
	// SaslHandshake. It is compared with sasl.enabled.mechanisms and with
	// the client's choice case-sensitively, as Kafka does.
	Name() string
	// NewServer starts one authentication attempt on a connection (a
	// first authentication or a KIP-368 re-authentication).
	NewServer(a Attempt) Server
}

// Service is implemented by a [Mechanism] (or the validator behind one)
// that has work of its own while it serves, such as fetching and
// refreshing OAUTHBEARER's signing keys. Its owner calls Start before the
// first authentication and Close after the last; the socket server does so
// for the mechanisms of its listeners (each listener's
// socketserver.ListenerConfig.Mechanisms), in Server.Start and when the
// server has stopped. Start and Close are counted, as Kafka counts its key resolvers:
// a Service shared by several owners (two listeners, two servers) does its
// work from the first Start to the last Close, and nothing it started
// outlives that Close.
type Service interface {
	// Start prepares the service and starts its background work. ctx
	// bounds the preparation only (a first fetch of keys, say), not the
	// work, which runs until Close. logger is the owner's, for what the
	// service reports while it runs. An error means nothing was started.
	Start(ctx context.Context, logger *slog.Logger) error
	// Close ends what the matching Start began once no other Start is
	// outstanding, and waits for it. Close without an outstanding Start
	// does nothing.
	Close() error
}

// Attempt is one authentication attempt that a [Server] runs: the
// connection it runs on, as far as a mechanism needs to know it, and
// whether it re-authenticates. It is the input of [Mechanism.NewServer],
// made for each attempt; the connection's whole description is
// socketserver's (connregistry.Info).
type Attempt struct {
	// Listener is the name of the listener the client connected to.
	Listener protocolmap.ListenerName
	// ClientAddr is the client's address and port.
	ClientAddr netip.AddrPort
	// TLS is the connection's TLS state on a SASL_SSL listener, else nil.
	TLS *tls.ConnectionState
	// Reauthentication reports a KIP-368 re-authentication of a
	// connection that has authenticated before, with the same mechanism.
	// The connection checks itself that the principal does not change.
	Reauthentication bool
}

// Server is one authentication exchange: Java's SaslServer. The connection
// drives it from one goroutine, one client token at a time, and drops it
// when the exchange ends; if it implements io.Closer, the connection
// closes it then (Java's dispose).
type Server interface {
	// Step evaluates the client's next token (Java's evaluateResponse) and
	// returns the server's challenge, sent to the client whether or not
	// the exchange is then complete: in a SaslAuthenticate response, where
	// nil is sent as empty, or, after SaslHandshake v0, as a raw frame,
	// where nil sends nothing (as in Kafka). ctx ends when the connection
	// closes or the handshake deadline passes; a Step that waits for
	// something (a key server, a directory) must give up then.
	//
	// A failed authentication returns an error: a [*Error] says what the
	// client is told (see [Error]); any other error is reported to the
	// client as Kafka reports a SaslException, with the generic message,
	// and its text only logged. After success or failure no Step follows.
	Step(ctx context.Context, response []byte) (challenge []byte, err error)
	// Complete reports whether the exchange has succeeded.
	Complete() bool
	// AuthorizationID is the authenticated identity once Complete: the
	// name of the connection's principal (User:<AuthorizationID> with
	// Kafka's default principal builder).
	AuthorizationID() string
	// Negotiated returns the properties negotiated once Complete.
	Negotiated() Negotiated
}

// Negotiated holds what a completed exchange negotiated besides the
// identity: Java's SaslServer.getNegotiatedProperty.
type Negotiated struct {
	// CredentialExpiry is when the credential the client authenticated
	// with expires, such as an OAuth token's exp (Kafka's
	// CREDENTIAL.LIFETIME.MS); zero if it does not. When set, the session
	// ends at the earlier of it and connections.max.reauth.ms, even if
	// re-authentication is otherwise off, and the client learns so from
	// SaslAuthenticate's SessionLifetimeMs.
	CredentialExpiry time.Time
}

// Error is a failed authentication. It wraps [ErrAuthenticationFailed].
//
// Kafka tells a client one of two things: for a SaslAuthenticationException
// its own text (for example "Authentication failed: Invalid username or
// password"), for any other SaslException only the generic "Authentication
// failed during authentication due to invalid credentials with SASL
// mechanism <mechanism>", so that nothing about the user store leaks.
// SendReason says which kind of failure this is.
//
// With Challenge set the failure is told in two steps, as Kafka's
// OAUTHBEARER does: the connection sends Challenge as an ordinary
// (successful) reply, reads the client's next message, whatever it is
// (OAUTHBEARER clients answer 0x01; a client that closes instead is closed
// cleanly), and only then fails the exchange with SASL_AUTHENTICATION_FAILED
// and the client message.
type Error struct {
	// Mechanism is the SASL mechanism that failed.
	Mechanism string
	// Reason is the failure in Kafka's words (or in its style), for the
	// broker's log. It never contains a password, proof or other secret.
	Reason string
	// SendReason reports that the client is told Reason itself rather than
	// the generic message.
	SendReason bool
	// Challenge, when not nil, is sent to the client before the failure,
	// such as OAUTHBEARER's {"status":"invalid_token"}.
	Challenge []byte
	// Err, when not nil, is the cause behind Reason, for the broker's log
	// only: why a token was refused, when the client is told no more than
	// {"status":"invalid_token"}. It is never sent to the client and, like
	// Reason, never holds a secret.
	Err error
	// User is the user name the client tried, where the mechanism carries
	// one and the client's message got that far (PLAIN and SCRAM fill it):
	// for an audit trail of failed logins (socketserver's HookAudit). ""
	// when unknown. It is never sent to the client.
	User string
}

// Error returns the failure as the broker logs it: Reason (the client
// message when there is none), then Err. What the client is told is
// [Error.ClientMessage].
func (e *Error) Error() string {
	msg := e.Reason
	if msg == "" {
		msg = e.ClientMessage(false)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// ClientMessage returns the message Kafka sends the client in
// SaslAuthenticate's ErrorMessage: Reason if SendReason, else the generic
// message, which names "re-authentication" instead of "authentication" when
// reauthentication is true (KIP-368).
func (e *Error) ClientMessage(reauthentication bool) string {
	if e.SendReason {
		return e.Reason
	}
	return GenericMessage(e.Mechanism, reauthentication)
}

// GenericMessage is the message Kafka sends a client whose authentication
// failed with a SaslException: it names only the mechanism.
func GenericMessage(mechanism string, reauthentication bool) string {
	phase := "authentication"
	if reauthentication {
		phase = "re-authentication"
	}
	return genericFailStart + phase + " due to invalid credentials with SASL mechanism " + mechanism
}

// Unwrap returns [ErrAuthenticationFailed] and Err, if any, so that
// errors.Is and errors.As see the cause too.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrAuthenticationFailed}
	}
	return []error{ErrAuthenticationFailed, e.Err}
}

// Builtin returns the named built-in mechanism (PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512, case-sensitive as in Kafka) backed by store. Any other
// name gives an error wrapping [ErrUnsupportedMechanism].
func Builtin(name string, store CredentialStore) (Mechanism, error) {
	switch name {
	case Plain:
		return NewPlain(store)
	case SCRAMSHA256, SCRAMSHA512:
		return NewSCRAM(name, store)
	}
	return nil, fmt.Errorf("%w %s", ErrUnsupportedMechanism, name)
}

// SCRAMCredential is a user's stored SCRAM credential for one hash function
// (RFC 5802 section 3): the salt and iteration count the client needs to
// derive its keys, and the two keys the server verifies with. It holds no
// password.
type SCRAMCredential struct {
	// Salt is the raw (not base64) salt.
	Salt []byte
	// Iterations is the PBKDF2 iteration count; servers refuse credentials
	// below Kafka's minimum of 4096.
	Iterations int
	// StoredKey is H(ClientKey).
	StoredKey []byte
	// ServerKey is HMAC(SaltedPassword, "Server Key").
	ServerKey []byte
}

// CredentialStore is the host's user store, consulted by the built-in
// mechanisms. Implementations must be safe for concurrent use.
type CredentialStore interface {
	// CheckPlain reports whether password is user's password. It must
	// compare in constant time.
	CheckPlain(user, password string) bool
	// SCRAM returns user's credential for mechanism ("SCRAM-SHA-256" or
	// "SCRAM-SHA-512"), or false if the user has none.
	SCRAM(mechanism, user string) (SCRAMCredential, bool)
}
