// Package protocolmap parses and validates the mapping from listener names to
// security protocols that Apache Kafka configures with
// listener.security.protocol.map (KIP-103), together with the two value types
// that mapping is made of: [ListenerName] and [SecurityProtocol].
//
// A broker may run several listeners that share one security protocol (say
// CLIENT and REPLICATION, both SASL_SSL), so each listener carries a name, and
// the map says which protocol each name speaks. Parsing follows Kafka's
// Csv.parseCsvMap: entries are separated by commas with surrounding white
// space ignored, each entry is split at its last colon (so IPv6 keys work),
// and key and value are trimmed. Listener names are case-insensitive and held
// in upper case; protocol names are case-insensitive and printed in upper
// case. When the key is not set at all, [Default] maps each protocol's name to
// itself.
//
// One rule is deliberately stricter than Kafka: Kafka lets a later duplicate
// key silently replace an earlier one (and, for keys that differ only in
// case, keeps whichever its hash map yields). KIP-103 says each listener name
// appears once, so [Parse] and [ParseCSVMap] reject a duplicate key, including
// one that differs from an earlier key only in case, with [ErrDuplicateKey].
//
// Errors of a key's value ([Parse], [ParseCSVMap]) are *config.Error values:
// they name the configuration key, the value that was given and the rule
// it broke, and wrap a sentinel such as [ErrUnknownSecurityProtocol] for
// errors.Is. [ParseListenerName] and [ParseSecurityProtocol], which parse
// one name outside any key, wrap the same sentinels. The package is the lowest of
// the module: besides the standard library it imports only the internal
// package that defines config.Error.
package protocolmap
