package oauthbearer_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer/oauthbearertest"
)

// The tests of a mechanism built from Kafka's properties: the config
// package reads the settings (config.OAuthBearer, whose errors
// config's TestOAuthBearerConfigErrors checks), FromSettings builds.

const (
	oauthJAASKey  = "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config"
	oauthClassKey = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"
	loginModule   = config.OAuthBearerLoginModule + " required"
)

// oauthProps is a SASL_PLAINTEXT listener enabling OAUTHBEARER, with extra.
func oauthProps(extra config.Properties) config.Properties {
	p := config.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "OAUTHBEARER",
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// oauthMechanism builds the listener's mechanism from props as a host
// does: the settings the security package reads, then FromSettings.
func oauthMechanism(t *testing.T, props config.Properties) *oauthbearer.Mechanism {
	t.Helper()
	cfg, err := config.Listeners(oauthProps(props))
	require.NoError(t, err)
	s, err := config.OAuthBearer(oauthProps(props), cfg, "SASL_PLAINTEXT")
	require.NoError(t, err)
	m, err := oauthbearer.FromSettings(s)
	require.NoError(t, err)
	return m
}

// step authenticates token with a fresh server of m.
func step(m *oauthbearer.Mechanism, token string) (sasl.Server, error) {
	s := m.NewServer(sasl.Attempt{})
	_, err := s.Step(context.Background(), oauthbearertest.ClientFirstMessage(token))
	return s, err
}

// With no server callback handler class, a listener gets Kafka's default,
// the unsecured validator (SaslChannelBuilder.createServerCallbackHandlers),
// configured by its JAAS options, and warns at start.
func TestOAuthBearerUnsecuredFromProperties(t *testing.T) {
	for _, class := range []string{"", config.OAuthBearerUnsecuredValidatorCallbackHandler} {
		props := config.Properties{oauthJAASKey: loginModule + ` unsecuredLoginStringClaim_sub="admin"
			unsecuredValidatorPrincipalClaimName="principal" unsecuredValidatorScopeClaimName="scp"
			unsecuredValidatorRequiredScope="kafka  write" unsecuredValidatorAllowableClockSkewMs="60000";`}
		if class != "" {
			props[oauthClassKey] = class
		}
		m := oauthMechanism(t, props)
		require.IsType(t, &oauthbearer.UnsecuredValidator{}, m.Validator())
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
	m := oauthMechanism(t, config.Properties{
		oauthJAASKey:                         loginModule + ";",
		"sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
		"sasl.server.callback.handler.class": config.OAuthBearerValidatorCallbackHandler,
	})
	var logs bytes.Buffer
	require.NoError(t, m.Start(context.Background(), slog.New(slog.NewTextHandler(&logs, nil))))
	out := logs.String()
	assert.Contains(t, out, "sasl.oauthbearer.jwks.endpoint.url is set but unused")
	assert.Contains(t, out, "sasl.server.callback.handler.class="+config.OAuthBearerValidatorCallbackHandler+" is ignored")
	assert.Contains(t, out, oauthClassKey)
	assert.Less(t, bytes.Index(logs.Bytes(), []byte("is set but unused")), bytes.Index(logs.Bytes(), []byte("UNSIGNED tokens")),
		"the settings' warnings first, then the validator's")
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
	for _, class := range []string{config.OAuthBearerValidatorCallbackHandler, config.OAuthBearerValidatorCallbackHandlerDeprecated} {
		t.Run(class, func(t *testing.T) {
			m := oauthMechanism(t, config.Properties{
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
	base := config.Properties{oauthClassKey: config.OAuthBearerValidatorCallbackHandler, "sasl.oauthbearer.jwks.endpoint.url": srv.URL + "/jwks.json"}

	props := config.Properties{oauthJAASKey: loginModule + ` ssl.truststore.type="PEM" ssl.truststore.location="` + ca + `";`}
	for k, v := range base {
		props[k] = v
	}
	m := oauthMechanism(t, props)
	require.NoError(t, m.Start(context.Background(), nil))
	_, err := step(m, is.Sign(t, "k1", is.Claims("alice", time.Hour)))
	require.NoError(t, err)
	require.NoError(t, m.Close())

	props[oauthJAASKey] = loginModule + ";"
	m = oauthMechanism(t, props)
	err = m.Start(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
	require.NoError(t, m.Close())
}

// One settings type per validator, with one meaning of zero: Kafka's
// default, negative for none, whether the settings were read from Kafka's
// keys (where a key set to 0 is none, read as -1) or built in code. A
// ClockSkew of zero is Kafka's 30 s. FromSettings refuses settings that
// configure no validator, or two.
func TestFromSettings(t *testing.T) {
	is := oauthbearertest.NewIssuer(t, "https://idp.example")
	is.AddKey(t, "k1", "ES256")
	url := is.WriteJWKS(t)
	claims := is.Claims("alice", time.Hour)
	claims["iat"], claims["exp"] = time.Now().Add(-time.Minute).Unix(), time.Now().Add(-time.Second).Unix()
	expired := is.Sign(t, "k1", claims) // a second ago
	parsed := oauthMechanism(t, config.Properties{oauthJAASKey: loginModule + ";", oauthClassKey: config.OAuthBearerValidatorCallbackHandler,
		"sasl.oauthbearer.jwks.endpoint.url": url, "sasl.oauthbearer.clock.skew.seconds": "0"})
	for _, tc := range []struct {
		name string
		m    func() *oauthbearer.Mechanism
		err  error
	}{
		{"zero: Kafka's 30 s", func() *oauthbearer.Mechanism {
			m, err := oauthbearer.FromSettings(security.OAuthBearerSettings{Listener: "L", JWKS: &security.OAuthBearerJWKS{URL: url}})
			require.NoError(t, err)
			return m
		}, nil},
		{"negative: none", func() *oauthbearer.Mechanism {
			m, err := oauthbearer.FromSettings(security.OAuthBearerSettings{Listener: "L", JWKS: &security.OAuthBearerJWKS{URL: url, ClockSkew: -1}})
			require.NoError(t, err)
			return m
		}, oauthbearer.ErrTokenExpired},
		{"the validator itself, zero", func() *oauthbearer.Mechanism {
			v, err := oauthbearer.NewJWKSValidator(security.OAuthBearerJWKS{URL: url})
			require.NoError(t, err)
			m, err := oauthbearer.New(v)
			require.NoError(t, err)
			return m
		}, nil},
		{"clock.skew.seconds=0 read from properties: none", func() *oauthbearer.Mechanism { return parsed }, oauthbearer.ErrTokenExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m()
			require.NoError(t, m.Start(context.Background(), nil))
			defer m.Close()
			_, err := step(m, expired)
			if tc.err == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.err)
			}
		})
	}
	jwks := &security.OAuthBearerJWKS{URL: url}
	var err error

	for _, s := range []security.OAuthBearerSettings{
		{Listener: "L"},
		{Listener: "L", JWKS: jwks, Unsecured: &security.OAuthBearerUnsecured{}},
	} {
		_, err := oauthbearer.FromSettings(s)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "listener L")
	}
	_, err = oauthbearer.FromSettings(security.OAuthBearerSettings{Listener: "L", Unsecured: &security.OAuthBearerUnsecured{RequiredScope: []string{`a"b`}}})
	assert.ErrorContains(t, err, "listener L: oauthbearer: Invalid scope value")
}

// AddMechanism adds the mechanism a listener's settings configure, in a
// slice of its own, and keeps a host's own OAUTHBEARER mechanism; its
// error names the listener.
func TestAddMechanism(t *testing.T) {
	unsecured := &security.OAuthBearerSettings{Listener: "A", Unsecured: &security.OAuthBearerUnsecured{}}
	plain := sasl.Builtins()[0]
	store, err := sasl.NewUsers(map[string]string{"alice": "pw"})
	require.NoError(t, err)
	p, err := sasl.Builtin(plain, store)
	require.NoError(t, err)
	mechanisms := make([]sasl.Mechanism, 1, 4)
	mechanisms[0] = p
	got, err := oauthbearer.AddMechanism(mechanisms, security.Settings{EnabledMechanisms: []string{plain, "OAUTHBEARER"}, OAuthBearer: unsecured})
	require.NoError(t, err)
	assert.Equal(t, []sasl.Mechanism{p}, mechanisms[:cap(mechanisms)][:1], "the caller's slice is not changed")
	assert.Nil(t, mechanisms[:2][1], "the caller's backing array is not written")
	require.Len(t, got, 2)
	assert.Equal(t, p, got[0])
	assert.Equal(t, "OAUTHBEARER", got[1].Name())

	same, err := oauthbearer.AddMechanism(mechanisms, security.Settings{EnabledMechanisms: []string{plain}})
	require.NoError(t, err)
	assert.Equal(t, mechanisms, same, "settings without OAUTHBEARER add nothing")

	again, err := oauthbearer.AddMechanism(got, security.Settings{OAuthBearer: unsecured})
	require.NoError(t, err)
	assert.Equal(t, got, again, "a listener with an OAUTHBEARER mechanism keeps it")

	none, err := oauthbearer.AddMechanism(nil, security.Settings{})
	require.NoError(t, err)
	assert.Nil(t, none)

	_, err = oauthbearer.AddMechanism(nil, security.Settings{OAuthBearer: &security.OAuthBearerSettings{Listener: "X"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listener X")
}
