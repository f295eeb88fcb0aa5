package sasl_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/kafkanet/kafkanet/security/sasl"
)

const (
	saslGeneric256 = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
	saslAuthzid    = "Authentication failed: Client requested an authorization id that is different from username"
)

var saslSCRAMMechs = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

// saslTestUsers is built once: deriving SCRAM credentials costs PBKDF2 runs.
var saslTestUsers = sync.OnceValue(func() *sasl.Users {
	u, err := sasl.NewUsers(map[string]string{
		"alice":   "alice-secret",
		"bob":     "bob-secret",
		"a,b=c":   "comma-secret",
		"émile":   "pässwörd",
		"charlie": "has\x00nul",
	})
	if err != nil {
		panic(err)
	}
	return u
})

// session drives a sasl.Server as the connection does, one token at a
// time: done reports that the exchange completed with this step.
type session struct{ sasl.Server }

func newSession(m sasl.Mechanism) session { return session{m.NewServer(sasl.Attempt{})} }

func (s session) Step(token []byte) (reply []byte, done bool, err error) {
	reply, err = s.Server.Step(context.Background(), token)
	return reply, err == nil && s.Complete(), err
}

func (s session) Identity() string { return s.AuthorizationID() }

func saslMech(t testing.TB, name string, store sasl.CredentialStore) sasl.Mechanism {
	t.Helper()
	m, err := sasl.Builtin(name, store)
	require.NoError(t, err)
	require.Equal(t, name, m.Name())
	return m
}

// saslRequireFailure checks err is a *SASLError for mech with the given
// client message and a Reason containing reason.
func saslRequireFailure(t testing.TB, err error, mech, clientMsg, reason string) *sasl.Error {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, sasl.ErrAuthenticationFailed)
	var se *sasl.Error
	require.ErrorAs(t, err, &se)
	assert.Equal(t, mech, se.Mechanism)
	assert.Equal(t, clientMsg, se.ClientMessage(false))
	assert.Contains(t, se.Reason, reason)
	assert.Contains(t, err.Error(), se.Reason, "the log has the reason")
	return se
}

func saslGeneric(mech string) string {
	return "Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech
}

func TestBuiltin(t *testing.T) {
	users := saslTestUsers()
	for _, name := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		m := saslMech(t, name, users)
		assert.NotNil(t, newSession(m))
	}
	for _, name := range []string{"GSSAPI", "OAUTHBEARER", "plain", "SCRAM-SHA-1", "scram-sha-256", ""} {
		_, err := sasl.Builtin(name, users)
		require.ErrorIs(t, err, sasl.ErrUnsupportedMechanism, name)
		assert.Equal(t, "Unsupported SASL mechanism "+name, err.Error())
	}
	_, err := sasl.Builtin("PLAIN", nil)
	require.Error(t, err)
	assert.NotErrorIs(t, err, sasl.ErrUnsupportedMechanism)
}

func TestSASLErrorClientMessage(t *testing.T) {
	// The client is told the generic message; the log (Error) keeps the
	// reason, which is what Reason is for.
	e := &sasl.Error{Mechanism: "SCRAM-SHA-512", Reason: "Invalid client credentials"}
	assert.Equal(t, "Invalid client credentials", e.Error())
	assert.Equal(t, saslGeneric("SCRAM-SHA-512"), e.ClientMessage(false))
	assert.Equal(t, "Authentication failed during re-authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
		e.ClientMessage(true))
	assert.ErrorIs(t, e, sasl.ErrAuthenticationFailed)

	e = &sasl.Error{Mechanism: "PLAIN", Reason: "Authentication failed: Invalid username or password", SendReason: true}
	assert.Equal(t, e.Reason, e.Error())
	assert.Equal(t, e.Reason, e.ClientMessage(true))

	e = &sasl.Error{Mechanism: "PLAIN"}
	assert.Equal(t, saslGeneric("PLAIN"), e.Error(), "without a reason the log has the client's message")
}

// An Error's cause (Err) is for the broker's log and for errors.Is and
// errors.As: OAUTHBEARER tells the client only {"status":"invalid_token"},
// the log needs to say why. It never reaches the client.
func TestSASLErrorCause(t *testing.T) {
	cause := fmt.Errorf("token expired at %s: %w", "2026-01-02T03:04:05Z", errTestExpired)
	status := `{"status":"invalid_token"}`
	e := &sasl.Error{Mechanism: "OAUTHBEARER", Reason: status, SendReason: true, Challenge: []byte(status), Err: cause}
	assert.Equal(t, status+": token expired at 2026-01-02T03:04:05Z: expired", e.Error())
	assert.Equal(t, status, e.ClientMessage(false))
	assert.Equal(t, status, e.ClientMessage(true))
	assert.ErrorIs(t, e, sasl.ErrAuthenticationFailed)
	assert.ErrorIs(t, e, errTestExpired)
	wrapped := fmt.Errorf("socketserver: %w", e)
	var se *sasl.Error
	require.ErrorAs(t, wrapped, &se)
	assert.ErrorIs(t, wrapped, errTestExpired)

	e = &sasl.Error{Mechanism: "SCRAM-SHA-256", Reason: "Invalid client credentials", Err: cause}
	assert.Equal(t, saslGeneric("SCRAM-SHA-256"), e.ClientMessage(false), "the cause is never sent")
}

