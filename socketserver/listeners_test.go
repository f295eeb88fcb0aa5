package socketserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// requireTool returns the path of the named program, and skips the test
// if it is missing, unless the environment variable CI is set: in CI a
// missing tool fails the test.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s is not installed (%s); in CI this fails", name, install)
		}
		t.Fatalf("%s is required in CI (%s): %v", name, install, err)
	}
	return path
}

// settledBaseline takes a goroutine baseline once the count has stopped
// changing: a server's Serve workers start on a goroutine of their own.
func settledBaseline(t *testing.T) testkit.GoroutineBaseline {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := runtime.NumGoroutine(); ; {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n || time.Now().After(deadline) {
			return testkit.TakeGoroutineBaseline()
		}
		n = m
	}
}

// listKey is the key these tests serve ListClientConnections under (93,
// KIP-1329's, is one of kmsg's, which allAPIs enables).
const listKey = 1000

// listenersAPIs are every API and ListClientConnections.
func listenersAPIs(c *socketserver.Config) {
	c.APIs = append(allAPIs(), socketserver.ListClientConnectionsAPI(listKey, nil))
}

// listedOn lists the connections of listener l, the closed ones too, through
// ListClientConnections on rc.
func listedOn(t *testing.T, rc *rawClient, l string) []connregistry.ConnectionRecord {
	t.Helper()
	resp := rc.roundTrip(&connregistry.ListClientConnectionsRequest{APIKey: listKey, ListenerFilter: &l, IncludeClosed: true}).(*connregistry.ListClientConnectionsResponse)
	require.Zero(t, resp.ErrorCode)
	return resp.Connections
}

