package listener_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/listener/sasl"
	"github.com/kafkanet/kafkanet/listener/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/listener/sasl/oauthbearer/oauthbearertest"
	"github.com/kafkanet/kafkanet/protocolmap"
)

const (
	oauthJAASKey  = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
	oauthClassKey = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
	loginModule   = listener.OAuthBearerLoginModule + " required"
)

// oauthProps is a SASL_PLAINTEXT listener enabling OAUTHBEARER, with extra.
func oauthProps(extra listener.Properties) listener.Properties {
	p := listener.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "OAUTHBEARER",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func oauthMechanism(t *testing.T, props listener.Properties) (*oauthbearer.Mechanism, error) {
	t.Helper()
	cfg, err := listener.Resolve(oauthProps(props))
	require.NoError(t, err)
	return cfg.OAuthBearer("SASL_PLAINTEXT")
}

// step authenticates token with a fresh server of m.
func step(m *oauthbearer.Mechanism, token string) (sasl.Server, error) {
	s := m.NewServer(sasl.ConnState{})
	_, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage(token))
	return s, err
}

// With no server callback handler class, a listener gets Kafka's default,
// the unsecured validator (SaslChannelBuilder.createServerCallbackHandlers),
// configured by its JAAS options, and warns at start.
func TestOAuthBearerUnsecuredFromProperties(t *testing.T) {
	for _, class := range []string{"", listener.OAuthBearerUnsecuredValidatorCallbackHandler} {
		props := listener.Properties{oauthJAASKey: loginModule + ` unsecuredLoginStringClaim_sub="admin"
			unsecuredValidatorPrincipalClaimName="principal" unsecuredValidatorScopeClaimName="scp"
			unsecuredValidatorRequiredScope="kafka  write" unsecuredValidatorAllowableClockSkewMs="60000";`}
		if class != "" {
			props[oauthClassKey] = class
		}
		m, err := oauthMechanism(t, props)
		require.NoError(t, err)
		require.IsType(t, &oauthbearer.Mechanism{}, m)
		exp := time.Now().Add(-30 * time.Second).Unix() // expired, but within the 60 s of skew
		s, err := step(m, oauthbearertest.UnsecuredToken(map[string]any{"principal": "alice", "exp": exp, "scp": []string{"kafka", "write"}}))
		require.NoError(t, err)
		assert.Equal(t, "alice", s.AuthorizationID())
		_, err = step(m, oauthbearertest.UnsecuredToken(map[string]any{"principal": "alice", "exp": exp + 3600, "scp": []string{"kafka"}}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), `{"status":"insufficient_scope", "scope":"[kafka, write]"}`)

		var logs bytes.Buffer
		require.NoError(t, m.Start(context.Background(), slog.New(slog.NewTextHandler(&logs, nil))))
		assert.Contains(t, logs.String(), "UNSIGNED tokens")
		require.NoError(t, m.Close())
	}
}

// The unsecured validator warns at start when a JWKS URL or an un-prefixed
// callback handler class is set but unused: the operator likely meant to
// validate tokens.
func TestOAuthBearerUnusedSettingsWarn(t *testing.T) {
	m, err := oauthMechanism(t, listener.Properties{
		oauthJAASKey:                         loginModule + ";",
		"sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
		"sasl.server.callback.handler.class": listener.OAuthBearerValidatorCallbackHandler,
	})
	require.NoError(t, err)
	var logs bytes.Buffer
	require.NoError(t, m.Start(context.Background(), slog.New(slog.NewTextHandler(&logs, nil))))
	out := logs.String()
	assert.Contains(t, out, "sasl.oauthbearer.jwks.endpoint.url is set but unused")
	assert.Contains(t, out, "sasl.server.callback.handler.class="+listener.OAuthBearerValidatorCallbackHandler+" is ignored")
	assert.Contains(t, out, oauthClassKey)
	require.NoError(t, m.Close())
}