var errTestExpired = errors.New("expired")

// TestPlainSASL follows Kafka's PlainSaslServer.evaluateResponse: its
// checks, their order and the messages the client is told.
func TestPlainSASL(t *testing.T) {
	const (
		invalid = "Authentication failed: Invalid username or password"
		noUser  = "Authentication failed: username not specified"
		noPass  = "Authentication failed: password not specified"
	)
	tokens := func(n int) string { return "Invalid SASL/PLAIN response: expected 3 tokens, got " + strconv.Itoa(n) }
	tests := []struct {
		name     string
		msg      string
		identity string // success when set
		client   string // message to the client
		reason   string
		user     string // the user name tried, in the failure (sasl.Error.User)
	}{
		{name: "success", msg: "\x00alice\x00alice-secret", identity: "alice"},
		{name: "authzid equals user", msg: "alice\x00alice\x00alice-secret", identity: "alice"},
		{name: "non-ASCII user", msg: "\x00émile\x00pässwörd", identity: "émile"},
		{name: "escapes are literal in PLAIN", msg: "\x00a,b=c\x00comma-secret", identity: "a,b=c"},
		// Kafka's PlainSaslServer throws SaslAuthenticationException for
		// every failure, so the client is told each message, malformed
		// messages included; extractTokens stops counting at 4 tokens.
		{name: "empty message", msg: "", client: tokens(1), reason: tokens(1)},
		{name: "two tokens", msg: "alice\x00alice-secret", client: tokens(2), reason: tokens(2)},
		{name: "four tokens", msg: "\x00charlie\x00has\x00nul", client: tokens(4), reason: tokens(4)},
		{name: "six tokens count as four", msg: "\x00a\x00b\x00c\x00d\x00e", client: tokens(4), reason: tokens(4)},
		{name: "empty username", msg: "\x00\x00alice-secret", client: noUser, reason: noUser},
		{name: "empty username and password", msg: "\x00\x00", client: noUser, reason: noUser},
		{name: "empty password", msg: "\x00alice\x00", client: noPass, reason: noPass, user: "alice"},
		{name: "wrong password", msg: "\x00alice\x00bob-secret", client: invalid, reason: invalid, user: "alice"},
		{name: "password prefix", msg: "\x00alice\x00alice-secre", client: invalid, reason: invalid, user: "alice"},
		{name: "unknown user", msg: "\x00mallory\x00alice-secret", client: invalid, reason: invalid, user: "mallory"},
		{name: "user is case-sensitive", msg: "\x00Alice\x00alice-secret", client: invalid, reason: invalid, user: "Alice"},
		{name: "authzid differs", msg: "bob\x00alice\x00alice-secret", client: saslAuthzid, reason: saslAuthzid, user: "alice"},
		// Kafka checks the password before the authorization id.
		{name: "authzid differs and wrong password", msg: "bob\x00alice\x00nope", client: invalid, reason: invalid, user: "alice"},
	}
	m := saslMech(t, "PLAIN", saslTestUsers())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(m)
			reply, done, err := s.Step([]byte(tt.msg))
			if tt.identity != "" {
				require.NoError(t, err)
				assert.True(t, done)
				assert.Empty(t, reply)
				assert.Equal(t, tt.identity, s.Identity())
			} else {
				se := saslRequireFailure(t, err, "PLAIN", tt.client, tt.reason)
				assert.Equal(t, tt.reason, se.Reason)
				assert.Equal(t, tt.user, se.User, "the user name tried")
				assert.False(t, done)
				assert.Nil(t, reply)
				assert.Empty(t, s.Identity())
				for _, secret := range []string{"alice-secret", "bob-secret", "nope"} {
					assert.NotContains(t, err.Error(), secret)
					assert.NotContains(t, se.Reason, secret)
				}
			}
			// The exchange is over either way.
			_, done, err = s.Step([]byte(tt.msg))
			assert.False(t, done)
			assert.ErrorIs(t, err, sasl.ErrAuthenticationFailed)
		})
	}
}

// saslXdgConversation runs a SCRAM exchange between xdg-go/scram's client
// and a session. It returns the error of the server step that failed, if
// any, and checks that on success the client accepted the server's
// signature.
func saslXdgConversation(t *testing.T, s session, conv *scram.ClientConversation) error {
	t.Helper()
	c1, err := conv.Step("")
	require.NoError(t, err)
	s1, done, err := s.Step([]byte(c1))
	if err != nil {
		assert.Nil(t, s1)
		assert.False(t, done)
		return err
	}
	require.False(t, done)
	c2, err := conv.Step(string(s1))
	require.NoError(t, err)
	s2, done, err := s.Step([]byte(c2))
	if err != nil {
		assert.Nil(t, s2)
		assert.False(t, done)
		return err
	}
	require.True(t, done)
	_, err = conv.Step(string(s2))
	require.NoError(t, err, "client rejected the server signature")
	require.True(t, conv.Valid())
	return nil
}