// processorIDs returns the ids of the server's processors, sorted.
func processorIDs(srv *socketserver.Server) []int {
	var ids []int
	for id := range srv.Stats().ProcessorBusy {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// sideListener returns listener name of a configuration resolved from
// props laid over listeners=PLAINTEXT://127.0.0.1:0,<name>://127.0.0.1:0,
// with its ListenerConfig: what a host that re-reads its properties has
// of a listener it adds.
func sideListener(t *testing.T, name string, props config.Properties) (listener.Listener, *socketserver.ListenerConfig) {
	t.Helper()
	cfg, err := config.Server(merge(config.Properties{
		"listeners": "PLAINTEXT://127.0.0.1:0," + name + "://127.0.0.1:0",
	}, props))
	require.NoError(t, err)
	l, ok := cfg.Listeners.Listener(protocolmap.ListenerName(name))
	require.True(t, ok)
	return l, cfg.PerListener[l.Name]
}

// A SASL_SSL listener added to a running server serves kcat and kgo at
// once; removing it drains its connections as Shutdown does (the request
// in flight is answered, then they close, listed as closed for the
// listener's removal) while the connections of the other listener go on.
// Processor ids continue and are never reused, and the listener's
// goroutines all end with RemoveListener.
func TestAddAndRemoveSASLSSLListener(t *testing.T) {
	kcat := requireTool(t, "kcat", "apt-get install kcat")
	pki := newTestPKI(t)
	users := newUsers(t)
	held := make(chan *socketserver.Request, 1)
	release := newGate()
	defer release.open()
	srv := socketservertest.NewServerFunc(t, config.Properties{"num.network.threads": "2"}, func(c *socketserver.Config) {
		listenersAPIs(c)
		c.ParkAfter = -1 // a parked connection's goroutine is a new one: the leak check below counts goroutines
	}, func(s *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			req, ok := r.Body.(*kmsg.MetadataRequest)
			if !ok {
				_ = respondEmpty(r)
				return
			}
			if len(req.Topics) == 1 && req.Topics[0].Topic != nil && *req.Topics[0].Topic == "held" {
				held <- r
				release.wait()
			}
			_ = r.Respond(s.SingleNodeMetadata(req, r.Conn.Listener, socketserver.SingleNode{NodeID: 1, ClusterID: "listeners-test"}))
		})
	})
	assert.Equal(t, []int{0, 1}, processorIDs(srv))
	plain := dialRaw(t, srv, "PLAINTEXT") // the other listener's connection, open throughout
	plain.roundTrip(metadataReq(9))
	base := settledBaseline(t)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, lc := sideListener(t, "SASL_SSL", merge(pki.props(""), config.Properties{
		"sasl.enabled.mechanisms":                    "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl_ssl.num.network.threads": "3",
	}))
	lc.Credentials = users
	require.NoError(t, srv.AddListener(ctx, l, lc))
	addr := srv.Addr("SASL_SSL")
	require.NotNil(t, addr)
	assert.Equal(t, []int{0, 1, 2, 3, 4}, processorIDs(srv), "the new listener's processors take the next ids")
	got, ok := srv.Listeners().Listener("SASL_SSL")
	require.True(t, ok)
	assert.Equal(t, l, got)
	broker := srv.Broker(1, "")
	require.Len(t, broker.EndPoints, 2)
	assert.Equal(t, addr.(*net.TCPAddr).Port, broker.EndPoints[1].Port, "advertised at the port bound")
	tlsConfig := srv.TLSConfig("SASL_SSL")
	require.NotNil(t, tlsConfig, "an added listener's TLS can be reloaded")
	require.NoError(t, srv.ReloadTLS("SASL_SSL", tlsConfig))

	// kcat (librdkafka): TLS, SCRAM and Metadata on the new listener.
	out, err := exec.CommandContext(ctx, kcat, "-L", "-b", addr.String(), "-m", "20",
		"-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+pki.truststore,
		"-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password="+alicePassword).CombinedOutput()
	require.NoError(t, err, "kcat: %s", out)
	assert.Contains(t, string(out), "broker 1 at "+addr.String(), "kcat: %s", out)

	// kgo, with a request the handler holds.
	cl := newKgo(t, srv, "SASL_SSL", kgo.SASL(kgoMechanism("SCRAM-SHA-512", "alice", alicePassword)), kgo.DialTLSConfig(pki.clientConfig()))
	require.NoError(t, kgoMetadata(cl))
	inFlight := make(chan error, 1)
	go func() {
		req := kmsg.NewPtrMetadataRequest()
		topic := kmsg.NewMetadataRequestTopic()
		topic.Topic = kmsg.StringPtr("held")
		req.Topics = append(req.Topics, topic)
		_, err := req.RequestWith(ctx, cl)
		inFlight <- err
	}()
	heldReq := recv(t, held)
	assert.Equal(t, protocolmap.ListenerName("SASL_SSL"), heldReq.Conn.Listener)
	assert.Equal(t, alice, heldReq.Conn.Principal)

	removed := make(chan error, 1)
	go func() { removed <- srv.RemoveListener(ctx, "sasl_ssl") }() // names compare without regard to case
	require.Eventually(t, func() bool { return srv.Addr("SASL_SSL") == nil }, 10*time.Second, 5*time.Millisecond)
	_, ok = srv.Listeners().Listener("SASL_SSL")
	assert.False(t, ok, "a listener being removed is out of the configuration")
	assert.Len(t, srv.Broker(1, "").EndPoints, 1, "nor advertised")
	c, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err == nil { // the port is closed: refused, or, if another socket took it meanwhile, not this server's
		c.Close()
		assert.Nil(t, srv.Addr("SASL_SSL"))
	}
	select {
	case err := <-removed:
		t.Fatalf("RemoveListener returned (%v) before the request in flight was answered", err)
	case <-time.After(300 * time.Millisecond):
	}
	err = srv.AddListener(ctx, l, lc)
	assert.ErrorIs(t, err, socketserver.ErrListenerRemoving, "the name is not used again during the drain")
	assert.Contains(t, fmt.Sprint(err), "SASL_SSL")

	release.open()
	require.NoError(t, <-inFlight, "the request in flight was answered")
	require.NoError(t, <-removed)

	// Every kgo connection closed for the removal; kcat's had closed
	// themselves. The other listener's connection serves on.
	var kgoClosed int
	for _, rec := range listedOn(t, plain, "SASL_SSL") {
		require.NotZero(t, rec.ClosedAt, "connection %s of the removed listener is open", rec.ConnectionID)
		if rec.ClientID == "kgo" {
			kgoClosed++
			assert.Equal(t, string(connregistry.CloseListenerRemoved), rec.CloseReason, "connection %s", rec.ConnectionID)
		}
	}
	assert.Positive(t, kgoClosed)
	plainConns := listedOn(t, plain, "PLAINTEXT")
	require.Len(t, plainConns, 1)
	assert.Zero(t, plainConns[0].ClosedAt)
	assert.Empty(t, plainConns[0].CloseReason)
	plain.roundTrip(metadataReq(9))
	assert.Equal(t, []int{0, 1}, processorIDs(srv))
	assert.ErrorIs(t, srv.ReloadTLS("SASL_SSL", tlsConfig), listener.ErrUnknownListener, "a removed listener's TLS is not reloaded")
	_, _, byIP := socketserver.QuotaCounts(srv)
	total, byListener, _ := socketserver.QuotaCounts(srv)
	assert.Equal(t, 1, total, "only the PLAINTEXT connection is counted: %v %v", byListener, byIP)
	assert.NotContains(t, byListener, protocolmap.ListenerName("SASL_SSL"))

	cl.Close()
	base.RequireReturned(t) // nothing of the removed listener runs

	// Added again, its processors take new ids: Kafka never reuses one.
	require.NoError(t, srv.AddListener(ctx, l, lc))
	assert.Equal(t, []int{0, 1, 5, 6, 7}, processorIDs(srv))
	cl2 := newKgo(t, srv, "SASL_SSL", kgo.SASL(kgoMechanism("PLAIN", "alice", alicePassword)), kgo.DialTLSConfig(pki.clientConfig()))
	require.NoError(t, kgoMetadata(cl2))
}

