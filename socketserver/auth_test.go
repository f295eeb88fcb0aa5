package socketserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	ksasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// The SASL users of these tests.
const (
	alicePassword = "alice-Pw-7c1f09e2"
	bobPassword   = "bob-Pw-43b8d5aa"
)

var (
	alice      = connregistry.Principal{Type: "User", Name: "alice"}
	mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
)

func newUsers(t testing.TB) *sasl.Users {
	t.Helper()
	u, err := sasl.NewUsers(map[string]string{"alice": alicePassword, "bob": bobPassword})
	require.NoError(t, err)
	return u
}

// withUsers enables every API and backs the SASL listeners with users.
func withUsers(users sasl.CredentialStore) func(*socketserver.Config) {
	return func(c *socketserver.Config) {
		c.APIs = allAPIs()
		c.Credentials = users
	}
}

// saslProps is a SASL_PLAINTEXT listener (and a PLAINTEXT one) offering
// every mechanism, overlaid with extra.
func saslProps(extra config.Properties) config.Properties {
	return merge(config.Properties{
		"listeners":               "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
	}, extra)
}

// recording answers every request with an empty response of its API and
// then passes it on to seen, dropping it if seen is full.
func recording(seen chan<- *socketserver.Request) socketserver.Handler {
	return socketserver.HandlerFunc(func(r *socketserver.Request) {
		_ = respondEmpty(r)
		select {
		case seen <- r:
		default:
		}
	})
}

func kgoMechanism(mech, user, pass string) ksasl.Mechanism {
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		return kscram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return kscram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
	panic("unknown mechanism " + mech)
}

// newKgo returns a kgo client of the listener, closed when the test ends.
func newKgo(t testing.TB, srv *socketserver.Server, listenerName protocolmap.ListenerName, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(srv.Addr(listenerName).String())}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func kgoMetadata(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// rawClient speaks the Kafka protocol by hand on one connection, with
// increasing correlation ids.
type rawClient struct {
	t      testing.TB
	c      net.Conn
	corr   int32
	tokens [][]byte // every SASL token sent, for the log test
}

func dialRaw(t testing.TB, srv *socketserver.Server, listenerName protocolmap.ListenerName) *rawClient {
	t.Helper()
	return &rawClient{t: t, c: socketservertest.Dial(t, srv, listenerName)}
}

func (rc *rawClient) send(req kmsg.Request) {
	rc.t.Helper()
	rc.corr++
	send(rc.t, rc.c, req, rc.corr)
}

// roundTrip sends req and reads its response, of req's version.
func (rc *rawClient) roundTrip(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	rc.send(req)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	readResponse(rc.t, rc.c, resp, rc.corr)
	return resp
}

func (rc *rawClient) handshake(version int16, mech string) *kmsg.SASLHandshakeResponse {
	rc.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mech
	return rc.roundTrip(req).(*kmsg.SASLHandshakeResponse)
}

func saslAuthenticateReq(version int16, token []byte) *kmsg.SASLAuthenticateRequest {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = version, token
	return req
}

func (rc *rawClient) authenticate(version int16, token []byte) *kmsg.SASLAuthenticateResponse {
	rc.t.Helper()
	rc.tokens = append(rc.tokens, token)
	return rc.roundTrip(saslAuthenticateReq(version, token)).(*kmsg.SASLAuthenticateResponse)
}

// login runs SaslHandshake v1 for mech (which must succeed) and the
// mechanism's exchange for user in SaslAuthenticate requests of version v.
// It returns the last SaslAuthenticate response: the failure, or the end
// of a successful exchange.
func (rc *rawClient) login(mech, user, pass string, v int16) *kmsg.SASLAuthenticateResponse {
	rc.t.Helper()
	hs := rc.handshake(1, mech)
	require.Equal(rc.t, int16(0), hs.ErrorCode, "SaslHandshake for %s", mech)
	return rc.exchange(newSASLClient(rc.t, mech, user, pass), v)
}

func (rc *rawClient) exchange(cl saslClient, v int16) *kmsg.SASLAuthenticateResponse {
	rc.t.Helper()
	var (
		challenge []byte
		resp      *kmsg.SASLAuthenticateResponse
	)
	for {
		token, done := cl(challenge)
		if done {
			return resp
		}
		resp = rc.authenticate(v, token)
		if resp.ErrorCode != 0 {
			return resp
		}
		challenge = resp.SASLAuthBytes
	}
}

// rawExchange runs the exchange with raw size-prefixed tokens, as after
// SaslHandshake v0.
func (rc *rawClient) rawExchange(cl saslClient) {
	rc.t.Helper()
	var challenge []byte
	for {
		token, done := cl(challenge)
		if done {
			return
		}
		rc.tokens = append(rc.tokens, token)
		write(rc.t, rc.c, frame(token))
		challenge = readRawFrame(rc.t, rc.c)
	}
}

// saslClient is a client's side of a mechanism: given the server's last
// challenge (nil at first) it returns its next token, or done once the
// exchange has succeeded (having checked the server's final message).
type saslClient func(challenge []byte) (token []byte, done bool)

func plainToken(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

func newSASLClient(t testing.TB, mech, user, pass string) saslClient {
	t.Helper()
	if mech == "PLAIN" {
		sent := false
		return func([]byte) ([]byte, bool) {
			if sent {
				return nil, true
			}
			sent = true
			return plainToken(user, pass), false
		}
	}
	h := scram.SHA256
	if mech == "SCRAM-SHA-512" {
		h = scram.SHA512
	}
	client, err := h.NewClient(user, pass, "")
	require.NoError(t, err)
	conv := client.NewConversation()
	return func(challenge []byte) ([]byte, bool) {
		msg, err := conv.Step(string(challenge))
		require.NoError(t, err, "SCRAM step")
		if conv.Done() {
			require.True(t, conv.Valid(), "the server's SCRAM signature does not verify")
			return nil, true
		}
		return []byte(msg), false
	}
}

// kgo authenticates with every mechanism over SASL_PLAINTEXT and
// SASL_SSL, and over SSL with and without a client certificate; each
// request's Conn shows what the connection established.
func TestKgoAuthentication(t *testing.T) {
	pki := newTestPKI(t)
	users := newUsers(t)
	props := merge(pki.props("requested"), config.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
		"security.inter.broker.protocol": "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"ssl.principal.mapping.rules":    cnRule,
	})
	type tc struct {
		name      string
		listener  string
		mech      string
		tls       *tls.Config
		principal connregistry.Principal
		version   uint16
	}
	var cases []tc
	for _, mech := range mechanisms {
		cases = append(cases,
			tc{name: "SASL_PLAINTEXT " + mech, listener: "SASL_PLAINTEXT", mech: mech, principal: alice},
			tc{name: "SASL_SSL " + mech, listener: "SASL_SSL", mech: mech, tls: pki.clientConfig(), principal: alice, version: tls.VersionTLS13})
	}
	cases = append(cases,
		tc{name: "SASL_SSL TLS 1.2", listener: "SASL_SSL", mech: "SCRAM-SHA-256", principal: alice,
			tls: withVersions(pki.clientConfig(), tls.VersionTLS12, tls.VersionTLS12), version: tls.VersionTLS12},
		// ssl.client.auth without the listener prefix does not apply to
		// SASL_SSL: the certificate is not asked for (an untrusted one
		// would fail the handshake if it were); SASL names the user.
		tc{name: "SASL_SSL with an untrusted client certificate", listener: "SASL_SSL", mech: "PLAIN", principal: alice,
			tls: pki.clientConfig(newTestPKI(t).clientCert(pkix.Name{CommonName: "Mallory", Organization: []string{"Elsewhere"}})), version: tls.VersionTLS13},
		tc{name: "SSL with a client certificate", listener: "SSL", tls: pki.clientConfig(pki.clientCert(aliceDN)),
			principal: alice, version: tls.VersionTLS13},
		tc{name: "SSL with a client certificate, TLS 1.2", listener: "SSL", principal: alice, version: tls.VersionTLS12,
			tls: withVersions(pki.clientConfig(pki.clientCert(aliceDN)), tls.VersionTLS12, tls.VersionTLS12)},
		tc{name: "SSL without a client certificate", listener: "SSL", tls: pki.clientConfig(),
			principal: connregistry.Anonymous(), version: tls.VersionTLS13},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seen := make(chan *socketserver.Request, 100)
			srv := socketservertest.NewServer(t, props, withUsers(users), recording(seen))
			var opts []kgo.Opt
			if tc.mech != "" {
				opts = append(opts, kgo.SASL(kgoMechanism(tc.mech, "alice", alicePassword)))
			}
			if tc.tls != nil {
				opts = append(opts, kgo.DialTLSConfig(tc.tls))
			}
			before := time.Now()
			cl := newKgo(t, srv, protocolmap.ListenerName(tc.listener), opts...)
			require.NoError(t, kgoMetadata(cl))
			after := time.Now()
			r := recv(t, seen)
			assert.Equal(t, int16(3), r.APIKey)
			ci := r.Conn
			assert.Equal(t, tc.principal, ci.Principal)
			assert.Equal(t, tc.listener, ci.SecurityProtocol.String())
			assert.Equal(t, tc.listener, string(ci.Listener))
			assert.Equal(t, tc.mech, ci.SASLMechanism)
			assert.Equal(t, tc.version, ci.TLSVersion, "TLS version %s", tls.VersionName(ci.TLSVersion))
			if tc.tls != nil {
				assert.NotZero(t, ci.CipherSuite)
			} else {
				assert.Zero(t, ci.CipherSuite)
			}
			if tc.mech != "" {
				assert.False(t, ci.AuthenticatedAt.Before(before), "AuthenticatedAt %v before the test's window %v", ci.AuthenticatedAt, before)
				assert.False(t, ci.AuthenticatedAt.After(after), "AuthenticatedAt %v after the test's window %v", ci.AuthenticatedAt, after)
				// kgo's ApiVersions came before authentication: it still counts.
				assert.Equal(t, "kgo", ci.ClientSoftwareName)
			} else {
				assert.True(t, ci.AuthenticatedAt.IsZero())
			}
			assert.True(t, ci.SessionExpiry.IsZero(), "SessionExpiry without connections.max.reauth.ms")
		})
	}
}

