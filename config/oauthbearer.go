package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/internal/oauthsettings"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// Kafka's broker keys for SASL/OAUTHBEARER, read by [OAuthBearer].
const (
	// KeySASLServerCallbackHandlerClass is read only with the listener and
	// mechanism prefix, as in
	// listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class.
	KeySASLServerCallbackHandlerClass = "sasl.server.callback.handler.class"

	KeySASLOAuthBearerJWKSEndpointURL               = "sasl.oauthbearer.jwks.endpoint.url"
	KeySASLOAuthBearerJWKSEndpointRefreshMs         = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
	KeySASLOAuthBearerJWKSEndpointRetryBackoffMs    = "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"
	KeySASLOAuthBearerJWKSEndpointRetryBackoffMaxMs = "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"
	KeySASLOAuthBearerExpectedAudience              = "sasl.oauthbearer.expected.audience"
	KeySASLOAuthBearerExpectedIssuer                = "sasl.oauthbearer.expected.issuer"
	KeySASLOAuthBearerClockSkewSeconds              = "sasl.oauthbearer.clock.skew.seconds"
	KeySASLOAuthBearerScopeClaimName                = "sasl.oauthbearer.scope.claim.name"
	KeySASLOAuthBearerSubClaimName                  = "sasl.oauthbearer.sub.claim.name"
)

