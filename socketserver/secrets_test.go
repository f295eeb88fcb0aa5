package socketserver_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// logCapture is a slog handler that keeps every record at every level, in
// three renderings: slog's JSON and text handlers (which escape bytes
// differently: a NUL of a PLAIN token is \u0000 in one and \x00 in the
// other) and the attribute values as Go prints them, errors by their text
// and byte slices as raw bytes, so that a secret is found whatever escaping
// a log sink would apply.
type logCapture struct {
	mu      sync.Mutex
	json    bytes.Buffer
	text    bytes.Buffer
	raw     strings.Builder
	records []capturedRecord
	jh, th  slog.Handler
	keep    slog.Level // records below it are counted out: dropped unrendered
}

type capturedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogCapture() (*logCapture, *slog.Logger) { return newLogCaptureFrom(slog.LevelDebug) }

// newLogCaptureFrom keeps only the records at level keep or above, for
// tests that make the server log thousands of lines they do not read.
func newLogCaptureFrom(keep slog.Level) (*logCapture, *slog.Logger) {
	lc := &logCapture{keep: keep}
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	lc.jh = slog.NewJSONHandler(&lc.json, opts)
	lc.th = slog.NewTextHandler(&lc.text, opts)
	return lc, slog.New(&captureHandler{lc: lc})
}

type captureHandler struct {
	lc    *logCapture
	attrs []slog.Attr
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{lc: h.lc, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *captureHandler) WithGroup(string) slog.Handler { return h }

func (h *captureHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < h.lc.keep {
		return nil
	}
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	lc := h.lc
	lc.mu.Lock()
	defer lc.mu.Unlock()
	_ = lc.jh.Handle(ctx, r)
	_ = lc.th.Handle(ctx, r)
	rec := capturedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	lc.raw.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		v, more := rawValue(a.Value)
		rec.attrs[a.Key] = v
		lc.raw.WriteString(" " + a.Key + "=" + v + more)
		return true
	})
	lc.raw.WriteString("\n")
	lc.records = append(lc.records, rec)
	return nil
}

// rawValue renders an attribute's value as Go prints it; more is what
// else a sink might print of it (an error's %+v form).
func rawValue(v slog.Value) (s, more string) {
	v = v.Resolve()
	switch x := v.Any().(type) {
	case error:
		return x.Error(), " " + fmt.Sprintf("%+v", x)
	case []byte:
		return string(x), ""
	case fmt.Stringer:
		return x.String(), ""
	}
	return fmt.Sprintf("%+v", v.Any()), ""
}

// String returns every rendering of every record.
func (lc *logCapture) String() string {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.json.String() + "\n" + lc.text.String() + "\n" + lc.raw.String()
}

// Records returns the records captured so far.
func (lc *logCapture) Records() []capturedRecord {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return append([]capturedRecord(nil), lc.records...)
}

// atLeast returns the records at level or above.
func (lc *logCapture) atLeast(level slog.Level) []capturedRecord {
	var out []capturedRecord
	for _, r := range lc.Records() {
		if r.level >= level {
			out = append(out, r)
		}
	}
	return out
}

// secretSet collects the strings that must never reach a log, in every
// encoding a log line might carry them.
type secretSet map[string]string // secret text -> what it is

func (s secretSet) add(what string, b []byte) {
	if len(b) < 6 { // too short to search for without false matches
		return
	}
	s[string(b)] = what
	s[base64.StdEncoding.EncodeToString(b)] = what + " (base64)"
	s[base64.RawStdEncoding.EncodeToString(b)] = what + " (raw base64)"
	s[base64.URLEncoding.EncodeToString(b)] = what + " (base64url)"
	s[hex.EncodeToString(b)] = what + " (hex)"
	s[strings.ToUpper(hex.EncodeToString(b))] = what + " (HEX)"
	s[fmt.Sprintf("%q", b)] = what + " (quoted)"
	s[strings.Trim(fmt.Sprintf("%q", b), `"`)] = what + " (escaped)"
	if j, err := json.Marshal(string(b)); err == nil {
		s[strings.Trim(string(j), `"`)] = what + " (JSON-escaped)"
	}
	if bytes.IndexByte(b, 0) >= 0 { // a PLAIN token: its parts around the NULs
		for _, part := range bytes.Split(b, []byte{0}) {
			if len(part) >= 8 {
				s.add(what+" part", part)
			}
		}
	}
}

