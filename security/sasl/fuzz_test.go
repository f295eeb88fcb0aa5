package sasl_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kafkanet/kafkanet/security/sasl"
)

// saslFuzzFailed checks that a failed Step kept to the SASLSession contract.
func saslFuzzFailed(t *testing.T, reply []byte, done bool, err error) {
	t.Helper()
	if done {
		t.Fatalf("done together with error %v", err)
	}
	if reply != nil {
		t.Fatalf("reply %q together with error %v", reply, err)
	}
	var se *sasl.Error
	if !errors.Is(err, sasl.ErrAuthenticationFailed) || !errors.As(err, &se) {
		t.Fatalf("error %T %v is not a *SASLError wrapping ErrAuthenticationFailed", err, err)
	}
}

// FuzzPlainMessage: no token panics, and a token succeeds only if it is
// authzid NUL user NUL password with the user's password and an authzid
// that is empty or the user.
func FuzzPlainMessage(f *testing.F) {
	for _, seed := range []string{
		"\x00alice\x00alice-secret", "alice\x00alice\x00alice-secret", "bob\x00alice\x00alice-secret",
		"\x00alice\x00", "\x00\x00x", "", "\x00", "\x00\x00\x00", "\x00alice\x00alice-secret\x00",
		"\x00émile\x00pässwörd", "\x00alice\x00\xffalice-secret",
	} {
		f.Add([]byte(seed))
	}
	users := saslTestUsers()
	m, err := sasl.Builtin("PLAIN", users)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token []byte) {
		s := newSession(m)
		reply, done, err := s.Step(token)
		if err != nil {
			saslFuzzFailed(t, reply, done, err)
			if s.Identity() != "" {
				t.Fatalf("identity %q after failure", s.Identity())
			}
			return
		}
		if !done || len(reply) != 0 {
			t.Fatalf("success with done=%v reply=%q", done, reply)
		}
		parts := bytes.Split(token, []byte{0})
		if len(parts) != 3 {
			t.Fatalf("accepted %d parts", len(parts))
		}
		authzid, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
		if s.Identity() != user || !users.CheckPlain(user, pass) || (authzid != "" && authzid != user) {
			t.Fatalf("accepted %q as %q", token, s.Identity())
		}
		if _, done, err := s.Step(token); done || err == nil {
			t.Fatal("second step accepted")
		}
	})
}

// FuzzSCRAMClientFirst: no client-first message panics or completes the
// exchange; an accepted one gets a well-formed server-first message, and no
// final message can then complete without the proof.
func FuzzSCRAMClientFirst(f *testing.F) {
	for _, seed := range []string{
		"n,,n=alice,r=abc", "y,,n=alice,r=abc", "n,a=alice,n=alice,r=abc", "n,a=bob,n=alice,r=abc",
		"n,,n=a=2Cb=3Dc,r=abc,foo=bar", "n,,n=alice,r=abc,tokenauth=true", "p=tls-unique,,n=alice,r=abc",
		"n,,m=x,n=alice,r=abc", "n,,n=al=ice,r=abc", "n,,n=alice,r=a c", "n,,n=alice", "n,", "", ",,,,",
		"n,,n=mallory,r=abc", "n,,n=\xc3\xa9mile,r=x",
	} {
		f.Add([]byte(seed), "SCRAM-SHA-256")
	}
	f.Add([]byte("n,,n=alice,r=abc"), "SCRAM-SHA-512")
	users := saslTestUsers()
	mechs := map[string]sasl.Mechanism{}
	for _, name := range saslSCRAMMechs {
		m, err := sasl.Builtin(name, users)
		if err != nil {
			f.Fatal(err)
		}
		mechs[name] = m
	}
	f.Fuzz(func(t *testing.T, first []byte, mech string) {
		m := mechs[mech]
		if m == nil {
			m = mechs["SCRAM-SHA-256"]
		}
		s := newSession(m)
		reply, done, err := s.Step(first)
		if err != nil {
			saslFuzzFailed(t, reply, done, err)
			return
		}
		if done {
			t.Fatal("client-first completed the exchange")
		}
		attrs := strings.Split(string(reply), ",")
		if len(attrs) != 3 || !strings.HasPrefix(attrs[0], "r=") || !strings.HasPrefix(attrs[1], "s=") || attrs[2] != "i=4096" {
			t.Fatalf("malformed server-first %q", reply)
		}
		// The server nonce extends the client's.
		_, bare, _ := strings.Cut(string(first), ",")
		_, bare, _ = strings.Cut(bare, ",")
		clientNonce, _ := strings.CutPrefix(strings.Split(bare, ",")[1], "r=")
		if !strings.HasPrefix(attrs[0], "r="+clientNonce) || len(attrs[0]) <= len("r="+clientNonce) {
			t.Fatalf("server nonce %q does not extend client nonce %q", attrs[0], clientNonce)
		}
		// A final message echoing the right nonce but with a made-up proof fails.
		for _, final := range []string{
			string(first),
			"c=biws,r=" + attrs[0][2:] + ",p=" + strings.Repeat("A", 43) + "=",
			"c=biws,r=" + attrs[0][2:] + ",p=" + strings.Repeat("A", 86) + "==",
		} {
			reply, done, err := s.Step([]byte(final))
			saslFuzzFailed(t, reply, done, err)
		}
		if s.Identity() != "" {
			t.Fatalf("identity %q without a proof", s.Identity())
		}
	})
}

// FuzzSCRAMClientFinal: after a valid client-first, no client-final message
// panics or completes the exchange without a valid proof (which the fuzzer
// cannot compute). "{nonce}" in the input is replaced by the server nonce so
// that inputs get past the nonce check.
func FuzzSCRAMClientFinal(f *testing.F) {
	for _, seed := range []string{
		"c=biws,r={nonce},p=dHpbkfH5vYnG0XhZsSe7dQ6wIdRdEvqVZ9ZVrz/Qrc0=",
		"c=biws,r=fyko{nonce},p=AAAA", "c=biws,r={nonce},x=1,p=AAAA", "c=eSws,r={nonce},p=AAAA",
		"c=biws,r={nonce}", "c=biws,r=abc,p=AAAA", "c=,r=,p=", ",p=", "p=", "", "c=biws,r={nonce},p=AAAA,",
		"c=bixhPWFsaWNlLA==,r={nonce},p=" + strings.Repeat("A", 86) + "==",
	} {
		f.Add(seed, false)
	}
	f.Add("c=biws,r={nonce},p="+strings.Repeat("A", 86)+"==", true)
	users := saslTestUsers()
	m256, err := sasl.Builtin("SCRAM-SHA-256", users)
	if err != nil {
		f.Fatal(err)
	}
	m512, err := sasl.Builtin("SCRAM-SHA-512", users)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, final string, sha512 bool) {
		m := m256
		if sha512 {
			m = m512
		}
		s := newSession(m)
		s1, _, err := s.Step([]byte("n,,n=alice,r=fyko"))
		if err != nil {
			t.Fatal(err)
		}
		serverNonce, _ := strings.CutPrefix(strings.Split(string(s1), ",")[0], "r=")
		msg := strings.ReplaceAll(final, "{nonce}", serverNonce)
		reply, done, err := s.Step([]byte(msg))
		if err == nil || done {
			t.Fatalf("final message %q accepted without a valid proof: done=%v reply=%q", msg, done, reply)
		}
		saslFuzzFailed(t, reply, done, err)
		if s.Identity() != "" {
			t.Fatalf("identity %q without a proof", s.Identity())
		}
	})
}
