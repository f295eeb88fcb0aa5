package protocolmap

import (
	"errors"
	"fmt"
)

// Sentinel errors wrapped by [ConfigError]; test for them with errors.Is.
var (
	// ErrUnknownSecurityProtocol: a value is not one of PLAINTEXT, SSL,
	// SASL_PLAINTEXT or SASL_SSL.
	ErrUnknownSecurityProtocol = errors.New("unknown security protocol")
	// ErrBlankListenerName: a listener name is empty or only white space.
	ErrBlankListenerName = errors.New("blank listener name")
	// ErrMissingColon: a map entry has no colon between key and value.
	ErrMissingColon = errors.New("map entry without colon")
	// ErrBlankKey: a map entry has nothing before its colon.
	ErrBlankKey = errors.New("blank map key")
	// ErrDuplicateKey: a map key appears more than once (compared without
	// regard to case).
	ErrDuplicateKey = errors.New("duplicate map key")
)

// ConfigError reports a configuration value that breaks a rule. Key is the
// configuration key (for example listener.security.protocol.map), Value the
// value as given, and Rule says, in Kafka's words where Kafka has them, what
// is wrong. Err is the sentinel behind it, if any.
type ConfigError struct {
	Key   string
	Value string
	Rule  string
	Err   error
}

// Error renders the error the way Kafka's ConfigException does:
// "invalid value V for configuration K: rule".
func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid value %q for configuration %s: %s", e.Value, e.Key, e.Rule)
}

// Unwrap returns the sentinel behind the error.
func (e *ConfigError) Unwrap() error { return e.Err }