func saslXdgHash(mech string) scram.HashGeneratorFcn {
	if mech == "SCRAM-SHA-512" {
		return scram.SHA512
	}
	return scram.SHA256
}

func TestSCRAMXdgClient(t *testing.T) {
	tests := []struct {
		name        string
		user, pass  string
		authzid     string
		advertiseCB bool   // gs2 flag "y"
		fail        string // failing Reason fragment; "" for success
		sendReason  bool
	}{
		{name: "success", user: "alice", pass: "alice-secret"},
		{name: "authzid equals user", user: "alice", pass: "alice-secret", authzid: "alice"},
		{name: "escaped user name", user: "a,b=c", pass: "comma-secret", authzid: "a,b=c"},
		{name: "non-ASCII user", user: "émile", pass: "pässwörd"},
		{name: "client supports channel binding (y)", user: "bob", pass: "bob-secret", advertiseCB: true},
		{name: "wrong password", user: "alice", pass: "bob-secret", fail: "Invalid client credentials"},
		{name: "unknown user", user: "mallory", pass: "alice-secret", fail: "Invalid user credentials"},
		{name: "user is case-sensitive", user: "Alice", pass: "alice-secret", fail: "Invalid user credentials"},
		{name: "authzid mismatch", user: "alice", pass: "alice-secret", authzid: "bob", fail: saslAuthzid, sendReason: true},
	}
	for _, mech := range saslSCRAMMechs {
		m := saslMech(t, mech, saslTestUsers())
		for _, tt := range tests {
			t.Run(mech+"/"+tt.name, func(t *testing.T) {
				client, err := saslXdgHash(mech).NewClientUnprepped(tt.user, tt.pass, tt.authzid)
				require.NoError(t, err)
				conv := client.NewConversation()
				if tt.advertiseCB {
					conv = client.NewConversationAdvertisingChannelBinding()
				}
				s := newSession(m)
				err = saslXdgConversation(t, s, conv)
				if tt.fail == "" {
					require.NoError(t, err)
					assert.Equal(t, tt.user, s.Identity())
					return
				}
				want := saslGeneric(mech)
				if tt.sendReason {
					want = tt.fail
				}
				se := saslRequireFailure(t, err, mech, want, tt.fail)
				assert.Equal(t, tt.sendReason, se.SendReason)
				assert.NotContains(t, se.Reason, tt.pass)
				assert.Empty(t, s.Identity())
				_, done, err := s.Step([]byte("c=biws,r=x,p=AAAA"))
				assert.False(t, done)
				assert.ErrorIs(t, err, sasl.ErrAuthenticationFailed)
			})
		}
	}
}

func TestSCRAMChannelBindingRequiredRejected(t *testing.T) {
	client, err := scram.SHA256.NewClientUnprepped("alice", "alice-secret", "")
	require.NoError(t, err)
	conv := client.NewConversationWithChannelBinding(scram.NewTLSUniqueBinding([]byte("finished")))
	err = saslXdgConversation(t, newSession(saslMech(t, "SCRAM-SHA-256", saslTestUsers())), conv)
	saslRequireFailure(t, err, "SCRAM-SHA-256", saslGeneric256, "channel binding is not supported")
}

// saslSCRAMClient is a hand-written RFC 5802 client for messages that no
// real client library sends. It uses crypto/pbkdf2 (test code only).
type saslSCRAMClient struct {
	hash  func() hash.Hash
	user  string
	pass  string
	gs2   string // GS2 header sent
	nonce string
	bare  string // client-first-message-bare sent
}

func newSASLSCRAMClient(mech, user, pass string) *saslSCRAMClient {
	h := sha256.New
	if mech == "SCRAM-SHA-512" {
		h = sha512.New
	}
	return &saslSCRAMClient{hash: h, user: user, pass: pass, gs2: "n,,", nonce: "fyko+d2lbbFgONRv9qkxdawL"}
}

// first returns the client-first message with extra appended to the bare
// part (extensions).
func (c *saslSCRAMClient) first(extra string) []byte {
	c.bare = "n=" + strings.NewReplacer("=", "=3D", ",", "=2C").Replace(c.user) + ",r=" + c.nonce + extra
	return []byte(c.gs2 + c.bare)
}

type saslFinalOpts struct {
	cbind    string                             // GS2 header to encode in c=; the one sent if ""
	nonce    func(client, server string) string // r= from the client and server nonces; the server's if nil
	extra    string                             // attributes between r= and p=
	badProof bool                               // flip a bit of the proof
}

