// Package configerr defines the configuration error of every kafkanet
// package, which package config exports as config.Error. It lives here,
// below protocolmap, so that the packages config sits above (protocolmap,
// listener, security, socketserver) can return it without importing config.
package configerr

import "fmt"

// Error reports a configuration value that breaks a rule. Key is the
// configuration key (for example listener.security.protocol.map, with its
// listener prefix as the user wrote it), Value the value as given, and Rule
// says, in Kafka's words where Kafka has them, what is wrong. Err is the
// sentinel behind it, if any.
type Error struct {
	Key   string
	Value string
	Rule  string
	Err   error
}

// Error renders the error the way Kafka's ConfigException does:
// "invalid value V for configuration K: rule".
func (e *Error) Error() string {
	return fmt.Sprintf("invalid value %q for configuration %s: %s", e.Value, e.Key, e.Rule)
}

// Unwrap returns the sentinel behind the error.
func (e *Error) Unwrap() error { return e.Err }

// Rule returns an error whose message is msg, one of Kafka's rules as the
// Rule of an [Error] states it, and which wraps sentinel.
func Rule(msg string, sentinel error) error { return &ruleError{msg, sentinel} }

type ruleError struct {
	msg string
	err error
}

func (e *ruleError) Error() string { return e.msg }
func (e *ruleError) Unwrap() error { return e.err }