// A listener added before Start only joins the configuration; Start binds
// it with the others. One removed before Start leaves no trace.
func TestAddAndRemoveListenerBeforeStart(t *testing.T) {
	srv := newUnstarted(t, config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}, listenersAPIs)
	ep := listener.EndPoint{Name: "EXTRA", Host: "127.0.0.1", SecurityProtocol: protocolmap.Plaintext}
	err := srv.AddListener(context.Background(), listener.Listener{Name: "EXTRA", SecurityProtocol: protocolmap.Plaintext, Bind: ep, Advertised: ep}, nil)
	assert.ErrorIs(t, err, listener.ErrNoSecurityProtocol, "Kafka's default map has no EXTRA")

	ssl, sslConfig := sideListener(t, "SASL_PLAINTEXT", config.Properties{"sasl.enabled.mechanisms": "PLAIN"})
	sslConfig.Credentials = newUsers(t)
	require.NoError(t, srv.AddListener(context.Background(), ssl, sslConfig))
	assert.Nil(t, srv.Addr("SASL_PLAINTEXT"), "not bound before Start")
	require.NoError(t, srv.RemoveListener(context.Background(), "SASL_PLAINTEXT"))
	require.NoError(t, srv.AddListener(context.Background(), ssl, sslConfig))
	require.NoError(t, srv.Start(context.Background()))
	require.NotNil(t, srv.Addr("SASL_PLAINTEXT"))
	assert.Equal(t, []int{0, 1, 2, 6, 7, 8}, processorIDs(srv), "ids are never reused, even before Start")
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.login("PLAIN", "alice", alicePassword, 1).ErrorCode)
}

// RemoveListener's ctx bounds the drain: when it ends first, the
// listener's connections are closed at once (a request in flight is
// dropped, as by Shutdown's deadline) and RemoveListener returns ctx's
// error once they have ended; its goroutines have all ended then.
func TestRemoveListenerDeadline(t *testing.T) {
	requests := make(chan *socketserver.Request, 10)
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT,LATER:PLAINTEXT",
	}, func(c *socketserver.Config) {
		listenersAPIs(c)
		c.ParkAfter = -1
	}, queueHandler(requests))
	base := settledBaseline(t)
	held := dialRaw(t, srv, "EXTRA")
	idle := dialRaw(t, srv, "EXTRA")
	held.send(metadataReq(9))
	r := recv(t, requests)
	idle.roundTrip(apiVersionsReq(3, "test", "1"))

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := srv.RemoveListener(ctx, "EXTRA")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Contains(t, err.Error(), "closed before they drained")
	requireClosed(t, held.c)
	requireClosed(t, idle.c)
	assert.Error(t, r.Context().Err(), "the request's context ended with its connection")
	assert.NoError(t, respondEmpty(r), "a late answer is dropped")

	for _, rec := range srv.Registry().Closed(connregistry.Filter{}) {
		assert.Equal(t, connregistry.CloseListenerRemoved, rec.CloseReason, "connection %s", rec.ID)
	}
	base.RequireReturned(t)

	// The server goes on, its other listener untouched.
	rc := dialRaw(t, srv, "PLAINTEXT")
	rc.send(metadataReq(9))
	require.NoError(t, respondEmpty(recv(t, requests)))
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(t, rc.c, resp, rc.corr)
}

// A host's mechanism that is a sasl.Service, on an added listener, is
// started by AddListener and closed when the listener's connections have
// drained, with no authentication in flight: nothing of the listener
// outlives its removal.
func TestAddedListenerMechanismService(t *testing.T) {
	m := &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY")}
	srv := socketservertest.NewServer(t, nil, listenersAPIs, echoMetadata)
	l, lc := sideListener(t, "SASL_PLAINTEXT", config.Properties{"sasl.enabled.mechanisms": "TOKEN-TOY"})
	lc.Mechanisms = []sasl.Mechanism{m}
	base := settledBaseline(t)
	require.NoError(t, srv.AddListener(context.Background(), l, lc))
	assert.Equal(t, []string{"start"}, m.Calls())
	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.handshake(1, "TOKEN-TOY").ErrorCode)
	require.Zero(t, rc.authenticate(2, []byte("tok-alice")).ErrorCode)
	rc.roundTrip(metadataReq(9))
	require.NoError(t, srv.RemoveListener(context.Background(), "SASL_PLAINTEXT"))
	assert.Equal(t, []string{"start", "close"}, m.Calls())
	requireClosed(t, rc.c)
	base.RequireReturned(t)

	// A mechanism that fails to start fails AddListener, naming it; the
	// server is as it was.
	bad := &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY"), startErr: errors.New("the key server is down")}
	lc.Mechanisms = []sasl.Mechanism{bad}
	before := srv.Listeners()
	err := srv.AddListener(context.Background(), l, lc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listener SASL_PLAINTEXT: SASL mechanism TOKEN-TOY failed to start")
	assert.Same(t, before, srv.Listeners())
	assert.Nil(t, srv.Addr("SASL_PLAINTEXT"))
	assert.Equal(t, []string{"start"}, bad.Calls())
}

