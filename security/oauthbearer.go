package security

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// ErrOAuthBearerNotConfigured is wrapped by the error of
// config.OAuthBearer when the properties configure no validator kafkanet
// implements: neither the listener's OAUTHBEARER JAAS
// configuration nor its server callback handler class is set, or the class
// is another than Kafka's. A host then gives the listener its own
// OAUTHBEARER mechanism. It wraps [ErrSASLMechanism].
var ErrOAuthBearerNotConfigured = fmt.Errorf("%w: OAUTHBEARER has no validator this package implements", ErrSASLMechanism)

// ErrOAuthBearerConfig is wrapped by the errors of config.OAuthBearer
// for an OAUTHBEARER setting of an invalid value.
var ErrOAuthBearerConfig = errors.New("invalid OAUTHBEARER configuration")

// OAuthBearerSettings are a listener's SASL/OAUTHBEARER settings as a
// Kafka broker reads them from its properties (config.OAuthBearer):
// which of Kafka's two token validators the listener uses, with its
// settings checked and resolved (Kafka's defaults filled in). They are
// plain values: this package builds nothing from them, and links nothing
// of the validators. The oauthbearer package (security/sasl/oauthbearer)
// builds the mechanism from them, oauthbearer.FromSettings, or adds it to
// a listener's mechanisms, oauthbearer.AddMechanism, so
// that a program that serves no OAUTHBEARER links neither the JWKS
// validator nor its HTTP client.
type OAuthBearerSettings struct {
	// Listener is the listener the settings are of.
	Listener protocolmap.ListenerName
	// JWKS is set when the listener validates signed tokens against a
	// JSON Web Key Set, with Kafka's OAuthBearerValidatorCallbackHandler;
	// Unsecured when it takes unsigned tokens, with Kafka's default
	// validator. Exactly one of the two is set.
	JWKS      *OAuthBearerJWKS
	Unsecured *OAuthBearerUnsecured
	// Warnings are about settings that are set but have no effect, such as
	// a JWKS URL that no validator reads: the mechanism logs them when it
	// starts, as Kafka's broker would log them when it configures itself.
	Warnings []string
}

// OAuthBearerJWKS are the settings of Kafka's
// OAuthBearerValidatorCallbackHandler (KIP-768): the one settings type of
// the JWKS validator, which config.OAuthBearer reads from Kafka's keys and
// oauthbearer.NewJWKSValidator takes, whether read or built in code.
// A zero field means Kafka's default, and a negative duration turns its
// feature off (no wait, no skew); config.OAuthBearer fills in Kafka's
// default of each key not set, and turns a key set to 0, which Kafka reads
// as none, into -1.
type OAuthBearerJWKS struct {
	// URL is sasl.oauthbearer.jwks.endpoint.url, required: https:// or
	// http:// with a host, or a file: URL with an absolute path (as in
	// file:///etc/kafka/jwks.json). config.OAuthBearer checks that the
	// file existed and was readable.
	URL string
	// Refresh is how often the key set is read again:
	// sasl.oauthbearer.jwks.endpoint.refresh.ms (zero: 1 h); not negative.
	Refresh time.Duration
	// RetryBackoff is the first wait after a failed refresh; each retry
	// waits twice as long, until RetryBackoffMax has passed since the
	// refresh began: sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
	// (zero: 100 ms) and ...retry.backoff.max.ms (zero: 10 s).
	// RetryBackoffMax is no less than RetryBackoff. Negative means no
	// wait, and so no retry.
	RetryBackoff, RetryBackoffMax time.Duration
	// ExpectedAudience is sasl.oauthbearer.expected.audience: a token's
	// aud claim must hold one of them. With none, a token with an aud
	// claim is refused, as Kafka's jose4j refuses it (RFC 7519 section
	// 4.1.3).
	ExpectedAudience []string
	// ExpectedIssuer is sasl.oauthbearer.expected.issuer: if set, the
	// token's iss claim must equal it.
	ExpectedIssuer string
	// ClockSkew is the leeway given to exp, nbf and iat:
	// sasl.oauthbearer.clock.skew.seconds (zero: 30 s); negative means
	// none.
	ClockSkew time.Duration
	// ScopeClaimName and SubClaimName name the claims holding the scope
	// and the principal: sasl.oauthbearer.scope.claim.name and
	// sasl.oauthbearer.sub.claim.name ("": scope and sub); not blank.
	ScopeClaimName, SubClaimName string
	// TLS is the client TLS configuration for an https URL, such as a
	// private CA's roots; nil means the system's roots. config.OAuthBearer
	// reads it from the PEM trust store of the JAAS options
	// (ssl.truststore.type=PEM with ssl.truststore.location or
	// ssl.truststore.certificates).
	TLS *tls.Config
}

// OAuthBearerUnsecured are the settings of Kafka's default validator,
// OAuthBearerUnsecuredValidatorCallbackHandler, from the JAAS options of
// the listener's OAuthBearerLoginModule: the one settings type of the
// unsecured validator, which config.OAuthBearer reads and
// oauthbearer.NewUnsecuredValidator takes. A zero field means Kafka's
// default.
type OAuthBearerUnsecured struct {
	// PrincipalClaimName is unsecuredValidatorPrincipalClaimName and
	// ScopeClaimName unsecuredValidatorScopeClaimName ("": sub and
	// scope); not blank.
	PrincipalClaimName, ScopeClaimName string
	// RequiredScope is unsecuredValidatorRequiredScope, split at spaces:
	// scopes every token must have, each an RFC 6749 scope-token (one or
	// more of the characters 0x21, 0x23-0x5B and 0x5D-0x7E).
	RequiredScope []string
	// AllowableClockSkew is the leeway given to exp and iat:
	// unsecuredValidatorAllowableClockSkewMs (zero: Kafka's default,
	// none); not negative, as Kafka refuses it.
	AllowableClockSkew time.Duration
}
