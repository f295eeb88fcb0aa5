// Package connregistry keeps a registry of the open connections of a server
// on every listener and plane, which any goroutine can snapshot while
// connections come and go, and answers Kafka's ListClientConnections request
// (KIP-1329) from it. It knows nothing of sockets: the server feeds it plain
// values.
//
// The package is being built; see the project README for its status.
package connregistry
