package security

import (
	"strings"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// config is a resolved listener set as this package reads it: the
// listener package's lookups, and its properties.
type config struct {
	*listener.Set
	props properties
}

func view(c *listener.Set) config { return config{c, c.Properties()} }

// properties are the properties a Set was read from, as this package's
// parsers look them up (with package config's rules: values trimmed, a
// listener's prefixed key before the un-prefixed one).
type properties map[string]string

func (p properties) Get(key string) (string, bool) {
	v, ok := p[key]
	return strings.TrimSpace(v), ok
}

func (p properties) ListenerValue(name protocolmap.ListenerName, key string) (value, from string, ok bool) {
	prefixed := name.ConfigPrefix() + key
	if v, ok := p.Get(prefixed); ok {
		return v, prefixed, true
	}
	v, ok := p.Get(key)
	return v, key, ok
}

// ruleError carries one of Kafka's messages and the sentinel behind it.
type ruleError struct {
	msg string
	err error
}

func (e *ruleError) Error() string { return e.msg }
func (e *ruleError) Unwrap() error { return e.err }
