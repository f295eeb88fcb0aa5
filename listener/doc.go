// Package listener resolves a broker's listeners the way Apache Kafka does
// (KIP-103 and the control plane of KIP-291): it parses the endpoints of
// listeners and advertised.listeners, looks each listener name up in
// listener.security.protocol.map, applies Kafka's validation rules, and says
// for each listener where it binds, what it advertises, which security
// protocol it speaks, which plane it feeds and whether brokers use it among
// themselves.
//
// The entry point is [Resolve], which takes broker [Properties] (for example
// from [LoadProperties] on a server.properties file) and returns a [Config].
// [Config.ListenerValue] resolves listener-prefixed settings
// (listener.name.<name>.<key>) as later layers need them. The package also
// encodes what KIP-103 changed in what brokers tell each other and clients:
// the ZooKeeper broker registration JSON ([BrokerRegistration]), the endpoint
// lists of UpdateMetadata and BrokerRegistration requests, and the brokers of
// a Metadata response as seen through the listener a client connected to.
//
// For security, [Config.TLSConfig] builds a listener's TLS configuration
// from Kafka's PEM key and trust store settings (KIP-651); [Config.Security]
// gathers its SASL mechanisms, client-certificate principal mapping
// ([ParsePrincipalMappingRules], [SubjectDN]), re-authentication and
// handshake limits; [Config.PlainUsers] reads SASL/PLAIN users from the
// listener's JAAS configuration ([ParsePlainJAAS]), [Config.SCRAMUsers]
// the SCRAM mechanisms' own ([ParseSCRAMJAAS]), and [NewJAASUsers]
// builds every SASL listener's user store from them and reloads them;
// [Config.OAuthBearer] reads a listener's SASL/OAUTHBEARER settings as a
// Kafka broker reads them (the JWKS validator of KIP-768, or the unsecured
// default) into a plain [OAuthBearerSettings] value, which [Config.Security]
// keeps. The SASL mechanisms themselves, their interface and the built-in
// PLAIN and SCRAM-SHA-256/512, are in the sasl package beneath this one;
// OAUTHBEARER is in sasl/oauthbearer, which builds the mechanism from the
// settings and which this package does not import: a program that serves no
// OAUTHBEARER links neither its JWKS validator nor the validator's HTTP
// client.
//
// Errors are [*protocolmap.ConfigError] values naming the key, the value and
// the rule (in Kafka's words), wrapping sentinels of this package for
// errors.Is.
package listener
