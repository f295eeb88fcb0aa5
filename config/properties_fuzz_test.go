package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kafkanet/kafkanet/config"
)

// FuzzParseProperties checks the server.properties reader: it never panics,
// and what it reads, written back with every character but letters and
// digits escaped as \uXXXX, reads back the same.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{
		"a=b", "listeners = PLAINTEXT://:9092\n# c\n! c\nx:y\nz w\n", "k=v\\\n   continued", "\\u0041=\\t\\n\\\\",
		"key", "=value", "a\\=b=c\\:d", "k=\xe9\xff", "k=${other}", "k=\\u12", "\\\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		props, err := config.ParseProperties(text)
		if err != nil {
			return
		}
		var b strings.Builder
		for k, v := range props {
			if !escapeProperty(&b, k) {
				return
			}
			b.WriteByte('=')
			if !escapeProperty(&b, v) {
				return
			}
			b.WriteByte('\n')
		}
		again, err := config.ParseProperties([]byte(b.String()))
		if err != nil {
			t.Fatalf("ParseProperties(%q) read %q, whose escaped form %q does not read: %v", text, props, b.String(), err)
		}
		if len(again) != len(props) {
			t.Fatalf("round trip of %q changed %q to %q", text, props, again)
		}
		for k, v := range props {
			if got, ok := again[k]; !ok || got != v {
				t.Fatalf("round trip of %q changed key %q from %q to %q (present %v)", text, k, v, got, ok)
			}
		}
	})
}

// escapeProperty writes s with every rune but ASCII letters and digits as a
// \uXXXX escape; false when s holds a rune that has no such escape.
func escapeProperty(b *strings.Builder, s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r <= 0xFFFF:
			fmt.Fprintf(b, "\\u%04x", r)
		default:
			return false
		}
	}
	return true
}
