package socketserver_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// A server's life: New from a configuration, Start to bind, Serve to run
// the host's handlers, Shutdown to answer what has arrived and close. The
// host answers Metadata; the server answers ApiVersions itself, and
// ListClientConnections through ListClientConnectionsAPI.
func Example() {
	// Kafka's defaults for the keys not given.
	cfg, err := config.Server(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"})
	if err != nil {
		panic(err)
	}
	cfg.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12), socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil)}
	cfg.IOThreads = 4 // num.io.threads
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
		served <- srv.Serve(context.Background(), protocolmap.DataPlane, socketserver.HandlerFunc(func(r *socketserver.Request) {
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

// A listener behind a TCP load balancer requires the PROXY protocol from
// the balancers' network; the others are left as they are. A host that
// builds its Config in code sets ListenerConfig.ProxyProtocol itself.
func ExampleProxyProtocol() {
	cfg, err := config.Server(config.Properties{
		"listeners":                                                     "CLIENT://:9092,REPLICATION://:9093",
		"listener.security.protocol.map":                                "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name":                                    "REPLICATION",
		"listener.name.client.kafkanet.proxy.protocol":                  "required",
		"listener.name.client.kafkanet.proxy.protocol.trusted.networks": "10.0.0.0/24,fd00:1::/64",
	})
	if err != nil {
		panic(err)
	}
	for _, name := range []protocolmap.ListenerName{"CLIENT", "REPLICATION"} {
		p := cfg.PerListener[name].ProxyProtocol
		fmt.Println(name, p.Mode, p.TrustedNetworks)
	}

	_, err = config.Server(config.Properties{
		"listeners":             "PLAINTEXT://:9092",
		config.KeyProxyProtocol: "required",
	})
	fmt.Println(err)
	// Output:
	// CLIENT required [10.0.0.0/24 fd00:1::/64]
	// REPLICATION none []
	// invalid value "" for configuration kafkanet.proxy.protocol.trusted.networks: kafkanet.proxy.protocol=required needs the networks of the load balancers that send the PROXY header (a header from anywhere else could claim any client address); 0.0.0.0/0,::/0 trusts every address
}
