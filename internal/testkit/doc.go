// Package testkit is the repository's own test plumbing, shared by the
// tests of the library, the plugins and the examples (modules whose paths
// lie under the library's, so Go lets them import it): a buffer many
// goroutines write to ([SyncBuffer]), a goroutine leak check around one
// test ([TakeGoroutineBaseline]), a dialer that records its connections'
// addresses ([RecordingDialer]), a cluster of in-process brokers that list
// their connections ([NewListingCluster]), the listener properties and
// connections of the PROXY protocol's and the TLS server names' tests, and
// a throwaway CA with certificates it signed ([TLSTestFixture],
// [IssueLeaf]) for the tests of TLS settings, read (package config) or
// built in code (package security).
// What a host's own tests need is in package socketservertest.
package testkit
