package testkit

import (
	"strings"

	"github.com/kafkanet/kafkanet/config"
)

// ServerNameKeyStore is a PEM key store (a socketservertest.ServerCert's KeyStoreFile)
// that a listener serves to the clients asking for Name.
type ServerNameKeyStore struct {
	Name         string
	KeyStoreFile string
}

// ServerNameListeners are the properties of two listeners on 127.0.0.1:
// SSL serves the PEM key store defaultKeyStore to the clients that ask
// for no server name or another, and each of named to the clients asking
// for its name (kafkanet.ssl.server.names, in named's order); PLAIN, the
// inter-broker listener, speaks PLAINTEXT.
func ServerNameListeners(defaultKeyStore string, named ...ServerNameKeyStore) config.Properties {
	props := config.Properties{
		"listeners":                      "SSL://127.0.0.1:0,PLAIN://127.0.0.1:0",
		"listener.security.protocol.map": "SSL:SSL,PLAIN:PLAINTEXT",
		"inter.broker.listener.name":     "PLAIN",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          defaultKeyStore,
	}
	names := make([]string, 0, len(named))
	for _, n := range named {
		names = append(names, n.Name)
		props["listener.name.ssl.kafkanet.ssl.server.name."+n.Name+".ssl.keystore.location"] = n.KeyStoreFile
	}
	if len(names) > 0 {
		props["listener.name.ssl.kafkanet.ssl.server.names"] = strings.Join(names, ",")
	}
	return props
}