// Adding, removing and setting listeners is refused as Kafka refuses it,
// with errors naming the listener and the rule, and changes nothing.
func TestListenerChangeErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	taken := freePortOf(t, "127.0.0.1") // bound at once by the server below
	props := config.Properties{
		"listeners":                      fmt.Sprintf("CLIENT://127.0.0.1:%d,REPLICATION://127.0.0.1:0,CONTROLLER://127.0.0.1:0", taken),
		"listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTRA:PLAINTEXT,SECURE:SASL_SSL,TLS:SSL",
		"inter.broker.listener.name":     "REPLICATION",
		"control.plane.listener.name":    "CONTROLLER",
	}
	srv := socketservertest.NewServer(t, props, listenersAPIs, echoMetadata)
	resolve := func(set ...string) *listener.Set {
		p, err := props.With(set...)
		require.NoError(t, err)
		s, err := config.Listeners(p)
		require.NoError(t, err)
		return s
	}
	ep := func(name string, p protocolmap.SecurityProtocol, port int) listener.Listener {
		e := listener.EndPoint{Name: protocolmap.ListenerName(name), Host: "127.0.0.1", Port: port, SecurityProtocol: p}
		return listener.Listener{Name: e.Name, SecurityProtocol: p, Bind: e, Advertised: e}
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		change   func() error
		want     error  // the sentinel
		key      string // the configuration key, for a config.Error
		listener string // named by the error
	}{
		{name: "add: a name in use", change: func() error { return srv.AddListener(ctx, ep("CLIENT", protocolmap.Plaintext, 0), nil) },
			want: listener.ErrDuplicateName, key: "listeners", listener: "CLIENT"},
		{name: "add: another listener's port", change: func() error { return srv.AddListener(ctx, ep("EXTRA", protocolmap.Plaintext, taken), nil) },
			want: listener.ErrDuplicatePort, key: "listeners", listener: "EXTRA"},
		{name: "add: a port another program holds", change: func() error { return srv.AddListener(ctx, ep("EXTRA", protocolmap.Plaintext, busyPort), nil) },
			listener: "EXTRA"},
		{name: "add: a name not in the map", change: func() error { return srv.AddListener(ctx, ep("ADMIN", protocolmap.Plaintext, 0), nil) },
			want: listener.ErrNoSecurityProtocol, key: "listeners", listener: "ADMIN"},
		{name: "add: a protocol the map does not give it", change: func() error { return srv.AddListener(ctx, ep("EXTRA", protocolmap.SSL, 0), nil) },
			want: listener.ErrInconsistent, listener: "EXTRA"},
		{name: "add: a second control plane", change: func() error {
			l := ep("EXTRA", protocolmap.Plaintext, 0)
			l.Plane = protocolmap.ControlPlane
			return srv.AddListener(ctx, l, nil)
		}, want: listener.ErrInconsistent, listener: "EXTRA"},
		{name: "add: a SASL listener without mechanisms", change: func() error {
			return srv.AddListener(ctx, ep("SECURE", protocolmap.SASLSSL, 0), nil)
		}, listener: "SECURE"},
		{name: "add: an SSL listener without TLS", change: func() error {
			return srv.AddListener(ctx, ep("TLS", protocolmap.SSL, 0), &socketserver.ListenerConfig{NetworkThreads: 1})
		}, listener: "TLS"},
		{name: "add: APIs that clash", change: func() error {
			return srv.AddListener(ctx, ep("EXTRA", protocolmap.Plaintext, 0), &socketserver.ListenerConfig{APIs: append(allAPIs(), allAPIs()[0])})
		}, listener: "EXTRA"},
		{name: "remove: an unknown listener", change: func() error { return srv.RemoveListener(ctx, "EXTRA") },
			want: listener.ErrUnknownListener, key: "listeners", listener: "EXTRA"},
		{name: "remove: the inter-broker listener", change: func() error { return srv.RemoveListener(ctx, "REPLICATION") },
			want: listener.ErrNotDynamic, key: "listeners", listener: "REPLICATION"},
		{name: "remove: the control-plane listener", change: func() error { return srv.RemoveListener(ctx, "controller") },
			want: listener.ErrNotDynamic, key: "listeners", listener: "CONTROLLER"},
		{name: "set: a listener's protocol", change: func() error {
			return srv.SetListeners(ctx, resolve("listener.security.protocol.map=CLIENT:SSL,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT"), nil)
		}, want: listener.ErrNotDynamic, key: "listener.security.protocol.map", listener: "CLIENT"},
		{name: "set: a listener moved", change: func() error {
			return srv.SetListeners(ctx, resolve("listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,CONTROLLER://127.0.0.1:0"), nil)
		}, want: listener.ErrNotDynamic, key: "listeners", listener: "CLIENT"},
		{name: "set: another inter-broker listener", change: func() error {
			return srv.SetListeners(ctx, resolve("inter.broker.listener.name=CLIENT"), nil)
		}, want: listener.ErrNotDynamic, key: "inter.broker.listener.name", listener: "REPLICATION"},
		{name: "set: a configuration for a listener it lacks", change: func() error {
			return srv.SetListeners(ctx, resolve(), map[protocolmap.ListenerName]*socketserver.ListenerConfig{"EXTRA": {}})
		}, listener: "EXTRA"},
		{name: "set: an added listener on a port another program holds", change: func() error {
			return srv.SetListeners(ctx, resolve(fmt.Sprintf("listeners=CLIENT://127.0.0.1:%d,REPLICATION://127.0.0.1:0,CONTROLLER://127.0.0.1:0,EXTRA://127.0.0.1:%d", taken, busyPort)), nil)
		}, listener: "EXTRA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, stats := srv.Listeners(), processorIDs(srv)
			err := tc.change()
			require.Error(t, err)
			t.Log(err)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			if tc.key != "" {
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.key, ce.Key)
			}
			assert.Contains(t, err.Error(), tc.listener)
			assert.Same(t, before, srv.Listeners(), "the configuration changed")
			assert.Equal(t, stats, processorIDs(srv), "processors changed")
			for _, name := range []protocolmap.ListenerName{"EXTRA", "SECURE", "TLS", "ADMIN"} {
				assert.Nil(t, srv.Addr(name))
			}
		})
	}
	require.NoError(t, srv.Close())
	assert.ErrorIs(t, srv.AddListener(ctx, ep("EXTRA", protocolmap.Plaintext, 0), nil), socketserver.ErrServerClosed)
	assert.ErrorIs(t, srv.RemoveListener(ctx, "CLIENT"), socketserver.ErrServerClosed)
	assert.ErrorIs(t, srv.SetListeners(ctx, resolve(), nil), socketserver.ErrServerClosed)
}

