package sasl_test

import (
	"context"
	"testing"

	"github.com/kafkanet/kafkanet/security/sasl"
)

// BenchmarkSCRAMClientFirst parses a SCRAM client-first message and
// answers it (salted password lookup and the server nonce included):
// what a server does for every SCRAM login before any proof is checked.
func BenchmarkSCRAMClientFirst(b *testing.B) {
	m, err := sasl.Builtin("SCRAM-SHA-256", saslTestUsers())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	first := []byte("n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.NewServer(sasl.Attempt{}).Step(ctx, first); err != nil {
			b.Fatal(err)
		}
	}
}