// addSCRAM adds what a SCRAM exchange holds secret: the client proof of
// the client-final message, raw and as sent, and the keys derived from the
// password with the salt and iterations of the server-first message
// (SaltedPassword, ClientKey, StoredKey, ServerKey): the stored keys are
// the server's credentials, and either key lets an attacker log in.
func (s secretSet) addSCRAM(t testing.TB, mech, password string, serverFirst, clientFinal []byte) {
	t.Helper()
	if i := bytes.Index(clientFinal, []byte(",p=")); i >= 0 {
		proof := clientFinal[i+3:]
		s.add(mech+" proof as sent", proof)
		raw, err := base64.StdEncoding.DecodeString(string(proof))
		require.NoError(t, err)
		s.add(mech+" proof", raw)
	}
	var salt []byte
	iter := 0
	for _, f := range strings.Split(string(serverFirst), ",") {
		switch {
		case strings.HasPrefix(f, "s="):
			var err error
			salt, err = base64.StdEncoding.DecodeString(f[2:])
			require.NoError(t, err)
		case strings.HasPrefix(f, "i="):
			var err error
			iter, err = strconv.Atoi(f[2:])
			require.NoError(t, err)
		}
	}
	require.NotEmpty(t, salt, "server-first %q", serverFirst)
	h, size := sha256.New, sha256.Size
	if mech == "SCRAM-SHA-512" {
		h, size = sha512.New, sha512.Size
	}
	salted, err := pbkdf2.Key(h, password, salt, iter, size)
	require.NoError(t, err)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := func(f func() hash.Hash) []byte { d := f(); d.Write(clientKey); return d.Sum(nil) }
	var storedKey []byte
	if mech == "SCRAM-SHA-512" {
		storedKey = stored(sha512.New)
	} else {
		storedKey = stored(sha256.New)
	}
	s.add(mech+" SaltedPassword", salted)
	s.add(mech+" ClientKey", clientKey)
	s.add(mech+" StoredKey", storedKey)
	s.add(mech+" ServerKey", mac(salted, "Server Key"))
}

// recordingSASLClient wraps a mechanism's client side, recording the
// server's challenges and the client's tokens.
type recordingSASLClient struct {
	cl         saslClient
	challenges [][]byte
	tokens     [][]byte
}

func (r *recordingSASLClient) step(challenge []byte) ([]byte, bool) {
	if challenge != nil {
		r.challenges = append(r.challenges, challenge)
	}
	tok, done := r.cl(challenge)
	if !done {
		r.tokens = append(r.tokens, tok)
	}
	return tok, done
}

