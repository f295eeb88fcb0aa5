package socketservertest_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// Testing a handler with a real client, kgo, in a few lines. In a test,
// socketservertest.NewServer(t, ...) does the same and closes the server
// when the test ends.
func ExampleStart() {
	handler := socketserver.HandlerFunc(func(r *socketserver.Request) {
		resp := r.Body.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		resp.ClusterID = kmsg.StringPtr("under-test")
		_ = r.Respond(resp)
	})
	srv, stop, err := socketservertest.Start(nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.MustKmsgAPI(kmsg.Metadata, 0, 12)}
	}, handler)
	if err != nil {
		panic(err)
	}
	defer stop()

	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	fmt.Println(*resp.ClusterID)
	// Output: under-test
}

// A handler that needs the server it serves: Metadata names the server
// itself, node 0, at the address the client came through, which is known
// only once the server has bound its listeners. In a test,
// socketservertest.NewServerFunc(t, ...) does the same and closes the
// server when the test ends.
func ExampleStartFunc() {
	newHandler := func(srv *socketserver.Server) socketserver.Handler {
		self := []listener.Broker{srv.Broker(0, "")}
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			resp := r.Body.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
			resp.Brokers = listener.MetadataBrokers(r.Conn.Listener, self)
			_ = r.Respond(resp)
		})
	}
	srv, stop, err := socketservertest.StartFunc(nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.MustKmsgAPI(kmsg.Metadata, 0, 12)}
	}, newHandler)
	if err != nil {
		panic(err)
	}
	defer stop()

	addr := srv.Addr("PLAINTEXT").String()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	b := resp.Brokers[0]
	fmt.Println(b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) == addr)
	// Output: 0 true
}
