package socketserver_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	ksasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// tokenMechanism is a toy host mechanism: the client sends one opaque
// token, which names its user in the server's table. A token listed in
// expiring also reports when its credential expires; one listed in
// challenged fails with a challenge first, as OAUTHBEARER does.
type tokenMechanism struct {
	name       string
	users      map[string]string    // token → user
	expiring   map[string]time.Time // token → credential expiry
	challenged map[string]bool
	servers    atomic.Int32 // servers started
	closed     atomic.Int32 // servers closed (io.Closer)
	lastState  atomic.Pointer[sasl.Attempt]
}

func (m *tokenMechanism) Name() string { return m.name }

func (m *tokenMechanism) NewServer(c sasl.Attempt) sasl.Server {
	m.servers.Add(1)
	m.lastState.Store(&c)
	return &tokenServer{m: m}
}

type tokenServer struct {
	m    *tokenMechanism
	user string
	exp  time.Time
}

const invalidTokenStatus = `{"status":"invalid_token"}`

func (s *tokenServer) Step(ctx context.Context, token []byte) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("the step's context has no deadline")
	}
	if s.m.challenged[string(token)] {
		return nil, &sasl.Error{Mechanism: s.m.name, Reason: invalidTokenStatus, SendReason: true, Challenge: []byte(invalidTokenStatus)}
	}
	user, ok := s.m.users[string(token)]
	if !ok {
		return nil, &sasl.Error{Mechanism: s.m.name, Reason: "Authentication failed: unknown token", SendReason: true}
	}
	s.user, s.exp = user, s.m.expiring[string(token)]
	return nil, nil
}

func (s *tokenServer) Complete() bool          { return s.user != "" }
func (s *tokenServer) AuthorizationID() string { return s.user }
func (s *tokenServer) Negotiated() sasl.Negotiated {
	return sasl.Negotiated{CredentialExpiry: s.exp}
}
func (s *tokenServer) Close() error { s.m.closed.Add(1); return nil }

// kgoToken is the client side of tokenMechanism for kgo: a custom
// ksasl.Mechanism. Like franz-go's OAUTHBEARER client, it treats any
// challenge as an error.
type kgoToken struct{ name, token string }

func (k kgoToken) Name() string { return k.name }
func (k kgoToken) Authenticate(context.Context, string) (ksasl.Session, []byte, error) {
	return kgoTokenSession{}, []byte(k.token), nil
}

type kgoTokenSession struct{}

func (kgoTokenSession) Challenge(c []byte) (bool, []byte, error) {
	if len(c) != 0 {
		return false, nil, errors.New("token: server challenge " + string(c))
	}
	return true, nil, nil
}

func newTokenMechanism(name string) *tokenMechanism {
	return &tokenMechanism{
		name:       name,
		users:      map[string]string{"tok-alice": "alice", "tok-bob": "bob", "tok-expired": "alice", "tok-soon": "alice"},
		expiring:   map[string]time.Time{},
		challenged: map[string]bool{"tok-revoked": true},
	}
}

// withTokens enables every API, gives SASL_PLAINTEXT the host mechanism m
// and backs the built-in ones with users.
func withTokens(m sasl.Mechanism, users sasl.CredentialStore) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		withUsers(users)(c)
		perListener(c, "SASL_PLAINTEXT").Mechanisms = []sasl.Mechanism{m}
	}
}

// A host registers its own mechanism in ListenerConfig.Mechanisms, beside the
// built-in ones, and a real kgo client authenticates with it; a wrong
// token is refused with SASL_AUTHENTICATION_FAILED and the mechanism's
// message.
func TestCustomMechanismWithKgo(t *testing.T) {
	m := newTokenMechanism("TOKEN-TOY")
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"sasl.enabled.mechanisms":                   "PLAIN,TOKEN-TOY",
		"connection.failed.authentication.delay.ms": "0",
	}), withTokens(m, newUsers(t)), recording(seen))

	cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoToken{"TOKEN-TOY", "tok-bob"}))
	require.NoError(t, kgoMetadata(cl))
	r := recv(t, seen)
	assert.Equal(t, connregistry.Principal{Type: "User", Name: "bob"}, r.Conn.Principal)
	assert.Equal(t, "TOKEN-TOY", r.Conn.SASLMechanism)
	assert.True(t, r.Conn.SessionExpiry.IsZero(), "no credential expiry and no connections.max.reauth.ms: no session expiry")
	state := m.lastState.Load()
	require.NotNil(t, state)
	assert.Equal(t, protocolmap.ListenerName("SASL_PLAINTEXT"), state.Listener)
	assert.Equal(t, r.Conn.ClientAddr, state.ClientAddr)
	assert.Nil(t, state.TLS)
	assert.False(t, state.Reauthentication)

	// The built-in mechanisms still serve beside it.
	plainCl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism("PLAIN", "alice", alicePassword)))
	require.NoError(t, kgoMetadata(plainCl))
	assert.Equal(t, alice, recv(t, seen).Conn.Principal)

	bad := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoToken{"TOKEN-TOY", "tok-mallory"}))
	err := kgoMetadata(bad)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	assert.True(t, strings.HasSuffix(err.Error(), ": Authentication failed: unknown token"), "error %q", err)
	bad.Close()
	cl.Close()
	plainCl.Close()
	requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
	assert.Equal(t, m.servers.Load(), m.closed.Load(), "every io.Closer server is closed when its exchange ends")
	assert.Empty(t, seen)
}

