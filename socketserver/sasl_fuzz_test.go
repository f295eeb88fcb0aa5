package socketserver_test

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// saslFuzzSeeds are the starts of SASL exchanges, good and bad, that seed
// FuzzSASLPreAuth (and, written out, its corpus under testdata). None holds
// the fuzz server's password, which is random.
func saslFuzzSeeds() map[string][]byte {
	hs := func(v int16, mech string) kmsg.Request {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, mech
		return r
	}
	f := func(corr int32, reqs ...kmsg.Request) []byte {
		var b []byte
		for _, r := range reqs {
			b = append(b, requestFrame(r, corr, strp("fuzz"))...)
			corr++
		}
		return b
	}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	return map[string][]byte{
		"apiversions":                 f(1, apiVersionsReq(3, "fuzz", "1")),
		"plain-v1-wrong-password":     f(1, apiVersionsReq(3, "fuzz", "1"), hs(1, "PLAIN"), saslAuthenticateReq(2, plainToken("alice", "guess"))),
		"plain-v1-then-metadata":      f(1, hs(1, "PLAIN"), saslAuthenticateReq(1, plainToken("alice", "guess")), metadataReq(9)),
		"plain-v0-raw-token":          cat(f(1, hs(0, "PLAIN")), frame(plainToken("alice", "guess")), f(3, metadataReq(1))),
		"scram-client-first":          f(1, hs(1, "SCRAM-SHA-256"), saslAuthenticateReq(0, []byte("n,,n=alice,r=fuzznonce"))),
		"scram-v0-client-first":       cat(f(1, hs(0, "SCRAM-SHA-512")), frame([]byte("n,,n=alice,r=fuzznonce"))),
		"metadata-first":              f(1, metadataReq(9)),
		"metadata-after-handshake":    f(1, hs(1, "PLAIN"), metadataReq(9)),
		"too-new-apiversions":         f(1, apiVersionsReq(100, "fuzz", "1"), hs(1, "PLAIN")),
		"two-apiversions":             f(1, apiVersionsReq(3, "fuzz", "1"), apiVersionsReq(0, "", "")),
		"authenticate-first":          f(1, saslAuthenticateReq(2, plainToken("alice", "guess"))),
		"unknown-mechanism":           f(1, hs(1, "GSSAPI")),
		"oversized-frame":             binary.BigEndian.AppendUint32(nil, 1<<20),
		"negative-frame":              {0xff, 0xff, 0xff, 0xfe, 0, 17},
		"tls-client-hello-prefix":     {22, 3, 1, 2, 0, 1, 0, 1, 0xfc, 3, 3},
		"handshake-header-only":       headerBytes(17, 1, 1, strp("x"), nil),
		"authenticate-empty-token-v2": f(1, hs(1, "SCRAM-SHA-512"), saslAuthenticateReq(2, []byte{})),
		"oauthbearer-v1-unsigned-token": f(1, hs(1, "OAUTHBEARER"), saslAuthenticateReq(2, oauthbearertest.ClientFirstMessage(fuzzUnsignedToken)),
			saslAuthenticateReq(2, []byte{oauthbearer.Separator}), metadataReq(9)),
		"oauthbearer-v1-then-metadata": f(1, hs(1, "OAUTHBEARER"), saslAuthenticateReq(1, []byte("n,,\x01auth=Bearer e30.e30.\x01\x01")), metadataReq(9)),
		"oauthbearer-v0-raw-token": cat(f(1, hs(0, "OAUTHBEARER")), frame(oauthbearertest.ClientFirstMessage(fuzzUnsignedToken)),
			frame([]byte{oauthbearer.Separator}), f(4, metadataReq(1))),
	}
}

// fuzzUnsignedToken is an unsigned token, which the fuzz server's
// OAUTHBEARER, validating against a JWKS, refuses.
const fuzzUnsignedToken = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6NDEwMjQ0NDgwMH0."

