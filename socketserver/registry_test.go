package socketserver_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// The server feeds its registry: every connection on every listener, with
// principal, client address, listener, protocol, client software from
// ApiVersions v3+, counters, state, and the reason it closed.
func TestRegistryFedByServer(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "CLIENT://127.0.0.1:0,PLAIN://127.0.0.1:0",
		"listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,PLAIN:PLAINTEXT",
		"inter.broker.listener.name":     "PLAIN",
		"sasl.enabled.mechanisms":        "SCRAM-SHA-256",
		"connections.max.idle.ms":        "300",
	}, withUsers(newUsers(t)), answerAll)
	reg := srv.Registry()
	start := time.Now()

	// An authenticated kgo client on CLIENT.
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("CLIENT").String()),
		kgo.SASL(scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism()), kgo.ConnIdleTimeout(time.Minute))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
	require.NoError(t, err)

	// A raw client on PLAIN that says who it is (KIP-511).
	raw := socketservertest.Dial(t, srv, "PLAIN")
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, "raw-test", "1.0"
	send(t, raw, av, 1)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	readResponse(t, raw, resp, 1)

	// A scanner that never authenticates shows up as authenticating.
	scanner := socketservertest.Dial(t, srv, "CLIENT")

	var byListener map[string][]connregistry.Conn
	waitFor(t, 5*time.Second, func() bool {
		byListener = map[string][]connregistry.Conn{}
		for _, c := range reg.Snapshot(connregistry.Filter{}) {
			byListener[string(c.Listener)] = append(byListener[string(c.Listener)], c)
		}
		return len(byListener["PLAIN"]) == 1 && len(byListener["CLIENT"]) >= 2
	}, "registry did not list the connections")

	var authed, scanning connregistry.Conn
	for _, c := range byListener["CLIENT"] {
		if c.Principal.Name == "alice" {
			authed = c
		}
		if c.ClientAddr.String() == scanner.LocalAddr().String() {
			scanning = c
		}
	}
	assert.Equal(t, connregistry.Principal{Type: "User", Name: "alice"}, authed.Principal)
	assert.Equal(t, "SASL_PLAINTEXT", authed.SecurityProtocol.String())
	assert.Equal(t, "SCRAM-SHA-256", authed.SASLMechanism)
	assert.Equal(t, connregistry.StateReady, authed.State)
	assert.Equal(t, "kgo", authed.ClientSoftwareName)
	assert.Equal(t, "kgo", authed.ClientID)
	assert.Greater(t, authed.Requests, int64(2))
	assert.Greater(t, authed.BytesIn, int64(0))
	assert.Greater(t, authed.BytesOut, int64(0))
	assert.False(t, authed.ConnectedAt.Before(start.Add(-time.Second)))
	assert.False(t, authed.AuthenticatedAt.IsZero())
	assert.Equal(t, "data", authed.Plane.String())

	assert.Equal(t, connregistry.Principal{Type: "User", Name: "ANONYMOUS"}, scanning.Principal)
	assert.Equal(t, connregistry.StateAuthenticating, scanning.State)

	plain := byListener["PLAIN"][0]
	assert.Equal(t, "raw-test", plain.ClientSoftwareName)
	assert.Equal(t, "1.0", plain.ClientSoftwareVersion)
	assert.Equal(t, raw.LocalAddr().String(), plain.ClientAddr.String())
	assert.Equal(t, connregistry.StateReady, plain.State)

	// An operator closes alice's connections; they go to the history with
	// the reason, and disappear from the live list.
	f := connregistry.Filter{Principal: strp("User:alice")}
	require.NoError(t, f.Validate())
	killed := reg.Close(f, connregistry.CloseByOperator)
	require.NotEmpty(t, killed)
	waitFor(t, 5*time.Second, func() bool { return len(reg.Snapshot(f)) == 0 }, "alice's connections are still listed")
	closed := reg.Closed(f)
	require.NotEmpty(t, closed)
	assert.Equal(t, connregistry.CloseByOperator, closed[0].CloseReason)

	// The raw connection goes idle: closed with the reason idle.
	pf := connregistry.Filter{ClientAddress: strp(raw.LocalAddr().(*net.TCPAddr).IP.String()), Listener: strp("plain")}
	waitFor(t, 5*time.Second, func() bool { return len(reg.Closed(pf)) == 1 }, "the idle connection did not close")
	assert.Equal(t, connregistry.CloseIdle, reg.Closed(pf)[0].CloseReason)
}

