// Package listener resolves a broker's listeners the way Apache Kafka does
// (KIP-103 and the control plane of KIP-291): it parses the endpoints of
// listeners and advertised.listeners, looks each listener name up in
// listener.security.protocol.map, applies Kafka's validation rules, and says
// for each listener where it binds, what it advertises, which security
// protocol it speaks, which plane it feeds and whether brokers use it among
// themselves.
//
// The entry point is [Resolve], which takes broker [Properties] (for example
// from [LoadProperties] on a server.properties file) and returns a [Set].
// [Properties.ListenerValue] resolves listener-prefixed settings
// (listener.name.<name>.<key>) as later layers need them.
// [Set.AdvertisedEndPoints] are what a broker tells clients; the
// socketserver package turns them into the brokers of a Metadata response
// as seen through the listener a client connected to.
//
// A running broker's listeners change as Kafka changes them dynamically
// (KIP-226): [Set.Changes] says what a re-read configuration adds, removes
// and advertises anew, and refuses what needs a restart (the inter-broker
// and control-plane listeners, an existing listener's protocol or
// address); [Set.WithListener] and [Set.WithoutListener] derive the Set
// of one change, under the rules [Resolve] applies.
//
// Who is talking on a listener (TLS, SASL, principals, JAAS, OAUTHBEARER)
// is not this package's concern but the security package's, which reads
// its settings with [Properties.ListenerValue], [Properties.ListenerInt]
// and [Properties.Int].
//
// Errors are [*protocolmap.ConfigError] values naming the key, the value and
// the rule (in Kafka's words), wrapping sentinels of this package for
// errors.Is.
package listener