// FuzzSASLPreAuth sends arbitrary bytes as the first bytes of a
// SASL_PLAINTEXT connection over real TCP, then half-closes. The server
// must neither crash nor hang, and no request may ever reach the handler:
// only authenticating with the password, which is random and unknown to
// the fuzzer, or with a token signed by a key the fuzzer does not know
// (OAUTHBEARER against a JWKS), gets that far.
func FuzzSASLPreAuth(f *testing.F) {
	password := rand.Text()
	users, err := sasl.NewUsers(map[string]string{"alice": password})
	if err != nil {
		f.Fatal(err)
	}
	is := oauthbearertest.NewIssuer(f, "https://idp.example")
	is.AddKey(f, "k1", "ES256")
	var reached atomic.Int64
	h := socketserver.HandlerFunc(func(r *socketserver.Request) {
		reached.Add(1)
		_ = respondEmpty(r)
	})
	srv := socketservertest.NewServer(f, saslProps(config.Properties{
		"connection.failed.authentication.delay.ms":                                   "0",
		"kafkanet.handshake.timeout.ms":                                               "5000",
		"sasl.enabled.mechanisms":                                                     "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":                   config.OAuthBearerLoginModule + " required;",
		"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": config.OAuthBearerValidatorCallbackHandler,
		"sasl.oauthbearer.jwks.endpoint.url":                                          is.WriteJWKS(f),
	}), withOAuth(f, withUsers(users)), h)
	addr := srv.Addr("SASL_PLAINTEXT").String()

	// The handler is reachable with the password, and with a signed token:
	// the property is not vacuous.
	rc := dialRaw(f, srv, "SASL_PLAINTEXT")
	if resp := rc.login("SCRAM-SHA-256", "alice", password, 2); resp.ErrorCode != 0 {
		f.Fatalf("the real password does not authenticate: error %d", resp.ErrorCode)
	}
	rc.roundTrip(metadataReq(9))
	rc.c.Close()
	rc = dialRaw(f, srv, "SASL_PLAINTEXT")
	if resp := rc.handshake(1, "OAUTHBEARER"); resp.ErrorCode != 0 {
		f.Fatalf("OAUTHBEARER handshake: error %d", resp.ErrorCode)
	}
	if resp := rc.authenticate(2, oauthbearertest.ClientFirstMessage(is.Sign(f, "k1", is.Claims("alice", time.Hour)))); resp.ErrorCode != 0 || len(resp.SASLAuthBytes) != 0 {
		f.Fatalf("a signed token does not authenticate: error %d, %q", resp.ErrorCode, resp.SASLAuthBytes)
	}
	rc.roundTrip(metadataReq(9))
	rc.c.Close()
	if reached.Swap(0) != 2 {
		f.Fatal("an authenticated request did not reach the handler")
	}

	for _, seed := range saslFuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := dialSpread(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		_, _ = c.Write(data) // the server may already have closed
		_ = c.(*net.TCPConn).CloseWrite()
		// The server answers a request before reading the next, so once it
		// has closed, everything the input could make it do is done.
		_, err = io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server neither finished nor closed; input %x", data)
		}
		if n := reached.Load(); n != 0 {
			t.Fatalf("%d request(s) of an unauthenticated connection reached the handler; input %x", n, data)
		}
	})
}

// dialSpread dials addr from a random loopback address (Linux routes all of
// 127.0.0.0/8 to the loopback interface), so that the hundreds of thousands
// of short connections of a fuzzing run, which linger in TIME_WAIT once
// closed, do not exhaust the ephemeral ports of 127.0.0.1 and slow dialing
// to a crawl. Where that address cannot be used it dials as usual.
func dialSpread(addr string) (net.Conn, error) {
	var b [3]byte
	_, _ = rand.Read(b[:])
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, b[0], b[1], b[2]%254+1)}}
	if c, err := d.Dial("tcp", addr); err == nil {
		return c, nil
	}
	return net.DialTimeout("tcp", addr, 10*time.Second)
}