// Kafka's class names for SASL/OAUTHBEARER.
const (
	// OAuthBearerLoginModule is the login module of an OAUTHBEARER
	// listener's sasl.jaas.config, whose options configure the unsecured
	// validator and the JWKS endpoint's TLS.
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	// OAuthBearerValidatorCallbackHandler validates signed tokens against
	// a JWKS (KIP-768); OAuthBearerValidatorCallbackHandlerDeprecated is
	// its older name, which Kafka still accepts.
	OAuthBearerValidatorCallbackHandler           = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	OAuthBearerValidatorCallbackHandlerDeprecated = "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler"
	// OAuthBearerUnsecuredValidatorCallbackHandler is Kafka's default:
	// unsigned tokens, for development.
	OAuthBearerUnsecuredValidatorCallbackHandler = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// oauthBearerMechanism is SASL/OAUTHBEARER's name in sasl.enabled.mechanisms.
const oauthBearerMechanism = "OAUTHBEARER"

// The JAAS options of Kafka's unsecured validator.
const (
	optionUnsecuredPrincipalClaimName = "unsecuredValidatorPrincipalClaimName"
	optionUnsecuredScopeClaimName     = "unsecuredValidatorScopeClaimName"
	optionUnsecuredRequiredScope      = "unsecuredValidatorRequiredScope"
	optionUnsecuredClockSkewMs        = "unsecuredValidatorAllowableClockSkewMs"
)

// OAuthBearer reads the SASL/OAUTHBEARER settings a Kafka broker reads for
// listener name of set from props, and checks them:
//
//   - When listener.name.<l>.oauthbearer.sasl.server.callback.handler.class
//     names Kafka's OAuthBearerValidatorCallbackHandler (under its current
//     or its older ...oauthbearer.secured. name), tokens are signed JWTs
//     validated against a JWKS (security.OAuthBearerSettings.JWKS), with the keys
//     sasl.oauthbearer.jwks.endpoint.url (required: https, http or file),
//     ...jwks.endpoint.refresh.ms (default 3600000),
//     ...jwks.endpoint.retry.backoff.ms (100) and ...retry.backoff.max.ms
//     (10000), sasl.oauthbearer.expected.audience (a list),
//     ...expected.issuer, ...clock.skew.seconds (30),
//     ...scope.claim.name (scope) and ...sub.claim.name (sub). Each is
//     looked up as Kafka's OAuth code does: with the listener and mechanism
//     prefix (listener.name.<l>.oauthbearer.<key>), then the listener
//     prefix, then the key alone. An https endpoint is trusted with the
//     system's roots, or with the PEM trust store of the JAAS options
//     ssl.truststore.type=PEM and ssl.truststore.location or
//     ssl.truststore.certificates, as Kafka reads them.
//   - When the class is not set (or names Kafka's unsecured handler),
//     tokens are unsigned, checked by Kafka's default validator
//     (security.OAuthBearerSettings.Unsecured), with the JAAS options
//     unsecuredValidatorPrincipalClaimName, unsecuredValidatorScopeClaimName,
//     unsecuredValidatorRequiredScope (space-separated) and
//     unsecuredValidatorAllowableClockSkewMs. The settings' Warnings hold
//     a warning if a JWKS URL or an un-prefixed handler class is set but
//     unused.
//
// Either way listener.name.<l>.oauthbearer.sasl.jaas.config must hold
// Kafka's OAuthBearerLoginModule, as a Kafka broker requires. The error
// wraps security.ErrOAuthBearerNotConfigured when neither that key nor the
// class is set, or the class is another: the properties leave OAUTHBEARER
// to the host. Other errors are [*Error] values naming the
// key, its value (the JAAS configuration's as [hidden]) and the rule.
//
// OAuthBearer reads no key set (a file: URL is only checked to be a
// readable file) and builds nothing: the settings are plain values, the
// same as built in code. [Security] calls it for a listener that enables
// OAUTHBEARER, so that [Server] reads the settings once, into
// security.Settings.OAuthBearer.
func OAuthBearer(props Properties, set *listener.Set, name protocolmap.ListenerName) (security.OAuthBearerSettings, error) {
	c := reader{props, set}
	classKey, jaasKey := MechanismKey(name, oauthBearerMechanism, KeySASLServerCallbackHandlerClass), MechanismKey(name, oauthBearerMechanism, KeySASLJAASConfig)
	class, classSet := c.props.Get(classKey)
	jaas, jaasSet := c.props.Get(jaasKey)
	s := security.OAuthBearerSettings{Listener: name}
	if !classSet {
		if v, from, ok := c.props.ListenerValue(name, KeySASLServerCallbackHandlerClass); ok {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s=%s is ignored: a broker reads a server callback handler class only with the listener and mechanism prefix, as %s", from, v, classKey))
		}
	}
	validated := false
	switch class {
	case OAuthBearerValidatorCallbackHandler, OAuthBearerValidatorCallbackHandlerDeprecated:
		validated = true
	case "", OAuthBearerUnsecuredValidatorCallbackHandler:
	default:
		return security.OAuthBearerSettings{}, &Error{Key: classKey, Value: class, Err: security.ErrOAuthBearerNotConfigured, Rule: fmt.Sprintf(
			"this package implements only Kafka's %s (validated tokens) and %s (the default); "+
				"a host that implements %s gives listener %s its own OAUTHBEARER mechanism (the Mechanisms of the listener's socketserver.ListenerConfig)",
			OAuthBearerValidatorCallbackHandler, OAuthBearerUnsecuredValidatorCallbackHandler, class, name)}
	}
	if !jaasSet {
		rule := fmt.Sprintf("OAUTHBEARER on listener %s needs %s (%s required;), as a Kafka broker does", name, jaasKey, OAuthBearerLoginModule)
		err := security.ErrOAuthBearerConfig
		if !classSet {
			rule += fmt.Sprintf("; with it and no %s, tokens are checked by Kafka's unsecured validator, for development; "+
				"set %s=%s to validate them against a JWKS; or give the listener an OAUTHBEARER mechanism of the host's own", classKey, classKey, OAuthBearerValidatorCallbackHandler)
			err = security.ErrOAuthBearerNotConfigured
		}
		return security.OAuthBearerSettings{}, &Error{Key: jaasKey, Err: err, Rule: rule}
	}
	e, err := parseOneModule(jaas, OAuthBearerLoginModule, "a broker's OAUTHBEARER listener is configured with that module")
	if err != nil {
		return security.OAuthBearerSettings{}, &Error{Key: jaasKey, Value: hiddenValue, Err: security.ErrOAuthBearerConfig, Rule: err.Error()}
	}
	options := map[string]string{}
	for _, o := range e.options {
		options[o.key] = o.value
	}
	if validated {
		if s.JWKS, err = c.oauthBearerJWKS(name, jaasKey, options); err != nil {
			return security.OAuthBearerSettings{}, err
		}
		return s, nil
	}
	if s.Unsecured, err = oauthBearerUnsecured(jaasKey, options); err != nil {
		return security.OAuthBearerSettings{}, err
	}
	if u := c.oauthSetting(name, KeySASLOAuthBearerJWKSEndpointURL); u.ok {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s is set but unused: tokens are not checked against a JWKS unless %s=%s", u.from, classKey, OAuthBearerValidatorCallbackHandler))
	}
	return s, nil
}

// oauthSetting looks an OAuth key up as Kafka's ConfigurationUtils does
// over the listener's configuration: listener.name.<l>.oauthbearer.<key>,
// then listener.name.<l>.<key>, then <key>.
func (c reader) oauthSetting(name protocolmap.ListenerName, key string) setting {
	mech := name.ConfigPrefix() + "oauthbearer." + key
	if v, ok := c.props.Get(mech); ok {
		return setting{value: v, from: mech, ok: true, key: key}
	}
	return c.setting(name, key)
}

func oauthError(s setting, rule string) error {
	return &Error{Key: s.from, Value: s.value, Err: security.ErrOAuthBearerConfig, Rule: rule}
}

// oauthMillis reads a LONG OAuth setting of milliseconds, at least min.
func (c reader) oauthMillis(name protocolmap.ListenerName, key string, def time.Duration, min int64) (time.Duration, setting, error) {
	s := c.oauthSetting(name, key)
	if !s.ok {
		return def, s, nil
	}
	n, err := strconv.ParseInt(s.value, 10, 64)
	if err != nil {
		return 0, s, oauthError(s, "Expected value to be a 64-bit integer, but it was a String")
	}
	if n < min {
		return 0, s, oauthError(s, fmt.Sprintf("Value must be at least %d", min))
	}
	return millis(n), s, nil
}

// oauthBearerJWKS reads the settings of Kafka's
// OAuthBearerValidatorCallbackHandler from the listener's keys.
func (c reader) oauthBearerJWKS(name protocolmap.ListenerName, jaasKey string, options map[string]string) (*security.OAuthBearerJWKS, error) {
	var cfg security.OAuthBearerJWKS
	urlSetting := c.oauthSetting(name, KeySASLOAuthBearerJWKSEndpointURL)
	if !urlSetting.ok || urlSetting.value == "" {
		return nil, oauthError(urlSetting, fmt.Sprintf(
			"The OAuth configuration option %s value must be non-null: listener %s validates tokens with %s, which reads the identity provider's keys from it (https://..., or file:///...)",
			KeySASLOAuthBearerJWKSEndpointURL, name, OAuthBearerValidatorCallbackHandler))
	}
	cfg.URL = urlSetting.value
	file, err := oauthsettings.JWKSFile(cfg.URL)
	if err != nil {
		return nil, oauthError(urlSetting, err.Error())
	}
	if err := checkJWKSFile(urlSetting, file); err != nil {
		return nil, err
	}
	if cfg.Refresh, _, err = c.oauthMillis(name, KeySASLOAuthBearerJWKSEndpointRefreshMs, oauthsettings.JWKSRefresh, 1); err != nil {
		return nil, err // Kafka's RefreshingHttpsJwks refuses 0
	}
	backoff, backoffSetting, err := c.oauthMillis(name, KeySASLOAuthBearerJWKSEndpointRetryBackoffMs, oauthsettings.JWKSRetryBackoff, 0)
	if err != nil {
		return nil, err
	}
	backoffMax, backoffMaxSetting, err := c.oauthMillis(name, KeySASLOAuthBearerJWKSEndpointRetryBackoffMaxMs, oauthsettings.JWKSRetryBackoffMax, 0)
	if err != nil {
		return nil, err
	}
	if backoffMax < backoff {
		at := backoffMaxSetting
		if !at.ok {
			at = backoffSetting
		}
		return nil, oauthError(at, fmt.Sprintf("retryBackoffMaxMs value (%d) is less than retryBackoffMs value (%d)", backoffMax.Milliseconds(), backoff.Milliseconds()))
	}
	cfg.RetryBackoff, cfg.RetryBackoffMax = noneIfZero(backoff), noneIfZero(backoffMax)
	if s := c.oauthSetting(name, KeySASLOAuthBearerExpectedAudience); s.ok {
		cfg.ExpectedAudience = protocolmap.SplitList(s.value)
	}
	cfg.ExpectedIssuer = c.oauthSetting(name, KeySASLOAuthBearerExpectedIssuer).value
	cfg.ClockSkew = oauthsettings.ClockSkew
	if s := c.oauthSetting(name, KeySASLOAuthBearerClockSkewSeconds); s.ok {
		n, err := strconv.Atoi(s.value)
		switch {
		case err != nil || n > math.MaxInt32:
			return nil, oauthError(s, "Expected value to be a 32-bit integer, but it was a String")
		case n < 0:
			return nil, oauthError(s, "Value must be at least 0")
		}
		cfg.ClockSkew = noneIfZero(time.Duration(n) * time.Second)
	}
	for _, claim := range []struct {
		key, def string
		dst      *string
	}{
		{KeySASLOAuthBearerScopeClaimName, oauthsettings.ScopeClaimName, &cfg.ScopeClaimName},
		{KeySASLOAuthBearerSubClaimName, oauthsettings.SubClaimName, &cfg.SubClaimName},
	} {
		s := c.oauthSetting(name, claim.key)
		switch {
		case !s.ok:
			*claim.dst = claim.def
		case s.value == "":
			return nil, oauthError(s, fmt.Sprintf("The OAuth configuration option %s value must not contain only whitespace", claim.key))
		default:
			*claim.dst = s.value
		}
	}
	if cfg.TLS, err = jaasTrustStore(jaasKey, options); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// noneIfZero turns a Kafka key's 0, none, into the settings' negative
// none (zero there is Kafka's default).
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// checkJWKSFile applies Kafka's ConfigurationUtils.validateFile to the
// file of a file: URL, path ("" for http and https): it exists, is
// readable and is no directory.
func checkJWKSFile(s setting, path string) error {
	if path == "" {
		return nil
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return oauthError(s, fmt.Sprintf("The OAuth configuration option %s contains a file (%s) that doesn't exist", KeySASLOAuthBearerJWKSEndpointURL, path))
	case err != nil:
		return oauthError(s, fmt.Sprintf("The OAuth configuration option %s contains a file (%s) that cannot be read: %v", KeySASLOAuthBearerJWKSEndpointURL, path, fileError(err)))
	case info.IsDir():
		return oauthError(s, fmt.Sprintf("The OAuth configuration option %s references a directory (%s), not a file", KeySASLOAuthBearerJWKSEndpointURL, path))
	}
	f, err := os.Open(path)
	if err != nil {
		return oauthError(s, fmt.Sprintf("The OAuth configuration option %s contains a file (%s) that doesn't have read permission", KeySASLOAuthBearerJWKSEndpointURL, path))
	}
	return f.Close()
}

// jaasTrustStore reads the JAAS options Kafka's JaasOptionsUtils turns into
// the JWKS endpoint's TLS configuration. Only a PEM trust store is read
// (ssl.truststore.type=PEM with ssl.truststore.location or
// ssl.truststore.certificates); another ssl.* option is an error rather
// than ignored.
func jaasTrustStore(jaasKey string, options map[string]string) (*tls.Config, error) {
	for opt := range options {
		switch opt {
		case KeySSLTruststoreType, KeySSLTruststoreLocation, KeySSLTruststoreCertificates, KeySSLTruststorePassword:
		default:
			if strings.HasPrefix(opt, "ssl.") {
				return nil, &Error{Key: jaasKey, Value: hiddenValue, Err: security.ErrOAuthBearerConfig, Rule: fmt.Sprintf(
					"option %s is not supported for the JWKS endpoint: only a PEM trust store (%s=PEM with %s or %s) is read",
					opt, KeySSLTruststoreType, KeySSLTruststoreLocation, KeySSLTruststoreCertificates)}
			}
		}
	}
	pool, err := truststoreFrom(func(key string) setting {
		v, ok := options[key]
		return setting{value: strings.TrimSpace(v), from: key, ok: ok, key: key}
	})
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) {
			return nil, &Error{Key: jaasKey, Value: hiddenValue, Err: ce.Err, Rule: "option " + ce.Key + ": " + ce.Rule}
		}
		return nil, err
	}
	if pool == nil {
		return nil, nil
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// oauthBearerUnsecured reads Kafka's unsecured validator's JAAS options.
func oauthBearerUnsecured(jaasKey string, options map[string]string) (*security.OAuthBearerUnsecured, error) {
	optionError := func(opt, rule string) error {
		return &Error{Key: jaasKey, Value: hiddenValue, Err: security.ErrOAuthBearerConfig, Rule: fmt.Sprintf("option %s=%q: %s", opt, options[opt], rule)}
	}
	cfg := security.OAuthBearerUnsecured{PrincipalClaimName: oauthsettings.SubClaimName, ScopeClaimName: oauthsettings.ScopeClaimName}
	for opt, dst := range map[string]*string{optionUnsecuredPrincipalClaimName: &cfg.PrincipalClaimName, optionUnsecuredScopeClaimName: &cfg.ScopeClaimName} {
		if v := strings.TrimSpace(options[opt]); v != "" {
			*dst = v // blank, as unset, is the default, as in Kafka
		}
	}
	if v := strings.TrimSpace(options[optionUnsecuredClockSkewMs]); v != "" {
		ms, err := strconv.ParseInt(v, 10, 32)
		switch {
		case err != nil:
			return nil, optionError(optionUnsecuredClockSkewMs, "not a 32-bit integer")
		case ms < 0:
			return nil, optionError(optionUnsecuredClockSkewMs, "Allowable clock skew millis must not be negative")
		}
		cfg.AllowableClockSkew = time.Duration(ms) * time.Millisecond
	}
	for _, s := range strings.Split(options[optionUnsecuredRequiredScope], " ") {
		if s == "" {
			continue
		}
		if !oauthsettings.ValidScopeToken(s) {
			return nil, optionError(optionUnsecuredRequiredScope, fmt.Sprintf("Invalid scope value: %q", s))
		}
		cfg.RequiredScope = append(cfg.RequiredScope, s)
	}
	return &cfg, nil
}