// With Kafka's OAuthBearerValidatorCallbackHandler, under either of its
// names, a listener validates signed tokens against the JWKS of
// sasl.oauthbearer.jwks.endpoint.url with the KIP-768 keys, each looked up
// as Kafka's ConfigurationUtils does: listener and mechanism prefix, then
// listener prefix, then the key alone.
func TestOAuthBearerJWKSFromProperties(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "RS256")
	url := is.WriteJWKS(t)
	for _, class := range []string{listener.OAuthBearerValidatorCallbackHandler, listener.OAuthBearerValidatorCallbackHandlerDeprecated} {
		t.Run(class, func(t *testing.T) {
			m, err := oauthMechanism(t, listener.Properties{
				oauthJAASKey:  loginModule + ";",
				oauthClassKey: class,
				"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
				"sasl.oauthbearer.jwks.endpoint.url":                                          "file:///nowhere/jwks.json", // overridden
				"sasl.oauthbearer.expected.audience":                                          "kafka, kafka-2",
				"sasl.oauthbearer.expected.issuer":                                            "https://wrong.example",
				"listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer":               "https://idp.example",
				"listener.name.sasl_plaintext.sasl.oauthbearer.sub.claim.name":                "client_id",
				"sasl.oauthbearer.clock.skew.seconds":                                         "0",
			})
			require.NoError(t, err)
			v, ok := m.Validator().(*oauthbearer.JWKSValidator)
			require.True(t, ok, "%T", m.Validator())
			assert.Equal(t, url, v.URL())
			require.NoError(t, m.Start(context.Background(), nil))
			defer m.Close()

			claims := is.Claims("ignored", time.Hour)
			claims["client_id"], claims["aud"] = "svc", "kafka-2"
			s, err := step(m, is.Sign(t, "k1", claims))
			require.NoError(t, err)
			assert.Equal(t, "svc", s.AuthorizationID())
			claims["aud"] = "web"
			_, err = step(m, is.Sign(t, "k1", claims))
			assert.ErrorIs(t, err, oauthbearer.ErrInvalidToken)
			claims["aud"], claims["exp"] = "kafka", time.Now().Add(-2*time.Second).Unix()
			_, err = step(m, is.Sign(t, "k1", claims))
			assert.ErrorIs(t, err, oauthbearer.ErrTokenExpired, "clock.skew.seconds=0: no leeway")
		})
	}
}

