package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
)

// A client listener of the proxy's may enable OAUTHBEARER, configured
// with Kafka's keys as the example broker's are (the proxy builds the
// mechanism from the listener's settings, oauthbearer.AddMechanism): the
// proxy authenticates the token and forwards the client's requests, and
// refuses a token its validator refuses.
func TestOAuthBearerAtTheProxy(t *testing.T) {
	fake := startFakeUpstream(t)
	p := startProxy(t, fake.addr(), nil,
		"listeners=OAUTH://127.0.0.1:0",
		"listener.security.protocol.map=OAUTH:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.oauth.oauthbearer.sasl.jaas.config="+config.OAuthBearerLoginModule+" required;")
	addr := p.addr(t, "OAUTH")
	token := func(exp time.Time) string {
		return oauthbearertest.UnsecuredToken(map[string]any{"sub": "carol", "exp": float64(exp.UnixMilli()) / 1000})
	}

	cl := newClient(t, addr, kgo.SASL(oauth.Auth{Token: token(time.Now().Add(time.Hour))}.AsMechanism()))
	resp, err := kmsg.NewPtrListGroupsRequest().RequestWith(ctxFor(t, 10*time.Second), cl)
	require.NoError(t, err)
	assert.Zero(t, resp.ErrorCode)
	assert.Positive(t, fake.sent(kmsg.ListGroups), "forwarded upstream")
	conns := p.srv.Registry().Snapshot(connregistry.Filter{})
	require.NotEmpty(t, conns)
	assert.Equal(t, "User:carol", conns[0].Principal.String())
	assert.Equal(t, "OAUTHBEARER", conns[0].SASLMechanism)

	expired := newClient(t, addr, kgo.SASL(oauth.Auth{Token: token(time.Now().Add(-time.Hour))}.AsMechanism()), kgo.RequestRetries(0))
	_, err = kmsg.NewPtrListGroupsRequest().RequestWith(ctxFor(t, 10*time.Second), expired)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
}
