// Package oauthsettings is what the configuration layer (package config),
// which reads a listener's SASL/OAUTHBEARER settings from Kafka's keys, and
// the oauthbearer package, which builds token validators from them, must agree
// on: Kafka's defaults, and the rules of a JWKS URL and of a scope. It
// imports the standard library only, so that reading the settings links
// nothing of the validators (neither go-jose nor an HTTP client).
package oauthsettings

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Kafka's defaults of the OAUTHBEARER validators' settings.
const (
	JWKSRefresh         = time.Hour              // sasl.oauthbearer.jwks.endpoint.refresh.ms
	JWKSRetryBackoff    = 100 * time.Millisecond // sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
	JWKSRetryBackoffMax = 10 * time.Second       // sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
	ClockSkew           = 30 * time.Second       // sasl.oauthbearer.clock.skew.seconds
	// ScopeClaimName is sasl.oauthbearer.scope.claim.name's default, and
	// the unsecured validator's unsecuredValidatorScopeClaimName's.
	ScopeClaimName = "scope"
	// SubClaimName is sasl.oauthbearer.sub.claim.name's default, and the
	// unsecured validator's unsecuredValidatorPrincipalClaimName's.
	SubClaimName = "sub"
)

// JWKSFile checks raw, a JWKS endpoint's URL, which must not be empty:
// http:// or https:// with a host, or a file: URL with an absolute path,
// whose path it returns ("" for http and https). Its errors name the URL
// and the rule, without a package prefix.
func JWKSFile(raw string) (path string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("the JWKS URL %q is malformed: %w", raw, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "http":
		if u.Host == "" {
			return "", fmt.Errorf("the JWKS URL %q has no host", raw)
		}
		return "", nil
	case "file":
		if u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/") {
			return "", fmt.Errorf("the JWKS URL %q is not a file URL with an absolute path, such as file:///etc/kafka/jwks.json", raw)
		}
		return u.Path, nil
	case "":
		return "", fmt.Errorf("the JWKS URL %q is missing the protocol", raw)
	default:
		return "", fmt.Errorf("the JWKS URL %q has the protocol %s; only http, https and file are supported", raw, u.Scheme)
	}
}

// ValidScopeToken reports whether s is a scope-token of RFC 6749 section
// 3.3, as Kafka's OAuthBearerScopeUtils checks it: one or more of the
// characters 0x21, 0x23-0x5B and 0x5D-0x7E.
func ValidScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != 0x21 && (c < 0x23 || c > 0x5b) && (c < 0x5d || c > 0x7e) {
			return false
		}
	}
	return true
}
