package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// sniDialer is a kgo Dialer for a proxy's virtual clusters: every host
// name resolves to the proxy (on 127.0.0.1), as wildcard DNS records would
// make *.<server name> resolve, and the TLS handshake asks for the host
// dialed, trusting roots. It records the hosts dialed.
type sniDialer struct {
	roots *x509.CertPool
	mu    sync.Mutex
	hosts []string
}

func (d *sniDialer) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if !slices.Contains(d.hosts, host) {
		d.hosts = append(d.hosts, host)
	}
	d.mu.Unlock()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: d.roots, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

func (d *sniDialer) dialed() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.hosts)
}

// topicNames asks cl for every topic.
func topicNames(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 20*time.Second), cl)
	require.NoError(t, err)
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, *tp.Topic)
	}
	return names
}

// One TLS port of the proxy serves two upstream clusters, told apart by
// the TLS server name: alpha (two brokers, reached over PLAINTEXT with the
// shared upstream keys) and beta (one broker, reached over SASL_PLAINTEXT
// with keys of its own). A client of alpha.kafka.test is given alpha's
// brokers as broker-<id>.alpha.kafka.test on the same port, produces and
// consumes through them, and sees only alpha's topics; beta's client only
// beta's. The listener serves each cluster's certificate (one for its name
// and *.its name) by server name. A client asking for no known name is
// refused, as there is no default cluster (recorded in the audit trail),
// and the admin listener lists every connection with the name it asked
// for.
func TestVirtualClustersByServerName(t *testing.T) {
	alphaUp := startUpstream(t, 2)
	betaUp := startUpstream(t, 1)
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	alphaCert := socketservertest.NewServerCert(t, "alpha.kafka.test", "*.alpha.kafka.test")
	betaCert := socketservertest.NewServerCert(t, "beta.kafka.test", "*.beta.kafka.test")
	const sni = "listener.name.secure.kafkanet.ssl.server.name."
	audit, trail := auditBuffer()
	p := startProxy(t, "", &proxyOptions{audit: audit},
		"listeners=SECURE://127.0.0.1:0,ADMIN://127.0.0.1:0",
		"listener.security.protocol.map=SECURE:SSL,ADMIN:PLAINTEXT",
		"proxy.admin.listener.name=ADMIN",
		"listener.name.secure.ssl.keystore.type=PEM",
		"listener.name.secure.ssl.keystore.location="+def.KeyStoreFile,
		"listener.name.secure.kafkanet.ssl.server.names=alpha.kafka.test,*.alpha.kafka.test,beta.kafka.test,*.beta.kafka.test",
		sni+"alpha.kafka.test.ssl.keystore.location="+alphaCert.KeyStoreFile,
		sni+"*.alpha.kafka.test.ssl.keystore.location="+alphaCert.KeyStoreFile,
		sni+"beta.kafka.test.ssl.keystore.location="+betaCert.KeyStoreFile,
		sni+"*.beta.kafka.test.ssl.keystore.location="+betaCert.KeyStoreFile,
		"proxy.virtual.clusters=alpha,beta",
		"proxy.virtual.cluster.alpha.server.name=alpha.kafka.test",
		"proxy.virtual.cluster.alpha.upstream.bootstrap.servers="+alphaUp.Addr(0, "INTERNAL"),
		"proxy.virtual.cluster.beta.server.name=beta.kafka.test",
		"proxy.virtual.cluster.beta.upstream.bootstrap.servers="+betaUp.Addr(0, "CLIENT"),
		"proxy.virtual.cluster.beta.upstream.security.protocol=SASL_PLAINTEXT",
		"proxy.virtual.cluster.beta.upstream.sasl.username=proxy",
		"proxy.virtual.cluster.beta.upstream.sasl.password=proxy-secret",
	)
	port := strconv.Itoa(p.Addr("SECURE").(*net.TCPAddr).Port)

	alpha, beta := &sniDialer{roots: alphaCert.Roots}, &sniDialer{roots: betaCert.Roots}
	produceConsume(t, "alpha.kafka.test:"+port, "alpha-topic", "alpha-group", kgo.Dialer(alpha.Dial))
	produceConsume(t, "beta.kafka.test:"+port, "beta-topic", "beta-group", kgo.Dialer(beta.Dial))
	assert.ElementsMatch(t, []string{"alpha.kafka.test", "broker-0.alpha.kafka.test", "broker-1.alpha.kafka.test"}, alpha.dialed(),
		"alpha's three partitions are led by its two brokers, each reached by its name")
	assert.ElementsMatch(t, []string{"beta.kafka.test", "broker-0.beta.kafka.test"}, beta.dialed())

	alphaClient := newClient(t, "alpha.kafka.test:"+port, kgo.Dialer(alpha.Dial))
	betaClient := newClient(t, "beta.kafka.test:"+port, kgo.Dialer(beta.Dial))
	assert.Contains(t, topicNames(t, alphaClient), "alpha-topic")
	assert.NotContains(t, topicNames(t, alphaClient), "beta-topic")
	assert.Contains(t, topicNames(t, betaClient), "beta-topic")
	assert.NotContains(t, topicNames(t, betaClient), "alpha-topic")
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 20*time.Second), alphaClient)
	require.NoError(t, err)
	var brokers []string
	for _, b := range meta.Brokers {
		brokers = append(brokers, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	assert.ElementsMatch(t, []string{"broker-0.alpha.kafka.test:" + port, "broker-1.alpha.kafka.test:" + port}, brokers)

	// Upstream, each topic is in its own cluster only.
	assert.Contains(t, topicNames(t, newClient(t, alphaUp.Addr(0, "INTERNAL"))), "alpha-topic")
	assert.NotContains(t, topicNames(t, newClient(t, alphaUp.Addr(0, "INTERNAL"))), "beta-topic")
	assert.Contains(t, topicNames(t, newClient(t, betaUp.Addr(0, "INTERNAL"))), "beta-topic")

	// Another name, or none: no cluster answers (there is no default one).
	// The socket server answers ApiVersions itself; the first forwarded
	// request closes the connection.
	for _, name := range []string{"gamma.kafka.test", "broker-0.gamma.kafka.test", "broker-x.alpha.kafka.test", "127.0.0.1"} {
		t.Run("refused "+name, func(t *testing.T) {
			raw := dialRaw(t, p.addr(t, "SECURE"))
			c := &rawConn{Conn: tls.Client(raw.Conn, &tls.Config{ServerName: name, InsecureSkipVerify: true})}
			api := kmsg.NewPtrApiVersionsRequest()
			api.Version, api.ClientSoftwareName, api.ClientSoftwareVersion = 3, "test", "1"
			assert.Zero(t, c.roundTrip(t, api).(*kmsg.ApiVersionsResponse).ErrorCode)
			c.send(t, metadataRequest(1))
			c.requireRefused(t, 10*time.Second)
		})
	}
	var refused []map[string]any
	require.Eventually(t, func() bool {
		refused = nil
		for _, r := range auditRecords(t, trail.String()) {
			if auditEvent(r) == "connection-refused" {
				refused = append(refused, r)
			}
		}
		return len(refused) >= 4
	}, 5*time.Second, 10*time.Millisecond, "the audit trail:\n%s", trail.String())
	assert.Len(t, refused, 4)
	for i, r := range refused {
		assert.Equal(t, "SECURE", str(r, "dst_endpoint", "svc_name"))
		assert.NotEmpty(t, str(r, "session", "uid"))
		assert.Contains(t, str(r, "status_detail"), errNoCluster.Error())
		if name := []string{"gamma.kafka.test", "broker-0.gamma.kafka.test", "broker-x.alpha.kafka.test"}; i < len(name) {
			assert.Contains(t, str(r, "status_detail"), name[i])
		}
	}

	// The admin listener lists each connection with the name it asked for:
	// alpha's client has a connection to each of its brokers, beta's to its
	// one.
	for cl, ids := range map[*kgo.Client][]int{alphaClient: {0, 1}, betaClient: {0}} {
		for _, id := range ids {
			_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 20*time.Second), cl.Broker(id))
			require.NoError(t, err)
		}
	}
	admin := connadmin.New(newClient(t, p.addr(t, "ADMIN"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey)), 0, 0)
	list := func(name string) []string {
		t.Helper()
		res, err := admin.List(ctxFor(t, 10*time.Second), connregistry.Filter{Listener: kmsg.StringPtr("SECURE"), ServerName: &name}, false)
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		var names []string
		for _, c := range res[0].Connections {
			if !slices.Contains(names, c.ServerName) {
				names = append(names, c.ServerName)
			}
		}
		return names
	}
	assert.ElementsMatch(t, []string{"broker-0.alpha.kafka.test", "broker-1.alpha.kafka.test"}, list("*.alpha.kafka.test"))
	assert.ElementsMatch(t, []string{"broker-0.beta.kafka.test"}, list("broker-0.beta.kafka.test"))
	assert.Subset(t, list("*.kafka.test"), []string{"broker-0.alpha.kafka.test", "broker-1.alpha.kafka.test", "broker-0.beta.kafka.test"})
}

