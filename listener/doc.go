// Package listener resolves a broker's listeners the way Apache Kafka does
// (KIP-103 and the control plane of KIP-291): it parses the endpoints of
// listeners and advertised.listeners, looks each listener name up in
// listener.security.protocol.map, applies Kafka's validation rules, and says
// for each listener where it binds, what it advertises, which security
// protocol it speaks, which plane it feeds and whether brokers use it among
// themselves.
//
// A [Set] holds typed values only: the configuration layer (package
// config: config.Listeners, from properties that config.Load reads) builds
// one from Kafka's keys, and a host may build one in code; [Set.Validate]
// applies Kafka's rules to either.
// [Set.AdvertisedEndPoints] are what a broker tells clients; the
// socketserver package turns them into the brokers of a Metadata response
// as seen through the listener a client connected to.
//
// A running broker's listeners change as Kafka changes them dynamically
// (KIP-226): [Set.Changes] says what a re-read configuration adds, removes
// and advertises anew, and refuses what needs a restart (the inter-broker
// and control-plane listeners, an existing listener's protocol or
// address); [Set.WithListener] and [Set.WithoutListener] derive the Set
// of one change, under the same rules.
//
// Who is talking on a listener (TLS, SASL, principals, JAAS, OAUTHBEARER)
// is not this package's concern but the security package's.
//
// Errors are *config.Error values naming the key, the value and
// the rule (in Kafka's words), wrapping sentinels of this package for
// errors.Is.
package listener
