package config

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
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
			return nil, fmt.Errorf("config: setting %q is not key=value", s)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// Overrides collects key=value settings given on a command line, as
// kafka-server-start's --override does; [Properties.With] lays them over a
// properties file's. It is a flag.Value for a repeatable flag:
//
//	var sets config.Overrides
//	flag.Var(&sets, "set", "set configuration `key=value` (repeatable)")
type Overrides []string

// String returns the settings, separated by spaces.
func (o *Overrides) String() string { return strings.Join(*o, " ") }

// Set adds one setting; it must be key=value with a key. The error is
// short, since package flag quotes the value and names the flag before it.
func (o *Overrides) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || strings.TrimSpace(k) == "" {
		return errors.New("want key=value")
	}
	*o = append(*o, v)
	return nil
}

// ParseProperties reads a Java .properties text as
// java.util.Properties.load does, which Kafka uses for server.properties:
// bytes are ISO-8859-1 (non-Latin text belongs in \uXXXX escapes); lines end
// with \n, \r or \r\n; a line ending in an odd number of backslashes
// continues on the next, whose leading white space is skipped; lines whose
// first non-blank character is # or ! are comments; the key ends at the
// first unescaped '=', ':' or white space, after which white space and one
// '=' or ':' are skipped; \t, \n, \r, \f and \uXXXX are escapes, and a
// backslash before any other character stands for that character. A later
// key replaces an earlier one, and ${...} is not expanded. The one error is
// a malformed \uXXXX escape, which Java refuses too.
func ParseProperties(text []byte) (Properties, error) {
	props := Properties{}
	lineNo := 0
	for len(text) > 0 {
		var line []rune
		line, text, lineNo = logicalLine(text, lineNo)
		if line == nil {
			continue
		}
		key, value, err := splitProperty(line)
		if err != nil {
			return nil, fmt.Errorf("config: reading properties: line %d: %w", lineNo, err)
		}
		props[key] = value
	}
	return props, nil
}

// Load reads the Java .properties file at path (see [ParseProperties]).
func Load(path string) (Properties, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	props, err := ParseProperties(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// isPropertySpace reports whether c is white space in a properties text.
func isPropertySpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

// logicalLine takes the next logical line off text, joining continued
// natural lines: its characters (ISO-8859-1 bytes as runes, escapes not yet
// read, the continuing backslashes and the next lines' leading white space
// dropped), or nil for a blank or comment line. lineNo counts the natural
// lines read, for errors.
func logicalLine(text []byte, lineNo int) (line []rune, rest []byte, n int) {
	// Leading white space; blank lines and comments.
	i := 0
	for i < len(text) && isPropertySpace(text[i]) {
		i++
	}
	if i == len(text) || text[i] == '\n' || text[i] == '\r' || text[i] == '#' || text[i] == '!' {
		_, next := lineEnd(text, i)
		return nil, text[next:], lineNo + 1
	}
	line = []rune{}
	for {
		lineNo++
		end, next := lineEnd(text, i)
		seg := text[i:end]
		slashes := 0
		for j := len(seg) - 1; j >= 0 && seg[j] == '\\'; j-- {
			slashes++
		}
		continued := slashes%2 == 1 && next > end // an odd count escapes the line end
		if continued {
			seg = seg[:len(seg)-1]
		}
		for _, b := range seg {
			line = append(line, rune(b))
		}
		text = text[next:]
		if !continued {
			return line, text, lineNo
		}
		i = 0
		for i < len(text) && isPropertySpace(text[i]) {
			i++
		}
	}
}

// lineEnd finds the end of the natural line starting at i: the index of
// its terminator, and of the next line.
func lineEnd(text []byte, i int) (end, next int) {
	for end = i; end < len(text); end++ {
		switch text[end] {
		case '\n':
			return end, end + 1
		case '\r':
			if end+1 < len(text) && text[end+1] == '\n' {
				return end, end + 2
			}
			return end, end + 1
		}
	}
	return end, end
}

// splitProperty splits a logical line into its key and value, reading
// escapes.
func splitProperty(line []rune) (key, value string, err error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line)) // a key's last backslash escapes nothing
	keyEnd := i
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
		i++
	}
	if i < len(line) && (line[i] == '=' || line[i] == ':') {
		i++
	}
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\f') {
		i++
	}
	if key, err = unescapeProperty(line[:keyEnd]); err != nil {
		return "", "", err
	}
	if value, err = unescapeProperty(line[i:]); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescapeProperty reads the escapes of a key or value.
