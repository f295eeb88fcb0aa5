// Package security says who is talking on a broker's listeners: the plain
// values a server authenticates connections with, and the runtime pieces
// built on them.
//
// A listener's [Settings] are its TLS configuration (a tls.Config, with a
// certificate per TLS server name if it has some:
// [WithServerNameCertificates]), its SASL mechanisms, the mapping of
// client-certificate names to principals ([ParsePrincipalMappingRules],
// [SubjectDN]), re-authentication (KIP-368) and handshake limits, and its
// SASL/OAUTHBEARER settings ([OAuthBearerSettings]: the JWKS validator of
// KIP-768 or the unsecured default). The configuration layer, package
// config, reads them from Kafka's keys (config.Security, config.TLS,
// config.OAuthBearer); a host may build them in code, and the same values
// behave the same. This package reads no property.
//
// A listener's TLS configuration may change while a server runs, as
// Kafka's does (KIP-226): [Settings.CheckCertificateChange] applies
// Kafka's rules to a new one under ssl.allow.dn.changes and
// ssl.allow.san.changes ([Settings.AllowDNChanges],
// [Settings.AllowSANChanges]), and a [TLSWatcher] rebuilds a listener's
// configuration when the files it is built from ([TLSSource];
// config.TLSSources names the PEM files of Kafka's keys) change on disk
// and hands it to the server (socketserver.Server.ReloadTLS).
//
// The users of the built-in SASL mechanisms are lists of user names and
// passwords per listener ([ListenerUsers]; config.JAASUsers reads them
// from the user_<name> options of Kafka's JAAS keys): [NewJAASUsers]
// builds each listener's credential store from them, and
// [JAASUsers.Reload] swaps in new ones.
//
// The SASL mechanisms themselves, their interface and the built-in PLAIN
// and SCRAM-SHA-256/512, are in the sasl package beneath this one;
// OAUTHBEARER is in sasl/oauthbearer, which builds the mechanism from the
// settings and which this package does not import: a program that serves
// no OAUTHBEARER links neither its JWKS validator nor the validator's HTTP
// client.
//
// Errors about configuration read from keys are *config.Error values
// naming the key, the value (secrets shown as [hidden]) and the rule,
// wrapping sentinels of this package ([ErrTLSConfig], [ErrSASLMechanism],
// [ErrJAASConfig], [ErrOAuthBearerConfig], ...) for errors.Is; functions
// and methods that take Go values rather than keys
// ([WithServerNameCertificates], [Settings.CheckCertificateChange]) wrap
// the same sentinels.
package security
