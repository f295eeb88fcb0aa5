package socketserver_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// serviceMechanism is a host mechanism with background work of its own, a
// sasl.Service: Start runs a goroutine that Close ends. It records its
// calls, and whether an authentication was in flight when it was closed.
type serviceMechanism struct {
	*tokenMechanism
	startErr error

	mu       sync.Mutex
	calls    []string
	starts   int // outstanding: Starts are counted, as sasl.Service says
	stop     chan struct{}
	done     chan struct{}
	inFlight int
}

func (m *serviceMechanism) NewServer(c sasl.Attempt) sasl.Server {
	return &trackedServer{Server: m.tokenMechanism.NewServer(c), m: m}
}

// trackedServer counts a Step in flight.
type trackedServer struct {
	sasl.Server
	m *serviceMechanism
}

func (s *trackedServer) Step(ctx context.Context, tok []byte) ([]byte, error) {
	s.m.mu.Lock()
	s.m.inFlight++
	s.m.mu.Unlock()
	defer func() { s.m.mu.Lock(); s.m.inFlight--; s.m.mu.Unlock() }()
	return s.Server.Step(ctx, tok)
}

func (m *serviceMechanism) Start(ctx context.Context, logger *slog.Logger) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "start")
	if m.startErr != nil {
		return m.startErr
	}
	if ctx == nil || logger == nil {
		return errors.New("Start without a context or logger")
	}
	logger.Info("mechanism started")
	if m.starts++; m.starts == 1 {
		m.stop, m.done = make(chan struct{}), make(chan struct{})
		go func(stop, done chan struct{}) { <-stop; close(done) }(m.stop, m.done)
	}
	return nil
}

func (m *serviceMechanism) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "close")
	if m.inFlight > 0 {
		m.calls = append(m.calls, "closed during an authentication")
	}
	if m.starts > 0 {
		if m.starts--; m.starts == 0 {
			close(m.stop)
			<-m.done
		}
	}
	return nil
}

func (m *serviceMechanism) Calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

// A mechanism that is a sasl.Service is started by Server.Start, before
// the server accepts connections, with the server's logger naming the
// listener, and closed once the server has stopped, after the last
// connection: nothing it started outlives the server. New and a server
// that never starts call neither.
func TestMechanismServiceLifecycle(t *testing.T) {
	base := testkit.TakeGoroutineBaseline()
	logs, logger := newLogCapture()
	m := &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY")}
	props := saslProps(config.Properties{"sasl.enabled.mechanisms": "TOKEN-TOY", "connection.failed.authentication.delay.ms": "0"})
	configure := func(c *socketserver.Config) {
		withTokens(m, nil)(c)
		c.Logger = logger
	}

	cfg, err := config.Server(merge(config.Properties{"listeners": "PLAINTEXT://127.0.0.1:0"}, props))
	require.NoError(t, err)
	configure(&cfg)
	unstarted, err := socketserver.New(cfg)
	require.NoError(t, err)
	require.NoError(t, unstarted.Close())
	assert.Empty(t, m.Calls(), "New and Close of a server never started touch no mechanism")

	srv, stop, err := socketservertest.Start(props, configure, echoMetadata)
	require.NoError(t, err)
	assert.Equal(t, []string{"start"}, m.Calls())
	var found bool
	for _, r := range logs.Records() {
		if r.msg == "mechanism started" {
			found = true
			assert.Equal(t, "SASL_PLAINTEXT", r.attrs["listener"])
			assert.Equal(t, "TOKEN-TOY", r.attrs["sasl_mechanism"])
		}
	}
	assert.True(t, found, "the mechanism logged through the server's logger")

	rc := dialRaw(t, srv, "SASL_PLAINTEXT")
	require.Zero(t, rc.handshake(1, "TOKEN-TOY").ErrorCode)
	require.Zero(t, rc.authenticate(2, []byte("tok-alice")).ErrorCode)
	rc.roundTrip(metadataReq(9))
	assert.Equal(t, []string{"start"}, m.Calls(), "no close while the server runs")

	require.NoError(t, stop())
	<-srv.Done()
	assert.Equal(t, []string{"start", "close"}, m.Calls(), "closed once, when the server stopped, with no authentication in flight")
	base.RequireReturned(t)
}

// A mechanism that fails to start fails Server.Start, which names the
// listener and mechanism, binds nothing, and closes the mechanisms it
// had started; so does a listener that fails to bind.
func TestMechanismServiceStartFailure(t *testing.T) {
	base := testkit.TakeGoroutineBaseline()
	good := &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY")}
	bad := &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY"), startErr: errors.New("the key server is down")}
	port := freePort(t)
	props := config.Properties{
		"listeners":                      "A://127.0.0.1:0,B://" + fixedHost + ":" + strconv.Itoa(port),
		"listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
		"inter.broker.listener.name":     "A",
		"sasl.enabled.mechanisms":        "TOKEN-TOY",
	}
	build := func(mechs map[protocolmap.ListenerName][]sasl.Mechanism) *socketserver.Server {
		cfg, err := config.Server(props)
		require.NoError(t, err)
		cfg.APIs = allAPIs()
		for name, m := range mechs {
			cfg.PerListener[name].Mechanisms = m
		}
		srv, err := socketserver.New(cfg)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		return srv
	}

	srv := build(map[protocolmap.ListenerName][]sasl.Mechanism{"A": {good}, "B": {bad}})
	err := srv.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listener B: SASL mechanism TOKEN-TOY failed to start: the key server is down")
	assert.Nil(t, srv.Addr("A"), "nothing bound")
	requireBindable(t, port)
	assert.Equal(t, []string{"start", "close"}, good.Calls(), "the mechanism started first was closed")

	busy, err := net.Listen("tcp", net.JoinHostPort(fixedHost, strconv.Itoa(port)))
	require.NoError(t, err)
	defer busy.Close()
	good2 := &serviceMechanism{tokenMechanism: newTokenMechanism("TOKEN-TOY")}
	srv = build(map[protocolmap.ListenerName][]sasl.Mechanism{"A": {good2}, "B": {good2}})
	err = srv.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "listener B failed to bind")
	assert.Equal(t, []string{"start", "start", "close", "close"}, good2.Calls(), "started once per listener, closed as often")
	base.RequireReturned(t)
}