// A wrong password: kgo's request fails with SASL_AUTHENTICATION_FAILED
// and Kafka's message, which for PLAIN names the cause (Kafka's
// PlainSaslServer throws SaslAuthenticationException for every failure,
// a missing user name or password included) and for SCRAM is the generic
// one.
func TestKgoAuthenticationFailed(t *testing.T) {
	users := newUsers(t)
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{"connection.failed.authentication.delay.ms": "0"}),
		withUsers(users), recording(seen))
	const generic = "Authentication failed during authentication due to invalid credentials with SASL mechanism "
	for _, tc := range []struct{ mech, user, pass, msg string }{
		{"PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"},
		{"PLAIN", "nobody", alicePassword, "Authentication failed: Invalid username or password"},
		{"SCRAM-SHA-256", "alice", "wrong", generic + "SCRAM-SHA-256"},
		{"SCRAM-SHA-512", "alice", bobPassword, generic + "SCRAM-SHA-512"},
		{"SCRAM-SHA-256", "nobody", alicePassword, generic + "SCRAM-SHA-256"},
	} {
		t.Run(tc.mech+" "+tc.user, func(t *testing.T) {
			cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(tc.mech, tc.user, tc.pass)))
			err := kgoMetadata(cl)
			require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
			// kgo appends the server's ErrorMessage to the error code's text.
			assert.True(t, strings.HasSuffix(err.Error(), ": "+tc.msg), "error %q, want message %q", err, tc.msg)
			cl.Close()
			requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
		})
	}
	assert.Empty(t, seen, "a request of a client that failed to authenticate reached the handler")
}

// SASL/PLAIN tells the client why a malformed message failed, as Kafka's
// PlainSaslServer does: it throws SaslAuthenticationException, whose text
// SaslServerAuthenticator sends, for a missing user name or password and
// for a wrong token count (counted up to 4, as its extractTokens does).
func TestPlainMalformedMessages(t *testing.T) {
	srv := socketservertest.NewServer(t, saslProps(config.Properties{"connection.failed.authentication.delay.ms": "0"}),
		withUsers(newUsers(t)), echoMetadata)
	for _, tc := range []struct{ name, token, msg string }{
		{"no user name", "\x00\x00" + alicePassword, "Authentication failed: username not specified"},
		{"no password", "\x00alice\x00", "Authentication failed: password not specified"},
		{"two tokens", "alice\x00" + alicePassword, "Invalid SASL/PLAIN response: expected 3 tokens, got 2"},
		{"five tokens", "\x00alice\x00" + alicePassword + "\x00x\x00y", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Zero(t, rc.handshake(1, "PLAIN").ErrorCode)
			resp := rc.authenticate(1, []byte(tc.token))
			assert.Equal(t, kerr.SaslAuthenticationFailed.Code, resp.ErrorCode)
			require.NotNil(t, resp.ErrorMessage)
			assert.Equal(t, tc.msg, *resp.ErrorMessage)
			requireClosedNoResponse(t, rc.c)
		})
	}
}

