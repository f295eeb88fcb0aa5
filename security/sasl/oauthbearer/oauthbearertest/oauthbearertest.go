// Package oauthbearertest is an identity provider for tests of OAUTHBEARER:
// an [Issuer] signs JWTs with keys of its own and publishes their public
// halves as a JSON Web Key Set, in a file or from an HTTPS server, and
// [UnsecuredToken] writes the unsigned tokens of Kafka's unsecured
// validator.
//
//	is := oauthbearertest.NewIssuer(t, "https://idp.example")
//	is.AddKey(t, "k1", "RS256")
//	url := is.WriteJWKS(t)                      // file:///.../jwks.json
//	tok := is.Sign(t, "k1", is.Claims("alice", time.Hour))
package oauthbearertest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Issuer signs tokens and publishes its keys. It is safe for concurrent
// use.
type Issuer struct {
	// Name is the issuer's iss claim in [Issuer.Claims].
	Name string

	mu      sync.Mutex
	keys    []key
	fetches atomic.Int64
}

type key struct {
	kid    string
	alg    jose.SignatureAlgorithm
	signer crypto.Signer
}

// NewIssuer returns an issuer called name with no keys.
func NewIssuer(t testing.TB, name string) *Issuer {
	t.Helper()
	return &Issuer{Name: name}
}

// Algorithms are the signature algorithms of AddKey: those Kafka's JWKS
// validator, and oauthbearer.JWKSValidator, accept.
func Algorithms() []string {
	return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
}

// AddKey creates a key for alg, one of [Algorithms] (RS* and PS* with
// 2048-bit RSA; ES256, ES384 and ES512 on their curves; EdDSA with
// Ed25519), and publishes it under kid.
func (is *Issuer) AddKey(t testing.TB, kid, alg string) {
	t.Helper()
	signer, err := newSigner(alg)
	if err != nil {
		t.Fatalf("oauthbearertest: key %s (%s): %v", kid, alg, err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = append(is.keys, key{kid: kid, alg: jose.SignatureAlgorithm(alg), signer: signer})
}

func newSigner(alg string) (crypto.Signer, error) {
	switch alg {
	case "ES256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ES512":
		return ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "EdDSA":
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return rsa.GenerateKey(rand.Reader, 2048)
	}
	return nil, fmt.Errorf("unknown algorithm %q", alg)
}

// RemoveKey stops publishing kid.
func (is *Issuer) RemoveKey(kid string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = slices.DeleteFunc(is.keys, func(k key) bool { return k.kid == kid })
}

// JWKS returns the published keys as a JSON Web Key Set.
func (is *Issuer) JWKS() []byte {
	is.mu.Lock()
	defer is.mu.Unlock()
	set := jose.JSONWebKeySet{}
	for _, k := range is.keys {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.signer.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic(err) // public keys of known types always marshal
	}
	return b
}

// WriteJWKS writes the key set to a file of t's temporary directory and
// returns its file: URL. Call it again to publish a change to the same
// file.
func (is *Issuer) WriteJWKS(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	is.WriteJWKSTo(t, path)
	return "file://" + filepath.ToSlash(path)
}

// WriteJWKSTo writes the key set to path, replacing it atomically.
func (is *Issuer) WriteJWKSTo(t testing.TB, path string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, is.JWKS(), 0o600); err != nil {
		t.Fatalf("oauthbearertest: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("oauthbearertest: %v", err)
	}
}

// Serve starts an HTTPS server that publishes the key set as it is at
// each request, at /jwks.json, closed when the test ends. Its Client
// trusts it; its Certificate is the one to trust otherwise.
func (is *Issuer) Serve(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks.json" {
			http.NotFound(w, r)
			return
		}
		is.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.JWKS())
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Fetches counts the key set's requests to the servers of Serve.
func (is *Issuer) Fetches() int64 { return is.fetches.Load() }

// Claims returns the usual claims of a token for sub that expires in ttl:
// iss, sub, iat (now) and exp.
func (is *Issuer) Claims(sub string, ttl time.Duration) map[string]any {
	now := time.Now()
	return map[string]any{"iss": is.Name, "sub": sub, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
}

// Sign returns a compact JWS of claims signed with the key kid, whose id
// goes in the header. A kid the issuer does not have fails the test.
func (is *Issuer) Sign(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	return is.sign(t, kid, claims, true)
}

// SignWithoutKID is Sign with no kid in the header.
func (is *Issuer) SignWithoutKID(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	return is.sign(t, kid, claims, false)
}

func (is *Issuer) sign(t testing.TB, kid string, claims map[string]any, withKID bool) string {
	t.Helper()
	is.mu.Lock()
	i := slices.IndexFunc(is.keys, func(k key) bool { return k.kid == kid })
	var k key
	if i >= 0 {
		k = is.keys[i]
	}
	is.mu.Unlock()
	if i < 0 {
		t.Fatalf("oauthbearertest: the issuer has no key %q", kid)
	}
	opts := &jose.SignerOptions{}
	if withKID {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.signer}, opts.WithType("JWT"))
	if err != nil {
		t.Fatalf("oauthbearertest: %v", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("oauthbearertest: %v", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatalf("oauthbearertest: %v", err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatalf("oauthbearertest: %v", err)
	}
	return tok
}

// UnsecuredToken returns an unsigned JWT of claims, as Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler and librdkafka write one:
// base64url of {"alg":"none"} and of the claims, and an empty signature.
func UnsecuredToken(claims map[string]any) string {
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(payload) + "."
}

// ClientFirstMessage returns an OAUTHBEARER client's first message for
// token, as Kafka's client writes it: n,,\x01auth=Bearer <token>\x01\x01.
func ClientFirstMessage(token string) []byte {
	return []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
}