// final returns a client-final message with a correct proof over exactly
// the message built, and the server signature to expect.
func (c *saslSCRAMClient) final(t testing.TB, serverFirst []byte, o saslFinalOpts) (msg []byte, serverSig string) {
	t.Helper()
	attrs := strings.Split(string(serverFirst), ",")
	require.GreaterOrEqual(t, len(attrs), 3)
	serverNonce, ok := strings.CutPrefix(attrs[0], "r=")
	require.True(t, ok)
	require.True(t, strings.HasPrefix(serverNonce, c.nonce), "server nonce must extend the client nonce")
	require.Greater(t, len(serverNonce), len(c.nonce))
	b64salt, ok := strings.CutPrefix(attrs[1], "s=")
	require.True(t, ok)
	salt, err := base64.StdEncoding.DecodeString(b64salt)
	require.NoError(t, err)
	iterStr, ok := strings.CutPrefix(attrs[2], "i=")
	require.True(t, ok)
	iters, err := strconv.Atoi(iterStr)
	require.NoError(t, err)
	assert.Equal(t, 4096, iters)

	mac := func(key []byte, s string) []byte {
		m := hmac.New(c.hash, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	salted, err := pbkdf2.Key(c.hash, c.pass, salt, iters, c.hash().Size())
	require.NoError(t, err)
	clientKey := mac(salted, "Client Key")
	h := c.hash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)

	cbind := c.gs2
	if o.cbind != "" {
		cbind = o.cbind
	}
	nonce := serverNonce
	if o.nonce != nil {
		nonce = o.nonce(c.nonce, serverNonce)
	}
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(cbind)) + ",r=" + nonce + o.extra
	authMessage := c.bare + "," + string(serverFirst) + "," + withoutProof
	proof := mac(storedKey, authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	if o.badProof {
		proof[0] ^= 1
	}
	serverSig = "v=" + base64.StdEncoding.EncodeToString(mac(mac(salted, "Server Key"), authMessage))
	return []byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)), serverSig
}

// TestSCRAMLibrdkafkaDuplicatedNonce: librdkafka ≤ 2.6.0 (kcat on Debian
// links 2.0.2) sends r=<client nonce><server nonce>, the server nonce
// already starting with the client nonce, and computes its proof over that
// message. Kafka 3.8.1–3.9 accept it; so must we.
func TestSCRAMLibrdkafkaDuplicatedNonce(t *testing.T) {
	dup := func(client, server string) string { return client + server }
	for _, mech := range saslSCRAMMechs {
		m := saslMech(t, mech, saslTestUsers())
		t.Run(mech+"/accepted", func(t *testing.T) {
			c := newSASLSCRAMClient(mech, "alice", "alice-secret")
			s := newSession(m)
			s1, done, err := s.Step(c.first(""))
			require.NoError(t, err)
			require.False(t, done)
			c2, wantSig := c.final(t, s1, saslFinalOpts{nonce: dup})
			require.True(t, bytes.HasPrefix(c2, []byte("c=biws,r="+c.nonce+c.nonce)), "%s", c2)
			s2, done, err := s.Step(c2)
			require.NoError(t, err)
			assert.True(t, done)
			assert.Equal(t, wantSig, string(s2), "server signature over the message as received")
			assert.Equal(t, "alice", s.Identity())
		})
		t.Run(mech+"/wrong proof", func(t *testing.T) {
			c := newSASLSCRAMClient(mech, "alice", "alice-secret")
			s := newSession(m)
			s1, _, err := s.Step(c.first(""))
			require.NoError(t, err)
			c2, _ := c.final(t, s1, saslFinalOpts{nonce: dup, badProof: true})
			_, done, err := s.Step(c2)
			saslRequireFailure(t, err, mech, saslGeneric(mech), "Invalid client credentials")
			assert.False(t, done)
			assert.Empty(t, s.Identity())
		})
		t.Run(mech+"/wrong password", func(t *testing.T) {
			c := newSASLSCRAMClient(mech, "alice", "bob-secret")
			s := newSession(m)
			s1, _, err := s.Step(c.first(""))
			require.NoError(t, err)
			c2, _ := c.final(t, s1, saslFinalOpts{nonce: dup})
			_, done, err := s.Step(c2)
			saslRequireFailure(t, err, mech, saslGeneric(mech), "Invalid client credentials")
			assert.False(t, done)
		})
	}
}

