package oauthbearer_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
)

// kafkaFirstMessage and kafkaAuth are the patterns of Kafka's
// OAuthBearerClientInitialResponse, in RE2's syntax ([\x01-\x7F&&[^=,]]
// spelled out), matched against the whole input as Java's matches() does.
// They are the oracle FuzzClientFirstMessage checks the parser against.
var (
	kafkaFirstMessage = regexp.MustCompile(`^n,(?:a=((?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01$`)
	kafkaAuth         = regexp.MustCompile(`^([A-Za-z0-9_]+) +([-_~+/.a-zA-Z0-9]+=*)$`)
)

// kafkaParse reads b as Kafka would: ok reports success, with the token,
// authzid and extensions.
func kafkaParse(b []byte) (m oauthbearer.ClientFirstMessage, ok bool) {
	s := string(b)
	sub := kafkaFirstMessage.FindStringSubmatch(s)
	if sub == nil {
		return m, false
	}
	m.AuthorizationID = sub[1]
	props := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSuffix(sub[2], "\x01"), "\x01") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		props[k] = v
	}
	auth, has := props["auth"]
	if !has {
		return m, false
	}
	delete(props, "auth")
	a := kafkaAuth.FindStringSubmatch(auth)
	if a == nil || !strings.EqualFold(a[1], "bearer") {
		return m, false
	}
	m.Token = a[2]
	if len(props) > 0 {
		m.Extensions = props
	}
	return m, true
}

// FuzzClientFirstMessage: no input panics; the parser accepts exactly what
// Kafka's patterns accept and reads the same token, authzid and
// extensions; what it accepts it writes back in a form it reads the same.
func FuzzClientFirstMessage(f *testing.F) {
	for _, seed := range []string{
		"n,,\x01auth=Bearer 123.345.567\x01\x01",
		"n,a=myuser,\x01auth=Bearer 345\x01\x01",
		"n,,\x01propA=valueA1, valueA2\x01auth=Bearer 567\x01propB=valueB\x01\x01",
		"n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg==\x01\x01",
		"n,a=a=2Cb=3D,\x01auth=bearer  t\x01\x01",
		"n,,\x01auth=Basic x\x01\x01", "y,,\x01auth=Bearer t\x01\x01", "\x01", "", "n,,\x01\x01",
		"n,a=,\x01auth=Bearer t\x01\x01", "n,,\x01auth=Bearer t\x01x=\x01\x01", "n,,\x01auth=Bearer t=\x01\x01\x01",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := oauthbearer.ParseClientFirstMessage(b)
		want, ok := kafkaParse(b)
		if ok != (err == nil) {
			t.Fatalf("parser error %v, Kafka's patterns accept: %v", err, ok)
		}
		if !ok {
			return
		}
		if got.Token != want.Token || got.AuthorizationID != want.AuthorizationID || len(got.Extensions) != len(want.Extensions) {
			t.Fatalf("parsed %+v, Kafka reads %+v", got, want)
		}
		for k, v := range want.Extensions {
			if got.Extensions[k] != v {
				t.Fatalf("extension %q: parsed %q, Kafka reads %q", k, got.Extensions[k], v)
			}
		}
		again, err := oauthbearer.ParseClientFirstMessage(oauthbearer.AppendClientFirstMessage(nil, got))
		if err != nil || again.Token != got.Token || again.AuthorizationID != got.AuthorizationID || len(again.Extensions) != len(got.Extensions) {
			t.Fatalf("written back, %+v reads as %+v (%v)", got, again, err)
		}
	})
}
