// Package socketserver is Apache Kafka's SocketServer for Go: per listener an
// acceptor and a pool of processors that own their connections, a bounded
// request channel per plane (data, and the control plane of KIP-291), one
// request in flight per connection with responses in order, connection
// quotas, idle and size limits, TLS and SASL, and a graceful shutdown. A host
// application builds it from a resolved listener.Config and consumes the
// request channels with its own handlers.
//
// The package is being built; see the project README for its status.
package socketserver