// An https JWKS endpoint is trusted with the PEM trust store of the JAAS
// options (Kafka's JaasOptionsUtils.createSSLSocketFactory), else with the
// system's roots, which do not know a private CA.
func TestOAuthBearerJWKSTrustStore(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	srv := is.Serve(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	base := listener.Properties{oauthClassKey: listener.OAuthBearerValidatorCallbackHandler, "sasl.oauthbearer.jwks.endpoint.url": srv.URL + "/jwks.json"}

	props := listener.Properties{oauthJAASKey: loginModule + ` ssl.truststore.type="PEM" ssl.truststore.location="` + ca + `";`}
	for k, v := range base {
		props[k] = v
	}
	m, err := oauthMechanism(t, props)
	require.NoError(t, err)
	require.NoError(t, m.Start(context.Background(), nil))
	_, err = step(m, is.Sign(t, "k1", is.Claims("alice", time.Hour)))
	require.NoError(t, err)
	require.NoError(t, m.Close())

	props[oauthJAASKey] = loginModule + ";"
	m, err = oauthMechanism(t, props)
	require.NoError(t, err)
	err = m.Start(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
	require.NoError(t, m.Close())
}

// Errors name the key, the value (a JAAS configuration's as [hidden]) and
// the rule; the properties that leave OAUTHBEARER to the host wrap
// ErrOAuthBearerNotConfigured.
func TestOAuthBearerConfigErrors(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "x")
	is.AddKey(t, "k1", "ES256")
	url := is.WriteJWKS(t)
	dir := t.TempDir()
	validated := func(extra listener.Properties) listener.Properties {
		p := listener.Properties{oauthJAASKey: loginModule + ";", oauthClassKey: listener.OAuthBearerValidatorCallbackHandler,
			"sasl.oauthbearer.jwks.endpoint.url": url}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		props      listener.Properties
		key, value string
		rule       string
		sentinel   error
	}{
		{"nothing configured", nil, oauthJAASKey, "", "needs " + oauthJAASKey, listener.ErrOAuthBearerNotConfigured},
		{"another handler class", listener.Properties{oauthClassKey: "io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler"},
			oauthClassKey, "io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler", "its own OAUTHBEARER mechanism", listener.ErrOAuthBearerNotConfigured},
		{"the validator without JAAS", listener.Properties{oauthClassKey: listener.OAuthBearerValidatorCallbackHandler},
			oauthJAASKey, "", "needs " + oauthJAASKey, listener.ErrOAuthBearerConfig},
		{"another login module", listener.Properties{oauthJAASKey: listener.PlainLoginModule + ` required user_alice="secret-pw";`},
			oauthJAASKey, "[hidden]", "is not " + listener.OAuthBearerLoginModule, listener.ErrOAuthBearerConfig},
		{"two login modules", listener.Properties{oauthJAASKey: loginModule + "; " + loginModule + ";"},
			oauthJAASKey, "[hidden]", "contains 2 login modules", listener.ErrOAuthBearerConfig},
		{"no JWKS URL", validated(listener.Properties{"sasl.oauthbearer.jwks.endpoint.url": ""}),
			"sasl.oauthbearer.jwks.endpoint.url", "", "must be non-null", listener.ErrOAuthBearerConfig},
		{"a JWKS file that does not exist", validated(listener.Properties{"listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url": "file://" + dir + "/none.json"}),
			"listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url", "file://" + dir + "/none.json", "that doesn't exist", listener.ErrOAuthBearerConfig},
		{"a JWKS directory", validated(listener.Properties{"sasl.oauthbearer.jwks.endpoint.url": "file://" + dir}),
			"sasl.oauthbearer.jwks.endpoint.url", "file://" + dir, "references a directory", listener.ErrOAuthBearerConfig},
		{"an ftp URL", validated(listener.Properties{"sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}),
			"sasl.oauthbearer.jwks.endpoint.url", "ftp://idp/jwks", "only http, https and file", listener.ErrOAuthBearerConfig},
		{"refresh.ms 0", validated(listener.Properties{"sasl.oauthbearer.jwks.endpoint.refresh.ms": "0"}),
			"sasl.oauthbearer.jwks.endpoint.refresh.ms", "0", "at least 1", listener.ErrOAuthBearerConfig},
		{"refresh.ms not a number", validated(listener.Properties{"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "1h"}),
			"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms", "1h", "64-bit integer", listener.ErrOAuthBearerConfig},
		{"backoff max below backoff", validated(listener.Properties{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "500", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "100"}),
			"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "100", "retryBackoffMaxMs value (100) is less than retryBackoffMs value (500)", listener.ErrOAuthBearerConfig},
		{"a negative clock skew", validated(listener.Properties{"sasl.oauthbearer.clock.skew.seconds": "-1"}),
			"sasl.oauthbearer.clock.skew.seconds", "-1", "at least 0", listener.ErrOAuthBearerConfig},
		{"a blank sub claim name", validated(listener.Properties{"sasl.oauthbearer.sub.claim.name": " "}),
			"sasl.oauthbearer.sub.claim.name", "", "must not contain only whitespace", listener.ErrOAuthBearerConfig},
		{"a client key store for the JWKS endpoint", validated(listener.Properties{oauthJAASKey: loginModule + ` ssl.keystore.location="/k.pem";`}),
			oauthJAASKey, "[hidden]", "option ssl.keystore.location is not supported", listener.ErrOAuthBearerConfig},
		{"a JKS trust store", validated(listener.Properties{oauthJAASKey: loginModule + ` ssl.truststore.location="/t.jks";`}),
			oauthJAASKey, "[hidden]", "option ssl.truststore.type: this package reads only PEM stores", listener.ErrTLSConfig},
		{"an unsecured clock skew that is not a number", listener.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorAllowableClockSkewMs="soon";`},
			oauthJAASKey, "[hidden]", `option unsecuredValidatorAllowableClockSkewMs="soon": not a 32-bit integer`, listener.ErrOAuthBearerConfig},
		{"a negative unsecured clock skew", listener.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorAllowableClockSkewMs="-5";`},
			oauthJAASKey, "[hidden]", "must not be negative", listener.ErrOAuthBearerConfig},
		{"an invalid required scope", listener.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorRequiredScope="ok bad\"quote";`},
			oauthJAASKey, "[hidden]", `option unsecuredValidatorRequiredScope="ok bad\"quote": Invalid scope value: "bad\"quote"`, listener.ErrOAuthBearerConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := oauthMechanism(t, tc.props)
			require.Error(t, err)
			assert.Nil(t, m)
			var ce *protocolmap.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
			assert.Equal(t, tc.value, ce.Value)
			assert.Contains(t, ce.Rule, tc.rule)
			assert.ErrorIs(t, err, tc.sentinel)
			leftToHost := tc.sentinel == listener.ErrOAuthBearerNotConfigured
			assert.Equal(t, leftToHost, errors.Is(err, listener.ErrOAuthBearerNotConfigured))
			assert.Equal(t, leftToHost, errors.Is(err, listener.ErrSASLMechanism))
			assert.NotContains(t, err.Error(), "secret-pw")
		})
	}
}
