package config

import "github.com/kafkanet/kafkanet/connregistry"

// ParsePrincipalOverrides exposes the parser of
// kafkanet.max.connections.per.principal.overrides to the external tests.
func ParsePrincipalOverrides(v string) (map[connregistry.Principal]int, error) {
	return parsePrincipalOverrides(KeyMaxConnectionsPerPrincipalOverrides, v)
}

// The JAAS readers are unexported; the external tests reach them here.
var (
	ParsePlainJAAS = parsePlainJAAS
	ParseSCRAMJAAS = parseSCRAMJAAS
	PlainUsers     = plainUsers
	SCRAMUsers     = scramUsers
)
