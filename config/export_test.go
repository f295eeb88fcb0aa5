package config

import "github.com/kafkanet/kafkanet/connregistry"

// ParsePrincipalOverrides exposes the parser of
// kafkanet.max.connections.per.principal.overrides to the external tests.
func ParsePrincipalOverrides(v string) (map[connregistry.Principal]int, error) {
	return parsePrincipalOverrides(KeyMaxConnectionsPerPrincipalOverrides, v)
}