// KIP-306: a failed authentication is answered, where the protocol can
// carry an answer, only after connection.failed.authentication.delay.ms,
// and the connection then closes; with the delay set to 0, at once.
func TestAuthenticationFailureDelay(t *testing.T) {
	users := newUsers(t)
	for _, delay := range []time.Duration{300 * time.Millisecond, 0} {
		srv := socketservertest.NewServer(t, saslProps(config.Properties{
			"connection.failed.authentication.delay.ms": strconv.Itoa(int(delay / time.Millisecond)),
		}), withUsers(users), echoMetadata)
		check := func(t *testing.T, took time.Duration) {
			t.Helper()
			if delay > 0 {
				assert.GreaterOrEqual(t, took, delay, "the failure was answered before the delay")
				assert.Less(t, took, delay+2*time.Second)
			} else {
				assert.Less(t, took, 200*time.Millisecond, "no delay is configured")
			}
		}
		t.Run("delay "+delay.String(), func(t *testing.T) {
			t.Run("PLAIN wrong password", func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Equal(t, int16(0), rc.handshake(1, "PLAIN").ErrorCode)
				start := time.Now()
				resp := rc.authenticate(1, plainToken("alice", "wrong"))
				check(t, time.Since(start))
				assert.Equal(t, int16(58), resp.ErrorCode)
				require.NotNil(t, resp.ErrorMessage)
				assert.Equal(t, "Authentication failed: Invalid username or password", *resp.ErrorMessage)
				requireClosedNoResponse(t, rc.c)
			})
			t.Run("SCRAM wrong password", func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Equal(t, int16(0), rc.handshake(1, "SCRAM-SHA-512").ErrorCode)
				cl := newSASLClient(t, "SCRAM-SHA-512", "alice", "wrong")
				first, _ := cl(nil)
				resp := rc.authenticate(2, first)
				require.Equal(t, int16(0), resp.ErrorCode)
				final, _ := cl(resp.SASLAuthBytes)
				start := time.Now()
				resp = rc.authenticate(2, final)
				check(t, time.Since(start))
				assert.Equal(t, int16(58), resp.ErrorCode)
				requireClosedNoResponse(t, rc.c)
			})
			t.Run("unknown mechanism", func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				start := time.Now()
				resp := rc.handshake(1, "GSSAPI")
				check(t, time.Since(start))
				assert.Equal(t, int16(33), resp.ErrorCode)
				requireClosedNoResponse(t, rc.c)
			})
			// Kafka delays the close for every authentication failure
			// (KafkaChannel.prepare delays any AuthenticationException of
			// the authenticator): a request other than ApiVersions or
			// SaslHandshake first (IllegalSaslStateException, no
			// response), a first packet that is not a Kafka request
			// (UnsupportedSaslMechanismException), a packet beyond
			// sasl.server.max.receive.size (SaslAuthenticationException
			// "Failing SASL authentication due to invalid receive size").
			for _, tc := range []struct {
				name string
				send func(rc *rawClient)
			}{
				{"Metadata before SaslHandshake", func(rc *rawClient) { rc.send(metadataReq(9)) }},
				{"Metadata after ApiVersions", func(rc *rawClient) {
					rc.roundTrip(apiVersionsReq(3, "test", "1"))
					rc.send(metadataReq(9))
				}},
				{"a first packet that is not a request", func(rc *rawClient) { write(t, rc.c, frame([]byte{0x60, 0x82, 1, 2, 3})) }},
				{"a first packet beyond sasl.server.max.receive.size", func(rc *rawClient) {
					write(t, rc.c, binary.BigEndian.AppendUint32(nil, 1<<30))
				}},
				{"a token beyond sasl.server.max.receive.size", func(rc *rawClient) {
					require.Zero(t, rc.handshake(1, "PLAIN").ErrorCode)
					write(t, rc.c, binary.BigEndian.AppendUint32(nil, 1<<30))
				}},
				{"a raw token beyond sasl.server.max.receive.size", func(rc *rawClient) {
					require.Zero(t, rc.handshake(0, "PLAIN").ErrorCode)
					write(t, rc.c, binary.BigEndian.AppendUint32(nil, 1<<30))
				}},
				{"a malformed SaslAuthenticate", func(rc *rawClient) {
					require.Zero(t, rc.handshake(1, "PLAIN").ErrorCode)
					write(t, rc.c, frame(append(requestHeader(36, 2, 9), 0xff, 0xff, 0xff)))
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					rc := dialRaw(t, srv, "SASL_PLAINTEXT")
					start := time.Now()
					tc.send(rc)
					requireClosedNoResponse(t, rc.c)
					check(t, time.Since(start))
				})
			}
			t.Run("SaslHandshake v0, wrong password", func(t *testing.T) {
				// The raw token exchange cannot carry an error: the client
				// sees the close, after the delay.
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Equal(t, int16(0), rc.handshake(0, "PLAIN").ErrorCode)
				start := time.Now()
				write(t, rc.c, frame(plainToken("alice", "wrong")))
				requireClosedNoResponse(t, rc.c)
				check(t, time.Since(start))
			})
		})
	}
}