func TestSCRAMClientFinalRejected(t *testing.T) {
	tests := []struct {
		name   string
		opts   saslFinalOpts
		mangle func([]byte) []byte
		reason string
	}{
		{name: "tampered proof", opts: saslFinalOpts{badProof: true}, reason: "Invalid client credentials"},
		{name: "channel binding of another GS2 header", opts: saslFinalOpts{cbind: "y,,"}, reason: "channel binding does not match"},
		{name: "channel binding with authzid", opts: saslFinalOpts{cbind: "n,a=alice,"}, reason: "channel binding does not match"},
		{
			name:   "nonce not ending with the server nonce",
			opts:   saslFinalOpts{nonce: func(_, server string) string { return server + "x" }},
			reason: "Invalid client nonce in the final client message.",
		},
		{
			name:   "server nonce truncated",
			opts:   saslFinalOpts{nonce: func(_, server string) string { return server[:len(server)-1] }},
			reason: "Invalid client nonce in the final client message.",
		},
		{
			name:   "client nonce only",
			opts:   saslFinalOpts{nonce: func(client, _ string) string { return client }},
			reason: "Invalid client nonce in the final client message.",
		},
		{name: "no proof", mangle: func(b []byte) []byte { return b[:bytes.LastIndex(b, []byte(",p="))] }, reason: "no proof"},
		{name: "short proof", mangle: func(b []byte) []byte { return append(b[:bytes.LastIndex(b, []byte(",p="))], ",p=AAAA"...) }, reason: "Invalid client credentials"},
		{name: "proof not base64", mangle: func(b []byte) []byte { return append(b, '!') }, reason: "invalid proof encoding"},
		{name: "proof not last", opts: saslFinalOpts{extra: ",x=1"}, mangle: func(b []byte) []byte { return append(b, ",y=2"...) }, reason: "invalid proof encoding"},
		{name: "no channel binding", mangle: func(b []byte) []byte { return b[len("c=biws,"):] }, reason: "no channel binding"},
		{name: "empty", mangle: func([]byte) []byte { return nil }, reason: "no proof"},
	}
	for _, mech := range saslSCRAMMechs {
		m := saslMech(t, mech, saslTestUsers())
		for _, tt := range tests {
			t.Run(mech+"/"+tt.name, func(t *testing.T) {
				c := newSASLSCRAMClient(mech, "alice", "alice-secret")
				s := newSession(m)
				s1, _, err := s.Step(c.first(""))
				require.NoError(t, err)
				c2, _ := c.final(t, s1, tt.opts)
				if tt.mangle != nil {
					c2 = tt.mangle(c2)
				}
				reply, done, err := s.Step(c2)
				se := saslRequireFailure(t, err, mech, saslGeneric(mech), tt.reason)
				assert.Equal(t, "alice", se.User, "the user name tried")
				assert.False(t, done)
				assert.Nil(t, reply)
				assert.Empty(t, s.Identity())
			})
		}
	}
}

func TestSCRAMClientFinalExtensionsAccepted(t *testing.T) {
	c := newSASLSCRAMClient("SCRAM-SHA-256", "alice", "alice-secret")
	s := newSession(saslMech(t, "SCRAM-SHA-256", saslTestUsers()))
	s1, _, err := s.Step(c.first(""))
	require.NoError(t, err)
	c2, sig := c.final(t, s1, saslFinalOpts{extra: ",x=1"})
	s2, done, err := s.Step(c2)
	require.NoError(t, err)
	assert.True(t, done)
	assert.Equal(t, sig, string(s2))
}

func TestSCRAMClientFirst(t *testing.T) {
	tests := []struct {
		name   string
		msg    string
		reason string // "" for accepted
	}{
		{name: "plain", msg: "n,,n=alice,r=abc"},
		{name: "authzid", msg: "n,a=alice,n=alice,r=abc"},
		{name: "escaped authzid", msg: "n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc"},
		{name: "flag y", msg: "y,,n=alice,r=abc"},
		{name: "unknown extension ignored", msg: "n,,n=alice,r=abc,foo=bar"},
		{name: "tokenauth=false", msg: "n,,n=alice,r=abc,tokenauth=false"},
		{name: "tokenauth=true", msg: "n,,n=alice,r=abc,tokenauth=true", reason: "Token Authentication failed: delegation tokens are not supported"},
		{name: "tokenauth=TRUE", msg: "n,,n=alice,r=abc,tokenauth=TRUE", reason: "Token Authentication failed"},
		{name: "tokenauth after another", msg: "n,,n=alice,r=abc,x=1,tokenauth=true", reason: "Token Authentication failed"},
		{name: "channel binding required", msg: "p=tls-unique,,n=alice,r=abc", reason: "channel binding is not supported"},
		{name: "bad flag", msg: "x,,n=alice,r=abc", reason: "invalid GS2 channel-binding flag"},
		{name: "no GS2 header", msg: "n=alice,r=abc", reason: "invalid GS2 channel-binding flag"},
		{name: "no comma", msg: "n", reason: "no GS2 header"},
		{name: "no authzid field", msg: "n,n=alice", reason: "no authorization identity field"},
		{name: "authzid field missing", msg: "n,n=alice,r=abc", reason: "invalid authorization identity field"},
		{name: "only header", msg: "n,", reason: "no authorization identity field"},
		{name: "empty authzid value", msg: "n,a=,n=alice,r=abc", reason: "invalid authorization identity"},
		{name: "bad authzid escape", msg: "n,a=al=ce,n=alice,r=abc", reason: "invalid authorization identity"},
		{name: "mandatory extension", msg: "n,,m=ext,n=alice,r=abc", reason: "mandatory SCRAM extensions are not supported"},
		{name: "no user", msg: "n,,r=abc", reason: "no user name"},
		{name: "empty user", msg: "n,,n=,r=abc", reason: "invalid user name"},
		{name: "bad user escape", msg: "n,,n=al=4ice,r=abc", reason: "invalid user name"},
		{name: "user not UTF-8", msg: "n,,n=\xff,r=abc", reason: "invalid user name"},
		{name: "no nonce", msg: "n,,n=alice", reason: "no nonce"},
		{name: "empty nonce", msg: "n,,n=alice,r=", reason: "invalid nonce"},
		{name: "nonce with space", msg: "n,,n=alice,r=a c", reason: "invalid nonce"},
		{name: "nonce not ASCII", msg: "n,,n=alice,r=ñ", reason: "invalid nonce"},
		{name: "bad extension", msg: "n,,n=alice,r=abc,junk", reason: "invalid extension"},
		{name: "empty extension value", msg: "n,,n=alice,r=abc,x=", reason: "invalid extension"},
		{name: "extension key not letters", msg: "n,,n=alice,r=abc,x1=y", reason: "invalid extension"},
		{name: "trailing comma", msg: "n,,n=alice,r=abc,", reason: "invalid extension"},
		{name: "empty", msg: "", reason: "no GS2 header"},
	}
	for _, mech := range saslSCRAMMechs {
		m := saslMech(t, mech, saslTestUsers())
		for _, tt := range tests {
			t.Run(mech+"/"+tt.name, func(t *testing.T) {
				s := newSession(m)
				reply, done, err := s.Step([]byte(tt.msg))
				assert.False(t, done)
				if tt.reason == "" {
					require.NoError(t, err)
					attrs := strings.Split(string(reply), ",")
					require.Len(t, attrs, 3)
					assert.True(t, strings.HasPrefix(attrs[0], "r=abc"))
					assert.Greater(t, len(attrs[0]), len("r=abc")+16)
					assert.True(t, strings.HasPrefix(attrs[1], "s="))
					assert.Equal(t, "i=4096", attrs[2])
					return
				}
				se := saslRequireFailure(t, err, mech, saslGeneric(mech), tt.reason)
				assert.Empty(t, se.User, "no user name read from a message refused before it, or from a token's id")
				assert.Nil(t, reply)
			})
		}
	}
}

