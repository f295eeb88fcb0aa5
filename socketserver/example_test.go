package socketserver_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// A server's life: New from a configuration, Start to bind, Serve to run
// the host's handlers, Shutdown to answer what has arrived and close. The
// host answers Metadata; the server answers ApiVersions itself, and
// ListClientConnections through ListClientConnectionsAPI.
func Example() {
	// Kafka's defaults for the keys not given.
	cfg, err := socketserver.ConfigFromProperties(listener.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		panic(err)
	}
	cfg.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12), socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil)}
	srv, err := socketserver.New(cfg)
	if err != nil {
		panic(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		panic(err)
	}

	self := []socketserver.Broker{srv.Broker(0, "")}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(context.Background(), protocolmap.DataPlane, 4, socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch req := r.Body.(type) {
			case *kmsg.MetadataRequest:
				resp := req.ResponseKind().(*kmsg.MetadataResponse)
				resp.Brokers = socketserver.MetadataBrokers(r.Conn.Listener, self)
				resp.ClusterID = kmsg.StringPtr("example")
				_ = r.Respond(resp)
			default:
				_ = r.CloseConnection()
			}
		}))
	}()

	// A Kafka client asks for metadata.
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("PLAINTEXT").String()))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		panic(err)
	}
	fmt.Println("cluster:", *md.ClusterID, "brokers:", len(md.Brokers))
	fmt.Println("client connected:", srv.Registry().Len() > 0)
	cl.Close()

	if err := srv.Shutdown(ctx); err != nil {
		panic(err)
	}
	fmt.Println("served:", errors.Is(<-served, socketserver.ErrServerClosed))
	// Output:
	// cluster: example brokers: 1
	// client connected: true
	// served: true
}
