package oauthbearer

import (
	"fmt"
	"slices"

	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// FromSettings builds the OAUTHBEARER mechanism a Kafka broker configures
// from a listener's settings, as config.OAuthBearer reads them
// from Kafka's keys: over a [JWKSValidator] when s.JWKS is set (Kafka's
// OAuthBearerValidatorCallbackHandler), over an [UnsecuredValidator] when
// s.Unsecured is (Kafka's default, which warns at start that the listener
// accepts unsigned tokens). The mechanism logs s.Warnings when it starts.
//
// It reads no key set and starts nothing: the mechanism is a sasl.Service,
// which its owner, the socket server, starts (a JWKSValidator then reads
// the key set, and fails the server's Start if it cannot) and closes.
// Settings that config.OAuthBearer returned are valid; the error
// is for settings built otherwise.
func FromSettings(s security.OAuthBearerSettings) (*Mechanism, error) {
	var (
		v   Validator
		err error
	)
	switch {
	case s.JWKS != nil && s.Unsecured != nil:
		return nil, fmt.Errorf("oauthbearer: the OAUTHBEARER settings of listener %s configure two validators, JWKS and Unsecured", s.Listener)
	case s.JWKS != nil:
		v, err = NewJWKSValidator(*s.JWKS)
	case s.Unsecured != nil:
		v, err = NewUnsecuredValidator(*s.Unsecured)
	default:
		return nil, fmt.Errorf("oauthbearer: the OAUTHBEARER settings of listener %s configure no validator (JWKS or Unsecured)", s.Listener)
	}
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", s.Listener, err)
	}
	m, err := New(v)
	if err != nil {
		return nil, err
	}
	m.warnings = slices.Clone(s.Warnings)
	return m, nil
}

// AddMechanism returns mechanisms, the host's SASL mechanisms of one
// listener (a socket server's ListenerConfig.Mechanisms, nil or not), with
// the OAUTHBEARER mechanism that the listener's security settings
// configure (settings.OAuthBearer, built with [FromSettings]), unless
// mechanisms already holds an OAUTHBEARER mechanism of the host's own or
// the settings configure none. mechanisms itself is not changed. It is
// the call with which a host that reads Kafka's properties serves
// OAUTHBEARER as a Kafka broker does:
//
//	cfg, err := config.Server(props)
//	...
//	for _, l := range cfg.PerListener {
//		if l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security); err != nil {
//			...
//		}
//	}
//
// Listeners whose properties leave OAUTHBEARER to the host
// (security.Settings.OAuthBearerNotConfigured) get nothing here: the
// socket server refuses to start them until the host gives them a
// mechanism.
func AddMechanism(mechanisms []sasl.Mechanism, settings security.Settings) ([]sasl.Mechanism, error) {
	if settings.OAuthBearer == nil || slices.ContainsFunc(mechanisms, func(m sasl.Mechanism) bool { return m != nil && m.Name() == Name }) {
		return mechanisms, nil
	}
	m, err := FromSettings(*settings.OAuthBearer)
	if err != nil {
		return nil, err
	}
	return append(slices.Clone(mechanisms), m), nil
}
