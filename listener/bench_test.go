package listener_test

import (
	"testing"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func BenchmarkParseEndPoint(b *testing.B) {
	m := protocolmap.Default()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := listener.ParseEndPoint("SASL_SSL://[::1]:9093", m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseProperties(b *testing.B) {
	const text = `# a broker's listener section
listeners=INTERNAL://:9092,EXTERNAL://0.0.0.0:9093,CONTROLLER://:9094
advertised.listeners=INTERNAL://broker-1.internal:9092,EXTERNAL://broker-1.example:9093
listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=INTERNAL
control.plane.listener.name=CONTROLLER
listener.name.external.sasl.enabled.mechanisms=SCRAM-SHA-512
max.connections.per.ip.overrides=10.0.0.1:100,\
  10.0.0.2:50
`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.ParseProperties([]byte(text)); err != nil {
			b.Fatal(err)
		}
	}
}