// The SASL exchange by hand: what is allowed before authentication
// completes, and how each step is answered.
func TestSASLPreAuthentication(t *testing.T) {
	users := newUsers(t)
	seen := make(chan *socketserver.Request, 100)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"connection.failed.authentication.delay.ms": "0",
		"sasl.server.max.receive.size":              "1000",
	}), withUsers(users), recording(seen))
	requireNothingSeen := func(t *testing.T) {
		t.Helper()
		select {
		case r := <-seen:
			t.Fatalf("the handler received %s from a connection that had not authenticated", kmsg.NameForKey(r.APIKey))
		default:
		}
	}
	// metadataAs checks that a Metadata request reaches the handler with
	// the principal and mechanism.
	metadataAs := func(t *testing.T, rc *rawClient, mech string) *socketserver.Request {
		t.Helper()
		resp := rc.roundTrip(metadataReq(9)).(*kmsg.MetadataResponse)
		assert.Equal(t, int16(9), resp.Version)
		r := recv(t, seen)
		assert.Equal(t, alice, r.Conn.Principal)
		assert.Equal(t, mech, r.Conn.SASLMechanism)
		return r
	}

	t.Run("requests before authentication close the connection", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			before func(rc *rawClient)
			req    kmsg.Request
		}{
			{"Metadata first", func(*rawClient) {}, metadataReq(9)},
			{"Metadata after ApiVersions", func(rc *rawClient) { rc.roundTrip(apiVersionsReq(3, "test", "1")) }, metadataReq(9)},
			{"Produce after SaslHandshake v0", func(rc *rawClient) { rc.handshake(0, "PLAIN") }, kmsg.NewPtrProduceRequest()},
			{"SaslAuthenticate before SaslHandshake", func(*rawClient) {}, saslAuthenticateReq(1, plainToken("alice", alicePassword))},
			{"SaslAuthenticate after ApiVersions", func(rc *rawClient) { rc.roundTrip(apiVersionsReq(3, "test", "1")) },
				saslAuthenticateReq(2, plainToken("alice", alicePassword))},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				tc.before(rc)
				rc.send(tc.req)
				requireClosedNoResponse(t, rc.c)
				requireNothingSeen(t)
			})
		}
	})

	t.Run("every enabled API before authentication closes the connection", func(t *testing.T) {
		// After SaslHandshake v1 (the stages that allow only
		// SaslAuthenticate) Kafka answers any other request with its own
		// error response, ILLEGAL_SASL_STATE (TestIllegalSASLState), unless
		// the response has no error code to carry it; before, and after
		// SaslHandshake v0, the connection closes unanswered.
		// The APIs come from the listener's own ApiVersions answer, which
		// lists them all before authentication, as Kafka's does.
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		av := rc.roundTrip(apiVersionsReq(3, "test", "1")).(*kmsg.ApiVersionsResponse)
		require.Equal(t, int16(0), av.ErrorCode)
		require.Greater(t, len(av.ApiKeys), 50)
		rc.c.Close()
		stages := []struct {
			name     string
			before   func(rc *rawClient)
			skip     []int16 // the requests this stage allows
			answered bool    // error responses come before the close
		}{
			{"first request", func(*rawClient) {}, []int16{17, 18}, false},
			{"after ApiVersions", func(rc *rawClient) { rc.roundTrip(apiVersionsReq(3, "test", "1")) }, []int16{17}, false},
			{"after SaslHandshake v1", func(rc *rawClient) {
				require.Equal(t, int16(0), rc.handshake(1, "PLAIN").ErrorCode)
			}, []int16{36}, true},
			{"mid SCRAM", func(rc *rawClient) {
				require.Equal(t, int16(0), rc.handshake(1, "SCRAM-SHA-256").ErrorCode)
				first, _ := newSASLClient(t, "SCRAM-SHA-256", "alice", alicePassword)(nil)
				require.Equal(t, int16(0), rc.authenticate(1, first).ErrorCode)
			}, []int16{36}, true},
			// After SaslHandshake v0 the next frame is a raw token: any
			// request is a malformed one.
			{"after SaslHandshake v0", func(rc *rawClient) {
				require.Equal(t, int16(0), rc.handshake(0, "PLAIN").ErrorCode)
			}, nil, false},
		}
		n, answered := 0, 0
		for _, st := range stages {
			for _, k := range av.ApiKeys {
				if slices.Contains(st.skip, k.ApiKey) {
					continue
				}
				versions := []int16{k.MaxVersion}
				if st.name == "first request" && k.MinVersion != k.MaxVersion {
					versions = append(versions, k.MinVersion)
				}
				for _, v := range versions {
					rc := dialRaw(t, srv, "SASL_PLAINTEXT")
					st.before(rc)
					req := kmsg.RequestForKey(k.ApiKey)
					req.SetVersion(v)
					rc.send(req)
					if st.answered && illegalStateAnswerable(req) {
						resp := req.ResponseKind()
						resp.SetVersion(v)
						readResponse(t, rc.c, resp, rc.corr)
						answered++
					}
					requireClosedNoResponse(t, rc.c)
					requireNothingSeen(t)
					rc.c.Close()
					n++
				}
			}
		}
		t.Logf("%d APIs, %d requests before authentication, all closed, %d after an error response", len(av.ApiKeys), n, answered)
		requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
		requireNothingSeen(t)
	})

	t.Run("unknown mechanism", func(t *testing.T) {
		for _, v := range []int16{0, 1} {
			for _, mech := range []string{"GSSAPI", "plain", "OAUTHBEARER", ""} {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				resp := rc.handshake(v, mech)
				assert.Equal(t, int16(33), resp.ErrorCode, "v%d %q", v, mech)
				assert.Equal(t, mechanisms, resp.SupportedMechanisms)
				requireClosedNoResponse(t, rc.c)
			}
		}
		requireNothingSeen(t)
	})

	t.Run("SaslHandshake lists the enabled mechanisms", func(t *testing.T) {
		for _, v := range []int16{0, 1} {
			for _, mech := range mechanisms {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				resp := rc.handshake(v, mech)
				assert.Equal(t, int16(0), resp.ErrorCode)
				assert.Equal(t, mechanisms, resp.SupportedMechanisms, "v%d %s", v, mech)
			}
		}
	})

	t.Run("SaslHandshake v0 and raw tokens", func(t *testing.T) {
		// kafka-python's PLAIN flow: the server's answer to the token is a
		// size-prefixed empty token.
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Equal(t, int16(0), rc.handshake(0, "PLAIN").ErrorCode)
		write(t, rc.c, frame(plainToken("alice", alicePassword)))
		var reply [4]byte
		_, err := io.ReadFull(rc.c, reply[:])
		require.NoError(t, err)
		assert.Equal(t, [4]byte{}, reply, "want an empty size-prefixed token")
		metadataAs(t, rc, "PLAIN")
		metadataAs(t, rc, "PLAIN")

		// SCRAM takes two rounds of raw tokens.
		rc = dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Equal(t, int16(0), rc.handshake(0, "SCRAM-SHA-256").ErrorCode)
		rc.rawExchange(newSASLClient(t, "SCRAM-SHA-256", "alice", alicePassword))
		metadataAs(t, rc, "SCRAM-SHA-256")

		// A wrong password cannot be answered in this framing: close.
		rc = dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Equal(t, int16(0), rc.handshake(0, "PLAIN").ErrorCode)
		write(t, rc.c, frame(plainToken("alice", bobPassword)))
		requireClosedNoResponse(t, rc.c)
		requireNothingSeen(t)
	})

	t.Run("ApiVersions, SaslHandshake, SaslAuthenticate v0 to v2", func(t *testing.T) {
		for _, mech := range mechanisms {
			for v := int16(0); v <= 2; v++ {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				av := rc.roundTrip(apiVersionsReq(3, "raw-client", "1.2.3")).(*kmsg.ApiVersionsResponse)
				require.Equal(t, int16(0), av.ErrorCode)
				assert.Greater(t, len(av.ApiKeys), 50, "the full API list, as Kafka answers before authentication")
				resp := rc.login(mech, "alice", alicePassword, v)
				require.Equal(t, int16(0), resp.ErrorCode, "%s v%d", mech, v)
				assert.Nil(t, resp.ErrorMessage)
				assert.Zero(t, resp.SessionLifetimeMillis, "no connections.max.reauth.ms")
				r := metadataAs(t, rc, mech)
				assert.Equal(t, "raw-client", r.Conn.ClientSoftwareName)
				assert.Equal(t, "1.2.3", r.Conn.ClientSoftwareVersion)
			}
		}
	})

	t.Run("a second ApiVersions before SaslHandshake closes", func(t *testing.T) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		rc.roundTrip(apiVersionsReq(3, "test", "1"))
		rc.send(apiVersionsReq(3, "test", "1"))
		requireClosedNoResponse(t, rc.c)
	})

	t.Run("too-new and invalid ApiVersions are answered and the exchange goes on", func(t *testing.T) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		rc.send(apiVersionsReq(100, "test", "1"))
		tooNew := kmsg.NewPtrApiVersionsResponse() // answered in the v0 layout
		readResponse(t, rc.c, tooNew, rc.corr)
		assert.Equal(t, int16(35), tooNew.ErrorCode)
		assert.Equal(t, []keyRange{{18, 0, 4}}, ranges(tooNew.ApiKeys))

		invalid := rc.roundTrip(apiVersionsReq(3, "-bad name-", "1")).(*kmsg.ApiVersionsResponse)
		assert.Equal(t, int16(42), invalid.ErrorCode)

		ok := rc.roundTrip(apiVersionsReq(3, "test", "1")).(*kmsg.ApiVersionsResponse)
		assert.Equal(t, int16(0), ok.ErrorCode)
		require.Equal(t, int16(0), rc.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
		metadataAs(t, rc, "PLAIN")
	})

	t.Run("sasl.server.max.receive.size", func(t *testing.T) {
		// A frame of exactly the limit is read.
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version = 1
		req.Mechanism = string(make([]byte, 1000-len(requestFrame(req, 1, strp("t")))+4))
		f := requestFrame(req, 1, strp("t"))
		require.Len(t, f, 1004)
		write(t, rc.c, f)
		resp := kmsg.NewPtrSASLHandshakeResponse()
		resp.Version = 1
		readResponse(t, rc.c, resp, 1)
		assert.Equal(t, int16(33), resp.ErrorCode)

		// One byte more closes the connection before its body is sent.
		for _, tc := range []struct {
			name   string
			before func(rc *rawClient)
		}{
			{"first frame", func(*rawClient) {}},
			{"after ApiVersions", func(rc *rawClient) { rc.roundTrip(apiVersionsReq(3, "test", "1")) }},
			{"after SaslHandshake v1", func(rc *rawClient) { rc.handshake(1, "PLAIN") }},
			{"after SaslHandshake v0", func(rc *rawClient) { rc.handshake(0, "PLAIN") }},
			{"mid SCRAM", func(rc *rawClient) {
				rc.handshake(1, "SCRAM-SHA-256")
				first, _ := newSASLClient(t, "SCRAM-SHA-256", "alice", alicePassword)(nil)
				rc.authenticate(1, first)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				tc.before(rc)
				write(t, rc.c, binary.BigEndian.AppendUint32(nil, 1001))
				start := time.Now()
				requireClosedNoResponse(t, rc.c)
				assert.Less(t, time.Since(start), time.Second)
			})
		}

		// After authentication socket.request.max.bytes applies instead.
		rc = dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Equal(t, int16(0), rc.login("PLAIN", "alice", alicePassword, 1).ErrorCode)
		big := metadataReq(9)
		for i := range 100 {
			topic := kmsg.NewMetadataRequestTopic()
			topic.Topic = kmsg.StringPtr("a-topic-name-of-some-length-" + strconv.Itoa(i))
			big.Topics = append(big.Topics, topic)
		}
		require.Greater(t, len(requestFrame(big, 1, strp("test"))), 2000)
		rc.roundTrip(big)
		recv(t, seen)
		requireNothingSeen(t)
	})

	t.Run("SASL requests after authentication", func(t *testing.T) {
		const msg = "SaslAuthenticate request received after successful authentication"
		for _, l := range []string{"SASL_PLAINTEXT", "PLAINTEXT"} {
			rc := dialRaw(t, srv, protocolmap.ListenerName(l))
			if l == "SASL_PLAINTEXT" {
				require.Equal(t, int16(0), rc.login("SCRAM-SHA-256", "alice", alicePassword, 1).ErrorCode)
			}
			for v := int16(0); v <= 2; v++ {
				resp := rc.authenticate(v, plainToken("alice", alicePassword))
				assert.Equal(t, int16(34), resp.ErrorCode, "%s SaslAuthenticate v%d", l, v)
				require.NotNil(t, resp.ErrorMessage)
				assert.Equal(t, msg, *resp.ErrorMessage)
			}
			for v := int16(0); v <= 1; v++ {
				// Without re-authentication KafkaApis.handleSaslHandshakeRequest
				// answers: ILLEGAL_SASL_STATE and no mechanisms.
				resp := rc.handshake(v, "PLAIN")
				assert.Equal(t, int16(34), resp.ErrorCode, "%s SaslHandshake v%d", l, v)
				assert.Empty(t, resp.SupportedMechanisms, "%s SaslHandshake v%d", l, v)
			}
			// The connection stays open and serves requests.
			rc.roundTrip(metadataReq(9))
			r := recv(t, seen)
			assert.Equal(t, int16(3), r.APIKey)
		}
		requireNothingSeen(t)
	})
}