// The server's logs, captured at debug level in every rendering, hold no
// password, no SASL token, no SCRAM proof and no key derived from a
// password, over full authentications that succeed and fail (wrong
// password, unknown user, malformed tokens), with PLAIN, SCRAM-SHA-256
// and SCRAM-SHA-512, SaslHandshake v0 (raw tokens) and v1 (SaslAuthenticate
// v0 to v2), re-authentication, kgo, and a client confused about the
// framing; and no OAUTHBEARER token (nor its signature), valid or refused
// (expired, another key's, unsigned, malformed messages carrying it).
// TestLogsHoldNoCredentials checks the JSON output alone; this adds the
// renderings, the derived keys, the framing confusions and the tokens.
// The request log is checked alike: every RequestDone a hook was given,
// printed with %+v, and SlogRequestLog's records in the same capture.
func TestSecretsNeverLogged(t *testing.T) {
	users := newUsers(t)
	logs, logger := newLogCapture()
	requests := &requestLogs{}
	audit := &auditRecorder{}
	is := newOAuthIssuer(t)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"connection.failed.authentication.delay.ms": "0",
		"connections.max.reauth.ms":                 "60000",
		"sasl.enabled.mechanisms":                   "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		oauthJAAS:                                   config.OAuthBearerLoginModule + " required;",
		oauthClass:                                  config.OAuthBearerValidatorCallbackHandler,
		"sasl.oauthbearer.jwks.endpoint.url":        is.WriteJWKS(t),
	}), withOAuth(t, func(c *socketserver.Config) {
		withUsers(users)(c)
		c.Logger = logger
		c.Hooks = []socketserver.Hook{requests, socketserver.SlogRequestLog(logger), audit}
		c.AuditQueueSize = 100000 // every event kept, for the search below
	}), recording(make(chan *socketserver.Request, 1000)))

	const wrong = "wrong-Pw-5b2e90c7" // a wrong password is a secret too: a typo of the right one
	secrets := secretSet{}
	for _, p := range []string{alicePassword, bobPassword, wrong} {
		secrets.add("password", []byte(p))
	}
	// record adds a finished exchange's tokens and derived secrets.
	record := func(t *testing.T, mech, pass string, rc *recordingSASLClient) {
		t.Helper()
		for _, tok := range rc.tokens {
			secrets.add(mech+" token", tok)
		}
		if mech != "PLAIN" && len(rc.challenges) > 0 && len(rc.tokens) > 1 {
			secrets.addSCRAM(t, mech, pass, rc.challenges[0], rc.tokens[1])
		}
	}

	type login struct {
		user, pass string
		ok         bool
	}
	logins := []login{{"alice", alicePassword, true}, {"alice", wrong, false}, {"nobody", bobPassword, false}, {"bob", alicePassword, false}}
	var succeeded, failed int
	for _, mech := range mechanisms {
		for _, l := range logins {
			for v := int16(0); v <= 2; v++ { // SaslHandshake v1, SaslAuthenticate v0 to v2
				t.Run(fmt.Sprintf("%s %s v1 SaslAuthenticate v%d", mech, l.user, v), func(t *testing.T) {
					rc := dialRaw(t, srv, "SASL_PLAINTEXT")
					require.Equal(t, int16(0), rc.handshake(1, mech).ErrorCode)
					cl := &recordingSASLClient{cl: newSASLClient(t, mech, l.user, l.pass)}
					resp := rc.exchange(cl.step, v)
					record(t, mech, l.pass, cl)
					if l.ok {
						require.Equal(t, int16(0), resp.ErrorCode)
						rc.roundTrip(metadataReq(9))
						succeeded++
					} else {
						require.Equal(t, int16(58), resp.ErrorCode)
						requireClosedNoResponse(t, rc.c)
						failed++
					}
					rc.c.Close()
				})
			}
			t.Run(fmt.Sprintf("%s %s v0 raw tokens", mech, l.user), func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Equal(t, int16(0), rc.handshake(0, mech).ErrorCode)
				cl := &recordingSASLClient{cl: newSASLClient(t, mech, l.user, l.pass)}
				var challenge []byte
				for {
					tok, done := cl.step(challenge)
					if done {
						break
					}
					write(t, rc.c, frame(tok))
					var err error
					if challenge, err = readFrameErr(rc.c); err != nil {
						break // the failure: the raw framing can only close
					}
				}
				record(t, mech, l.pass, cl)
				if l.ok {
					rc.roundTrip(metadataReq(9))
					succeeded++
				} else {
					requireClosedNoResponse(t, rc.c)
					failed++
				}
				rc.c.Close()
			})
		}
		t.Run(mech+" re-authentication", func(t *testing.T) {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			cl := &recordingSASLClient{cl: newSASLClient(t, mech, "alice", alicePassword)}
			require.Equal(t, int16(0), rc.handshake(1, mech).ErrorCode)
			require.Equal(t, int16(0), rc.exchange(cl.step, 2).ErrorCode)
			record(t, mech, alicePassword, cl)
			cl2 := &recordingSASLClient{cl: newSASLClient(t, mech, "alice", wrong)}
			require.Equal(t, int16(0), rc.handshake(1, mech).ErrorCode)
			require.Equal(t, int16(58), rc.exchange(cl2.step, 1).ErrorCode)
			record(t, mech, wrong, cl2)
			requireClosedNoResponse(t, rc.c)
		})
		t.Run(mech+" kgo", func(t *testing.T) {
			cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(mech, "alice", alicePassword)))
			require.NoError(t, kgoMetadata(cl))
			cl.Close()
			bad := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(mech, "bob", wrong)))
			require.ErrorIs(t, kgoMetadata(bad), kerr.SaslAuthenticationFailed)
			bad.Close()
		})
	}
	oauthSucceeded, oauthFailed := testOAuthBearerSecrets(t, srv, is, secrets)
	// Malformed and confused exchanges that carry the password.
	plainTok := plainToken("alice", alicePassword)
	secrets.add("PLAIN token", plainTok)
	for _, tc := range []struct {
		name string
		run  func(rc *rawClient)
	}{
		{"a raw PLAIN token after SaslHandshake v1", func(rc *rawClient) {
			rc.handshake(1, "PLAIN")
			write(t, rc.c, frame(plainTok))
		}},
		{"a raw PLAIN token instead of SaslHandshake", func(rc *rawClient) { write(t, rc.c, frame(plainTok)) }},
		{"SaslAuthenticate before SaslHandshake", func(rc *rawClient) { rc.send(saslAuthenticateReq(1, plainTok)) }},
		{"SaslAuthenticate framing after SaslHandshake v0", func(rc *rawClient) {
			rc.handshake(0, "PLAIN")
			rc.send(saslAuthenticateReq(1, plainTok))
		}},
		{"PLAIN token with extra NULs", func(rc *rawClient) {
			rc.handshake(1, "PLAIN")
			rc.authenticate(1, []byte("\x00alice\x00"+alicePassword+"\x00"+alicePassword))
		}},
		{"PLAIN token without NULs", func(rc *rawClient) {
			rc.handshake(1, "PLAIN")
			rc.authenticate(1, []byte("alice:"+alicePassword))
		}},
		{"SCRAM client-first carrying the password", func(rc *rawClient) {
			rc.handshake(1, "SCRAM-SHA-256")
			rc.authenticate(1, []byte("n,,n=alice,p="+alicePassword))
		}},
		{"SCRAM client-final carrying the password", func(rc *rawClient) {
			rc.handshake(1, "SCRAM-SHA-512")
			first, _ := newSASLClient(t, "SCRAM-SHA-512", "alice", alicePassword)(nil)
			resp := rc.authenticate(1, first)
			rc.authenticate(1, []byte("c=biws,r="+strings.TrimPrefix(strings.Split(string(resp.SASLAuthBytes), ",")[0], "r=")+",p="+alicePassword))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			tc.run(rc)
			readUntilClosed(t, rc.c, 10*time.Second)
		})
	}
	// Every connection has ended, so each has logged all it will.
	requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
	require.Equal(t, len(mechanisms)*4, succeeded)
	require.Equal(t, len(mechanisms)*4*3, failed)
	require.Equal(t, 6, *oauthSucceeded)
	require.Equal(t, 16, *oauthFailed)

	out := logs.String()
	// The capture works and saw the failures, so its silence means something.
	require.Contains(t, out, "closing connection during authentication")
	require.Contains(t, out, "expired at", "the OAUTHBEARER refusals were logged, with their causes")
	require.Contains(t, out, `"level":"DEBUG"`, "the capture is at debug level")
	require.Contains(t, out, "level=DEBUG")
	// The request log saw the exchanges, each SaslAuthenticate of them.
	printed := requests.printedString()
	saslAuthenticates := 0
	for _, l := range requests.all() {
		if l.APIKey == 36 {
			saslAuthenticates++
		}
	}
	require.Greater(t, saslAuthenticates, 100, "SaslAuthenticate requests logged")
	require.Contains(t, out, "api_name=SASL_AUTHENTICATE", "SlogRequestLog logged into the capture")
	// The audit trail, every event delivered (Shutdown drains its queue),
	// saw the logins and the failures' user names.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(sctx))
	audited := audit.printed()
	require.Zero(t, srv.Stats().AuditDropped)
	require.GreaterOrEqual(t, len(audit.of(socketserver.AuditAuthenticated)), succeeded+*oauthSucceeded)
	require.GreaterOrEqual(t, len(audit.of(socketserver.AuditAuthenticationFailed)), failed+*oauthFailed)
	require.Contains(t, audited, "User:nobody", "a failure's user name")
	t.Logf("%d log records, %d requests logged, %d audit events, %d secrets searched for", len(logs.Records()), len(requests.all()),
		len(audit.all()), len(secrets))
	for s, what := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the log holds a %s: %q", what, s)
		}
		if strings.Contains(printed, s) {
			t.Errorf("a RequestDone holds a %s: %q", what, s)
		}
		if strings.Contains(audited, s) {
			t.Errorf("an audit event holds a %s: %q", what, s)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", out)
	}
}

