// Package connregistry keeps a live view of a server's connections and
// answers Kafka's ListClientConnections request (KIP-1329) from it.
//
// A [Registry] holds every open connection of a server, on every listener
// and both planes, plus a bounded history of recently closed ones with the
// reason they closed. A connection's description, [Info], is written in
// one place, its entry in the registry, and read from there by the
// server's request path as by the listings; [Conn] is an Info with what
// the registry counts (requests, bytes, state, close). Any goroutine may
// take a [Registry.Snapshot] while connections come and go: the registry's lock is
// held only to copy the set of entries, each record is read under its own
// lock, so a listing of 100,000 connections never stalls the data plane and
// never returns a torn record. [Filter] selects by principal, client address
// (an IP, or a CIDR prefix) and listener, and by the TLS server name the
// client asked for ([Filter.ServerName]), and [Registry.Close] closes
// what a filter selects, the incident-response "kill" Kafka lacks. Each
// connection carries its recent rates ([Conn.RequestRate],
// [Conn.BytesInRate], [Conn.BytesOutRate], per second over about the last
// minute), and [Registry.Top] returns the busiest first, or the longest
// idle, or the oldest ([SortKey]), keeping only as many as asked for.
//
// # Who writes
//
// A registry is written by its server alone: socketserver adds each
// connection and keeps its entry (requests, responses, throttles, state,
// description, close), as net/http keeps its trackConn and setState to
// itself. Hosts read ([Registry] has no method that writes) and close
// connections by filter. Go has no friend packages, so the writes are
// sealed by the module's internal directory: the implementation is
// internal/connreg, whose bookkeeping is exported to this module's
// packages only, and [Registry] is an interface that it implements, read
// only. A host cannot reach the bookkeeping, not even by reflection (the
// entry point is a function of the internal package, not a method of the
// value a host holds); the registry is the server's and lives as long as
// it, without global state. socketserver's Config.RegistryHistory sizes its
// history. A host's unit test builds a registry with the connections it
// describes through package connregistrytest; a host with a network layer
// of its own, whose connections socketserver does not serve, implements
// [Registry] over them to answer the same requests with [ListHandler] and
// [CloseHandler].
//
// [ListClientConnectionsRequest] and [ListClientConnectionsResponse]
// implement kmsg.Request and kmsg.Response with KIP-1329's version-0 schema;
// fields beyond the KIP (the server name among them, and its filter) travel
// as tagged fields, whose numbers docs/connection-listing.md lists for
// clients in other languages. Their API key defaults to
// the KIP's 93, which Kafka 4.4 and kmsg have since given to another API
// (see [DefaultListAPIKey]). [ListHandler] asks the host's [Authorizer]
// (an [Action]: DESCRIBE on the CLUSTER) and builds the response.
//
// [CloseClientConnectionsRequest] is [Registry.Close] as a request, which
// Kafka lacks: an operator closes the connections of a principal, an
// address or a listener, or single connections by id, from a client.
// [CloseHandler] asks for ALTER on the CLUSTER and answers with what it
// closed. The requests' filters are a [Filter], the one shape of a filter
// in the API, connadmin and the CLI.
package connregistry
