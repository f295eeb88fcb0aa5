package listener

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xdg-go/scram"
)

// Sentinel errors of the SASL mechanisms; test for them with errors.Is.
var (
	// ErrAuthenticationFailed is wrapped by every error a [SASLSession]
	// returns: the client's credentials or messages were refused.
	ErrAuthenticationFailed = errors.New("SASL authentication failed")
	// ErrUnsupportedMechanism is wrapped by the error [NewSASLMechanism]
	// returns for a mechanism name it does not implement. Its text is
	// Kafka's: "Unsupported SASL mechanism <name>".
	ErrUnsupportedMechanism = errors.New("Unsupported SASL mechanism") // capitalised as Kafka's
)

// The SASL mechanism names this package implements, as clients send them in
// SaslHandshake.
const (
	mechPlain       = "PLAIN"
	mechSCRAMSHA256 = "SCRAM-SHA-256"
	mechSCRAMSHA512 = "SCRAM-SHA-512"
)

const (
	scramIterations  = 4096 // Kafka's minimum for both SCRAM mechanisms
	scramSaltLen     = 32   // bytes of random salt per user and mechanism
	plainDigestLen   = sha256.Size
	genericFailStart = "Authentication failed during "
)

// SASLMechanism is one server-side SASL mechanism. A mechanism is safe for
// concurrent use; each authentication attempt gets its own [SASLSession].
type SASLMechanism interface {
	// Name returns the mechanism name: "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512".
	Name() string
	// NewSession starts one authentication attempt.
	NewSession() SASLSession
}

// SASLSession is one authentication exchange. It is not safe for concurrent
// use; the connection that owns it drives it one token at a time.
type SASLSession interface {
	// Step takes the client's next token and returns the server's reply.
	// done is true once authentication has succeeded; err non-nil means it
	// failed. A failed err is a [*SASLError]: its Error() text is the message
	// to send the client in SaslAuthenticate's ErrorMessage (Kafka's wording)
	// and errors.Is(err, ErrAuthenticationFailed) holds. After success or
	// failure every further Step fails.
	Step(token []byte) (reply []byte, done bool, err error)
	// Identity returns the authenticated user name once done, else "".
	Identity() string
}

// SCRAMCredential is a user's stored SCRAM credential for one hash function
// (RFC 5802 section 3): the salt and iteration count the client needs to
// derive its keys, and the two keys the server verifies with. It holds no
// password.
type SCRAMCredential struct {
	// Salt is the raw (not base64) salt.
	Salt []byte
	// Iterations is the PBKDF2 iteration count; sessions refuse credentials
	// below Kafka's minimum of 4096.
	Iterations int
	// StoredKey is H(ClientKey).
	StoredKey []byte
	// ServerKey is HMAC(SaltedPassword, "Server Key").
	ServerKey []byte
}

// CredentialStore is the host's user store, consulted by the mechanisms of
// [NewSASLMechanism]. Implementations must be safe for concurrent use.
type CredentialStore interface {
	// CheckPlain reports whether password is user's password. It must
	// compare in constant time.
	CheckPlain(user, password string) bool
	// SCRAM returns user's credential for mechanism ("SCRAM-SHA-256" or
	// "SCRAM-SHA-512"), or false if the user has none.
	SCRAM(mechanism, user string) (SCRAMCredential, bool)
}

// SASLError is the error a [SASLSession] returns when authentication fails.
// It wraps [ErrAuthenticationFailed].
//
// Kafka sends a client one of two kinds of messages: for a
// SaslAuthenticationException its own text (for example "Authentication
// failed: Invalid username or password"), for any other SaslException only
// the generic "Authentication failed during authentication due to invalid
// credentials with SASL mechanism <mechanism>", so that nothing about the
// user store leaks. SendReason says which kind this failure is.
type SASLError struct {
	// Mechanism is the SASL mechanism that failed.
	Mechanism string
	// Reason is Kafka's exception text for the failure (or a description in
	// its style), for the broker's log. It never contains a password, proof
	// or any other secret.
	Reason string
	// SendReason reports that Kafka sends Reason itself to the client;
	// otherwise the client gets the generic message.
	SendReason bool
}

// Error returns the message to send the client during a first
// authentication: [SASLError.ClientMessage](false).
func (e *SASLError) Error() string { return e.ClientMessage(false) }

// ClientMessage returns the message Kafka sends the client in
// SaslAuthenticate's ErrorMessage: Reason if SendReason, else the generic
// message, which names "re-authentication" instead of "authentication" when
// reauthentication is true (KIP-368).
func (e *SASLError) ClientMessage(reauthentication bool) string {
	if e.SendReason {
		return e.Reason
	}
	phase := "authentication"
	if reauthentication {
		phase = "re-authentication"
	}
	return genericFailStart + phase + " due to invalid credentials with SASL mechanism " + e.Mechanism
}

// Unwrap returns [ErrAuthenticationFailed].
func (e *SASLError) Unwrap() error { return ErrAuthenticationFailed }

// NewSASLMechanism returns the named mechanism ("PLAIN", "SCRAM-SHA-256" or
// "SCRAM-SHA-512", case-sensitive as in Kafka) backed by store. Any other
// name gives an error wrapping [ErrUnsupportedMechanism].
func NewSASLMechanism(name string, store CredentialStore) (SASLMechanism, error) {
	if store == nil {
		return nil, errors.New("listener: SASL mechanism " + name + " needs a credential store")
	}
	switch name {
	case mechPlain:
		return plainMechanism{store: store}, nil
	case mechSCRAMSHA256, mechSCRAMSHA512:
		return newSCRAMMechanism(name, store), nil
	}
	return nil, fmt.Errorf("%w %s", ErrUnsupportedMechanism, name)
}