// kafkanet.handshake.timeout.ms bounds the TLS handshake and the SASL
// exchange together, from the accept: a client that stalls anywhere in
// them is closed when it runs out. An authenticated connection is no
// longer subject to it.
func TestHandshakeTimeout(t *testing.T) {
	pki := newTestPKI(t)
	users := newUsers(t)
	props := func(timeoutMS string) config.Properties {
		return merge(pki.props(""), config.Properties{
			"listeners":                      "SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
			"security.inter.broker.protocol": "SSL",
			"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
			"kafkanet.handshake.timeout.ms":  timeoutMS,
			"num.network.threads":            "1",
		})
	}
	const timeout = 300 * time.Millisecond
	srv := socketservertest.NewServer(t, props("300"), withUsers(users), echoMetadata)

	t.Run("stalled clients are closed", func(t *testing.T) {
		for _, tc := range []struct {
			name, listener string
			stall          func(t *testing.T, c net.Conn)
		}{
			{"TLS client sends nothing", "SSL", func(*testing.T, net.Conn) {}},
			{"TLS client sends part of a record", "SSL", func(t *testing.T, c net.Conn) { write(t, c, []byte{22, 3, 1, 1}) }},
			{"SASL client sends nothing", "SASL_PLAINTEXT", func(*testing.T, net.Conn) {}},
			{"SASL client stops after ApiVersions", "SASL_PLAINTEXT", func(t *testing.T, c net.Conn) {
				(&rawClient{t: t, c: c}).roundTrip(apiVersionsReq(3, "test", "1"))
			}},
			{"SASL client stops after SaslHandshake", "SASL_PLAINTEXT", func(t *testing.T, c net.Conn) {
				(&rawClient{t: t, c: c}).handshake(1, "SCRAM-SHA-256")
			}},
			{"SASL client stops mid SCRAM", "SASL_PLAINTEXT", func(t *testing.T, c net.Conn) {
				rc := &rawClient{t: t, c: c}
				rc.handshake(1, "SCRAM-SHA-256")
				first, _ := newSASLClient(t, "SCRAM-SHA-256", "alice", alicePassword)(nil)
				require.Equal(t, int16(0), rc.authenticate(1, first).ErrorCode)
			}},
			{"SASL client sends part of a frame", "SASL_PLAINTEXT", func(t *testing.T, c net.Conn) {
				write(t, c, requestFrame(apiVersionsReq(3, "test", "1"), 1, nil)[:10])
			}},
			{"SASL_SSL client stops after the TLS handshake", "SASL_SSL", func(t *testing.T, c net.Conn) {
				require.NoError(t, tls.Client(c, pki.clientConfig()).Handshake())
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				start := time.Now() // before the server's clock starts
				c := socketservertest.Dial(t, srv, protocolmap.ListenerName(tc.listener))
				tc.stall(t, c)
				readUntilClosed(t, c, 10*time.Second)
				took := time.Since(start)
				assert.GreaterOrEqual(t, took, timeout)
				assert.Less(t, took, timeout+2*time.Second)
			})
		}
	})

	t.Run("authenticated connections outlive the timeout", func(t *testing.T) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Equal(t, int16(0), rc.login("PLAIN", "alice", alicePassword, 1).ErrorCode)
		requireOpen(t, rc.c, 2*timeout)
		rc.roundTrip(metadataReq(9))

		c := tls.Client(socketservertest.Dial(t, srv, "SSL"), pki.clientConfig())
		require.NoError(t, c.Handshake())
		requireOpen(t, c, 2*timeout)
		metadataRoundTrip(t, c, 9, 1)
	})

	t.Run("stalled handshakes hold up no one", func(t *testing.T) {
		// A timeout far longer than the test: the stalled connections stay
		// stalled while good clients come and go, on the single processor.
		seen := make(chan *socketserver.Request, 10)
		srv := socketservertest.NewServer(t, props("60000"), withUsers(users), recording(seen))
		const stalled = 10
		for range stalled {
			socketservertest.Dial(t, srv, "SSL")
			socketservertest.Dial(t, srv, "SASL_SSL")
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			rc.roundTrip(apiVersionsReq(3, "test", "1"))
		}
		requireConnCount(t, srv, "SSL", stalled)
		requireConnCount(t, srv, "SASL_SSL", stalled)
		requireConnCount(t, srv, "SASL_PLAINTEXT", stalled)

		start := time.Now()
		c := tls.Client(socketservertest.Dial(t, srv, "SSL"), pki.clientConfig())
		metadataRoundTrip(t, c, 9, 1)
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Equal(t, int16(0), rc.login("SCRAM-SHA-512", "alice", alicePassword, 2).ErrorCode)
		rc.roundTrip(metadataReq(9))
		cl := newKgo(t, srv, "SASL_SSL", kgo.DialTLSConfig(pki.clientConfig()),
			kgo.SASL(kgoMechanism("SCRAM-SHA-256", "alice", alicePassword)))
		require.NoError(t, kgoMetadata(cl))
		assert.Less(t, time.Since(start), 5*time.Second, "good clients waited behind stalled handshakes")

		st := srv.Stats().ConnectionCount
		assert.Equal(t, stalled+1, st["SSL"], "the stalled TLS connections are still there")
		assert.Equal(t, stalled+1, st["SASL_SSL"])
		assert.Equal(t, stalled+1, st["SASL_PLAINTEXT"])
		for range 3 {
			recv(t, seen)
		}
	})
}

// newReauthServer starts a SASL_PLAINTEXT listener with
// connections.max.reauth.ms=2000 (KIP-368) and no failed-authentication
// delay. (kgo re-authenticates at the lifetime less at least a second, and
// Kafka refuses a re-authentication within a second of the last one: a
// lifetime of 2 s is the shortest on which kgo keeps re-authenticating.)
func newReauthServer(t testing.TB, users sasl.CredentialStore) (*socketserver.Server, chan *socketserver.Request) {
	t.Helper()
	seen := make(chan *socketserver.Request, 1000)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"connections.max.reauth.ms":                 "2000",
		"connection.failed.authentication.delay.ms": "0",
	}), withUsers(users), recording(seen))
	return srv, seen
}

