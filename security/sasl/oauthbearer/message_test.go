package oauthbearer_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
)

// The cases of Kafka's OAuthBearerClientInitialResponseTest, and the edges
// of its grammar (OAuthBearerClientInitialResponse's patterns).
func TestParseClientFirstMessage(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      oauthbearer.ClientFirstMessage
	}{
		{name: "token (testToken)", msg: "n,,\x01auth=Bearer 123.345.567\x01\x01",
			want: oauthbearer.ClientFirstMessage{Token: "123.345.567"}},
		{name: "authorization id (testAuthorizationId)", msg: "n,a=myuser,\x01auth=Bearer 345\x01\x01",
			want: oauthbearer.ClientFirstMessage{AuthorizationID: "myuser", Token: "345"}},
		{name: "extensions (testExtensions)", msg: "n,,\x01propA=valueA1, valueA2\x01auth=Bearer 567\x01propB=valueB\x01\x01",
			want: oauthbearer.ClientFirstMessage{Token: "567", Extensions: map[string]string{"propA": "valueA1, valueA2", "propB": "valueB"}}},
		{name: "RFC 7628's example (testRfc7688Example)", msg: "n,a=user@example.com,\x01host=server.example.com\x01port=143\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg\x01\x01",
			want: oauthbearer.ClientFirstMessage{AuthorizationID: "user@example.com", Token: "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg",
				Extensions: map[string]string{"host": "server.example.com", "port": "143"}}},
		{name: "RFC 6750 token characters (testCharSupportForRfc6750Token)", msg: "n,a=user@example.com,\x01auth=Bearer vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg==\x01\x01",
			want: oauthbearer.ClientFirstMessage{AuthorizationID: "user@example.com", Token: "vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg=="}},
		{name: "the scheme in any case, several spaces", msg: "n,,\x01auth=bEaReR   tok\x01\x01",
			want: oauthbearer.ClientFirstMessage{Token: "tok"}},
		{name: "an escaped authzid is kept as sent, as Kafka keeps it", msg: "n,a=a=2Cb=3Dc,\x01auth=Bearer t\x01\x01",
			want: oauthbearer.ClientFirstMessage{AuthorizationID: "a=2Cb=3Dc", Token: "t"}},
		{name: "the last of two auth keys counts", msg: "n,,\x01auth=Bearer first\x01auth=Bearer second\x01\x01",
			want: oauthbearer.ClientFirstMessage{Token: "second"}},
		{name: "a value may hold '=', tab, CR and LF", msg: "n,,\x01auth=Bearer t\x01x=a=b\tc\r\nd\x01\x01",
			want: oauthbearer.ClientFirstMessage{Token: "t", Extensions: map[string]string{"x": "a=b\tc\r\nd"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := oauthbearer.ParseClientFirstMessage([]byte(tc.msg))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}

	for _, tc := range []struct{ name, msg, detail string }{
		{"empty", "", ""},
		{"the dummy answer to an error challenge", "\x01", ""},
		{"channel binding flag y", "y,,\x01auth=Bearer t\x01\x01", ""},
		{"channel binding flag p", "p=tls-unique,,\x01auth=Bearer t\x01\x01", ""},
		{"no separator after the header", "n,,auth=Bearer t\x01\x01", ""},
		{"no closing separator", "n,,\x01auth=Bearer t\x01", ""},
		{"bytes after the closing separator", "n,,\x01auth=Bearer t\x01\x01x", ""},
		{"an empty key=value", "n,,\x01auth=Bearer t\x01\x01\x01", ""},
		{"no auth key", "n,,\x01host=example\x01\x01", "'auth' not specified"},
		{"no key=value at all", "n,,\x01\x01", "'auth' not specified"},
		{"an empty authzid", "n,a=,\x01auth=Bearer t\x01\x01", ""},
		{"a bare = in the authzid", "n,a=x=y,\x01auth=Bearer t\x01\x01", ""},
		{"=2c is no escape", "n,a=x=2c,\x01auth=Bearer t\x01\x01", ""},
		{"a non-ASCII authzid", "n,a=émile,\x01auth=Bearer t\x01\x01", ""},
		{"a digit in a key (testThrowsSaslExceptionOnInvalidExtensionKey)", "n,,\x01auth=Bearer t\x0119=42\x01\x01", ""},
		{"an empty value", "n,,\x01auth=Bearer t\x01x=\x01\x01", ""},
		{"a control character in a value", "n,,\x01auth=Bearer t\x01x=a\x00b\x01\x01", ""},
		{"a non-ASCII value", "n,,\x01auth=Bearer t\x01x=caf\xc3\xa9\x01\x01", ""},
		{"another scheme", "n,,\x01auth=Basic dXNlcjpwYXNz\x01\x01", "the 'auth' scheme is not Bearer"},
		{"no space after the scheme", "n,,\x01auth=Bearertok\x01\x01", "invalid 'auth' format"},
		{"no token", "n,,\x01auth=Bearer \x01\x01", "invalid 'auth' format"},
		{"a space in the token", "n,,\x01auth=Bearer a b\x01\x01", "invalid 'auth' format"},
		{"'=' inside the token", "n,,\x01auth=Bearer a=b\x01\x01", "invalid 'auth' format"},
		{"a tab before the token", "n,,\x01auth=Bearer\ttok\x01\x01", "invalid 'auth' format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := oauthbearer.ParseClientFirstMessage([]byte(tc.msg))
			require.ErrorIs(t, err, oauthbearer.ErrMalformedMessage)
			assert.Zero(t, got)
			assert.True(t, strings.HasPrefix(err.Error(), "Invalid OAUTHBEARER client first message"), err.Error())
			if tc.detail != "" {
				assert.Contains(t, err.Error(), tc.detail)
			}
		})
	}
}

// Errors never hold the message's bytes: the token is a credential.
func TestParseClientFirstMessageErrorsHoldNoToken(t *testing.T) {
	const secret = "s3cr3t-t0k3n-value"
	for _, msg := range []string{
		"n,,\x01auth=Basic " + secret + "\x01\x01",
		"n,,\x01auth=Bearer " + secret + " x\x01\x01",
		"n,,\x01auth=Bearer " + secret + "\x01",
		"n,a=" + secret + ",\x01x=y\x01\x01",
	} {
		_, err := oauthbearer.ParseClientFirstMessage([]byte(msg))
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret)
	}
}

// AppendClientFirstMessage writes what Kafka's client writes
// (testBuildClientResponseToBytes), and the parser reads it back.
func TestAppendClientFirstMessage(t *testing.T) {
	m := oauthbearer.ClientFirstMessage{Token: "123.345.567", Extensions: map[string]string{"nineteen": "42"}}
	b := oauthbearer.AppendClientFirstMessage(nil, m)
	assert.Equal(t, "n,,\x01auth=Bearer 123.345.567\x01nineteen=42\x01\x01", string(b))
	got, err := oauthbearer.ParseClientFirstMessage(b)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	m = oauthbearer.ClientFirstMessage{AuthorizationID: "alice", Token: "t", Extensions: map[string]string{"b": "2", "a": "1"}}
	assert.Equal(t, "n,a=alice,\x01auth=Bearer t\x01a=1\x01b=2\x01\x01", string(oauthbearer.AppendClientFirstMessage(nil, m)))
}
