// Package config turns Kafka's broker properties into the typed, checked
// values the runtime packages consume.
//
// # Layers
//
// A host builds a socket server from a [socketserver.Config] and
// [listener.Set] of plain values: they carry no properties, and
// socketserver.New reads none. This package is the layer above them that
// reads Kafka's keys: [Server] reads the socket server's configuration
// (its listeners, limits, quotas, PROXY protocol and each listener's
// security settings) from properties once, and a host may then change any
// value in code before socketserver.New. A value built in code behaves as
// the same value read here: socketserver.New checks either with the same
// rules.
//
// The parts of Server are readers of their own, each taking the
// properties beside the [listener.Set] read from them, for a host that
// needs one part alone or again (a reload): [Listeners], [Security] (a
// listener's security.Settings), [TLS] (its tls.Config), [OAuthBearer]
// (its security.OAuthBearerSettings), and, for what Server does not read,
// [JAASUsers] (the users of the built-in SASL mechanisms, for
// security.NewJAASUsers) and [TLSSources] (the PEM files a
// security.TLSWatcher watches). The listener and security packages read
// no property: their values are plain.
//
// The imports run one way: examples and plugins -> config -> socketserver
// -> security -> listener -> protocolmap. Nothing in the runtime packages
// imports this one, so a host that configures in code links no parser.
//
// # Keys, defaults and errors
//
// The keys are constants (KeySocketRequestMaxBytes,
// KeyQuotaWindowNum, ...), with Kafka's names, or kafkanet.-prefixed for
// kafkanet's own. Each default is written once, as the runtime's default
// (socketserver.DefaultQueuedMaxRequests, socketserver.DefaultConnectionQuotas,
// quota.DefaultSamples), and this package reads an unset key as that
// value. Errors are *Error values that name the key as
// it was written (with its listener.name.<listener>. prefix when the value
// came from one), the value and the rule broken, and wrap a sentinel such
// as listener.ErrInvalidValue for errors.Is.
//
// # Default and off
//
// One convention holds for the Go values and for the keys of kafkanet's
// own, documented once in docs/configuration.md: a Go value's zero means
// the default and a negative value turns the feature off; a kafkanet. key
// unset is the default, -1 turns the feature off, and 0 is refused where
// it has no literal meaning. Kafka's own keys keep Kafka's meanings, which
// this package translates (connections.max.idle.ms=-1 is no idle limit,
// socket.send.buffer.bytes=-1 the operating system's default,
// connections.max.reauth.ms=0 no re-authentication). Byte sizes are ints.
package config