// A SCRAM failure names the user tried (sasl.Error.User), for an audit
// trail: an unknown user's name too.
func TestSCRAMFailureNamesUser(t *testing.T) {
	for _, mech := range saslSCRAMMechs {
		s := newSession(saslMech(t, mech, saslTestUsers()))
		_, _, err := s.Step([]byte("n,,n=mallory,r=abc"))
		se := saslRequireFailure(t, err, mech, saslGeneric(mech), "Invalid user credentials")
		assert.Equal(t, "mallory", se.User, mech)
	}
}

// An extension the client sends is part of client-first-message-bare and so
// of the AuthMessage; Kafka ignores it otherwise.
func TestSCRAMUnknownExtensionIgnored(t *testing.T) {
	for _, mech := range saslSCRAMMechs {
		c := newSASLSCRAMClient(mech, "a,b=c", "comma-secret")
		s := newSession(saslMech(t, mech, saslTestUsers()))
		s1, _, err := s.Step(c.first(",foo=bar"))
		require.NoError(t, err)
		c2, sig := c.final(t, s1, saslFinalOpts{})
		s2, done, err := s.Step(c2)
		require.NoError(t, err)
		assert.True(t, done)
		assert.Equal(t, sig, string(s2))
		assert.Equal(t, "a,b=c", s.Identity())
	}
}

func TestSCRAMStepAfterCompletion(t *testing.T) {
	client, err := scram.SHA512.NewClientUnprepped("alice", "alice-secret", "")
	require.NoError(t, err)
	s := newSession(saslMech(t, "SCRAM-SHA-512", saslTestUsers()))
	require.NoError(t, saslXdgConversation(t, s, client.NewConversation()))
	_, done, err := s.Step([]byte("n,,n=alice,r=abc"))
	assert.False(t, done)
	saslRequireFailure(t, err, "SCRAM-SHA-512", saslGeneric("SCRAM-SHA-512"), "after the exchange completed")
	assert.Equal(t, "alice", s.Identity())
}

// saslStaticStore is a CredentialStore with one SCRAM credential.
type saslStaticStore struct{ cred sasl.SCRAMCredential }

func (saslStaticStore) CheckPlain(string, string) bool { return false }
func (s saslStaticStore) SCRAM(mech, user string) (sasl.SCRAMCredential, bool) {
	return s.cred, mech == "SCRAM-SHA-256" && user == "alice"
}

func TestSCRAMStoredCredentialChecks(t *testing.T) {
	good, ok := saslTestUsers().SCRAM("SCRAM-SHA-256", "alice")
	require.True(t, ok)
	few := good
	few.Iterations = 4095
	short := good
	short.StoredKey = good.StoredKey[:16]
	tests := []struct {
		name   string
		cred   sasl.SCRAMCredential
		reason string
	}{
		{name: "too few iterations", cred: few, reason: "Iterations 4095 is less than the minimum 4096 for SCRAM-SHA-256"},
		{name: "stored key of another hash", cred: short, reason: "Credentials could not be obtained"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := saslMech(t, "SCRAM-SHA-256", saslStaticStore{tt.cred})
			_, _, err := newSession(m).Step([]byte("n,,n=alice,r=abc"))
			saslRequireFailure(t, err, "SCRAM-SHA-256", saslGeneric256, tt.reason)
		})
	}
	// The same store with the good credential works.
	client, err := scram.SHA256.NewClientUnprepped("alice", "alice-secret", "")
	require.NoError(t, err)
	m := saslMech(t, "SCRAM-SHA-256", saslStaticStore{good})
	require.NoError(t, saslXdgConversation(t, newSession(m), client.NewConversation()))
}