// max.connections stays one broker-wide quota: a listener added at run
// time counts its connections with the others', and its own
// listener.name.<l>.max.connections (set with SetConnectionQuotas before it is
// added) applies to it. Adding a listener also gives the inter-broker
// listener its protection (it is exempt from the broker-wide limit once
// the server has more than one listener, as in Kafka), and removing it
// takes that back.
func TestAddedListenerQuotas(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "PLAINTEXT://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
		"max.connections":                "2",
	}, listenersAPIs, echoMetadata)
	counts := func() map[protocolmap.ListenerName]int {
		_, byListener, _ := socketserver.QuotaCounts(srv)
		return byListener
	}
	// waits checks that rc's connection stays unadmitted (the acceptor
	// waits for a slot), its request unanswered, while the counts stay.
	waits := func(rc *rawClient, why string) {
		t.Helper()
		rc.send(kmsg.NewPtrApiVersionsRequest()) // answered by the server once the connection is registered
		want := counts()
		time.Sleep(300 * time.Millisecond)
		assert.Equal(t, want, counts(), why)
	}
	answered := func(rc *rawClient) {
		t.Helper()
		readResponse(t, rc.c, kmsg.NewPtrApiVersionsResponse(), rc.corr)
	}
	p1 := dialRaw(t, srv, "PLAINTEXT")
	p1.roundTrip(kmsg.NewPtrApiVersionsRequest())

	q := socketserver.DefaultConnectionQuotas()
	q.MaxConnections = 2
	q.ListenerMaxConnections = map[protocolmap.ListenerName]int{"EXTRA": 1}
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	l := listener.EndPoint{Name: "EXTRA", Host: "127.0.0.1", SecurityProtocol: protocolmap.Plaintext}
	require.NoError(t, srv.AddListener(context.Background(), listener.Listener{Name: "EXTRA", SecurityProtocol: protocolmap.Plaintext, Bind: l, Advertised: l}, nil))

	e1 := dialRaw(t, srv, "EXTRA")
	e1.roundTrip(kmsg.NewPtrApiVersionsRequest())
	assert.Equal(t, map[protocolmap.ListenerName]int{"PLAINTEXT": 1, "EXTRA": 1}, counts())
	e2 := dialRaw(t, srv, "EXTRA")
	waits(e2, "EXTRA's own limit, 1, holds its second connection")

	// The broker-wide limit counts EXTRA's connection with PLAINTEXT's:
	// with EXTRA's own limit raised, its second connection waits on, for
	// max.connections, until PLAINTEXT's closes.
	q.ListenerMaxConnections["EXTRA"] = 5
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, map[protocolmap.ListenerName]int{"PLAINTEXT": 1, "EXTRA": 1}, counts(), "EXTRA's second connection waits for a broker-wide slot")
	p1.c.Close()
	answered(e2)
	total, _, _ := socketserver.QuotaCounts(srv)
	assert.Equal(t, 2, total)

	// PLAINTEXT, the inter-broker listener, is protected now that the
	// server has two listeners: its connection is admitted past
	// max.connections (and EXTRA's processors shed one of EXTRA's).
	p2 := dialRaw(t, srv, "PLAINTEXT")
	p2.roundTrip(kmsg.NewPtrApiVersionsRequest())
	require.NoError(t, srv.RemoveListener(context.Background(), "EXTRA"))
	requireClosed(t, e1.c)
	requireClosed(t, e2.c)
	assert.Equal(t, map[protocolmap.ListenerName]int{"PLAINTEXT": 1}, counts(), "EXTRA is forgotten")

	// Alone again, PLAINTEXT is limited like any listener.
	q.MaxConnections = 1
	require.NoError(t, srv.SetConnectionQuotas(context.Background(), q))
	p3 := dialRaw(t, srv, "PLAINTEXT")
	waits(p3, "without another listener, the inter-broker listener is not protected")
	p2.c.Close()
	answered(p3)
}

