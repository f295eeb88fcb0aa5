// Package security says who is talking on a broker's listeners: it turns
// Kafka's security settings of a resolved listener set ([listener.Set])
// into what a server authenticates connections with.
//
// [ForListener] gathers one listener's [Settings]: its TLS configuration
// ([TLSConfig], from Kafka's PEM key and trust store settings, KIP-651),
// with a certificate per TLS server name if the listener lists some
// ([KeySSLServerNames]; [WithServerNameCertificates] for a tls.Config built
// in code), its SASL mechanisms, the mapping of client-certificate names to
// principals ([ParsePrincipalMappingRules], [SubjectDN]), re-authentication
// (KIP-368) and handshake limits, and its SASL/OAUTHBEARER settings
// ([OAuthBearer]: the JWKS validator of KIP-768 or the unsecured default,
// as plain values). config.Server reads the broker-wide delay
// before a failed authentication is answered (KIP-306).
//
// A listener's TLS configuration may change while a server runs, as
// Kafka's does (KIP-226): [Settings.CheckCertificateChange] applies
// Kafka's rules to a new one under ssl.allow.dn.changes and
// ssl.allow.san.changes ([Settings.AllowDNChanges],
// [Settings.AllowSANChanges]), and a [TLSWatcher] rebuilds a listener's
// configuration when the PEM files its settings name change on disk and
// hands it to the server (socketserver.Server.ReloadTLS).
//
// The users of the built-in SASL mechanisms come from Kafka's JAAS
// settings, the user_<name> options of each listener's
// listener.name.<listener>.<mechanism>.sasl.jaas.config (config.MechanismKey):
// [NewJAASUsers] reads them for every SASL listener and builds its
// credential store, and [JAASUsers.Reload] reloads them.
//
// The SASL mechanisms themselves, their interface and the built-in PLAIN
// and SCRAM-SHA-256/512, are in the sasl package beneath this one;
// OAUTHBEARER is in sasl/oauthbearer, which builds the mechanism from the
// settings and which this package does not import: a program that serves
// no OAUTHBEARER links neither its JWKS validator nor the validator's HTTP
// client.
//
// Errors are *config.Error values naming the key (in the form
// the value came from), the value (secrets shown as [hidden]) and the
// rule, in Kafka's words where Kafka has them, wrapping sentinels of this
// package or the listener package for errors.Is.
package security