func TestSCRAMServerNoncesDiffer(t *testing.T) {
	m := saslMech(t, "SCRAM-SHA-256", saslTestUsers())
	seen := map[string]bool{}
	for range 50 {
		s1, _, err := newSession(m).Step([]byte("n,,n=alice,r=abc"))
		require.NoError(t, err)
		nonce := strings.Split(string(s1), ",")[0]
		assert.False(t, seen[nonce])
		seen[nonce] = true
	}
}

func TestUsers(t *testing.T) {
	users := saslTestUsers()
	assert.True(t, users.Has("alice"))
	assert.True(t, users.Has("a,b=c"))
	assert.False(t, users.Has("mallory"))
	assert.False(t, users.Has(""))

	assert.True(t, users.CheckPlain("alice", "alice-secret"))
	assert.True(t, users.CheckPlain("charlie", "has\x00nul"))
	assert.False(t, users.CheckPlain("alice", "bob-secret"))
	assert.False(t, users.CheckPlain("alice", ""))
	assert.False(t, users.CheckPlain("alice", "alice-secret "))
	assert.False(t, users.CheckPlain("mallory", "alice-secret"))
	assert.False(t, users.CheckPlain("", ""))

	salts := map[string]bool{}
	for _, mech := range saslSCRAMMechs {
		size := sha256.Size
		if mech == "SCRAM-SHA-512" {
			size = sha512.Size
		}
		for _, user := range []string{"alice", "bob"} {
			c, ok := users.SCRAM(mech, user)
			require.True(t, ok)
			assert.Equal(t, 4096, c.Iterations)
			assert.GreaterOrEqual(t, len(c.Salt), 16)
			assert.Len(t, c.StoredKey, size)
			assert.Len(t, c.ServerKey, size)
			assert.False(t, salts[string(c.Salt)], "salts are random per user and mechanism")
			salts[string(c.Salt)] = true

			// The credential is what xdg-go derives from the password.
			client, err := saslXdgHash(mech).NewClientUnprepped(user, user+"-secret", "")
			require.NoError(t, err)
			want, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations})
			require.NoError(t, err)
			assert.Equal(t, want.StoredKey, c.StoredKey)
			assert.Equal(t, want.ServerKey, c.ServerKey)

			// Callers get a copy.
			c.StoredKey[0] ^= 0xff
			again, _ := users.SCRAM(mech, user)
			assert.NotEqual(t, c.StoredKey, again.StoredKey)
		}
	}
	_, ok := users.SCRAM("SCRAM-SHA-1", "alice")
	assert.False(t, ok)
	_, ok = users.SCRAM("SCRAM-SHA-256", "mallory")
	assert.False(t, ok)
}

func TestNewUsersInvalid(t *testing.T) {
	for name, passwords := range map[string]map[string]string{
		"empty user name": {"": "x"},
		"empty password":  {"alice": ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sasl.NewUsers(passwords)
			require.ErrorIs(t, err, sasl.ErrInvalidUsers)
		})
	}
	u, err := sasl.NewUsers(nil)
	require.NoError(t, err)
	assert.False(t, u.Has("alice"))
	assert.False(t, u.CheckPlain("alice", "x"))
}

func TestUsersReplace(t *testing.T) {
	u, err := sasl.NewUsers(map[string]string{"alice": "a1", "bob": "b1", "carol": "c1"})
	require.NoError(t, err)
	aliceBefore, _ := u.SCRAM("SCRAM-SHA-256", "alice")
	bobBefore, _ := u.SCRAM("SCRAM-SHA-256", "bob")
	plain := saslMech(t, "PLAIN", u)
	scram256 := saslMech(t, "SCRAM-SHA-256", u)

	require.NoError(t, u.Replace(map[string]string{"alice": "a1", "bob": "b2", "dave": "d1"}))

	// carol is gone for every mechanism.
	assert.False(t, u.Has("carol"))
	assert.False(t, u.CheckPlain("carol", "c1"))
	_, ok := u.SCRAM("SCRAM-SHA-256", "carol")
	assert.False(t, ok)
	_, _, err = newSession(plain).Step([]byte("\x00carol\x00c1"))
	assert.ErrorIs(t, err, sasl.ErrAuthenticationFailed)
	_, _, err = newSession(scram256).Step([]byte("n,,n=carol,r=abc"))
	assert.ErrorIs(t, err, sasl.ErrAuthenticationFailed)

	// alice is unchanged and keeps her credential; bob's password changed.
	aliceAfter, _ := u.SCRAM("SCRAM-SHA-256", "alice")
	assert.Equal(t, aliceBefore, aliceAfter)
	bobAfter, _ := u.SCRAM("SCRAM-SHA-256", "bob")
	assert.NotEqual(t, bobBefore.Salt, bobAfter.Salt)
	assert.False(t, u.CheckPlain("bob", "b1"))
	assert.True(t, u.CheckPlain("bob", "b2"))
	assert.True(t, u.CheckPlain("dave", "d1"))
	for pass, ok := range map[string]bool{"b1": false, "b2": true} {
		client, err := scram.SHA256.NewClientUnprepped("bob", pass, "")
		require.NoError(t, err)
		err = saslXdgConversation(t, newSession(scram256), client.NewConversation())
		assert.Equal(t, ok, err == nil, pass)
	}

	// A bad list leaves the old one in force.
	require.ErrorIs(t, u.Replace(map[string]string{"erin": "e1", "": "x"}), sasl.ErrInvalidUsers)
	assert.True(t, u.Has("dave"))
	assert.False(t, u.Has("erin"))
}

