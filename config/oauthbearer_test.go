package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/security"
)

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

// oauthSettings reads the SASL_PLAINTEXT listener's OAUTHBEARER settings
// from props.
func oauthSettings(t *testing.T, props config.Properties) (security.OAuthBearerSettings, error) {
	t.Helper()
	r := resolve(t, oauthProps(props))
	return config.OAuthBearer(r.props, r.set, "SASL_PLAINTEXT")
}

// writeJWKS writes a file the JWKS URL may name (the settings check only
// that it is a readable file) and returns its file: URL.
func writeJWKS(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"keys":[]}`), 0o600))
	return "file://" + path
}

// Kafka's keys are read into typed settings, once, with Kafka's defaults
// filled in and each key looked up as Kafka's ConfigurationUtils does
// (listener and mechanism prefix, then listener prefix, then the key
// alone); nothing is built or fetched. Security keeps them for a listener
// that enables OAUTHBEARER.
func TestOAuthBearerSettingsFromProperties(t *testing.T) {
	url := writeJWKS(t)
	t.Run("JWKS", func(t *testing.T) {
		for _, class := range []string{config.OAuthBearerValidatorCallbackHandler, config.OAuthBearerValidatorCallbackHandlerDeprecated} {
			s, err := oauthSettings(t, config.Properties{
				oauthJAASKey:  loginModule + ";",
				oauthClassKey: class,
				"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
				"sasl.oauthbearer.jwks.endpoint.url":                                          "file:///nowhere/jwks.json", // overridden
				"sasl.oauthbearer.expected.audience":                                          "kafka, kafka-2",
				"sasl.oauthbearer.expected.issuer":                                            "https://wrong.example",
				"listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer":               "https://idp.example",
				"listener.name.sasl_plaintext.sasl.oauthbearer.sub.claim.name":                "client_id",
				"sasl.oauthbearer.clock.skew.seconds":                                         "0",
				"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":                             "0",
			})
			require.NoError(t, err)
			assert.Equal(t, security.OAuthBearerSettings{Listener: "SASL_PLAINTEXT", JWKS: &security.OAuthBearerJWKS{
				// Kafka's 0 is none: negative in the settings, whose zero is Kafka's default.
				URL: url, Refresh: time.Hour, RetryBackoff: -1, RetryBackoffMax: 10 * time.Second,
				ExpectedAudience: []string{"kafka", "kafka-2"}, ExpectedIssuer: "https://idp.example", ClockSkew: -1,
				ScopeClaimName: "scope", SubClaimName: "client_id",
			}}, s)
		}
		s, err := oauthSettings(t, config.Properties{oauthJAASKey: loginModule + ";", oauthClassKey: config.OAuthBearerValidatorCallbackHandler,
			"sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks"})
		require.NoError(t, err)
		assert.Equal(t, &security.OAuthBearerJWKS{URL: "https://idp.example/jwks", Refresh: time.Hour,
			RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 10 * time.Second, ClockSkew: 30 * time.Second,
			ScopeClaimName: "scope", SubClaimName: "sub"}, s.JWKS, "Kafka's defaults")
		assert.Nil(t, s.Unsecured)
		assert.Empty(t, s.Warnings)
	})
	t.Run("unsecured", func(t *testing.T) {
		s, err := oauthSettings(t, config.Properties{oauthJAASKey: loginModule + ` unsecuredLoginStringClaim_sub="admin"
			unsecuredValidatorPrincipalClaimName="principal" unsecuredValidatorScopeClaimName="scp"
			unsecuredValidatorRequiredScope="kafka  write" unsecuredValidatorAllowableClockSkewMs="60000";`})
		require.NoError(t, err)
		assert.Equal(t, security.OAuthBearerSettings{Listener: "SASL_PLAINTEXT", Unsecured: &security.OAuthBearerUnsecured{
			PrincipalClaimName: "principal", ScopeClaimName: "scp", RequiredScope: []string{"kafka", "write"}, AllowableClockSkew: time.Minute,
		}}, s)
		s, err = oauthSettings(t, config.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorPrincipalClaimName=" ";`,
			oauthClassKey: config.OAuthBearerUnsecuredValidatorCallbackHandler})
		require.NoError(t, err)
		assert.Equal(t, &security.OAuthBearerUnsecured{PrincipalClaimName: "sub", ScopeClaimName: "scope"}, s.Unsecured, "Kafka's defaults")
		assert.Nil(t, s.JWKS)
	})
	t.Run("warnings", func(t *testing.T) {
		s, err := oauthSettings(t, config.Properties{
			oauthJAASKey:                         loginModule + ";",
			"sasl.oauthbearer.jwks.endpoint.url": "https://idp.example/jwks",
			"sasl.server.callback.handler.class": config.OAuthBearerValidatorCallbackHandler,
		})
		require.NoError(t, err)
		require.Len(t, s.Warnings, 2)
		assert.Contains(t, s.Warnings[0], "sasl.server.callback.handler.class="+config.OAuthBearerValidatorCallbackHandler+" is ignored")
		assert.Contains(t, s.Warnings[0], oauthClassKey)
		assert.Contains(t, s.Warnings[1], "sasl.oauthbearer.jwks.endpoint.url is set but unused")
	})
	t.Run("Security", func(t *testing.T) {
		cfg := resolve(t, oauthProps(config.Properties{oauthJAASKey: loginModule + ";",
			"listeners": "SASL_PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0", "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
			"listener.name.other.sasl.enabled.mechanisms": "PLAIN"}))
		sec, err := forListener(cfg, "SASL_PLAINTEXT")
		require.NoError(t, err)
		require.NotNil(t, sec.OAuthBearer)
		want, err := config.OAuthBearer(cfg.props, cfg.set, "SASL_PLAINTEXT")
		require.NoError(t, err)
		assert.Equal(t, want, *sec.OAuthBearer)
		require.NoError(t, sec.OAuthBearerNotConfigured)
		sec, err = forListener(cfg, "OTHER")
		require.NoError(t, err)
		assert.Nil(t, sec.OAuthBearer, "OTHER does not enable OAUTHBEARER")
		require.NoError(t, sec.OAuthBearerNotConfigured)

		// Properties that leave OAUTHBEARER to the host are no error of
		// Security's: it says why, for the socket server's.
		cfg = resolve(t, oauthProps(config.Properties{oauthClassKey: "com.example.Introspection"}))
		sec, err = forListener(cfg, "SASL_PLAINTEXT")
		require.NoError(t, err)
		assert.Nil(t, sec.OAuthBearer)
		err = sec.OAuthBearerNotConfigured
		require.ErrorIs(t, err, security.ErrOAuthBearerNotConfigured)
		var ce *config.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, oauthClassKey, ce.Key)

		// An invalid setting is.
		cfg = resolve(t, oauthProps(config.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorAllowableClockSkewMs="-5";`}))
		_, err = forListener(cfg, "SASL_PLAINTEXT")
		require.ErrorIs(t, err, security.ErrOAuthBearerConfig)
	})
}

// Errors name the key, the value (a JAAS configuration's as [hidden]) and
// the rule; the properties that leave OAUTHBEARER to the host wrap
// ErrOAuthBearerNotConfigured.
func TestOAuthBearerConfigErrors(t *testing.T) {
	url := writeJWKS(t)
	dir := t.TempDir()
	validated := func(extra config.Properties) config.Properties {
		p := config.Properties{oauthJAASKey: loginModule + ";", oauthClassKey: config.OAuthBearerValidatorCallbackHandler,
			"sasl.oauthbearer.jwks.endpoint.url": url}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		props      config.Properties
		key, value string
		rule       string
		sentinel   error
	}{
		{"nothing configured", nil, oauthJAASKey, "", "needs " + oauthJAASKey, security.ErrOAuthBearerNotConfigured},
		{"another handler class", config.Properties{oauthClassKey: "io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler"},
			oauthClassKey, "io.strimzi.kafka.oauth.server.JaasServerOauthValidatorCallbackHandler", "its own OAUTHBEARER mechanism", security.ErrOAuthBearerNotConfigured},
		{"the validator without JAAS", config.Properties{oauthClassKey: config.OAuthBearerValidatorCallbackHandler},
			oauthJAASKey, "", "needs " + oauthJAASKey, security.ErrOAuthBearerConfig},
		{"another login module", config.Properties{oauthJAASKey: config.PlainLoginModule + ` required user_alice="secret-pw";`},
			oauthJAASKey, "[hidden]", "is not " + config.OAuthBearerLoginModule, security.ErrOAuthBearerConfig},
		{"two login modules", config.Properties{oauthJAASKey: loginModule + "; " + loginModule + ";"},
			oauthJAASKey, "[hidden]", "contains 2 login modules", security.ErrOAuthBearerConfig},
		{"no JWKS URL", validated(config.Properties{"sasl.oauthbearer.jwks.endpoint.url": ""}),
			"sasl.oauthbearer.jwks.endpoint.url", "", "must be non-null", security.ErrOAuthBearerConfig},
		{"an empty prefixed JWKS URL", validated(config.Properties{"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": ""}),
			"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url", "", "must be non-null", security.ErrOAuthBearerConfig},
		{"a JWKS file that does not exist", validated(config.Properties{"listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url": "file://" + dir + "/none.json"}),
			"listener.name.sasl_plaintext.sasl.oauthbearer.jwks.endpoint.url", "file://" + dir + "/none.json", "that doesn't exist", security.ErrOAuthBearerConfig},
		{"a JWKS directory", validated(config.Properties{"sasl.oauthbearer.jwks.endpoint.url": "file://" + dir}),
			"sasl.oauthbearer.jwks.endpoint.url", "file://" + dir, "references a directory", security.ErrOAuthBearerConfig},
		{"an ftp URL", validated(config.Properties{"sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks"}),
			"sasl.oauthbearer.jwks.endpoint.url", "ftp://idp/jwks", "only http, https and file", security.ErrOAuthBearerConfig},
		{"refresh.ms 0", validated(config.Properties{"sasl.oauthbearer.jwks.endpoint.refresh.ms": "0"}),
			"sasl.oauthbearer.jwks.endpoint.refresh.ms", "0", "at least 1", security.ErrOAuthBearerConfig},
		{"refresh.ms not a number", validated(config.Properties{"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms": "1h"}),
			"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.refresh.ms", "1h", "64-bit integer", security.ErrOAuthBearerConfig},
		{"backoff max below backoff", validated(config.Properties{"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "500", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "100"}),
			"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "100", "retryBackoffMaxMs value (100) is less than retryBackoffMs value (500)", security.ErrOAuthBearerConfig},
		{"a negative clock skew", validated(config.Properties{"sasl.oauthbearer.clock.skew.seconds": "-1"}),
			"sasl.oauthbearer.clock.skew.seconds", "-1", "at least 0", security.ErrOAuthBearerConfig},
		{"a blank sub claim name", validated(config.Properties{"sasl.oauthbearer.sub.claim.name": " "}),
			"sasl.oauthbearer.sub.claim.name", "", "must not contain only whitespace", security.ErrOAuthBearerConfig},
		{"a client key store for the JWKS endpoint", validated(config.Properties{oauthJAASKey: loginModule + ` ssl.keystore.location="/k.pem";`}),
			oauthJAASKey, "[hidden]", "option ssl.keystore.location is not supported", security.ErrOAuthBearerConfig},
		{"a JKS trust store", validated(config.Properties{oauthJAASKey: loginModule + ` ssl.truststore.location="/t.jks";`}),
			oauthJAASKey, "[hidden]", "option ssl.truststore.type: this package reads only PEM stores", security.ErrTLSConfig},
		{"an unsecured clock skew that is not a number", config.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorAllowableClockSkewMs="soon";`},
			oauthJAASKey, "[hidden]", `option unsecuredValidatorAllowableClockSkewMs="soon": not a 32-bit integer`, security.ErrOAuthBearerConfig},
		{"a negative unsecured clock skew", config.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorAllowableClockSkewMs="-5";`},
			oauthJAASKey, "[hidden]", "must not be negative", security.ErrOAuthBearerConfig},
		{"an invalid required scope", config.Properties{oauthJAASKey: loginModule + ` unsecuredValidatorRequiredScope="ok bad\"quote";`},
			oauthJAASKey, "[hidden]", `option unsecuredValidatorRequiredScope="ok bad\"quote": Invalid scope value: "bad\"quote"`, security.ErrOAuthBearerConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := oauthSettings(t, tc.props)
			require.Error(t, err)
			assert.Zero(t, s)
			var ce *config.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.key, ce.Key)
			assert.Equal(t, tc.value, ce.Value)
			assert.Contains(t, ce.Rule, tc.rule)
			assert.ErrorIs(t, err, tc.sentinel)
			leftToHost := tc.sentinel == security.ErrOAuthBearerNotConfigured
			assert.Equal(t, leftToHost, errors.Is(err, security.ErrOAuthBearerNotConfigured))
			assert.Equal(t, leftToHost, errors.Is(err, security.ErrSASLMechanism))
			assert.NotContains(t, err.Error(), "secret-pw")
		})
	}
}
