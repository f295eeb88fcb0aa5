package socketserver

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestValidSoftwareField checks the hand-written KIP-511 check against
// Kafka's regular expression, on chosen and on random strings.
func TestValidSoftwareField(t *testing.T) {
	kafka := regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)
	cases := []string{"", "a", "-", ".", "kgo", "1.22.3", "librdkafka", "a-b.c", "-a", "a-", "a.", ".a", "a b", "a_b", "é", "a\x00", "A9", "9"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ09-._ é\x00"
	for range 5000 {
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := validSoftwareField(s), kafka.MatchString(s); got != want {
			t.Errorf("validSoftwareField(%q) = %v, Kafka's pattern says %v", s, got, want)
		}
		if validSoftwareField([]byte(s)) != validSoftwareField(s) {
			t.Errorf("validSoftwareField(%q) differs for bytes and strings", s)
		}
	}
}

func TestParseClientSoftware(t *testing.T) {
	for _, tt := range []struct {
		name          string
		body          []byte
		wantName, ver string
		wantErr       bool
	}{
		{"name, version, no tags", []byte{4, 'k', 'g', 'o', 3, '1', '.', 0}, "kgo", "1.", false},
		{"empty strings", []byte{1, 1, 0}, "", "", false},
		{"a tag is skipped", []byte{2, 'a', 2, 'b', 1, 5, 1, 'x'}, "a", "b", false},
		{"null name", []byte{0, 1, 0}, "", "", true},
		{"name longer than the body", []byte{9, 'a'}, "", "", true},
		{"no version", []byte{2, 'a'}, "", "", true},
		{"no tag section", []byte{2, 'a', 2, 'b'}, "", "", true},
		{"bad tag size", []byte{2, 'a', 2, 'b', 1, 5, 9}, "", "", true},
		{"empty body", nil, "", "", true},
		{"varint overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name, ver, err := parseClientSoftware(tt.body)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parsed %q %q, want an error", name, ver)
				}
				return
			}
			if err != nil || string(name) != tt.wantName || string(ver) != tt.ver {
				t.Fatalf("got %q %q %v, want %q %q", name, ver, err, tt.wantName, tt.ver)
			}
		})
	}
}
