package protocolmap

import (
	"fmt"
	"strings"
)

// ListenerName names a listener, such as CLIENT or REPLICATION. Names are
// case-insensitive; a ListenerName made by [ParseListenerName] is always upper
// case, so two names can be compared with ==.
type ListenerName string

// ParseListenerName trims s and returns it in upper case. A blank name gives
// an error wrapping [ErrBlankListenerName].
func ParseListenerName(s string) (ListenerName, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: the provided listener name is null or empty string", ErrBlankListenerName)
	}
	return ListenerName(strings.ToUpper(s)), nil
}

// String returns the name.
func (n ListenerName) String() string { return string(n) }

// ConfigPrefix returns the prefix of the listener's own configuration keys,
// "listener.name." followed by the name in lower case and a dot, as in
// listener.name.client.ssl.keystore.location. Kafka matches this prefix case
// sensitively, so a key written with an upper-case listener name does not
// apply.
func (n ListenerName) ConfigPrefix() string {
	return "listener.name." + strings.ToLower(string(n)) + "."
}
