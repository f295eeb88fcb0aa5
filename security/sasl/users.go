package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xdg-go/scram"
)

const (
	scramIterations = 4096 // Kafka's minimum for both SCRAM mechanisms
	scramSaltLen    = 32   // bytes of random salt per user and mechanism
	plainDigestLen  = sha256.Size
)

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
		return nil, fmt.Errorf("sasl: users: %w", err)
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
			return fmt.Errorf("%w: SASL user name must not be empty", ErrInvalidUsers)
		}
		if password == "" {
			return fmt.Errorf("%w: SASL user %q has an empty password", ErrInvalidUsers, name)
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
	case SCRAMSHA256:
		c = e.sha256
	case SCRAMSHA512:
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
		return SCRAMCredential{}, fmt.Errorf("sasl: SCRAM salt: %w", err)
	}
	client, err := h.NewClientUnprepped(user, password, "")
	if err != nil {
		return SCRAMCredential{}, fmt.Errorf("sasl: SCRAM credential of user %q: %w", user, err)
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: scramIterations})
	if err != nil {
		// xdg-go's derivation errors name only parameters, never the password.
		return SCRAMCredential{}, fmt.Errorf("sasl: SCRAM credential of user %q: %w", user, err)
	}
	return SCRAMCredential{
		Salt:       salt,
		Iterations: scramIterations,
		StoredKey:  sc.StoredKey,
		ServerKey:  sc.ServerKey,
	}, nil
}
