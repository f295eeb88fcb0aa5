package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"
)

// NewSCRAM returns SCRAM-SHA-256 or SCRAM-SHA-512 (name, as in [SCRAMSHA256])
// as Kafka's ScramSaslServer implements it, over the credentials of store.
func NewSCRAM(name string, store CredentialStore) (Mechanism, error) {
	if store == nil {
		return nil, errors.New("sasl: mechanism " + name + " needs a credential store")
	}
	m := &scramMechanism{name: name, hash: sha256.New, size: sha256.Size, store: store}
	switch name {
	case SCRAMSHA256:
	case SCRAMSHA512:
		m.hash, m.size = sha512.New, sha512.Size
	default:
		return nil, fmt.Errorf("%w %s", ErrUnsupportedMechanism, name)
	}
	return m, nil
}

// scramMechanism is SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677) as
// Kafka's ScramSaslServer implements it, without channel binding and
// without delegation tokens.
//
// The conversation is parsed here rather than handed to xdg-go/scram's
// ServerConversation because Kafka's rules differ from that type's in ways
// it cannot be configured for: it accepts a client-final nonce that only
// ends with the server nonce (librdkafka <= 2.6.0 repeats the client nonce;
// Kafka 3.8.1-3.9 accept that), it reads Kafka's extensions after the client
// nonce (tokenauth) and it checks the authorization id against the user.
// The verification itself is the three HMAC/hash operations of RFC 5802
// section 3 over the stored keys; key derivation (PBKDF2) is xdg-go/scram's,
// in [NewUsers].
type scramMechanism struct {
	name  string
	hash  func() hash.Hash
	size  int
	store CredentialStore
}

func (m *scramMechanism) Name() string { return m.name }

func (m *scramMechanism) NewServer(Attempt) Server { return &scramServer{m: m} }

type scramState int8

const (
	scramAwaitClientFirst scramState = iota
	scramAwaitClientFinal
	scramComplete
	scramFailed
)

type scramServer struct {
	m     *scramMechanism
	state scramState

	user            string
	gs2Header       string // as received, e.g. "n,,"
	clientFirstBare string // as received
	serverFirst     string
	nonce           string // client nonce + server nonce
	cred            SCRAMCredential
	identity        string
}

// Step runs the two rounds: client-first → server-first, then client-final
// → server-final (done). Every failure is a SaslException in Kafka, so the
// client gets the generic message, except an authorization id other than
// the user, which Kafka reports to the client as a
// SaslAuthenticationException.
func (s *scramServer) Step(_ context.Context, token []byte) ([]byte, error) {
	var (
		reply []byte
		err   *Error
	)
	switch s.state {
	case scramAwaitClientFirst:
		if reply, err = s.clientFirst(string(token)); err == nil {
			s.state = scramAwaitClientFinal
			return reply, nil
		}
	case scramAwaitClientFinal:
		if reply, err = s.clientFinal(string(token)); err == nil {
			s.state = scramComplete
			s.clear()
			return reply, nil
		}
	case scramComplete:
		return nil, s.fail("Unexpected SCRAM message after the exchange completed")
	default:
		return nil, s.fail("Unexpected SCRAM message after the exchange failed")
	}
	s.state = scramFailed
	s.clear()
	return nil, err
}

func (s *scramServer) Complete() bool          { return s.state == scramComplete }
func (s *scramServer) AuthorizationID() string { return s.identity }
func (s *scramServer) Negotiated() Negotiated  { return Negotiated{} }