// SetListeners applies a re-read configuration: a listener removed and
// one added on its port in one call (the removed one's socket closes
// first), a kept listener advertised anew, all while connections of the
// kept listener are served.
func TestSetListeners(t *testing.T) {
	port := freePort(t)
	props := config.Properties{
		"listeners":                      fmt.Sprintf("PLAINTEXT://127.0.0.1:0,OLD://%s:%d", fixedHost, port),
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OLD:PLAINTEXT,NEW:SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "PLAIN",
	}
	srv := socketservertest.NewServer(t, props, listenersAPIs, echoMetadata)
	kept := dialRaw(t, srv, "PLAINTEXT")
	kept.roundTrip(metadataReq(9))
	old := dialRaw(t, srv, "OLD")
	old.roundTrip(metadataReq(9))

	nextProps, err := props.With(
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:0,NEW://%s:%d", fixedHost, port),
		fmt.Sprintf("advertised.listeners=PLAINTEXT://broker.example:9092,NEW://%s:%d", fixedHost, port))
	require.NoError(t, err)
	next, err := config.Server(nextProps)
	require.NoError(t, err)
	ch, err := srv.Listeners().Changes(next.Listeners)
	require.NoError(t, err)
	assert.Equal(t, []protocolmap.ListenerName{"NEW"}, []protocolmap.ListenerName{ch.Added[0].Name})
	assert.Equal(t, protocolmap.ListenerName("OLD"), ch.Removed[0].Name)
	next.PerListener["NEW"].Credentials = newUsers(t)
	next.PerListener["PLAINTEXT"].NetworkThreads = 7 // ignored: PLAINTEXT is kept
	require.NoError(t, srv.SetListeners(context.Background(), next.Listeners, next.PerListener))

	assert.Same(t, next.Listeners, srv.Listeners())
	assert.Nil(t, srv.Addr("OLD"))
	require.NotNil(t, srv.Addr("NEW"))
	assert.Equal(t, port, srv.Addr("NEW").(*net.TCPAddr).Port, "NEW took OLD's port")
	requireClosed(t, old.c)
	b := srv.Broker(1, "")
	require.Len(t, b.EndPoints, 2)
	assert.Equal(t, "broker.example", b.EndPoints[0].Host, "PLAINTEXT advertised anew")
	assert.Equal(t, []int{0, 1, 2, 6, 7, 8}, processorIDs(srv), "PLAINTEXT keeps its processors; NEW's take the next ids")
	rc := dialRaw(t, srv, "NEW")
	require.Zero(t, rc.login("PLAIN", "alice", alicePassword, 1).ErrorCode)
	kept.roundTrip(metadataReq(9))
	var reasons []string
	for _, rec := range srv.Registry().Closed(connregistry.Filter{}) {
		reasons = append(reasons, string(rec.Listener)+": "+string(rec.CloseReason))
	}
	assert.Equal(t, []string{"OLD: listener-removed"}, reasons)

	// Nothing to change is no change.
	require.NoError(t, srv.SetListeners(context.Background(), next.Listeners, nil))
}

