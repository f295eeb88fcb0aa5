package listener

import (
	"fmt"
	"maps"
	"strings"

	"github.com/magiconair/properties"
)

// Properties holds broker configuration as Kafka reads server.properties: a
// key that is present was set, even when its value equals the default (which
// matters: setting security.inter.broker.protocol at all conflicts with
// inter.broker.listener.name). Values are used trimmed, as Kafka trims string
// settings.
type Properties map[string]string

// Get returns the trimmed value of key and whether key is set.
func (p Properties) Get(key string) (string, bool) {
	v, ok := p[key]
	return strings.TrimSpace(v), ok
}

// With returns a copy of p with the given key=value settings laid over it,
// the way a command line's overrides sit on top of a properties file. Each
// setting must contain '='.
func (p Properties) With(settings ...string) (Properties, error) {
	out := maps.Clone(p)
	if out == nil {
		out = Properties{}
	}
	for _, s := range settings {
		k, v, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("listener: setting %q is not key=value", s)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// ParseProperties reads a Java .properties text: # and ! comments, '=', ':'
// or white space between key and value, backslash line continuations and
// escapes (\t, \n, \uXXXX, ...). Like java.util.Properties.load, which Kafka
// uses for server.properties, it reads bytes as ISO-8859-1 (non-Latin text
// belongs in \uXXXX escapes) and does not expand ${...}.
func ParseProperties(text []byte) (Properties, error) {
	l, err := loader().LoadBytes(text)
	if err != nil {
		return nil, fmt.Errorf("listener: reading properties: %w", err)
	}
	return Properties(l.Map()), nil
}

// LoadProperties reads the Java .properties file at path (see
// [ParseProperties]).
func LoadProperties(path string) (Properties, error) {
	l, err := loader().LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("listener: reading %s: %w", path, err)
	}
	return Properties(l.Map()), nil
}

func loader() *properties.Loader {
	return &properties.Loader{Encoding: properties.ISO_8859_1, DisableExpansion: true}
}