func (s *scramServer) clientFirst(msg string) ([]byte, *Error) {
	cf, reason := parseSCRAMClientFirst(msg)
	if reason != "" {
		return nil, s.fail("Invalid SCRAM client first message format: " + reason)
	}
	if cf.tokenAuth { // the name is a token's id, not a user's
		return nil, s.fail("Token Authentication failed: delegation tokens are not supported")
	}
	s.user = cf.user // the user tried, for the failures' Error.User
	cred, ok := s.m.store.SCRAM(s.m.name, cf.user)
	if !ok {
		return nil, s.fail("Authentication failed: Invalid user credentials")
	}
	if cf.authzid != "" && cf.authzid != cf.user {
		return nil, &Error{
			Mechanism:  s.m.name,
			Reason:     "Authentication failed: Client requested an authorization id that is different from username",
			SendReason: true,
			User:       s.user,
		}
	}
	if cred.Iterations < scramIterations {
		return nil, s.fail("Iterations " + strconv.Itoa(cred.Iterations) + " is less than the minimum " +
			strconv.Itoa(scramIterations) + " for " + s.m.name)
	}
	if len(cred.StoredKey) != s.m.size || len(cred.ServerKey) != s.m.size {
		return nil, s.fail("Authentication failed: Credentials could not be obtained")
	}
	s.cred = cred
	s.gs2Header, s.clientFirstBare = cf.gs2Header, cf.bare
	s.nonce = cf.nonce + rand.Text() // 128 random bits, base32: printable, no comma
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) +
		",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *scramServer) clientFinal(msg string) ([]byte, *Error) {
	cf, reason := parseSCRAMClientFinal(msg)
	if reason != "" {
		return nil, s.fail("Invalid SCRAM client final message format: " + reason)
	}
	if !hmac.Equal(cf.channelBinding, []byte(s.gs2Header)) {
		return nil, s.fail("Invalid SCRAM client final message: channel binding does not match the GS2 header")
	}
	// RFC 5802 wants the nonce equal to the server's; Kafka 3.8.1–3.9 accept
	// any nonce that ends with it, for librdkafka ≤ 2.6.0, which sends the
	// client nonce twice. The proof covers the message as received.
	if !strings.HasSuffix(cf.nonce, s.nonce) {
		return nil, s.fail("Invalid client nonce in the final client message.")
	}
	if len(cf.proof) != s.m.size {
		return nil, s.fail("Invalid client credentials")
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + cf.withoutProof)

	// ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); valid iff
	// H(ClientKey) = StoredKey.
	clientKey := s.hmac(s.cred.StoredKey, authMessage)
	subtle.XORBytes(clientKey, clientKey, cf.proof)
	h := s.m.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, s.fail("Invalid client credentials")
	}
	s.identity = s.user
	return []byte("v=" + base64.StdEncoding.EncodeToString(s.hmac(s.cred.ServerKey, authMessage))), nil
}

func (s *scramServer) hmac(key, msg []byte) []byte {
	mac := hmac.New(s.m.hash, key)
	mac.Write(msg)
	return mac.Sum(nil)
}

// clear drops the credential and messages once the exchange is over, as
// Kafka's clearCredentials does.
func (s *scramServer) clear() {
	s.cred = SCRAMCredential{}
	s.gs2Header, s.clientFirstBare, s.serverFirst, s.nonce = "", "", "", ""
}

func (s *scramServer) fail(reason string) *Error {
	return &Error{Mechanism: s.m.name, Reason: reason, User: s.user}
}

// scramClientFirst is a parsed client-first-message:
//
//	gs2-cbind-flag "," [ "a=" saslname ] "," "n=" saslname "," "r=" nonce *("," ext "=" value)
type scramClientFirst struct {
	gs2Header string // gs2-cbind-flag "," [authzid] ","
	bare      string // client-first-message-bare
	authzid   string // decoded
	user      string // decoded
	nonce     string
	tokenAuth bool // Kafka's tokenauth=true extension (KIP-48 delegation tokens)
}