// A failure that carries a challenge (OAuthBearerSaslServer's flow in
// Kafka's SaslServerAuthenticator): the challenge goes out as an ordinary
// SaslAuthenticate response, error code 0; the client's next message,
// whatever it is (OAUTHBEARER clients send 0x01), gets
// SASL_AUTHENTICATION_FAILED with the error's message, after the
// failed-authentication delay, and the connection closes.
func TestMechanismChallengeThenFailure(t *testing.T) {
	const delay = 200 * time.Millisecond
	m := newTokenMechanism("OAUTHBEARER")
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"sasl.enabled.mechanisms":                   "OAUTHBEARER",
		"connection.failed.authentication.delay.ms": strconv.Itoa(int(delay / time.Millisecond)),
	}), withTokens(m, nil), echoMetadata)

	t.Run("SaslAuthenticate", func(t *testing.T) {
		for _, answer := range [][]byte{{0x01}, []byte("tok-alice")} {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
			start := time.Now()
			resp := rc.authenticate(2, []byte("tok-revoked"))
			assert.Less(t, time.Since(start), delay, "the challenge is no failure yet: not delayed")
			require.Zero(t, resp.ErrorCode)
			assert.Equal(t, invalidTokenStatus, string(resp.SASLAuthBytes))
			assert.Zero(t, resp.SessionLifetimeMillis)

			start = time.Now()
			resp = rc.authenticate(2, answer)
			assert.GreaterOrEqual(t, time.Since(start), delay)
			assert.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
			require.NotNil(t, resp.ErrorMessage)
			assert.Equal(t, invalidTokenStatus, *resp.ErrorMessage)
			requireClosedNoResponse(t, rc.c)
		}
	})
	t.Run("SaslHandshake v0: raw frames", func(t *testing.T) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Zero(t, rc.handshake(0, "OAUTHBEARER").ErrorCode)
		write(t, rc.c, frame([]byte("tok-revoked")))
		assert.Equal(t, invalidTokenStatus, string(readRawFrame(t, rc.c)))
		start := time.Now()
		write(t, rc.c, frame([]byte{0x01}))
		requireClosedNoResponse(t, rc.c)
		assert.GreaterOrEqual(t, time.Since(start), delay)
	})
	t.Run("a client that closes instead of answering", func(t *testing.T) {
		// franz-go's OAUTHBEARER client errors out on the challenge and
		// closes; the server must end the connection cleanly.
		cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoToken{"OAUTHBEARER", "tok-revoked"}))
		err := kgoMetadata(cl)
		require.Error(t, err)
		assert.Contains(t, err.Error(), invalidTokenStatus)
		cl.Close()
		requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
	})
	t.Run("a raw client that closes after the challenge", func(t *testing.T) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
		require.Zero(t, rc.authenticate(2, []byte("tok-revoked")).ErrorCode)
		rc.c.Close()
		requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
	})
}

