package socketservertest_test

import (
	"context"
	"fmt"
	"time"

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
