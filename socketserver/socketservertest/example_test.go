package socketservertest_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
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
// only once the server has bound its listeners, with its one topic. In a
// test, socketservertest.NewServerFunc(t, ...) does the same and closes
// the server when the test ends.
func ExampleStartFunc() {
	node := socketserver.SingleNode{NodeID: 0, ClusterID: "example",
		Topics: []socketserver.MetadataTopic{{Name: "orders", Partitions: 3}}}
	newHandler := func(srv *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			_ = r.Respond(srv.SingleNodeMetadata(r.Body.(*kmsg.MetadataRequest), r.Conn.Listener, node))
		})
	}
	srv, stop, err := socketservertest.StartFunc(nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 13)}
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
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"orders", "missing"} {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	b := resp.Brokers[0]
	fmt.Println(b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) == addr)
	for _, t := range resp.Topics {
		fmt.Println(*t.Topic, len(t.Partitions), kerr.ErrorForCode(t.ErrorCode))
	}
	// Output:
	// 0 true
	// orders 3 <nil>
	// missing 0 UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.
}