// Listeners are added and removed from several goroutines while clients
// connect to them and others read the server's listeners (Addr, Stats,
// Broker, Listeners, the quota counts): under -race this checks that
// every reader of the listeners is safe against their change. Then the
// server shuts down cleanly, with nothing counted and nothing left
// running.
func TestConcurrentListenerChanges(t *testing.T) {
	base := settledBaseline(t)
	names := []string{"L1", "L2", "L3", "L4"}
	props := config.Properties{
		"listeners":                      "PLAINTEXT://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,L1:PLAINTEXT,L2:PLAINTEXT,L3:PLAINTEXT,L4:PLAINTEXT",
		"num.network.threads":            "1",
	}
	srv, stop, err := socketservertest.Start(props, listenersAPIs, echoMetadata)
	require.NoError(t, err)
	all, err := config.Listeners(merge(props, config.Properties{
		"listeners": "PLAINTEXT://127.0.0.1:0,L1://127.0.0.1:0,L2://127.0.0.1:0,L3://127.0.0.1:0,L4://127.0.0.1:0",
	}))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var changes, served atomic.Int64
	for i := range 4 {
		wg.Go(func() { // adds and removes two names, in turns with another goroutine
			for j := 0; ctx.Err() == nil; j++ {
				name := protocolmap.ListenerName(names[(i+j)%len(names)])
				l, _ := all.Listener(name)
				err := srv.AddListener(ctx, l, &socketserver.ListenerConfig{NetworkThreads: 1 + j%2})
				switch {
				case err == nil:
					changes.Add(1)
				case errors.Is(err, listener.ErrDuplicateName), errors.Is(err, socketserver.ErrListenerRemoving), ctx.Err() != nil:
				default:
					t.Errorf("AddListener(%s): %v", name, err)
				}
				time.Sleep(time.Duration(j%5) * time.Millisecond)
				rctx, rcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				err = srv.RemoveListener(rctx, name)
				rcancel()
				switch {
				case err == nil:
					changes.Add(1)
				case errors.Is(err, listener.ErrUnknownListener), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
				default:
					t.Errorf("RemoveListener(%s): %v", name, err)
				}
			}
		})
	}
	for i := range 4 {
		wg.Go(func() { // clients of whatever listener is there
			for j := 0; ctx.Err() == nil; j++ {
				addr := srv.Addr(protocolmap.ListenerName(names[(i+j)%len(names)]))
				if addr == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				c, err := net.DialTimeout("tcp", addr.String(), time.Second)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := c.Write(formatter.AppendRequest(nil, metadataReq(9), 1)); err == nil {
					var size [4]byte
					if _, err := c.Read(size[:]); err == nil {
						served.Add(1)
					}
				}
				c.Close()
			}
		})
	}
	wg.Go(func() { // readers of the listeners
		for ctx.Err() == nil {
			set := srv.Listeners()
			for _, l := range set.All {
				_ = srv.Addr(l.Name)
			}
			st := srv.Stats()
			_ = srv.Broker(1, "")
			_ = srv.ReloadTLSFrom(socketserver.Config{}) // ranges over the listeners too
			_ = srv.TLSConfig("L1")
			_, _, _ = socketserver.QuotaCounts(srv)
			for name, n := range st.ConnectionCount {
				if n < 0 {
					t.Errorf("listener %s counts %d connections", name, n)
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Wait()
	t.Logf("%d listener changes, %d requests served", changes.Load(), served.Load())
	assert.Positive(t, changes.Load())
	assert.Positive(t, served.Load())

	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	require.NoError(t, srv.Shutdown(sctx))
	require.NoError(t, stop())
	requireQuotasReleased(t, srv)
	for _, rec := range srv.Registry().Closed(connregistry.Filter{}) {
		assert.True(t, slices.Contains([]connregistry.CloseReason{connregistry.CloseListenerRemoved, connregistry.CloseServerShutdown, connregistry.CloseByClient}, rec.CloseReason),
			"connection %s of %s closed for %q", rec.ID, rec.Listener, rec.CloseReason)
	}
	for _, name := range names {
		assert.False(t, strings.Contains(fmt.Sprint(srv.Stats().ConnectionCount), name+":"), "listener %s still counts connections", name)
	}
	base.RequireReturned(t)
}

// A listener that requires the PROXY protocol, added at run time, reads
// headers as any other; removed, it closes a socket whose header is still
// awaited (it has no request to finish) and drains its served
// connections, and nothing of it is left running.
func TestAddAndRemoveProxyListener(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,LB:PLAINTEXT",
	}, func(c *socketserver.Config) {
		listenersAPIs(c)
		c.ParkAfter = -1
	}, echoMetadata)
	base := settledBaseline(t)
	ep := listener.EndPoint{Name: "LB", Host: "127.0.0.1", SecurityProtocol: protocolmap.Plaintext}
	require.NoError(t, srv.AddListener(context.Background(), listener.Listener{Name: "LB", SecurityProtocol: protocolmap.Plaintext, Bind: ep, Advertised: ep},
		&socketserver.ListenerConfig{NetworkThreads: 1, ProxyProtocol: socketserver.ProxyProtocol{
			Mode: socketserver.ProxyProtocolRequired, TrustedNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}))

	served := dialRaw(t, srv, "LB")
	write(t, served.c, []byte("PROXY TCP4 192.0.2.7 127.0.0.1 40000 9092\r\n"))
	served.roundTrip(metadataReq(9))
	pending := dialRaw(t, srv, "LB") // no header yet
	require.Eventually(t, func() bool { return srv.Stats().ConnectionCount["LB"] == 1 }, 5*time.Second, 5*time.Millisecond)
	conns := srv.Registry().Snapshot(connregistry.Filter{})
	require.Len(t, conns, 1)
	assert.Equal(t, netip.MustParseAddrPort("192.0.2.7:40000"), conns[0].ClientAddr, "the header's address")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.RemoveListener(ctx, "LB"))
	requireClosed(t, served.c)
	_, err := pending.c.Read(make([]byte, 1))
	assert.Error(t, err, "the socket awaiting its header is closed")
	closed := srv.Registry().Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, connregistry.CloseListenerRemoved, closed[0].CloseReason)
	_, byListener, byIP := socketserver.QuotaCounts(srv)
	assert.Empty(t, byIP)
	assert.NotContains(t, byListener, protocolmap.ListenerName("LB"))
	base.RequireReturned(t)
}

// onListener runs f once, on the goroutine the hook it stands for runs
// on, for the first connection of listener EXTRA: its acceptor's
// (accepted) or its processor's (created).
type onListener struct {
	once atomic.Bool
	f    func()
}

func (h *onListener) run(l protocolmap.ListenerName) {
	if l == "EXTRA" && h.once.CompareAndSwap(false, true) {
		h.f()
	}
}

type onAccepted struct{ onListener }

func (h *onAccepted) OnConnAccepted(l protocolmap.ListenerName) { h.run(l) }

type onCreated struct{ onListener }

func (h *onCreated) OnConnCreated(info connregistry.Info) { h.run(info.Listener) }

// A hook or Inline handler of a listener that removes that listener waits
// for itself, a goroutine the removal waits for, until its context ends:
// RemoveListener then returns the context's error, the rest of the
// removal finishes once the caller has returned, and the server still
// closes. It used to wait for ever, and Close with it.
func TestRemoveListenerFromItsOwnGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name string
		// configure makes remove run on a goroutine of EXTRA's.
		configure func(c *socketserver.Config, remove func())
	}{
		{"acceptor's hook", func(c *socketserver.Config, remove func()) {
			c.Hooks = append(c.Hooks, &onAccepted{onListener{f: remove}})
		}},
		{"processor's hook", func(c *socketserver.Config, remove func()) {
			c.Hooks = append(c.Hooks, &onCreated{onListener{f: remove}})
		}},
		{"inline handler", func(c *socketserver.Config, remove func()) {
			c.APIs = socketserver.Inline(socketserver.HandlerFunc(func(r *socketserver.Request) {
				if r.Conn.Listener == "EXTRA" {
					remove()
				}
				_ = respondEmpty(r)
			}), allAPIs()...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := testkit.TakeGoroutineBaseline()
			var srv atomic.Pointer[socketserver.Server]
			removed := make(chan error, 1)
			remove := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				removed <- srv.Load().RemoveListener(ctx, "EXTRA")
			}
			s, stop, err := socketservertest.Start(config.Properties{
				"listeners":                      "PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:0",
				"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
			}, func(c *socketserver.Config) {
				withAPIs(c)
				tc.configure(c, remove)
			}, answerAll)
			require.NoError(t, err)
			srv.Store(s)
			c := socketservertest.Dial(t, s, "EXTRA")
			send(t, c, metadataReq(1), 1) // for the inline handler
			select {
			case err := <-removed:
				require.ErrorIs(t, err, context.DeadlineExceeded)
			case <-time.After(10 * time.Second):
				t.Fatal("RemoveListener, with a 300 ms context, has not returned after 10 s")
			}
			_, kept := s.Listeners().Listener("EXTRA")
			assert.False(t, kept)
			metadataRoundTrip(t, socketservertest.Dial(t, s, "PLAINTEXT"), 1, 1)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			if _, err := io.Copy(io.Discard, c); err != nil { // EOF, or a reset with the request unread
				requireClosedErr(t, err)
			}

			closed := make(chan error, 1)
			go func() { closed <- stop() }()
			select {
			case err := <-closed:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Close has not returned after 10 s")
			}
			base.RequireReturned(t)
		})
	}
}