// Users is a ready, concurrency-safe [CredentialStore] built from plain
// passwords, like the user_<name>="<password>" options of Kafka's
// PlainLoginModule. SCRAM-SHA-256 and SCRAM-SHA-512 credentials are derived
// once per user with a random salt and 4096 iterations (Kafka's minimum), and
// the passwords themselves are kept only as keyed digests. Build one with
// [NewUsers].
type Users struct {
	key   [32]byte // HMAC key of the password digests, fixed for the Users' life
	mu    sync.Mutex
	table atomic.Pointer[userTable]
}

type userTable map[string]*userEntry

type userEntry struct {
	digest [plainDigestLen]byte
	sha256 SCRAMCredential
	sha512 SCRAMCredential
}

// NewUsers returns a store of the users in passwords (user name → password).
// A user name or password must not be empty. Passwords are used as their
// UTF-8 bytes, without SASLprep, as Kafka does.
func NewUsers(passwords map[string]string) (*Users, error) {
	u := &Users{}
	if _, err := rand.Read(u.key[:]); err != nil {
		return nil, fmt.Errorf("listener: SASL users: %w", err)
	}
	if err := u.Replace(passwords); err != nil {
		return nil, err
	}
	return u, nil
}

// Replace atomically swaps the user list for passwords (for example on a
// SIGHUP reload): afterwards exactly those users authenticate. Users whose
// password is unchanged keep their SCRAM credentials. On error the old list
// stays in force.
func (u *Users) Replace(passwords map[string]string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	old := u.load()
	next := make(userTable, len(passwords))
	for _, name := range slices.Sorted(maps.Keys(passwords)) {
		password := passwords[name]
		if name == "" {
			return fmt.Errorf("%w: SASL user name must not be empty", ErrInvalidValue)
		}
		if password == "" {
			return fmt.Errorf("%w: SASL user %q has an empty password", ErrInvalidValue, name)
		}
		digest := u.digest(password)
		if prev, ok := old[name]; ok && subtle.ConstantTimeCompare(prev.digest[:], digest[:]) == 1 {
			next[name] = prev
			continue
		}
		e := &userEntry{digest: digest}
		var err error
		if e.sha256, err = deriveSCRAM(scram.SHA256, name, password); err != nil {
			return err
		}
		if e.sha512, err = deriveSCRAM(scram.SHA512, name, password); err != nil {
			return err
		}
		next[name] = e
	}
	u.table.Store(&next)
	return nil
}

// Has reports whether user is in the store.
func (u *Users) Has(user string) bool {
	_, ok := u.load()[user]
	return ok
}

// CheckPlain reports whether password is user's password. The comparison
// takes the same time whether or not the user exists.
func (u *Users) CheckPlain(user, password string) bool {
	got := u.digest(password)
	e, ok := u.load()[user]
	want := dummyDigest
	if ok {
		want = e.digest
	}
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok
}

// SCRAM returns a copy of user's credential for mechanism ("SCRAM-SHA-256"
// or "SCRAM-SHA-512").
func (u *Users) SCRAM(mechanism, user string) (SCRAMCredential, bool) {
	e, ok := u.load()[user]
	if !ok {
		return SCRAMCredential{}, false
	}
	var c SCRAMCredential
	switch mechanism {
	case mechSCRAMSHA256:
		c = e.sha256
	case mechSCRAMSHA512:
		c = e.sha512
	default:
		return SCRAMCredential{}, false
	}
	return SCRAMCredential{
		Salt:       slices.Clone(c.Salt),
		Iterations: c.Iterations,
		StoredKey:  slices.Clone(c.StoredKey),
		ServerKey:  slices.Clone(c.ServerKey),
	}, true
}

func (u *Users) load() userTable {
	if t := u.table.Load(); t != nil {
		return *t
	}
	return nil
}

// digest is the keyed digest of a password: fixed length, so comparing two
// leaks nothing about the passwords' lengths.
func (u *Users) digest(password string) (d [plainDigestLen]byte) {
	mac := hmac.New(sha256.New, u.key[:])
	mac.Write([]byte(password))
	mac.Sum(d[:0])
	return d
}

// dummyDigest is compared against for unknown users; no password's digest
// is all zeros in practice.
var dummyDigest [plainDigestLen]byte

// deriveSCRAM derives a SCRAM credential with xdg-go/scram's client-side
// key derivation (PBKDF2, ClientKey, StoredKey, ServerKey of RFC 5802).
func deriveSCRAM(h scram.HashGeneratorFcn, user, password string) (SCRAMCredential, error) {
	salt := make([]byte, scramSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return SCRAMCredential{}, fmt.Errorf("listener: SCRAM salt: %w", err)
	}
	client, err := h.NewClientUnprepped(user, password, "")
	if err != nil {
		return SCRAMCredential{}, fmt.Errorf("listener: SCRAM credential of user %q: %w", user, err)
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	if err != nil {
		// xdg-go's derivation errors name only parameters, never the password.
		return SCRAMCredential{}, fmt.Errorf("listener: SCRAM credential of user %q: %w", user, err)
	}
	return SCRAMCredential{
		Salt:       salt,
		Iterations: scramIterations,
		StoredKey:  sc.StoredKey,
		ServerKey:  sc.ServerKey,
	}, nil
}
