package testkit

import (
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// ListingBroker is one broker of a [ListingCluster].
type ListingBroker struct {
	ID       int32
	Server   *socketserver.Server
	Registry connregistry.Registry
	Client   string // bound address of CLIENT (SASL_PLAINTEXT: PLAIN and SCRAM-SHA-256)
	Plain    string // bound address of PLAIN (PLAINTEXT, inter-broker)
}

// ListingOptions configure one broker of a ListingCluster.
type ListingOptions struct {
	// SuperUsers may list connections, in super.users form.
	SuperUsers string
	// APIKey is the key ListClientConnections is served under.
	APIKey int16
	// APIs are served besides Metadata and ListClientConnections, and
	// Handler answers them.
	APIs    []socketserver.API
	Handler socketserver.Handler
}

// ListingCluster is a cluster of in-process brokers for testing clients of
// ListClientConnections (KIP-1329): each answers Metadata, listing every
// broker on the listener the request came through (a topic asked for by
// name exists with one partition led by broker 0), and
// ListClientConnections from its own registry.
type ListingCluster struct {
	Brokers []*ListingBroker

	mu       sync.RWMutex
	metadata []socketserver.Broker
}

// NewListingCluster starts n brokers with node ids 0..n-1 whose CLIENT
// listeners accept users (name to password). Each broker's options start
// as SuperUsers "User:admin;User:ANONYMOUS" and connregistry.DefaultListAPIKey;
// opt, which may be nil, changes broker i's. The brokers close when the
// test ends.
func NewListingCluster(t testing.TB, n int, users map[string]string, opt func(i int, o *ListingOptions)) *ListingCluster {
	t.Helper()
	store, err := sasl.NewUsers(users)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	c := &ListingCluster{}
	for i := range n {
		o := ListingOptions{SuperUsers: "User:admin;User:ANONYMOUS", APIKey: connregistry.DefaultListAPIKey}
		if opt != nil {
			opt(i, &o)
		}
		apis := append([]socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, kmsg.NewPtrMetadataRequest().MaxVersion()),
			socketserver.ListClientConnectionsAPI(o.APIKey, connregistry.SuperUsers(o.SuperUsers))}, o.APIs...)
		extra := o.Handler
		srv := socketservertest.NewServer(t, config.Properties{
			"listeners":                      "CLIENT://127.0.0.1:0,PLAIN://127.0.0.1:0",
			"listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,PLAIN:PLAINTEXT",
			"inter.broker.listener.name":     "PLAIN",
			"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256",
		}, func(cfg *socketserver.Config) {
			cfg.APIs = apis
			cfg.Credentials = store
		}, socketserver.HandlerFunc(func(r *socketserver.Request) {
			switch body := r.Body.(type) {
			case *kmsg.MetadataRequest:
				_ = r.Respond(c.metadataResponse(body, r.Conn.Listener))
			default:
				if extra == nil {
					_ = r.CloseConnection()
					return
				}
				extra.ServeKafka(r)
			}
		}))
		c.Brokers = append(c.Brokers, &ListingBroker{ID: int32(i), Server: srv, Registry: srv.Registry(),
			Client: srv.Addr("CLIENT").String(), Plain: srv.Addr("PLAIN").String()})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.Brokers {
		c.metadata = append(c.metadata, socketserver.Broker{NodeID: b.ID, EndPoints: []listener.EndPoint{
			endPoint(t, "CLIENT", b.Client, protocolmap.SASLPlaintext),
			endPoint(t, "PLAIN", b.Plain, protocolmap.Plaintext),
		}})
	}
	return c
}

func endPoint(t testing.TB, name, addr string, protocol protocolmap.SecurityProtocol) listener.EndPoint {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return listener.EndPoint{Name: protocolmap.ListenerName(name), Host: host, Port: p, SecurityProtocol: protocol}
}

func (c *ListingCluster) metadataResponse(req *kmsg.MetadataRequest, via protocolmap.ListenerName) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	c.mu.RLock()
	resp.Brokers = socketserver.MetadataBrokers(via, c.metadata)
	c.mu.RUnlock()
	resp.ClusterID = kmsg.StringPtr("socketservertest")
	resp.ControllerID = 0
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			continue
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic = rt.Topic
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.Replicas, p.ISR = 0, 0, []int32{0}, []int32{0}
		t.Partitions = []kmsg.MetadataResponseTopicPartition{p}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
