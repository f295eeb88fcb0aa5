package protocolmap_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// FuzzParse checks that Parse never panics, that what it accepts prints in a
// form it accepts again with the same meaning, and that every key is upper
// case.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "CLIENT:SASL_SSL", "a:ssl, b : plaintext ,", "A:B:SSL", ",x:SSL",
		"client:SSL,CLIENT:SSL", ":SSL", "X:tls", "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		m, err := protocolmap.Parse(value)
		if err != nil {
			return
		}
		for name, p := range m {
			if !p.Valid() {
				t.Fatalf("invalid protocol %d for %q", p, name)
			}
			if n, err := protocolmap.ParseListenerName(string(name)); err != nil || n != name {
				t.Fatalf("key %q is not a normalised listener name", name)
			}
		}
		again, err := protocolmap.Parse(m.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %v, but its String %q does not parse: %v", value, m, m.String(), err)
		}
		if len(again) != len(m) {
			t.Fatalf("round trip changed size: %v -> %v", m, again)
		}
		for k, v := range m {
			if again[k] != v {
				t.Fatalf("round trip changed %s: %v -> %v", k, v, again[k])
			}
		}
	})
}

// FuzzParseCSVMap checks the parser of every key:value list
// (listener.security.protocol.map, max.connections.per.ip.overrides): it
// never panics; accepted entries have trimmed, non-blank keys, trimmed
// values and no key twice (regardless of case); a refusal is a
// *config.Error naming the configuration key.
func FuzzParseCSVMap(f *testing.F) {
	for _, s := range []string{
		"", "a:1", " a : 1 , b:2 ,", "::1:5,[::1]:6", "a:1,A:2", ":1", "a", "a:", "x:y:z", ",,,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		entries, err := protocolmap.ParseCSVMap("some.key", value)
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Key != "some.key" || ce.Rule == "" {
				t.Fatalf("ParseCSVMap(%q) = %v, not a config.Error naming the key", value, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if e.Key == "" || e.Key != strings.TrimSpace(e.Key) || e.Value != strings.TrimSpace(e.Value) {
				t.Fatalf("ParseCSVMap(%q): untrimmed or blank entry %+v", value, e)
			}
			if seen[strings.ToUpper(e.Key)] {
				t.Fatalf("ParseCSVMap(%q): key %q twice", value, e.Key)
			}
			seen[strings.ToUpper(e.Key)] = true
		}
	})
}