// Virtual clusters beside the default one (upstream.bootstrap.servers): a
// client asking for a virtual cluster's name, or one of its brokers',
// goes to it whatever port it came to; any other client, with another
// name or none, goes to the default cluster by port, as without virtual
// clusters. Each cluster's Metadata names its brokers its own way.
func TestVirtualClusterBesideTheDefault(t *testing.T) {
	defUp, alphaUp := startFakeUpstream(t), startFakeUpstream(t)
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	alphaCert := socketservertest.NewServerCert(t, "alpha.kafka.test", "*.alpha.kafka.test")
	p := startProxy(t, defUp.addr(), nil,
		"listeners=SECURE://127.0.0.1:0",
		"listener.security.protocol.map=SECURE:SSL",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location="+def.KeyStoreFile,
		"kafkanet.ssl.server.names=alpha.kafka.test,*.alpha.kafka.test",
		"kafkanet.ssl.server.name.alpha.kafka.test.ssl.keystore.location="+alphaCert.KeyStoreFile,
		"kafkanet.ssl.server.name.*.alpha.kafka.test.ssl.keystore.location="+alphaCert.KeyStoreFile,
		"proxy.virtual.clusters=alpha",
		"proxy.virtual.cluster.alpha.server.name=Alpha.Kafka.Test.",
		"proxy.virtual.cluster.alpha.upstream.bootstrap.servers="+alphaUp.addr(),
	)
	bootstrap, node0 := p.addr(t, "SECURE"), p.nodeAddr(t, "SECURE", 0)
	_, bootstrapPort := hostPort(bootstrap)
	_, node0Port := hostPort(node0)
	for _, tc := range []struct {
		name, addr, serverName string
		want                   *fakeUpstream
		brokers                string // as Metadata names them
	}{
		{"no name, bootstrap port", bootstrap, "", defUp, "127.0.0.1:" + node0Port},
		{"no name, node port", node0, "", defUp, "127.0.0.1:" + node0Port},
		{"another name", bootstrap, "other.example.com", defUp, "127.0.0.1:" + node0Port},
		{"a name below the cluster's that is no broker's", bootstrap, "zookeeper.alpha.kafka.test", defUp, "127.0.0.1:" + node0Port},
		{"the cluster's name", bootstrap, "alpha.kafka.test", alphaUp, "broker-0.alpha.kafka.test:" + bootstrapPort},
		{"a broker's name", bootstrap, "BROKER-0.alpha.kafka.test", alphaUp, "broker-0.alpha.kafka.test:" + bootstrapPort},
		{"a broker's name on the default's node port", node0, "broker-0.alpha.kafka.test", alphaUp, "broker-0.alpha.kafka.test:" + bootstrapPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := dialRaw(t, tc.addr)
			name := tc.serverName
			if name == "" {
				name = "127.0.0.1" // Go sends no server name for an IP address
			}
			c := &rawConn{Conn: tls.Client(raw.Conn, &tls.Config{ServerName: name, InsecureSkipVerify: true})}
			before := map[*fakeUpstream]int{defUp: defUp.sent(kmsg.ListGroups), alphaUp: alphaUp.sent(kmsg.ListGroups)}
			groups := kmsg.NewPtrListGroupsRequest()
			groups.Version = 3
			assert.Zero(t, c.roundTrip(t, groups).(*kmsg.ListGroupsResponse).ErrorCode)
			for f, n := range before {
				if f == tc.want {
					assert.Equal(t, n+1, f.sent(kmsg.ListGroups), "the request went to its cluster")
				} else {
					assert.Equal(t, n, f.sent(kmsg.ListGroups), "the request went to the other cluster")
				}
			}
			meta := c.roundTrip(t, metadataRequest(7)).(*kmsg.MetadataResponse)
			require.Len(t, meta.Brokers, 1)
			assert.Equal(t, tc.brokers, net.JoinHostPort(meta.Brokers[0].Host, strconv.Itoa(int(meta.Brokers[0].Port))))
		})
	}
}