// slowStart is a mechanism service whose Start tells entered and waits
// for proceed.
type slowStart struct {
	*serviceMechanism
	entered, proceed chan struct{}
}

func (m *slowStart) Start(ctx context.Context, logger *slog.Logger) error {
	close(m.entered)
	<-m.proceed
	return m.serviceMechanism.Start(ctx, logger)
}

// A listener being added when Close comes is the server's: Close waits
// for AddListener to give it up (its services closed, its socket not
// left bound), so nothing of it runs after Done. Close returned while the
// listener's services still started before.
func TestCloseWaitsForAListenerBeingAdded(t *testing.T) {
	m := &slowStart{serviceMechanism: &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY")},
		entered: make(chan struct{}), proceed: make(chan struct{})}
	srv, stop, err := socketservertest.Start(nil, listenersAPIs, echoMetadata)
	require.NoError(t, err)
	l, lc := sideListener(t, "SASL_PLAINTEXT", config.Properties{"sasl.enabled.mechanisms": "TOKEN-TOY"})
	lc.Mechanisms = []sasl.Mechanism{m}
	added := make(chan error, 1)
	go func() { added <- srv.AddListener(context.Background(), l, lc) }()
	<-m.entered
	closed := make(chan error, 1)
	go func() { closed <- stop() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a listener was being added")
	case <-time.After(200 * time.Millisecond):
	}
	close(m.proceed)
	require.ErrorIs(t, <-added, socketserver.ErrServerClosed)
	require.NoError(t, <-closed)
	assert.Equal(t, []string{"start", "close"}, m.Calls(), "the listener's services closed before Close returned")
}