// When a mechanism reports a credential expiry, the session ends at the
// earlier of it and connections.max.reauth.ms, even with re-authentication
// otherwise off, and SaslAuthenticate's SessionLifetimeMs says so: Kafka's
// SaslServerAuthenticator.ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs
// (M>0 only: M; expiry only: max(0, expiry-now); both: max(0, min(expiry-now, M));
// neither: 0).
func TestCredentialExpiryBoundsTheSession(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reauthMS  string        // connections.max.reauth.ms; "" unset
		expiresIn time.Duration // from the login; 0: no credential expiry
		want      time.Duration // SessionLifetimeMs
		expires   bool
	}{
		{name: "neither", want: 0},
		{name: "connections.max.reauth.ms only", reauthMS: "60000", want: time.Minute, expires: true},
		{name: "expiry only", expiresIn: 30 * time.Second, want: 30 * time.Second, expires: true},
		{name: "expiry before connections.max.reauth.ms", reauthMS: "60000", expiresIn: 30 * time.Second, want: 30 * time.Second, expires: true},
		{name: "connections.max.reauth.ms before expiry", reauthMS: "10000", expiresIn: time.Hour, want: 10 * time.Second, expires: true},
		{name: "expired credential", expiresIn: -time.Minute, want: 0, expires: true},
		{name: "re-authentication turned off", reauthMS: "0", expiresIn: 30 * time.Second, want: 30 * time.Second, expires: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTokenMechanism("TOKEN-TOY")
			props := config.Properties{"sasl.enabled.mechanisms": "TOKEN-TOY", "connection.failed.authentication.delay.ms": "0"}
			if tc.reauthMS != "" {
				props["connections.max.reauth.ms"] = tc.reauthMS
			}
			seen := make(chan *socketserver.Request, 10)
			srv := socketservertest.NewServer(t, saslProps(props), withTokens(m, nil), recording(seen))
			if tc.expiresIn != 0 {
				m.expiring["tok-alice"] = time.Now().Add(tc.expiresIn)
			}
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "TOKEN-TOY").ErrorCode)
			resp := rc.authenticate(2, []byte("tok-alice"))
			require.Zero(t, resp.ErrorCode)
			got := time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
			assert.InDelta(t, tc.want.Milliseconds(), got.Milliseconds(), 1000, "SessionLifetimeMs %d", resp.SessionLifetimeMillis)
			if !tc.expires {
				rc.roundTrip(metadataReq(9))
				assert.True(t, recv(t, seen).Conn.SessionExpiry.IsZero())
				return
			}
			if tc.want > 0 {
				rc.roundTrip(metadataReq(9))
				r := recv(t, seen)
				assert.Equal(t, got, r.Conn.SessionExpiry.Sub(r.Conn.AuthenticatedAt), "the session ends when the client was told")
				return
			}
			// A session that ends at once: any request but a
			// re-authentication closes the connection.
			rc.send(metadataReq(9))
			requireClosedNoResponse(t, rc.c)
			assert.Empty(t, seen)
		})
	}

	t.Run("the session ends at the credential's expiry and allows re-authentication", func(t *testing.T) {
		m := newTokenMechanism("TOKEN-TOY")
		seen := make(chan *socketserver.Request, 10)
		srv := socketservertest.NewServer(t, saslProps(config.Properties{
			"sasl.enabled.mechanisms": "TOKEN-TOY", "connection.failed.authentication.delay.ms": "0",
		}), withTokens(m, nil), recording(seen))
		m.expiring["tok-soon"] = time.Now().Add(300 * time.Millisecond)
		m.expiring["tok-alice"] = time.Now().Add(time.Hour)
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Zero(t, rc.handshake(1, "TOKEN-TOY").ErrorCode)
		require.Zero(t, rc.authenticate(2, []byte("tok-soon")).ErrorCode)
		rc.roundTrip(metadataReq(9))
		r := recv(t, seen)
		time.Sleep(time.Until(r.Conn.SessionExpiry) + 10*time.Millisecond)

		// No connections.max.reauth.ms, but the session expires: a
		// SaslHandshake re-authenticates (KafkaChannel.maybeBeginServerReauthentication).
		require.Zero(t, rc.handshake(1, "TOKEN-TOY").ErrorCode)
		resp := rc.authenticate(2, []byte("tok-alice"))
		require.Zero(t, resp.ErrorCode)
		// The mechanism's server is made after the SaslHandshake
		// response is written, so its state is known only once the
		// SaslAuthenticate response has come.
		assert.True(t, m.lastState.Load().Reauthentication)
		assert.InDelta(t, time.Hour.Milliseconds(), resp.SessionLifetimeMillis, 1000)
		rc.roundTrip(metadataReq(9))
		r2 := recv(t, seen)
		assert.Equal(t, r.Conn.ID, r2.Conn.ID)
		assert.True(t, r2.Conn.SessionExpiry.After(r.Conn.SessionExpiry))
	})
}

// sasl.enabled.mechanisms is case-sensitive in Kafka:
// SaslServerAuthenticator.handleHandshakeRequest looks the client's
// mechanism up with enabledMechanisms.contains, so a listener that enables
// "plain" refuses a client's "PLAIN" with UNSUPPORTED_SASL_MECHANISM and
// lists "plain".
func TestMechanismNamesAreCaseSensitive(t *testing.T) {
	m := newTokenMechanism("plain") // a host's mechanism under the lower-case name
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"sasl.enabled.mechanisms":                   "plain,SCRAM-SHA-256",
		"connection.failed.authentication.delay.ms": "0",
	}), withTokens(m, newUsers(t)), echoMetadata)
	for _, mech := range []string{"PLAIN", "Plain", "scram-sha-256"} {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		resp := rc.handshake(1, mech)
		assert.Equal(t, kerr.UnsupportedSaslMechanism.Code, resp.ErrorCode, mech)
		assert.Equal(t, []string{"plain", "SCRAM-SHA-256"}, resp.SupportedMechanisms)
		requireClosedNoResponse(t, rc.c)
	}
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.handshake(1, "plain").ErrorCode)
	require.Zero(t, rc.authenticate(2, []byte("tok-alice")).ErrorCode)
	rc.roundTrip(metadataReq(9))
}