// parseSCRAMClientFirst parses msg, or returns why it is malformed. The
// reasons are fixed strings: no client bytes reach the log.
func parseSCRAMClientFirst(msg string) (cf scramClientFirst, reason string) {
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return cf, "no GS2 header"
	}
	switch {
	case flag == "n":
		// The client does not support channel binding.
	case flag == "y":
		// The client supports channel binding but thinks the server does
		// not; right, as no SCRAM-*-PLUS mechanism is offered (RFC 5802
		// section 6), so this is accepted.
	case strings.HasPrefix(flag, "p="):
		return cf, "channel binding is not supported"
	default:
		return cf, "invalid GS2 channel-binding flag"
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return cf, "no authorization identity field"
	}
	if authz != "" {
		raw, ok := strings.CutPrefix(authz, "a=")
		if !ok {
			return cf, "invalid authorization identity field"
		}
		if cf.authzid, ok = decodeSASLName(raw); !ok {
			return cf, "invalid authorization identity"
		}
	}
	cf.gs2Header = msg[:len(flag)+1+len(authz)+1]
	cf.bare = bare

	attrs := strings.Split(bare, ",")
	if strings.HasPrefix(attrs[0], "m=") {
		return cf, "mandatory SCRAM extensions are not supported"
	}
	raw, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return cf, "no user name"
	}
	if cf.user, ok = decodeSASLName(raw); !ok {
		return cf, "invalid user name"
	}
	if len(attrs) < 2 {
		return cf, "no nonce"
	}
	if cf.nonce, ok = strings.CutPrefix(attrs[1], "r="); !ok || !validSCRAMNonce(cf.nonce) {
		return cf, "invalid nonce"
	}
	for _, a := range attrs[2:] {
		key, value, ok := parseSCRAMExtension(a)
		if !ok {
			return cf, "invalid extension"
		}
		// Kafka ignores extensions other than tokenauth, which it reads
		// with Boolean.parseBoolean.
		if key == "tokenauth" && strings.EqualFold(value, "true") {
			cf.tokenAuth = true
		}
	}
	return cf, ""
}

// scramClientFinal is a parsed client-final-message:
//
//	"c=" base64 "," "r=" nonce *("," ext "=" value) "," "p=" base64
type scramClientFinal struct {
	channelBinding []byte // decoded c=
	nonce          string
	proof          []byte // decoded p=
	withoutProof   string // client-final-message-without-proof, as received
}

func parseSCRAMClientFinal(msg string) (cf scramClientFinal, reason string) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return cf, "no proof"
	}
	var err error
	if cf.proof, err = base64.StdEncoding.Strict().DecodeString(msg[i+len(",p="):]); err != nil {
		return cf, "invalid proof encoding"
	}
	cf.withoutProof = msg[:i]
	attrs := strings.Split(cf.withoutProof, ",")
	raw, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return cf, "no channel binding"
	}
	if cf.channelBinding, err = base64.StdEncoding.Strict().DecodeString(raw); err != nil {
		return cf, "invalid channel binding encoding"
	}
	if len(attrs) < 2 {
		return cf, "no nonce"
	}
	if cf.nonce, ok = strings.CutPrefix(attrs[1], "r="); !ok || !validSCRAMNonce(cf.nonce) {
		return cf, "invalid nonce"
	}
	for _, a := range attrs[2:] {
		if _, _, ok := parseSCRAMExtension(a); !ok {
			return cf, "invalid extension"
		}
	}
	return cf, ""
}

// decodeSASLName decodes an RFC 5802 saslname: non-empty UTF-8 without NUL
// or comma, in which "=2C" stands for "," and "=3D" for "=" and no other "="
// may appear.
func decodeSASLName(s string) (string, bool) {
	if s == "" || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return "", false
	}
	if strings.IndexByte(s, '=') < 0 {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexByte(s, '=')
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		b.WriteString(s[:i])
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		s = s[i+3:]
	}
}

// validSCRAMNonce reports whether s is an RFC 5802 nonce: one or more
// printable ASCII characters other than comma.
func validSCRAMNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

// parseSCRAMExtension parses key=value where key is letters (Kafka allows
// more than RFC 5802's single letter, for tokenauth) and value is non-empty
// UTF-8 without NUL.
func parseSCRAMExtension(a string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(a, "=")
	if !ok || key == "" || value == "" || !utf8.ValidString(value) || strings.IndexByte(value, 0) >= 0 {
		return "", "", false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i] | 0x20; c < 'a' || c > 'z' {
			return "", "", false
		}
	}
	return key, value, true
}
