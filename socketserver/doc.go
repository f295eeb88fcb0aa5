// Package socketserver is Apache Kafka's SocketServer for Go: it accepts
// Kafka clients' connections on a broker's listeners and hands their
// requests to the host, which answers them.
//
// # Overview
//
// Per listener an acceptor and a pool of processors own the connections;
// a bounded request channel per plane (data, and the control plane of
// KIP-291) holds the requests; a connection has one request in flight,
// its responses in order (several for a raw API that pipelines, for a
// proxy: API.Pipeline). The server enforces Kafka's connection quotas
// ([ConnectionQuotas]), idle and size limits, TLS and SASL (the built-in
// PLAIN and SCRAM-SHA-256/512 or the host's own sasl.Mechanism
// implementations, KIP-306 failure delay, KIP-368 re-authentication), and
// shuts down gracefully. A host builds a [Server] from a resolved
// listener.Set (config.Server, in package config, reads Kafka's keys), starts it,
// and answers the [Request] values of each plane with its own handler,
// which [Server.Serve] runs in a pool of goroutines. The server answers
// ApiVersions and the SASL exchange itself, and feeds every connection to a
// connregistry.Registry for listing (KIP-1329): a connection's description,
// a connregistry.Info, lives in its registry entry, and each request
// carries the one it found when it was read ([Request.Conn], a copy the
// connection's requests share until the description changes), as the
// hooks get a copy; after a TLS handshake it holds the server name the client asked
// for (SNI), and a listener may serve a certificate per server name
// (config.KeySSLServerNames). [KmsgAPI] enables kmsg's request types (and says which versions to
// pick).
//
// # Broker answers
//
// The package is a network layer, not a broker: it keeps no topics,
// partitions or group state. It does hold the few answers every host that
// embeds it must give about the listeners it serves, since only the
// server knows them: [Server.Broker] is this server as Metadata and
// DescribeCluster describe a broker (its advertised endpoints, with the
// ports it bound), [MetadataBrokers] and [DescribeClusterBrokers] give a
// client the brokers on the listener it came through, as Kafka does, and
// [Server.SingleNodeMetadata] answers Metadata for a host that is a
// cluster of one broker. They are pure functions of the listeners and
// what the host passes in; a host with a cluster of its own builds its
// Metadata from [Broker] values and leaves SingleNodeMetadata aside.
//
// # Listeners at run time
//
// Listeners may be added and removed while the server runs, as Kafka
// applies a dynamic update of its listeners (KIP-226):
// [Server.AddListener] serves a new listener with its own security and
// quotas, [Server.RemoveListener] stops one and drains its connections as
// [Server.Shutdown] drains the server's, and [Server.SetListeners] applies
// a re-read configuration; the broker-wide connection limit stays one.
//
// # Embedding
//
// A host embedding it may serve listeners it makes itself
// ([Config.Listen]: an inherited socket, a proxy's listener, an in-memory
// one in tests), give request contexts its own values
// ([Config.BaseContext], [Config.ConnContext]), observe the server through
// single-purpose hooks ([Hook]: connections, requests, authentication)
// and [Server.Stats], see every request as it ends, those the server
// answers itself included, for a request log as Kafka's
// kafka.request.logger and request metrics as its RequestMetrics
// ([HookRequestDone], [SlogRequestLog]: who sent what, from where, the
// sizes and each phase's time, never a SASL secret),
// keep an audit trail of logins, refused connections, operators' closes
// and throttles, delivered from a bounded queue that never holds a client
// ([HookAudit], [Server.Audit]), tune or turn off the parking of idle connections
// ([Config.ParkAfter]), and replace a listener's TLS configuration while
// it serves, for new connections, with Kafka's checks
// ([Server.ReloadTLS], [Server.ReloadTLSFrom]). APIs with an inline handler
// ([API.Inline], set by [Inline]) are answered on the connection's
// goroutine, as net/http calls handlers ([ListClientConnectionsAPI] and
// [CloseClientConnectionsAPI] are such), still within the queue's bound.
//
// # Behind a load balancer
//
// Behind a TCP load balancer (HAProxy, a cloud's network load balancer), a
// listener may require the PROXY protocol, versions 1 and 2
// ([ListenerConfig.ProxyProtocol]: kafkanet.proxy.protocol and
// kafkanet.proxy.protocol.trusted.networks): the header is accepted only
// from the balancers' networks and read on the connection's own goroutine
// within the handshake timeout, never on the acceptor, and from then on
// the connection is the client's: its id, its registry entry, the
// per-address connection quotas, filters, hooks and logs have the client's
// address, and connregistry.Info.ProxyAddr and ProxyTLVs hold the
// balancer's address and the header's v2 fields. A connection refused
// for its header is closed before it is served ([HookProxyRefused]).
//
// # Throttling
//
// A handler that throttles a client, as Kafka's client quotas
// do (KIP-219), calls [Request.Throttle] before its answer. The answer
// leaves at once, with throttle_time_ms set, and the connection then reads
// nothing until the throttle has passed (Kafka's MUTED_AND_THROTTLED), an
// acks=0 Produce's (NoResponse) too; a client that ignores the throttle is
// held all the same. A muted connection holds no queue place and no
// request memory, connections.max.idle.ms counts from the throttle's end,
// the registry lists it as throttled (connregistry.Conn.ThrottledUntil and
// ThrottleTime), and Shutdown closes it at once, as an idle one.
//
// # Bytes
//
// A request's frame is read once and never reused, so a host may
// keep its record batches without copying them ([Request]);
// queued.max.request.bytes ([Config.QueuedMaxRequestBytes]) bounds the
// memory of requests read and not yet answered, as Kafka's memory pool
// does; and a Fetch answered with a [FetchResponse] carries its record
// batches by reference ([FetchRecords]), written with writev from memory or
// sendfile from a file, as Kafka's zero-copy fetch. The package
// socketserver/records reads a Produce's record batches and records, CRC
// checked and decompressed; it is apart so that a host that does not read
// records does not link kgo's compression libraries.
//
// # Raw forwarding
//
// An API served raw ([API.Raw], [Raw]) reaches the host
// undecoded, as the client sent it ([Request.Raw], a [RawRequest]: the
// header and body's bytes), and the host answers with bytes it already has,
// an upstream broker's response for a proxy ([Request.RespondRaw] with one
// writev, [Request.RespondRawFrom] from a reader: splice from a TCP
// connection, sendfile from a file); the server writes the size and the
// response header. A raw API's large frames may be streamed
// ([API.StreamAbove]): the host moves the body from the client's socket as
// it reads it, socket to socket, and the server holds none of it.
// Everything before the host is as for a decoded request. These APIs
// are experimental: their docs say so, and CONTRIBUTING.md what it means.
//
// # One goroutine per connection
//
// Each connection has one goroutine, which runs the whole per-request path:
// it reads a frame (within queued.max.request.bytes), decodes it, queues
// the request or answers it inline, waits for the answer, writes the
// response, reports the request ([HookRequestDone]), mutes the connection
// while a throttle lasts, and only then reads the next frame. An idle
// connection parks: after [Config.ParkAfter] without a request it gives
// back its read buffer and hands its read to a fresh goroutine with the
// smallest stack, so that thousands of idle connections cost little memory;
// the next request's first bytes wake it. The connection's listener
// processor registers it, enforces its idle expiry and asks it to park;
// [Server.Shutdown] and [Server.Close] end it in whatever state it is.
package socketserver
