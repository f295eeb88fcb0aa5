package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rcrowley/go-metrics"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/auditlog"
	"github.com/kafkanet/kafkanet/examples/internal/exampleproc"
	"github.com/kafkanet/kafkanet/examples/internal/faults"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

func TestMain(m *testing.M) {
	// sarama starts a goroutine, never stopped, for its metrics' meters
	// unless go-metrics is told to use no-op metrics; goleak would see it.
	// The fault tests' toxiproxy may leave goroutines of its own blocked
	// (faults.IgnoreToxiproxy).
	metrics.UseNilMetrics = true
	goleak.VerifyTestMain(bindcheck.Wrap(m), append(faults.IgnoreToxiproxy(), goleak.Cleanup(func(code int) {
		exampleproc.Cleanup()
		os.Exit(code)
	}))...)
}

// The users of the upstream cluster's CLIENT listener, and of the proxy's
// SASL listeners.
const (
	upstreamJAAS = config.PlainLoginModule + ` required user_proxy="proxy-secret" user_admin="admin-secret";`
	proxyJAAS    = config.PlainLoginModule + ` required user_alice="alice-secret" user_bob="bob-secret" user_admin="admin-secret";`
)

// upstreamSettings are examples/broker's settings in these tests: CLIENT
// speaks SASL_PLAINTEXT (the proxy logs in as proxy), INTERNAL PLAINTEXT,
// topics get 3 partitions when created on first use (kcat), and groups
// start without delay, as in Kafka's own tests.
var upstreamSettings = []string{
	"listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,REPLICATION://127.0.0.1:0",
	"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,REPLICATION:PLAINTEXT",
	"inter.broker.listener.name=REPLICATION",
	"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
	"listener.name.client.plain.sasl.jaas.config=" + upstreamJAAS,
	"num.partitions=3",
	"group.initial.rebalance.delay.ms=0",
}

// startUpstream runs examples/broker -brokers n with upstreamSettings and
// then sets.
func startUpstream(t *testing.T, n int, sets ...string) *exampleproc.Broker {
	t.Helper()
	return exampleproc.StartBroker(t, n, append(append([]string(nil), upstreamSettings...), sets...)...)
}

// testProxy is a proxy running in the test.
type testProxy struct {
	*proxy
	served chan error
}

// proxyOptions change how startProxy builds a proxy.
type proxyOptions struct {
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
	answerLinger time.Duration    // zero: the proxy's default
	audit        *auditlog.Writer // the audit trail's writer; nil: none
}

// startProxy starts a proxy with the -set settings sets in front of the
// upstream bootstrap server; it is closed when the test ends.
func startProxy(t *testing.T, upstream string, o *proxyOptions, sets ...string) *testProxy {
	t.Helper()
	if o == nil {
		o = &proxyOptions{}
	}
	cfg, err := resolve("", sets, upstream)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := newProxy(ctx, cfg, log, nil, o.dial, o.audit)
	require.NoError(t, err)
	if o.answerLinger > 0 {
		p.answerLinger = o.answerLinger
	}
	require.NoError(t, p.Start(ctx))
	tp := &testProxy{proxy: p, served: make(chan error, 1)}
	go func() { tp.served <- p.Serve(context.Background()) }()
	t.Cleanup(tp.close)
	return tp
}

// close closes the proxy at once and waits for its loops; a second call
// does nothing.
func (tp *testProxy) close() {
	tp.Close()
	if tp.served != nil {
		err := <-tp.served
		tp.served = nil
		if err != nil && !errors.Is(err, socketserver.ErrServerClosed) {
			panic(err)
		}
	}
}

// addr returns the bound address of a proxy listener.
func (tp *testProxy) addr(t *testing.T, name string) string {
	t.Helper()
	a := tp.Addr(protocolmap.ListenerName(name))
	require.NotNil(t, a, "no listener %s", name)
	return a.String()
}

// newClient returns a kgo client seeded with addr, closed when the test
// ends.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// plaintextProxy are the settings of a proxy with one PLAINTEXT listener
// in front of the upstream's INTERNAL listener.
var plaintextProxy = []string{
	"listeners=PLAIN://127.0.0.1:0",
	"listener.security.protocol.map=PLAIN:PLAINTEXT",
}

// hostPort splits an address the test knows is valid.
func hostPort(addr string) (string, string) {
	h, p, _ := net.SplitHostPort(addr)
	return h, p
}

var _ = strings.Cut

// protocolName converts a listener name.
func protocolName(name string) protocolmap.ListenerName { return protocolmap.ListenerName(name) }