// A failed authentication is recorded with its reason.
func TestRegistryAuthenticationFailed(t *testing.T) {
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                                 "SASL_PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol":            "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":                   "SCRAM-SHA-256",
		"connection.failed.authentication.delay.ms": "0",
	}, withUsers(newUsers(t)), answerAll)
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("SASL_PLAINTEXT").String()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism()), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.Error(t, err)
	waitFor(t, 5*time.Second, func() bool { return len(srv.Registry().Closed(connregistry.Filter{})) > 0 }, "no closed connection recorded")
	assert.Equal(t, connregistry.CloseAuthenticationFailed, srv.Registry().Closed(connregistry.Filter{})[0].CloseReason)
}

// Connections closed by Shutdown are recorded as closed by the server's
// shutdown, not by their clients.
func TestRegistryServerShutdownReason(t *testing.T) {
	srv := socketservertest.NewServer(t, nil, withAPIs, answerAll)
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	metadataRoundTrip(t, c, 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	closed := srv.Registry().Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, connregistry.CloseServerShutdown, closed[0].CloseReason)
	assert.Zero(t, srv.Registry().Len())
}

// A request type serving under a key chosen at run time (KeySetter) gets the
// frame's key, so its response carries the same key.
func TestKeySetterGetsFrameKey(t *testing.T) {
	const key = 200
	var srv *socketserver.Server
	srv = socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{{Key: key, MaxVersion: 0,
			New: func() kmsg.Request { return &connregistry.ListClientConnectionsRequest{} }}}
	}, socketserver.HandlerFunc(func(r *socketserver.Request) {
		h := &connregistry.ListHandler{Registry: srv.Registry()}
		if err := r.Respond(h.Handle(r.Context(), connregistry.Principal(r.Conn.Principal), r.Body.(*connregistry.ListClientConnectionsRequest))); err != nil {
			t.Error(err)
			_ = r.CloseConnection()
		}
	}))
	c := socketservertest.Dial(t, srv, "PLAINTEXT")
	send(t, c, &connregistry.ListClientConnectionsRequest{APIKey: key}, 5)
	resp := &connregistry.ListClientConnectionsResponse{APIKey: key}
	readResponse(t, c, resp, 5)
	assert.Len(t, resp.Connections, 1, "the listing shows the connection itself")
}

// A host-supplied PrincipalBuilder decides the principal of each
// connection; the default one's rules no longer apply. It is given what
// the connection established, as Kafka's AuthenticationContext: listener,
// security protocol, client address, and the SASL mechanism and identity.
func TestCustomPrincipalBuilder(t *testing.T) {
	seen := make(chan *socketserver.Request, 1)
	built := make(chan socketserver.Authentication, 1)
	srv := socketservertest.NewServer(t, config.Properties{
		"listeners":                      "SASL_PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":        "SCRAM-SHA-256",
	}, func(c *socketserver.Config) {
		withUsers(newUsers(t))(c)
		c.PrincipalBuilder = func(info socketserver.Authentication, _ *security.PrincipalMapper) (connregistry.Principal, error) {
			select {
			case built <- info:
			default:
			}
			return connregistry.Principal{Type: "Service", Name: info.SASLIdentity + "@" + string(info.Listener)}, nil
		}
	}, queueHandler(seen))
	cl, err := kgo.NewClient(kgo.SeedBrokers(srv.Addr("SASL_PLAINTEXT").String()),
		kgo.SASL(scram.Auth{User: "alice", Pass: alicePassword}.AsSha256Mechanism()))
	require.NoError(t, err)
	defer cl.Close()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	}()
	r := recv(t, seen)
	assert.Equal(t, connregistry.Principal{Type: "Service", Name: "alice@SASL_PLAINTEXT"}, r.Conn.Principal)
	require.NoError(t, respondEmpty(r))
	list := srv.Registry().Snapshot(connregistry.Filter{})
	require.NotEmpty(t, list)
	assert.Equal(t, connregistry.Principal{Type: "Service", Name: "alice@SASL_PLAINTEXT"}, list[0].Principal)
	a := <-built
	assert.Equal(t, protocolmap.SASLPlaintext, a.SecurityProtocol)
	assert.Equal(t, list[0].ClientAddr, a.ClientAddr)
	assert.True(t, a.ClientAddr.IsValid())
	assert.Equal(t, "SCRAM-SHA-256", a.SASLMechanism)
	assert.Nil(t, a.TLS)
}