// TestUsersReplaceRace runs under -race: readers never see a torn list.
func TestUsersReplaceRace(t *testing.T) {
	lists := []map[string]string{
		{"alice": "a1", "bob": "b1"},
		{"alice": "a1", "carol": "c1"},
	}
	u, err := sasl.NewUsers(lists[0])
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				// alice is in every list.
				if !u.CheckPlain("alice", "a1") || !u.Has("alice") {
					t.Error("alice missing during Replace")
					return
				}
				if _, ok := u.SCRAM("SCRAM-SHA-512", "alice"); !ok {
					t.Error("alice's SCRAM credential missing during Replace")
					return
				}
				u.CheckPlain("bob", "b1")
				u.CheckPlain("carol", "c1")
				u.SCRAM("SCRAM-SHA-256", "carol")
			}
		})
	}
	for i := range 6 {
		require.NoError(t, u.Replace(lists[(i+1)%2]))
	}
	cancel()
	wg.Wait()
	assert.True(t, u.Has("alice"))
	assert.True(t, u.Has("bob"))
	assert.False(t, u.CheckPlain("carol", "c1"))
}

// saslFranzConversation drives a franz-go client mechanism against a
// session, in process, as kgo does over SaslAuthenticate.
func saslFranzConversation(t *testing.T, client ksasl.Mechanism, s session) error {
	t.Helper()
	cs, token, err := client.Authenticate(t.Context(), "broker:9092")
	require.NoError(t, err)
	for range 4 {
		reply, serverDone, err := s.Step(token)
		if err != nil {
			return err
		}
		clientDone, next, err := cs.Challenge(reply)
		require.NoError(t, err, "franz-go rejected the server's reply")
		if serverDone {
			require.True(t, clientDone, "server done before client")
			return nil
		}
		require.False(t, clientDone)
		token = next
	}
	t.Fatal("exchange did not finish")
	return nil
}

func TestSASLFranzGoInterop(t *testing.T) {
	tests := []struct {
		name     string
		mech     string
		client   ksasl.Mechanism
		identity string
		reason   string // failing Reason fragment
		message  string // client message on failure
	}{
		{name: "plain", mech: "PLAIN", client: kplain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), identity: "alice"},
		{name: "plain zid", mech: "PLAIN", client: kplain.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}.AsMechanism(), identity: "alice"},
		{
			name: "plain wrong password", mech: "PLAIN", client: kplain.Auth{User: "alice", Pass: "nope"}.AsMechanism(),
			reason: "Invalid username or password", message: "Authentication failed: Invalid username or password",
		},
		{
			name: "plain other zid", mech: "PLAIN", client: kplain.Auth{Zid: "bob", User: "alice", Pass: "alice-secret"}.AsMechanism(),
			reason: saslAuthzid, message: saslAuthzid,
		},
		{name: "scram-sha-256", mech: "SCRAM-SHA-256", client: kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), identity: "alice"},
		{name: "scram-sha-512", mech: "SCRAM-SHA-512", client: kscram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), identity: "bob"},
		{name: "scram escaped user and zid", mech: "SCRAM-SHA-512", client: kscram.Auth{Zid: "a,b=c", User: "a,b=c", Pass: "comma-secret"}.AsSha512Mechanism(), identity: "a,b=c"},
		{name: "scram non-ASCII", mech: "SCRAM-SHA-256", client: kscram.Auth{User: "émile", Pass: "pässwörd"}.AsSha256Mechanism(), identity: "émile"},
		{
			name: "scram wrong password", mech: "SCRAM-SHA-256", client: kscram.Auth{User: "alice", Pass: "nope"}.AsSha256Mechanism(),
			reason: "Invalid client credentials", message: saslGeneric256,
		},
		{
			name: "scram unknown user", mech: "SCRAM-SHA-512", client: kscram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism(),
			reason: "Invalid user credentials", message: saslGeneric("SCRAM-SHA-512"),
		},
		{
			name: "scram delegation token", mech: "SCRAM-SHA-256", client: kscram.Auth{User: "tokenid", Pass: "hmac", IsToken: true}.AsSha256Mechanism(),
			reason: "delegation tokens are not supported", message: saslGeneric256,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(saslMech(t, tt.mech, saslTestUsers()))
			err := saslFranzConversation(t, tt.client, s)
			if tt.identity != "" {
				require.NoError(t, err)
				assert.Equal(t, tt.identity, s.Identity())
				return
			}
			saslRequireFailure(t, err, tt.mech, tt.message, tt.reason)
			assert.Empty(t, s.Identity())
		})
	}
}
