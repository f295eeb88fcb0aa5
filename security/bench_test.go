package security_test

import (
	"testing"

	"github.com/kafkanet/kafkanet/security"
)

func BenchmarkPrincipalMapping(b *testing.B) {
	m, err := security.ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/, DEFAULT`)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Name("CN=Duke,OU=ServiceUsers,O=Org,C=US"); err != nil {
			b.Fatal(err)
		}
	}
}