// Only TLS 1.2 and 1.3 are spoken, on SSL and SASL_SSL listeners, even
// when ssl.enabled.protocols names older versions and even when the host
// hands the server a tls.Config that allows them: a crypto/tls client
// limited to TLS 1.0 or 1.1 fails the handshake, and the handler sees
// nothing; TLS 1.2 and 1.3 clients are served.
func TestTLSVersions(t *testing.T) {
	pki := newTestPKI(t)
	users := newUsers(t)
	props := merge(pki.props(""), saslProps(nil), config.Properties{
		"listeners":                      "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"security.inter.broker.protocol": "SSL",
		"ssl.enabled.protocols":          "TLSv1,TLSv1.1,TLSv1.2,TLSv1.3",
	})
	servers := map[string]func(*socketserver.Config){
		"ssl.enabled.protocols with TLSv1 and TLSv1.1": withUsers(users),
		"host's tls.Config allows TLS 1.0": func(c *socketserver.Config) {
			withUsers(users)(c)
			for _, l := range c.PerListener {
				if l.Security.TLS != nil {
					l.Security.TLS = l.Security.TLS.Clone()
					l.Security.TLS.MinVersion = tls.VersionTLS10
				}
			}
		},
	}
	for sname, configure := range servers {
		t.Run(sname, func(t *testing.T) {
			seen := make(chan *socketserver.Request, 100)
			srv := socketservertest.NewServer(t, props, configure, recording(seen))
			for _, l := range []string{"SSL", "SASL_SSL"} {
				for _, v := range []struct {
					name     string
					min, max uint16
					ok       bool
				}{
					{"TLS 1.0", tls.VersionTLS10, tls.VersionTLS10, false},
					{"TLS 1.1", tls.VersionTLS11, tls.VersionTLS11, false},
					{"TLS 1.0 to 1.1", tls.VersionTLS10, tls.VersionTLS11, false},
					{"TLS 1.2", tls.VersionTLS12, tls.VersionTLS12, true},
					{"TLS 1.3", tls.VersionTLS13, tls.VersionTLS13, true},
					{"TLS 1.0 to 1.3", tls.VersionTLS10, tls.VersionTLS13, true},
				} {
					t.Run(l+" "+v.name, func(t *testing.T) {
						raw := socketservertest.Dial(t, srv, protocolmap.ListenerName(l))
						c := tls.Client(raw, withVersions(pki.clientConfig(), v.min, v.max))
						err := c.Handshake()
						if !v.ok {
							require.Error(t, err, "a TLS %s client completed the handshake", v.name)
							readUntilClosed(t, raw, 5*time.Second)
							assert.Empty(t, seen)
							return
						}
						require.NoError(t, err)
						want := v.max
						assert.Equal(t, want, c.ConnectionState().Version)
						rc := &rawClient{t: t, c: c}
						av := rc.roundTrip(apiVersionsReq(3, "test", "1")).(*kmsg.ApiVersionsResponse)
						require.Equal(t, int16(0), av.ErrorCode)
						if l == "SASL_SSL" {
							require.Equal(t, int16(0), rc.login("SCRAM-SHA-256", "alice", alicePassword, 2).ErrorCode)
						}
						rc.roundTrip(metadataReq(9))
						r := recv(t, seen)
						assert.Equal(t, want, r.Conn.TLSVersion, "Request.Conn says %s", tls.VersionName(r.Conn.TLSVersion))
					})
				}
			}
			requireConnCount(t, srv, "SSL", 0)
			requireConnCount(t, srv, "SASL_SSL", 0)
		})
	}
}