// KIP-368 re-authentication with connections.max.reauth.ms=2000.
func TestReauthentication(t *testing.T) {
	const lifetime = 2 * time.Second
	users := newUsers(t)

	t.Run("SaslAuthenticate carries the session lifetime", func(t *testing.T) {
		t.Parallel()
		srv, seen := newReauthServer(t, users)
		for _, mech := range mechanisms {
			for v := int16(0); v <= 2; v++ {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				resp := rc.login(mech, "alice", alicePassword, v)
				require.Equal(t, int16(0), resp.ErrorCode)
				if v >= 1 { // v0 has no field for it
					assert.Equal(t, lifetime.Milliseconds(), resp.SessionLifetimeMillis, "%s v%d", mech, v)
				}
				rc.roundTrip(metadataReq(9))
				r := recv(t, seen)
				assert.Equal(t, lifetime, r.Conn.SessionExpiry.Sub(r.Conn.AuthenticatedAt))
				assert.True(t, r.ReceivedAt.Before(r.Conn.SessionExpiry))
			}
		}
	})

	t.Run("kgo re-authenticates across several lifetimes", func(t *testing.T) {
		for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
			t.Run(mech, func(t *testing.T) {
				t.Parallel()
				srv, seen := newReauthServer(t, users)
				cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(mech, "alice", alicePassword)))
				tick := time.NewTicker(50 * time.Millisecond) // pacing, not synchronisation
				defer tick.Stop()
				n := 0
				for end := time.Now().Add(3 * lifetime); time.Now().Before(end); n++ {
					require.NoError(t, kgoMetadata(cl), "request %d", n)
					<-tick.C
				}
				conns := map[string]bool{}
				sessions := map[time.Time]bool{}
				for range n {
					r := recv(t, seen)
					assert.Equal(t, alice, r.Conn.Principal)
					assert.Equal(t, mech, r.Conn.SASLMechanism)
					assert.True(t, r.ReceivedAt.Before(r.Conn.SessionExpiry), "a request served on an expired session")
					conns[r.Conn.ID] = true
					sessions[r.Conn.AuthenticatedAt] = true
				}
				assert.Len(t, conns, 1, "kgo should re-authenticate in place, on one connection")
				assert.GreaterOrEqual(t, len(sessions), 3, "too few re-authentications in %d requests", n)
			})
		}
	})

	t.Run("after the session expires", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			req  kmsg.Request
		}{
			{"Metadata closes", metadataReq(9)},
			{"Produce closes", kmsg.NewPtrProduceRequest()},
			{"ApiVersions closes", apiVersionsReq(3, "test", "1")},
			{"SaslAuthenticate closes", saslAuthenticateReq(2, plainToken("alice", alicePassword))},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				srv, seen := newReauthServer(t, users)
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Equal(t, int16(0), rc.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
				rc.roundTrip(metadataReq(9))
				r := recv(t, seen)
				time.Sleep(time.Until(r.Conn.SessionExpiry) + 10*time.Millisecond) // the session's own clock
				rc.send(tc.req)
				requireClosedNoResponse(t, rc.c)
				assert.Empty(t, seen, "a request on an expired session reached the handler")
			})
		}
		t.Run("re-authentication is still allowed", func(t *testing.T) {
			t.Parallel()
			srv, seen := newReauthServer(t, users)
			rc := dialRaw(t, srv, "SASL_PLAINTEXT")
			require.Equal(t, int16(0), rc.login("SCRAM-SHA-256", "alice", alicePassword, 1).ErrorCode)
			rc.roundTrip(metadataReq(9))
			r := recv(t, seen)
			time.Sleep(time.Until(r.Conn.SessionExpiry) + 10*time.Millisecond)
			resp := rc.login("SCRAM-SHA-256", "alice", alicePassword, 1)
			require.Equal(t, int16(0), resp.ErrorCode)
			assert.Equal(t, lifetime.Milliseconds(), resp.SessionLifetimeMillis)
			rc.roundTrip(metadataReq(9))
			r2 := recv(t, seen)
			assert.Equal(t, r.Conn.ID, r2.Conn.ID)
			assert.True(t, r2.Conn.AuthenticatedAt.After(r.Conn.SessionExpiry))
		})
	})

	t.Run("re-authentication by hand", func(t *testing.T) {
		srv, seen := newReauthServer(t, users)
		const generic = "Authentication failed during re-authentication due to invalid credentials with SASL mechanism "
		for _, tc := range []struct {
			name                    string
			firstMech, mech, user   string
			pass                    string
			handshakeV              int16
			wantHandshake, wantAuth int16
			wantMsg                 string
			badMechanism            bool
		}{
			{name: "same user and mechanism", firstMech: "PLAIN", mech: "PLAIN", user: "alice", pass: alicePassword, handshakeV: 1},
			{name: "same user, SCRAM", firstMech: "SCRAM-SHA-512", mech: "SCRAM-SHA-512", user: "alice", pass: alicePassword, handshakeV: 1},
			{name: "another user", firstMech: "PLAIN", mech: "PLAIN", user: "bob", pass: bobPassword, handshakeV: 1,
				wantAuth: 58, wantMsg: "Cannot change principals during re-authentication from User.alice: User.bob"},
			{name: "another user, SCRAM", firstMech: "SCRAM-SHA-256", mech: "SCRAM-SHA-256", user: "bob", pass: bobPassword, handshakeV: 1,
				wantAuth: 58, wantMsg: "Cannot change principals during re-authentication from User.alice: User.bob"},
			{name: "wrong password, PLAIN", firstMech: "PLAIN", mech: "PLAIN", user: "alice", pass: "wrong", handshakeV: 1,
				wantAuth: 58, wantMsg: "Authentication failed: Invalid username or password"},
			{name: "wrong password, SCRAM", firstMech: "SCRAM-SHA-256", mech: "SCRAM-SHA-256", user: "alice", pass: "wrong", handshakeV: 1,
				wantAuth: 58, wantMsg: generic + "SCRAM-SHA-256"},
			// SaslServerAuthenticator: another enabled mechanism gets a
			// successful SaslHandshake (REAUTH_BAD_MECHANISM), and the
			// client's next packet a delayed close without a response.
			{name: "another mechanism", firstMech: "PLAIN", mech: "SCRAM-SHA-256", user: "alice", pass: alicePassword, handshakeV: 1, badMechanism: true},
			{name: "a mechanism not enabled", firstMech: "PLAIN", mech: "GSSAPI", handshakeV: 1, wantHandshake: 33},
			// Kafka re-authenticates after SaslHandshake v0 too, with raw tokens.
			{name: "SaslHandshake v0", firstMech: "PLAIN", mech: "PLAIN", user: "alice", pass: alicePassword, handshakeV: 0},
			{name: "SaslHandshake v0, SCRAM", firstMech: "SCRAM-SHA-512", mech: "SCRAM-SHA-512", user: "alice", pass: alicePassword, handshakeV: 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				require.Equal(t, int16(0), rc.login(tc.firstMech, "alice", alicePassword, 2).ErrorCode)
				rc.roundTrip(metadataReq(9))
				first := recv(t, seen)

				hs := rc.handshake(tc.handshakeV, tc.mech)
				assert.Equal(t, tc.wantHandshake, hs.ErrorCode)
				assert.Equal(t, mechanisms, hs.SupportedMechanisms)
				if tc.wantHandshake != 0 {
					requireClosedNoResponse(t, rc.c)
					return
				}
				if tc.badMechanism {
					first, _ := newSASLClient(t, tc.mech, tc.user, tc.pass)(nil)
					rc.send(saslAuthenticateReq(2, first))
					requireClosedNoResponse(t, rc.c)
					return
				}
				if tc.handshakeV == 0 {
					rc.rawExchange(newSASLClient(t, tc.mech, tc.user, tc.pass))
					rc.roundTrip(metadataReq(9))
					again := recv(t, seen)
					assert.Equal(t, first.Conn.ID, again.Conn.ID)
					assert.True(t, again.Conn.AuthenticatedAt.After(first.Conn.AuthenticatedAt))
					return
				}
				resp := rc.exchange(newSASLClient(t, tc.mech, tc.user, tc.pass), 2)
				require.Equal(t, tc.wantAuth, resp.ErrorCode)
				if tc.wantAuth != 0 {
					require.NotNil(t, resp.ErrorMessage)
					assert.Equal(t, tc.wantMsg, *resp.ErrorMessage)
					requireClosedNoResponse(t, rc.c)
					return
				}
				assert.Equal(t, lifetime.Milliseconds(), resp.SessionLifetimeMillis)
				rc.roundTrip(metadataReq(9))
				again := recv(t, seen)
				assert.Equal(t, first.Conn.ID, again.Conn.ID)
				assert.Equal(t, alice, again.Conn.Principal)
				assert.True(t, again.Conn.AuthenticatedAt.After(first.Conn.AuthenticatedAt))
				assert.True(t, again.Conn.SessionExpiry.After(first.Conn.SessionExpiry))
			})
		}
		assert.Empty(t, seen)
	})

	// KafkaChannel.maybeBeginServerReauthentication: a connection cannot
	// re-authenticate within a second of its last re-authentication's
	// start; the SaslHandshake is then an ordinary request, which
	// KafkaApis answers with ILLEGAL_SASL_STATE and no mechanisms, and the
	// connection stays open.
	t.Run("at most one re-authentication a second", func(t *testing.T) {
		t.Parallel()
		srv, seen := newReauthServer(t, users)
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		require.Zero(t, rc.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
		// The first re-authentication may follow the authentication at once.
		// The server stamps it between before and after.
		before := time.Now()
		require.Zero(t, rc.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
		after := time.Now()
		hs := rc.handshake(1, "PLAIN")
		require.Less(t, time.Since(before), time.Second, "the test was too slow to show the rule")
		assert.Equal(t, kerr.IllegalSaslState.Code, hs.ErrorCode)
		assert.Empty(t, hs.SupportedMechanisms)
		rc.roundTrip(metadataReq(9))
		recv(t, seen)

		time.Sleep(time.Until(after.Add(time.Second + 10*time.Millisecond)))
		require.Zero(t, rc.login("PLAIN", "alice", alicePassword, 2).ErrorCode)
		rc.roundTrip(metadataReq(9))
		assert.Equal(t, alice, recv(t, seen).Conn.Principal)
	})

	t.Run("a removed user loses the connection at re-authentication", func(t *testing.T) {
		// The credential-revocation guarantee: once a user is gone from the
		// store, its connections end within connections.max.reauth.ms.
		for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
			t.Run(mech, func(t *testing.T) {
				t.Parallel()
				own := newUsers(t)
				srv, seen := newReauthServer(t, own)
				cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(mech, "alice", alicePassword)))
				require.NoError(t, kgoMetadata(cl))
				recv(t, seen)
				// Two raw clients: one will try to re-authenticate, the other
				// will not.
				reauth, idle := dialRaw(t, srv, "SASL_PLAINTEXT"), dialRaw(t, srv, "SASL_PLAINTEXT")
				var expiry time.Time
				for _, rc := range []*rawClient{reauth, idle} {
					require.Equal(t, int16(0), rc.login(mech, "alice", alicePassword, 2).ErrorCode)
					rc.roundTrip(metadataReq(9))
					expiry = recv(t, seen).Conn.SessionExpiry
				}
				requireConnCount(t, srv, "SASL_PLAINTEXT", 3)

				require.NoError(t, own.Replace(map[string]string{"bob": bobPassword}))
				time.Sleep(lifetime / 2) // kgo re-authenticates from a second before the lifetime ends
				err := kgoMetadata(cl)
				require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)

				resp := reauth.login(mech, "alice", alicePassword, 2)
				assert.Equal(t, int16(58), resp.ErrorCode)
				requireClosedNoResponse(t, reauth.c)

				time.Sleep(time.Until(expiry) + 10*time.Millisecond) // the session's own clock
				idle.send(metadataReq(9))
				requireClosedNoResponse(t, idle.c)
				requireConnCount(t, srv, "SASL_PLAINTEXT", 0)
			})
		}
	})
}

