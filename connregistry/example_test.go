package connregistry_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connregistrytest"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// A host that answers ListClientConnections in its own request loop: the
// ListHandler checks the caller's principal with the authorizer (DESCRIBE on
// CLUSTER, here Kafka's super.users) and answers from the registry. A
// socketserver host does the same in one line with
// socketserver.ListClientConnectionsAPI.
func ExampleListHandler() {
	// A server feeds its registry (socketserver's Server.Registry); here,
	// as in a host's unit test, a registry with two connections.
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reg := connregistrytest.NewRegistry(0,
		connregistry.Conn{Info: connregistry.Info{ID: "10.0.0.1:9092-10.0.0.7:50000-0-0",
			Principal:  connregistry.Principal{Type: "User", Name: "alice"},
			ClientAddr: netip.MustParseAddrPort("10.0.0.7:50000"), Listener: "CLIENT", SecurityProtocol: protocolmap.SASLSSL,
			ConnectedAt: now}, State: connregistry.StateReady},
		connregistry.Conn{Info: connregistry.Info{ID: "10.0.0.1:9093-10.0.0.2:40000-1-0", Principal: connregistry.Anonymous(),
			ClientAddr: netip.MustParseAddrPort("10.0.0.2:40000"), Listener: "REPLICATION", SecurityProtocol: protocolmap.Plaintext,
			ConnectedAt: now.Add(time.Second)}, State: connregistry.StateReady})

	h := &connregistry.ListHandler{Registry: reg, Authorize: connregistry.SuperUsers("User:admin")}
	// In the host's loop, for each ListClientConnectionsRequest:
	serve := func(caller connregistry.Principal, req *connregistry.ListClientConnectionsRequest) {
		resp := h.Handle(context.Background(), caller, req)
		fmt.Printf("%s: error %d,", caller, resp.ErrorCode)
		for _, c := range resp.Connections {
			fmt.Printf(" %s from %s on %s;", c.Principal, c.ClientAddress, c.ListenerName)
		}
		fmt.Println()
	}
	admin := connregistry.Principal{Type: "User", Name: "admin"}
	serve(admin, &connregistry.ListClientConnectionsRequest{})
	client := "client"
	serve(admin, &connregistry.ListClientConnectionsRequest{ListenerFilter: &client})
	serve(connregistry.Principal{Type: "User", Name: "mallory"}, &connregistry.ListClientConnectionsRequest{})
	// Output:
	// User:admin: error 0, User:alice from 10.0.0.7 on CLIENT; User:ANONYMOUS from 10.0.0.2 on REPLICATION;
	// User:admin: error 0, User:alice from 10.0.0.7 on CLIENT;
	// User:mallory: error 31,
}