// socketserver.New checks, where the implementations are known, that every
// mechanism a SASL listener enables has one and that the host gives none
// that is not enabled. Errors name the key.
func TestMechanismConfiguration(t *testing.T) {
	users := newUsers(t)
	toy := newTokenMechanism("TOKEN-TOY")
	hostPlain := newTokenMechanism("PLAIN")
	for _, tc := range []struct {
		name     string
		props    config.Properties
		mechs    map[protocolmap.ListenerName][]sasl.Mechanism
		noUsers  bool
		key, msg string // the error's key and text; "" for success
	}{
		{name: "built-in mechanisms", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"}},
		{name: "a host mechanism beside built-in ones", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN,TOKEN-TOY"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"SASL_PLAINTEXT": {toy}}},
		{name: "host mechanisms need no credential store", props: config.Properties{"sasl.enabled.mechanisms": "TOKEN-TOY"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"SASL_PLAINTEXT": {toy}}, noUsers: true},
		{name: "built-in mechanisms need one", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN"}, noUsers: true,
			msg: "no credential store"},
		{name: "Kafka's default GSSAPI", props: config.Properties{"sasl.enabled.mechanisms": ""},
			key: "sasl.enabled.mechanisms", msg: "GSSAPI (Kerberos) is Kafka's default"},
		{name: "a name nothing implements", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN,AWS_MSK_IAM"},
			key: "sasl.enabled.mechanisms", msg: "enables SASL mechanism AWS_MSK_IAM, which is neither built in"},
		{name: "names are case-sensitive", props: config.Properties{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "plain"},
			key: "listener.name.sasl_plaintext.sasl.enabled.mechanisms", msg: "case-sensitive, as in Kafka: PLAIN, not plain"},
		{name: "a host mechanism not enabled", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"SASL_PLAINTEXT": {toy}},
			key:   "sasl.enabled.mechanisms", msg: "SASL mechanism TOKEN-TOY, which sasl.enabled.mechanisms does not enable"},
		{name: "a host mechanism on a listener without SASL", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"PLAINTEXT": {toy}}, msg: "speaks PLAINTEXT"},
		{name: "a listener that does not exist", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"NOPE": {toy}}, msg: "NOPE, which is not configured"},
		{name: "two implementations of one name", props: config.Properties{"sasl.enabled.mechanisms": "TOKEN-TOY"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"SASL_PLAINTEXT": {toy, toy}}, msg: "two implementations"},
		{name: "the host's PLAIN replaces the built-in one", props: config.Properties{"sasl.enabled.mechanisms": "PLAIN"},
			mechs: map[protocolmap.ListenerName][]sasl.Mechanism{"SASL_PLAINTEXT": {hostPlain}}, noUsers: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := saslProps(tc.props)
			if _, ok := tc.props["sasl.enabled.mechanisms"]; !ok {
				delete(props, "sasl.enabled.mechanisms")
			}
			if tc.props["sasl.enabled.mechanisms"] == "" {
				delete(props, "sasl.enabled.mechanisms")
			}
			cfg, err := config.Server(props)
			require.NoError(t, err, "config.Security refuses no mechanism name")
			if !tc.noUsers {
				cfg.Credentials = users
			}
			for name, mechs := range tc.mechs {
				perListener(&cfg, name).Mechanisms = mechs
			}
			srv, err := socketserver.New(cfg)
			if tc.msg == "" {
				require.NoError(t, err)
				srv.Close()
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			if tc.key != "" {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.key, ce.Key)
				assert.ErrorIs(t, err, security.ErrSASLMechanism)
			}
		})
	}

	// The host's PLAIN is the one that serves.
	srv := socketservertest.NewServer(t, saslProps(nil), func(c *socketserver.Config) {
		c.APIs = allAPIs()
		perListener(c, "SASL_PLAINTEXT").Mechanisms = []sasl.Mechanism{hostPlain}
		c.Credentials = users
	}, echoMetadata)
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.handshake(1, "PLAIN").ErrorCode)
	require.Zero(t, rc.authenticate(2, []byte("tok-alice")).ErrorCode)
	assert.Positive(t, hostPlain.servers.Load())
}