// The server's logs, at debug level, never hold a password or a token
// of the exchange, whether authentication succeeds or fails, in any
// framing.
func TestLogsHoldNoCredentials(t *testing.T) {
	users := newUsers(t)
	var logs testkit.SyncBuffer
	seen := make(chan *socketserver.Request, 100)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"connection.failed.authentication.delay.ms": "0",
		"connections.max.reauth.ms":                 "60000",
	}), func(c *socketserver.Config) {
		withUsers(users)(c)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}, recording(seen))

	const wrong = "wrong-Pw-9e0d7a13" // a wrong password is a secret too: a typo of the right one
	var tokens [][]byte
	run := func(f func(rc *rawClient)) {
		rc := dialRaw(t, srv, "SASL_PLAINTEXT")
		f(rc)
		tokens = append(tokens, rc.tokens...)
		rc.c.Close()
	}
	for _, mech := range mechanisms {
		for _, pass := range []string{alicePassword, wrong} {
			run(func(rc *rawClient) { rc.login(mech, "alice", pass, 2) })
			run(func(rc *rawClient) { // re-authentication
				require.Equal(t, int16(0), rc.login(mech, "alice", alicePassword, 1).ErrorCode)
				rc.login(mech, "alice", pass, 1)
			})
			run(func(rc *rawClient) { // re-authentication as another user
				require.Equal(t, int16(0), rc.login(mech, "alice", alicePassword, 1).ErrorCode)
				require.Equal(t, int16(58), rc.login(mech, "bob", bobPassword, 1).ErrorCode)
			})
			run(func(rc *rawClient) { // SaslHandshake v0
				rc.handshake(0, mech)
				cl := newSASLClient(t, mech, "alice", pass)
				token, _ := cl(nil)
				rc.tokens = append(rc.tokens, token)
				write(t, rc.c, frame(token))
				if mech != "PLAIN" {
					if challenge, err := readFrameErr(rc.c); err == nil {
						token, _ = cl(challenge)
						rc.tokens = append(rc.tokens, token)
						write(t, rc.c, frame(token))
					}
				}
				_, _ = readFrameErr(rc.c) // the server's last token, or the close
			})
		}
		// Malformed tokens carrying the password.
		run(func(rc *rawClient) {
			rc.handshake(1, mech)
			rc.authenticate(1, []byte("n,,n=alice,p="+alicePassword))
		})
		cl := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(mech, "alice", alicePassword)))
		require.NoError(t, kgoMetadata(cl))
		cl.Close()
		bad := newKgo(t, srv, "SASL_PLAINTEXT", kgo.SASL(kgoMechanism(mech, "alice", wrong)))
		require.ErrorIs(t, kgoMetadata(bad), kerr.SaslAuthenticationFailed)
		bad.Close()
	}
	// Every connection has ended, so each has logged all it will.
	requireConnCount(t, srv, "SASL_PLAINTEXT", 0)

	out := logs.String()
	require.Contains(t, out, "closing connection during authentication", "the failures were not logged: the test would prove nothing")
	secrets := []string{alicePassword, bobPassword, wrong}
	for _, p := range []string{alicePassword, bobPassword, wrong} {
		secrets = append(secrets, base64.StdEncoding.EncodeToString([]byte(p)), hex.EncodeToString([]byte(p)))
	}
	for _, tok := range tokens {
		if len(tok) < 8 {
			continue
		}
		secrets = append(secrets, base64.StdEncoding.EncodeToString(tok), base64.RawStdEncoding.EncodeToString(tok), hex.EncodeToString(tok))
		if i := bytes.Index(tok, []byte(",p=")); i >= 0 { // a SCRAM proof
			secrets = append(secrets, string(tok[i+3:]))
		}
	}
	for _, s := range secrets {
		assert.NotContains(t, out, s)
	}
}

func readFrameErr(c net.Conn) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, b)
	return b, err
}

// illegalStateAnswerable reports whether Kafka answers req, arriving when
// only SaslAuthenticate may, with an error response: its getErrorResponse
// builds one for every type, and kafkanet for the types it mirrors and
// those with a top-level error code; Produce with acks=0 gets none.
func illegalStateAnswerable(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		return r.Acks != 0
	case *kmsg.ListOffsetsRequest, *kmsg.OffsetCommitRequest, *kmsg.DescribeGroupsRequest,
		*kmsg.CreateTopicsRequest, *kmsg.DeleteTopicsRequest:
		return true
	}
	f := reflect.ValueOf(req.ResponseKind()).Elem().FieldByName("ErrorCode")
	return f.IsValid() && f.Kind() == reflect.Int16
}

