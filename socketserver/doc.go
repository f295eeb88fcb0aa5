// Package socketserver is Apache Kafka's SocketServer for Go: it accepts
// Kafka clients' connections on a broker's listeners, authenticates them,
// and hands their requests to the host, which answers them.
//
// It enforces what Kafka's SocketServer enforces: the connection quotas
// ([ConnectionQuotas]), idle and size limits, TLS and SASL
// ([ListenerConfig.Mechanisms]; KIP-306's failure delay, KIP-368's
// re-authentication), one request in flight per connection with its
// responses in order, and a bounded request queue per plane (data, and
// the control plane of KIP-291).
//
// # Lifecycle
//
// As net/http's Server: [New] builds a [Server] from a [Config] and binds
// nothing; [Server.Start] binds the listeners and accepts; [Server.Serve]
// runs a plane's workers, which hand each [Request] to the host's
// [Handler]; [Server.Shutdown] drains, each connection finishing the
// request it serves, and [Server.Close] stops at once. Listeners may be
// added and removed while it runs, as Kafka's KIP-226 updates them
// ([Server.AddListener], [Server.RemoveListener], [Server.SetListeners]).
//
// # Who answers what
//
// The server answers ApiVersions (from the listener's [API] list, unless
// the host takes it over), the SASL exchange, and the APIs it serves from
// its registry of connections ([ListClientConnectionsAPI],
// [CloseClientConnectionsAPI]). The host answers every other API a listener
// enables ([Config.APIs], [ListenerConfig.APIs]; [KmsgAPI] makes the entry
// of a kmsg request type and says which versions to enable), each request
// exactly once, from any goroutine; one that throttles a client calls
// [Request.Throttle] first. Requests queue for Server.Serve's workers,
// except those of an API with an inline handler ([Inline]), answered on
// the connection's own goroutine; an API served raw ([Raw], experimental)
// reaches the host undecoded, for a proxy that forwards its bytes
// (docs/raw-forwarding.md).
//
// It is a network layer, not a broker: it keeps no topics, partitions or
// group state, and of the answers about the cluster gives only what it
// alone knows, as pure functions of its listeners and what the host passes
// in: [Server.Broker] is this server as Metadata and DescribeCluster
// describe a broker, [MetadataBrokers] and [DescribeClusterBrokers] give a
// client the brokers on the listener it came through, and
// [Server.SingleNodeMetadata] answers Metadata for a cluster of one broker;
// a host with a cluster of its own builds its Metadata from [Broker] values.
//
// # More
//
//   - Connections: [Server.Registry] lists them (KIP-1329,
//     docs/connection-listing.md); [Request.Conn] describes a request's.
//   - Observing: [Hook], [Server.Stats], a request log ([HookRequestDone],
//     [SlogRequestLog]), an audit trail ([HookAudit], docs/audit-trail.md).
//   - Embedding: [Config.Listen], [Config.BaseContext], [Config.ConnContext];
//     behind a load balancer: [ProxyProtocol]; TLS: [Server.ReloadTLS], and
//     a certificate per server name (SNI) with config.KeySSLServerNames.
//   - Bytes: frames the host keeps without a copy ([Request.Body]), their
//     memory bound ([Config.QueuedMaxRequestBytes]), zero-copy Fetch
//     ([FetchResponse]), a Produce's records (package socketserver/records).
//   - One goroutine per connection, parked while idle ([Server],
//     [Config.ParkAfter], docs/performance.md); docs/hardening.md,
//     docs/configuration.md.
package socketserver