// testOAuthBearerSecrets runs OAUTHBEARER exchanges that succeed and fail
// on srv, adding every token and message sent to secrets: each token
// whole, its signature, and the client's messages. It returns how many
// exchanges succeeded and failed, counted once their subtests end.
func testOAuthBearerSecrets(t *testing.T, srv *socketserver.Server, is *oauthbearertest.Issuer, secrets secretSet) (succeeded, failed *int) {
	succeeded, failed = new(int), new(int)
	other := oauthbearertest.NewIssuer(t, oauthIssuerURL)
	other.AddKey(t, "k1", "RS256")
	addToken := func(what, tok string) {
		secrets.add(what, []byte(tok))
		if i := strings.LastIndexByte(tok, '.'); i >= 0 && len(tok)-i > 8 {
			secrets.add(what+" signature", []byte(tok[i+1:]))
		}
	}
	good := func() string { return is.Sign(t, "k1", is.Claims("alice", time.Hour)) }
	refused := map[string]string{
		"expired":          is.Sign(t, "k1", merge2(is.Claims("alice", time.Hour), map[string]any{"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})),
		"another key's":    other.Sign(t, "k1", is.Claims("alice", time.Hour)),
		"unsigned":         oauthbearertest.UnsecuredToken(is.Claims("alice", time.Hour)) + "c2lnbmF0dXJlLWJ5dGVz",
		"an unknown kid's": forgedOAuthToken(t, "k-unknown"),
	}
	for v := int16(0); v <= 2; v++ {
		t.Run(fmt.Sprintf("OAUTHBEARER v1 SaslAuthenticate v%d", v), func(t *testing.T) {
			tok := good()
			addToken("OAUTHBEARER token", tok)
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
			require.Zero(t, rc.authenticate(v, oauthbearertest.ClientFirstMessage(tok)).ErrorCode)
			rc.roundTrip(metadataReq(9))
			*succeeded++
			for what, bad := range refused {
				addToken("refused ("+what+") OAUTHBEARER token", bad)
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
				resp := rc.authenticate(v, oauthbearertest.ClientFirstMessage(bad))
				require.Zero(t, resp.ErrorCode, what)
				require.Equal(t, invalidToken, string(resp.SASLAuthBytes))
				require.Equal(t, int16(58), rc.authenticate(v, []byte{1}).ErrorCode)
				requireClosedNoResponse(t, rc.c)
				*failed++
			}
		})
	}
	t.Run("OAUTHBEARER v0 raw tokens", func(t *testing.T) {
		tok := good()
		addToken("OAUTHBEARER token", tok)
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Zero(t, rc.handshake(0, "OAUTHBEARER").ErrorCode)
		write(t, rc.c, frame(oauthbearertest.ClientFirstMessage(tok)))
		require.Empty(t, readRawFrame(t, rc.c))
		rc.roundTrip(metadataReq(9))
		*succeeded++
	})
	t.Run("OAUTHBEARER re-authentication", func(t *testing.T) {
		tok, next := good(), good()
		addToken("OAUTHBEARER token", tok)
		addToken("OAUTHBEARER token", next)
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
		require.Zero(t, rc.authenticate(2, oauthbearertest.ClientFirstMessage(tok)).ErrorCode)
		require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode) // connections.max.reauth.ms is set: a re-authentication
		require.Zero(t, rc.authenticate(2, oauthbearertest.ClientFirstMessage(next)).ErrorCode)
		rc.roundTrip(metadataReq(9))
		*succeeded++
	})
	t.Run("OAUTHBEARER kgo", func(t *testing.T) {
		tok := good()
		addToken("OAUTHBEARER token", tok)
		cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()))
		require.NoError(t, kgoMetadata(cl))
		cl.Close()
		*succeeded++
		bad := refused["expired"]
		badCl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(oauth.Auth{Token: bad}.AsMechanism()))
		require.Error(t, kgoMetadata(badCl))
		badCl.Close()
		*failed++
	})
	// Malformed messages that carry a valid token: refused as malformed.
	for _, tc := range []struct{ name, msg string }{
		{"the Basic scheme", "n,,\x01auth=Basic %s\x01\x01"},
		{"no closing separator", "n,,\x01auth=Bearer %s\x01"},
		{"the token in an extension", "n,,\x01auth=Bearer x\x01token=%s\x01\x01 trailing"},
	} {
		t.Run("OAUTHBEARER malformed: "+tc.name, func(t *testing.T) {
			tok := good()
			addToken("OAUTHBEARER token", tok)
			msg := fmt.Sprintf(tc.msg, tok)
			secrets.add("OAUTHBEARER message", []byte(msg))
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "OAUTHBEARER").ErrorCode)
			require.Equal(t, int16(58), rc.authenticate(2, []byte(msg)).ErrorCode)
			requireClosedNoResponse(t, rc.c)
			*failed++
		})
	}
	return succeeded, failed
}

// forgedOAuthToken is a token whose kid no JWKS holds.
func forgedOAuthToken(t *testing.T, kid string) string {
	is := oauthbearertest.NewIssuer(t, oauthIssuerURL)
	is.AddKey(t, kid, "ES256")
	return is.Sign(t, kid, is.Claims("mallory", time.Hour))
}
