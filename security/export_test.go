package security

// The JAAS readers are unexported; the external tests reach them here.
var (
	ParsePlainJAAS = parsePlainJAAS
	ParseSCRAMJAAS = parseSCRAMJAAS
	PlainUsers     = plainUsers
	SCRAMUsers     = scramUsers
)
