package protocolmap_test

import (
	"testing"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// The parsers run at start-up, not per request; these keep them cheap
// enough that a configuration reload is never a concern.

func BenchmarkParse(b *testing.B) {
	const value = "INTERNAL:PLAINTEXT, EXTERNAL:SASL_SSL, REPLICATION:SSL, CONTROLLER:PLAINTEXT, CLIENT:SASL_PLAINTEXT"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocolmap.Parse(value); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCSVMap(b *testing.B) {
	const value = "10.0.0.1:100, broker-2.example:50, ::1:20, fe80::1:5, 192.168.1.7:0"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocolmap.ParseCSVMap("max.connections.per.ip.overrides", value); err != nil {
			b.Fatal(err)
		}
	}
}
