package protocolmap_test

import (
	"errors"
	"fmt"

	"github.com/kafkanet/kafkanet/protocolmap"
)

func ExampleParse() {
	// Three listeners, two of which share SASL_SSL (KIP-103).
	m, err := protocolmap.Parse("client:SASL_SSL, replication:sasl_ssl, INTERNAL:PLAINTEXT")
	if err != nil {
		panic(err)
	}
	p, _ := m.Lookup("Replication")
	fmt.Println(p)
	fmt.Println(m)

	_, err = protocolmap.Parse("CLIENT:TLS")
	fmt.Println(err)
	fmt.Println(errors.Is(err, protocolmap.ErrUnknownSecurityProtocol))
	// Output:
	// SASL_SSL
	// CLIENT:SASL_SSL,INTERNAL:PLAINTEXT,REPLICATION:SASL_SSL
	// invalid value "CLIENT:TLS" for configuration listener.security.protocol.map: Invalid security protocol `TLS` defined in listener.security.protocol.map
	// true
}
