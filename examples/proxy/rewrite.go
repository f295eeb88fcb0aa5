package main

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// This file is what the proxy changes in the responses it forwards: every
// broker address upstream gives becomes the proxy's address of that
// broker on the listener the client came through, as kroxylicious's
// BrokerAddressFilter does. The responses that carry broker addresses are
// Metadata, FindCoordinator (one coordinator before v4, a list from v4),
// DescribeCluster, and the leader hints (KIP-951 NodeEndpoints) of Produce
// v10+, Fetch v16+, ShareFetch and ShareAcknowledge. A broker the proxy
// cannot serve is left out (a coordinator becomes COORDINATOR_NOT_AVAILABLE,
// which clients retry): no upstream address ever reaches a client.
// TestEveryAddressIsRewritten checks that no other response of kmsg's
// carries a broker's host and port, unless the proxy never forwards it.

// addressBook maps upstream brokers to the proxy's addresses.
type addressBook interface {
	// learn notes an upstream broker's address as a response gave it.
	learn(id int32, host string, port int32)
	// endpoint returns the proxy's address of node id on listener l,
	// opening its port if it is not yet open; false when the proxy cannot
	// serve the node there.
	endpoint(l protocolmap.ListenerName, id int32) (host string, port int32, ok bool)
}

// rewrite changes the broker addresses in resp, a response forwarded to a
// client of listener l.
func rewrite(resp kmsg.Response, l protocolmap.ListenerName, book addressBook) {
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		r.Brokers = rewriteEach(r.Brokers, l, book, func(b *kmsg.MetadataResponseBroker) (int32, *string, *int32) {
			return b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.DescribeClusterResponse:
		r.Brokers = rewriteEach(r.Brokers, l, book, func(b *kmsg.DescribeClusterResponseBroker) (int32, *string, *int32) {
			return b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.ProduceResponse:
		r.Brokers = rewriteEach(r.Brokers, l, book, func(b *kmsg.ProduceResponseBroker) (int32, *string, *int32) {
			return b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.FetchResponse:
		r.Brokers = rewriteEach(r.Brokers, l, book, func(b *kmsg.FetchResponseBroker) (int32, *string, *int32) {
			return b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.ShareFetchResponse:
		r.NodeEndpoints = rewriteEach(r.NodeEndpoints, l, book, func(b *kmsg.ShareFetchResponseNodeEndpoint) (int32, *string, *int32) {
			return b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.ShareAcknowledgeResponse:
		r.NodeEndpoints = rewriteEach(r.NodeEndpoints, l, book, func(b *kmsg.ShareAcknowledgeResponseNodeEndpoint) (int32, *string, *int32) {
			return b.NodeID, &b.Host, &b.Port
		})
	case *kmsg.FindCoordinatorResponse:
		if r.Version < 4 {
			rewriteCoordinator(&r.NodeID, &r.Host, &r.Port, &r.ErrorCode, &r.ErrorMessage, l, book)
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			rewriteCoordinator(&c.NodeID, &c.Host, &c.Port, &c.ErrorCode, &c.ErrorMessage, l, book)
		}
	}
}

// rewriteEach rewrites the brokers of a list in place and drops those the
// proxy cannot serve; fields returns a broker's node id, host and port.
func rewriteEach[T any](brokers []T, l protocolmap.ListenerName, book addressBook, fields func(*T) (int32, *string, *int32)) []T {
	kept := brokers[:0]
	for i := range brokers {
		id, host, port := fields(&brokers[i])
		book.learn(id, *host, *port)
		h, p, ok := book.endpoint(l, id)
		if !ok {
			continue
		}
		*host, *port = h, p
		kept = append(kept, brokers[i])
	}
	return kept
}

// rewriteCoordinator rewrites one coordinator. One that the proxy cannot
// serve becomes COORDINATOR_NOT_AVAILABLE (retriable); an error from
// upstream (node -1) keeps its error, without an address.
func rewriteCoordinator(id *int32, host *string, port *int32, code *int16, msg **string, l protocolmap.ListenerName, book addressBook) {
	if *id < 0 || *code != 0 {
		*host, *port = "", -1
		return
	}
	book.learn(*id, *host, *port)
	h, p, ok := book.endpoint(l, *id)
	if !ok {
		*id, *host, *port, *code = -1, "", -1, kerr.CoordinatorNotAvailable.Code
		*msg = kmsg.StringPtr("the proxy serves no address for the coordinator")
		return
	}
	*host, *port = h, p
}