// TestIllegalSASLState: after a successful SaslHandshake v1 only
// SaslAuthenticate may come. Kafka's SaslServerAuthenticator.handleSaslToken
// answers any other request with that request's error response
// (AbstractRequest.getErrorResponse) for IllegalSaslStateException
// "Unexpected Kafka request of type <KEY> during SASL authentication.",
// ILLEGAL_SASL_STATE, sent after connection.failed.authentication.delay.ms,
// and then closes the connection.
func TestIllegalSASLState(t *testing.T) {
	const delay = 200 * time.Millisecond
	seen := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, saslProps(config.Properties{
		"connection.failed.authentication.delay.ms": strconv.Itoa(int(delay / time.Millisecond)),
	}), withUsers(newUsers(t)), recording(seen))
	illegal := kerr.IllegalSaslState.Code
	topic := func(name string) kmsg.MetadataRequestTopic {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = &name
		return mt
	}
	for _, tc := range []struct {
		name  string
		req   kmsg.Request
		check func(t *testing.T, resp kmsg.Response)
	}{
		{"Metadata", func() kmsg.Request {
			r := metadataReq(12)
			r.Topics = []kmsg.MetadataRequestTopic{topic("a"), topic("b")}
			return r
		}(), func(t *testing.T, resp kmsg.Response) {
			r := resp.(*kmsg.MetadataResponse)
			require.Len(t, r.Topics, 2)
			for i, name := range []string{"a", "b"} {
				assert.Equal(t, name, *r.Topics[i].Topic)
				assert.Equal(t, illegal, r.Topics[i].ErrorCode)
				assert.Empty(t, r.Topics[i].Partitions)
			}
			assert.Zero(t, r.ErrorCode, "MetadataRequest.getErrorResponse sets no top-level error")
		}},
		{"Metadata of all topics", metadataReq(9), func(t *testing.T, resp kmsg.Response) {
			assert.Empty(t, resp.(*kmsg.MetadataResponse).Topics)
		}},
		{"ApiVersions", apiVersionsReq(3, "test", "1"), func(t *testing.T, resp kmsg.Response) {
			r := resp.(*kmsg.ApiVersionsResponse)
			assert.Equal(t, illegal, r.ErrorCode)
			assert.Empty(t, r.ApiKeys)
		}},
		{"Produce", func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks = 9, -1
			for _, p := range []int32{0, 1} {
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			}
			return r
		}(), func(t *testing.T, resp kmsg.Response) {
			r := resp.(*kmsg.ProduceResponse)
			require.Len(t, r.Topics, 1, "one entry per topic")
			require.Len(t, r.Topics[0].Partitions, 2)
			for i, p := range r.Topics[0].Partitions {
				assert.Equal(t, int32(i), p.Partition)
				assert.Equal(t, illegal, p.ErrorCode)
				assert.Equal(t, int64(-1), p.BaseOffset)
				require.NotNil(t, p.ErrorMessage)
				assert.Equal(t, "Unexpected Kafka request of type PRODUCE during SASL authentication.", *p.ErrorMessage)
			}
		}},
		{"FindCoordinator", func() kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.Version, r.CoordinatorKeys = 4, []string{"g1", "g2"}
			return r
		}(), func(t *testing.T, resp kmsg.Response) {
			r := resp.(*kmsg.FindCoordinatorResponse)
			require.Len(t, r.Coordinators, 2)
			assert.Equal(t, "g2", r.Coordinators[1].Key)
			assert.Equal(t, illegal, r.Coordinators[1].ErrorCode)
			assert.Equal(t, int32(-1), r.Coordinators[1].NodeID)
		}},
		{"Heartbeat", func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version = 4
			return r
		}(), func(t *testing.T, resp kmsg.Response) {
			assert.Equal(t, illegal, resp.(*kmsg.HeartbeatResponse).ErrorCode)
		}},
		{"SaslHandshake", func() kmsg.Request {
			r := kmsg.NewPtrSASLHandshakeRequest()
			r.Version, r.Mechanism = 1, "PLAIN"
			return r
		}(), func(t *testing.T, resp kmsg.Response) {
			r := resp.(*kmsg.SASLHandshakeResponse)
			assert.Equal(t, illegal, r.ErrorCode)
			assert.Empty(t, r.SupportedMechanisms)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mid := range []bool{false, true} { // right after SaslHandshake, and mid SCRAM
				rc := dialRaw(t, srv, "SASL_PLAINTEXT")
				if mid {
					require.Zero(t, rc.handshake(1, "SCRAM-SHA-256").ErrorCode)
					first, _ := newSASLClient(t, "SCRAM-SHA-256", "alice", alicePassword)(nil)
					require.Zero(t, rc.authenticate(1, first).ErrorCode)
				} else {
					require.Zero(t, rc.handshake(1, "PLAIN").ErrorCode)
				}
				start := time.Now()
				resp := rc.roundTrip(tc.req)
				assert.GreaterOrEqual(t, time.Since(start), delay, "answered before the failed-authentication delay")
				tc.check(t, resp)
				requireClosedNoResponse(t, rc.c)
			}
		})
	}
	assert.Empty(t, seen, "a request reached the handler before authentication")
}

// Shutdown does not wait out connection.failed.authentication.delay.ms:
// a connection delaying its failed authentication's answer gets it at
// once, and closes.
func TestShutdownCutsTheAuthenticationFailureDelayShort(t *testing.T) {
	srv, stop, err := socketservertest.Start(saslProps(config.Properties{
		"connection.failed.authentication.delay.ms": "60000",
	}), withUsers(newUsers(t)), echoMetadata)
	require.NoError(t, err)
	defer stop()
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Equal(t, int16(0), rc.handshake(1, "PLAIN").ErrorCode)
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	req.SASLAuthBytes = plainToken("alice", "wrong")
	rc.send(req)
	waitFor(t, 10*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("socketserver.(*conn).failAuthentication"))
	}, "the failed authentication is being delayed")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, srv.Shutdown(ctx))
	assert.Less(t, time.Since(start), 5*time.Second, "Shutdown waited for the delay")
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	resp.Version = 1
	readResponse(t, rc.c, resp, rc.corr)
	assert.Equal(t, int16(58), resp.ErrorCode)
	requireClosedNoResponse(t, rc.c)
}

// shutdownOnCreated starts Shutdown from HookConnCreated, on a goroutine
// of its own, and lets it drain before the connection's goroutine starts
// its handshake.
type shutdownOnCreated struct {
	srv  atomic.Pointer[socketserver.Server]
	done chan error
	once sync.Once
}

func (h *shutdownOnCreated) OnConnCreated(connregistry.Info) {
	h.once.Do(func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h.done <- h.srv.Load().Shutdown(ctx)
		}()
		time.Sleep(100 * time.Millisecond)
	})
}

// A connection whose handshake begins after Shutdown woke it closes: the
// handshake's deadline does not undo the wake, so Shutdown does not wait
// for kafkanet.handshake.timeout.ms. It waited out the timeout before.
func TestShutdownBeforeTheHandshakeBegins(t *testing.T) {
	h := &shutdownOnCreated{done: make(chan error, 1)}
	srv, stop, err := socketservertest.Start(saslProps(config.Properties{
		"kafkanet.handshake.timeout.ms": "30000",
	}), func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.Hooks = append(c.Hooks, h)
	}, echoMetadata)
	require.NoError(t, err)
	defer stop()
	h.srv.Store(srv)
	c := socketservertest.Dial(t, srv, "SASL_PLAINTEXT") // sends nothing
	select {
	case err := <-h.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown waited for the handshake's timeout")
	}
	requireClosedNoResponse(t, c)
}
