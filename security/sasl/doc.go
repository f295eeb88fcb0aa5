// Package sasl is the server side of SASL authentication for Kafka
// listeners: the interface a mechanism implements, modelled on Java's
// javax.security.sasl.SaslServer as Kafka's SaslServerAuthenticator drives
// it, and the built-in mechanisms PLAIN and SCRAM-SHA-256/512.
//
// A [Mechanism] names itself as clients ask for it in SaslHandshake and
// starts a [Server] for each authentication attempt. The connection passes
// the server each client token ([Server.Step]) and sends back its
// challenge, until the server is [Server.Complete] or fails with an error.
// A [*Error] says what the client is told, and may carry a last challenge
// (OAUTHBEARER's error status); once complete, the server gives the
// authorization id, the name of the connection's principal, and what it
// negotiated ([Negotiated]), such as when the credential expires, which
// bounds the session (KIP-368).
//
// [Builtin] returns PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 over a host's
// [CredentialStore]; [Users] is a ready store built from passwords, such as
// the user_<name> options of Kafka's PlainLoginModule. Hosts add other
// mechanisms, such as OAUTHBEARER, GSSAPI or AWS_MSK_IAM, by implementing
// [Mechanism] and handing it to the socket server.
//
// This package does not import the security package, which builds on it.
package sasl