// Virtual cluster settings that are wrong are refused naming the key,
// before anything is dialed or served.
func TestVirtualClusterSettingsRefused(t *testing.T) {
	tlsListener := []string{"-set", "listeners=SECURE://127.0.0.1:0", "-set", "listener.security.protocol.map=SECURE:SSL"}
	for _, tc := range []struct {
		name string
		sets []string
		want string
	}{
		{"no server name", []string{"proxy.virtual.clusters=a", "proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1"},
			"proxy.virtual.cluster.a.server.name"},
		{"a server name that is no DNS name", []string{"proxy.virtual.clusters=a", "proxy.virtual.cluster.a.server.name=*.a.test",
			"proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1"}, "proxy.virtual.cluster.a.server.name"},
		{"no bootstrap servers", []string{"proxy.virtual.clusters=a", "proxy.virtual.cluster.a.server.name=a.test"},
			"proxy.virtual.cluster.a.upstream.bootstrap.servers"},
		{"bootstrap servers not host:port", []string{"proxy.virtual.clusters=a", "proxy.virtual.cluster.a.server.name=a.test",
			"proxy.virtual.cluster.a.upstream.bootstrap.servers=nowhere"}, "proxy.virtual.cluster.a.upstream.bootstrap.servers"},
		{"a cluster name with a dot", []string{"proxy.virtual.clusters=a.b"}, "proxy.virtual.clusters"},
		{"a cluster listed twice", []string{"proxy.virtual.clusters=a,a", "proxy.virtual.cluster.a.server.name=a.test",
			"proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1"}, "listed twice"},
		{"the same server name", []string{"proxy.virtual.clusters=a,b",
			"proxy.virtual.cluster.a.server.name=a.test", "proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1",
			"proxy.virtual.cluster.b.server.name=A.test", "proxy.virtual.cluster.b.upstream.bootstrap.servers=127.0.0.1:1"},
			"proxy.virtual.cluster.b.server.name"},
		{"a server name below another's", []string{"proxy.virtual.clusters=a,b",
			"proxy.virtual.cluster.a.server.name=a.test", "proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1",
			"proxy.virtual.cluster.b.server.name=b.a.test", "proxy.virtual.cluster.b.upstream.bootstrap.servers=127.0.0.1:1"},
			"proxy.virtual.cluster.b.server.name"},
		{"its own upstream keys, wrong", []string{"proxy.virtual.clusters=a", "proxy.virtual.cluster.a.server.name=a.test",
			"proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1", "proxy.virtual.cluster.a.upstream.security.protocol=SASL_PLAINTEXT"},
			"proxy.virtual.cluster.a.upstream.sasl.username"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Clone(tlsListener)
			for _, s := range tc.sets {
				args = append(args, "-set", s)
			}
			code, out := runProxy(ctxFor(t, 20*time.Second), args...)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, tc.want)
			assert.NotContains(t, out, "msg=listening")
		})
	}
	// Virtual clusters need a TLS data listener to tell them apart.
	code, out := runProxy(ctxFor(t, 20*time.Second), "-set", "listeners=PLAIN://127.0.0.1:0", "-set", "listener.security.protocol.map=PLAIN:PLAINTEXT",
		"-set", "proxy.virtual.clusters=a", "-set", "proxy.virtual.cluster.a.server.name=a.test",
		"-set", "proxy.virtual.cluster.a.upstream.bootstrap.servers=127.0.0.1:1")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "proxy.virtual.clusters")
	assert.Contains(t, out, "SSL or SASL_SSL")
}
