package security

import (
	"github.com/kafkanet/kafkanet/listener"
)

// config is a resolved listener set as this package reads it: the
// listener package's lookups, and its properties.
type config struct {
	*listener.Set
	props listener.Properties
}

func view(c *listener.Set) config { return config{c, c.Properties()} }

// ruleError carries one of Kafka's messages and the sentinel behind it.
type ruleError struct {
	msg string
	err error
}

func (e *ruleError) Error() string { return e.msg }
func (e *ruleError) Unwrap() error { return e.err }
