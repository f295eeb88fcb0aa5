package protocolmap

import (
	"fmt"
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
)

// Entry is one key:value pair of a comma-separated map.
type Entry struct {
	Key   string
	Value string
}

// ParseCSVMap parses value, the setting of configuration key configKey, as
// Kafka's comma-separated map "k1:v1, k2:v2". It is the parser behind
// listener.security.protocol.map and max.connections.per.ip.overrides.
//
// Leading and trailing white space of value is ignored, entries are separated
// by commas with any white space around them, and each entry is split at its
// last colon, so a key may itself hold colons (an IPv6 address such as
// ::1:10 maps ::1 to 10). Key and value are trimmed. An empty value is an
// empty map, and trailing empty entries are dropped, as in Kafka.
//
// Unlike Kafka, a key that repeats an earlier one, compared without regard to
// case, is an error ([ErrDuplicateKey]); so is an entry without a colon
// ([ErrMissingColon]) or with nothing before it ([ErrBlankKey]). The entries
// come back in the order given; no value is checked.
func ParseCSVMap(configKey, value string) ([]Entry, error) {
	items := splitCSV(value)
	entries := make([]Entry, 0, len(items))
	seen := make(map[string]string, len(items))
	for _, item := range items {
		i := strings.LastIndexByte(item, ':')
		if i < 0 {
			return nil, &configerr.Error{Key: configKey, Value: value, Err: ErrMissingColon,
				Rule: fmt.Sprintf("entry %q has no colon; each entry must be key:value", item)}
		}
		k, v := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
		if k == "" {
			return nil, &configerr.Error{Key: configKey, Value: value, Err: ErrBlankKey,
				Rule: fmt.Sprintf("entry %q has an empty key", item)}
		}
		fold := strings.ToUpper(k)
		if first, dup := seen[fold]; dup {
			return nil, &configerr.Error{Key: configKey, Value: value, Err: ErrDuplicateKey,
				Rule: fmt.Sprintf("key %q appears more than once (as %q and %q; keys are compared without regard to case)", k, first, k)}
		}
		seen[fold] = k
		entries = append(entries, Entry{Key: k, Value: v})
	}
	return entries, nil
}

// splitCSV splits a trimmed list on commas with the white space around them,
// dropping trailing empty items as Java's String.split does. Empty items
// elsewhere are kept, so that callers can reject them.
func splitCSV(value string) []string {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil
	}
	parts := strings.Split(value, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// SplitList splits a comma-separated list the way Kafka's Csv.parseCsvList
// does: white space around each item is ignored and empty items are dropped.
func SplitList(value string) []string {
	var out []string
	for _, p := range splitCSV(value) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