func unescapeProperty(s []rune) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteRune(c)
			continue
		}
		i++
		if i == len(s) { // a lone backslash at the very end: Java drops it
			break
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+4 >= len(s) {
				return "", fmt.Errorf("malformed \\uxxxx encoding in %q", string(s))
			}
			var r rune
			for _, h := range s[i+1 : i+5] {
				d, ok := hexDigit(h)
				if !ok {
					return "", fmt.Errorf("malformed \\uxxxx encoding in %q", string(s))
				}
				r = r<<4 | d
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), nil
}

func hexDigit(r rune) (rune, bool) {
	switch {
	case '0' <= r && r <= '9':
		return r - '0', true
	case 'a' <= r && r <= 'f':
		return r - 'a' + 10, true
	case 'A' <= r && r <= 'F':
		return r - 'A' + 10, true
	}
	return 0, false
}

// ListenerValue looks key up for one listener the way Kafka resolves
// listener-prefixed settings: listener.name.<lower-case name>.<key> if set,
// else the un-prefixed key. It reports where the value came from in the
// returned configuration key, so that an error about the value can name it.
func (p Properties) ListenerValue(name protocolmap.ListenerName, key string) (value, from string, ok bool) {
	prefixed := name.ConfigPrefix() + key
	if v, ok := p.Get(prefixed); ok {
		return v, prefixed, true
	}
	v, ok := p.Get(key)
	return v, key, ok
}

// ListenerInt is ListenerValue for integer settings: it returns def when the
// key is set nowhere, and a [*Error] naming the key that
// holds a value that is not an integer or is below min. Like [Properties.Int]
// it takes 64-bit values.
func (p Properties) ListenerInt(name protocolmap.ListenerName, key string, def, min int) (int, error) {
	return p.listenerIntUpTo(name, key, def, min, math.MaxInt64)
}

// Int returns the integer value of a broker-wide key, def when it is not set,
// or a [*Error] when it is not an integer or is below min. It takes 64-bit
// values, as Kafka's LONG keys do; [Server] holds the keys Kafka types INT
// to 32 bits.
func (p Properties) Int(key string, def, min int) (int, error) {
	return p.intUpTo(key, def, min, math.MaxInt64)
}

// int32 is Int for a key Kafka types INT: at most math.MaxInt32.
func (p Properties) int32(key string, def, min int) (int, error) {
	return p.intUpTo(key, def, min, math.MaxInt32)
}

// listenerInt32 is ListenerInt for a key Kafka types INT.
func (p Properties) listenerInt32(name protocolmap.ListenerName, key string, def, min int) (int, error) {
	return p.listenerIntUpTo(name, key, def, min, math.MaxInt32)
}

func (p Properties) intUpTo(key string, def, min, max int) (int, error) {
	v, ok := p.Get(key)
	if !ok {
		return def, nil
	}
	return parseInt(key, v, min, max)
}

func (p Properties) listenerIntUpTo(name protocolmap.ListenerName, key string, def, min, max int) (int, error) {
	v, from, ok := p.ListenerValue(name, key)
	if !ok {
		return def, nil
	}
	return parseInt(from, v, min, max)
}

func parseInt(key, value string, min, max int) (int, error) {
	n, err := strconv.Atoi(value)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange), err == nil && n > max:
		rule := fmt.Sprintf("Expected value to be a 32-bit integer, at most %d", math.MaxInt32)
		if max != math.MaxInt32 {
			rule = fmt.Sprintf("Expected value to be a 64-bit integer, at most %d", max)
		}
		return 0, &Error{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: rule}
	case err != nil:
		return 0, &Error{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: "Expected value to be an integer, but it was a String"}
	case n < min:
		return 0, &Error{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: fmt.Sprintf("Value must be at least %d", min)}
	}
	return n, nil
}
