package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/attribute"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/auditlog"
	"github.com/kafkanet/kafkanet/examples/internal/loglevel"
	"github.com/kafkanet/kafkanet/examples/internal/otelenv"
	"github.com/kafkanet/kafkanet/examples/internal/propset"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/plugin/knprom"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/quota"
)

// portStep is how far apart the ports of consecutive brokers of one process
// are: broker i binds and advertises each listener's configured port plus
// i*portStep; port 0 stays 0 (an ephemeral port).
const portStep = 100

// brokerSettings are the keys the example reads besides the listeners and
// the socket server's keys.
type brokerSettings struct {
	nodeID        int32  // node.id, else broker.id; 0 when neither is set
	rack          string // broker.rack
	numPartitions int32  // num.partitions: partitions of an auto-created topic
	autoCreate    bool   // auto.create.topics.enable
	deleteTopics  bool   // delete.topic.enable: DeleteTopics deletes
	// listConnectionsKey is the API key ListClientConnections is served
	// under (kafkanet.list.client.connections.api.key, default KIP-1329's
	// 93), closeConnectionsKey CloseClientConnections'
	// (kafkanet.close.client.connections.api.key, default 1093), and
	// superUsers who may call them (super.users; everyone when unset, as
	// Kafka without an authorizer).
	listConnectionsKey  int16
	closeConnectionsKey int16
	superUsers          string
	// users are each SASL listener's users, from its
	// listener.name.<listener>.plain.sasl.jaas.config.
	users *security.JAASUsers
	// jaasWarnings are about sasl.jaas.config settings without the
	// listener and mechanism prefix, which a broker ignores.
	jaasWarnings []config.JAASWarning
	// groups are the group coordinator's settings (groups.go).
	groups groupSettings
	// log is how partitions keep records: retention and the largest batch
	// (retention.go).
	log logSettings
	// requestBudget is each broker's queued.max.request.bytes (0 or less:
	// none), and memoryLimit kafkanet.memory.limit.bytes (memlimit.go).
	requestBudget int64
	memoryLimit   int64
	// quotas are the client quotas' sampling and the quotas at start
	// (clientquotas.go).
	quotas quotaSettings
}

// authorizer is who may call the broker's administrative APIs (listing
// connections, client quotas): super.users when it is set, everyone when
// it is not, as Kafka without an authorizer (authorizer.class.name unset)
// lets everyone: connregistry.SuperUsers of an empty list would let no one.
func (s *brokerSettings) authorizer() connregistry.Authorizer {
	if s.superUsers == "" {
		return nil
	}
	return connregistry.SuperUsers(s.superUsers)
}

// readSettings reads the broker's settings from cfg's properties and checks
// the socket server's keys and the SASL users, and builds a socket server
// from them (serving nothing), so that -check rejects whatever serving
// would.
func readSettings(cfg *brokerConfig) (brokerSettings, error) {
	if _, err := config.Server(cfg.Properties()); err != nil {
		return brokerSettings{}, err
	}
	var s brokerSettings
	var err error
	lists, warnings, err := config.JAASUsers(cfg.Props, cfg.Set)
	s.jaasWarnings = warnings
	if err != nil {
		return brokerSettings{}, err
	}
	if s.users, err = security.NewJAASUsers(lists); err != nil {
		return brokerSettings{}, err
	}
	idKey := "node.id"
	if _, ok := cfg.Properties().Get(idKey); !ok {
		idKey = "broker.id"
	}
	id, err := boundedInt(cfg.Properties(), idKey, 0, 0, 1<<30) // room for the ids of -brokers
	if err != nil {
		return brokerSettings{}, err
	}
	s.nodeID = int32(id)
	s.rack, _ = cfg.Properties().Get("broker.rack")
	partitions, err := boundedInt(cfg.Properties(), "num.partitions", 1, 1, maxPartitions)
	if err != nil {
		return brokerSettings{}, err
	}
	s.numPartitions = int32(partitions)
	for _, k := range []struct {
		property string
		def      int16
		out      *int16
	}{{listConnectionsKeyProperty, connregistry.DefaultListAPIKey, &s.listConnectionsKey},
		{closeConnectionsKeyProperty, connregistry.DefaultCloseAPIKey, &s.closeConnectionsKey}} {
		key, err := cfg.Properties().Int(k.property, int(k.def), 0)
		if err != nil {
			return brokerSettings{}, err
		}
		if key > 32767 || kmsgKnows(int16(key)) && key != int(connregistry.DefaultListAPIKey) {
			return brokerSettings{}, &config.Error{Key: k.property, Value: strconv.Itoa(key), Err: listener.ErrInvalidValue,
				Rule: "must be an API key no other served API uses (93, KIP-1329's, or a free key such as 1000)"}
		}
		*k.out = int16(key)
	}
	if s.listConnectionsKey == s.closeConnectionsKey {
		return brokerSettings{}, &config.Error{Key: closeConnectionsKeyProperty, Value: strconv.Itoa(int(s.closeConnectionsKey)),
			Err: listener.ErrInvalidValue, Rule: "must differ from " + listConnectionsKeyProperty}
	}
	if s.groups, err = readGroupSettings(cfg); err != nil {
		return brokerSettings{}, err
	}
	if s.log, err = readLogSettings(cfg); err != nil {
		return brokerSettings{}, err
	}
	if s.quotas, err = readQuotaSettings(cfg.Properties()); err != nil {
		return brokerSettings{}, err
	}
	s.superUsers, _ = cfg.Properties().Get("super.users")
	if s.autoCreate, err = boolSetting(cfg.Properties(), "auto.create.topics.enable", true); err != nil {
		return brokerSettings{}, err
	}
	if s.deleteTopics, err = boolSetting(cfg.Properties(), "delete.topic.enable", true); err != nil {
		return brokerSettings{}, err
	}
	// The socket server checks what only it knows, such as whether it
	// implements every SASL mechanism a listener enables.
	scfg, err := socketServerConfig(cfg, s, nil)
	if err != nil {
		return brokerSettings{}, err
	}
	s.requestBudget = int64(scfg.QueuedMaxRequestBytes)
	if s.memoryLimit, err = readMemoryLimit(cfg); err != nil {
		return brokerSettings{}, err
	}
	srv, err := socketserver.New(scfg)
	if err != nil {
		return brokerSettings{}, err
	}
	srv.Close()
	return s, nil
}

// boundedInt reads the integer key of props, def when it is not set, and
// refuses a value below min or above max.
func boundedInt(props config.Properties, key string, def, min, max int) (int, error) {
	v, err := props.Int(key, def, min)
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, &config.Error{Key: key, Value: strconv.Itoa(v), Err: listener.ErrInvalidValue,
			Rule: fmt.Sprintf("Value must be no more than %d", max)}
	}
	return v, nil
}

// boolSetting reads the boolean key of props, def when it is not set.
func boolSetting(props config.Properties, key string, def bool) (bool, error) {
	v, ok := props.Get(key)
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &config.Error{Key: key, Value: v, Err: listener.ErrInvalidValue, Rule: "Expected value to be either true or false"}
	}
	return b, nil
}

// socketServerConfig is the socket server configuration of a broker with
// cfg and s: the socket server's keys, the broker's APIs, with h answering
// those that are inline (see dataPlaneAPIs), and the SASL users.
func socketServerConfig(cfg *brokerConfig, s brokerSettings, h socketserver.Handler) (socketserver.Config, error) {
	scfg, err := config.Server(cfg.Properties())
	if err != nil {
		return socketserver.Config{}, err
	}
	if _, set := cfg.Properties().Get(config.KeyQueuedMaxRequestBytes); !set {
		// Kafka sets no limit by default; the example, which keeps its log
		// in memory, bounds the requests in hand too.
		scfg.QueuedMaxRequestBytes = defaultQueuedMaxRequestBytes(scfg.RequestMaxBytes)
	}
	// Kafka fixes SO_SNDBUF and SO_RCVBUF at 100 KiB by default, which
	// turns off Linux's autotuning of a socket's buffers; the example
	// broker leaves them to the operating system unless they are set: a
	// 1 MiB Fetch answer then goes out in one write instead of several
	// that each wait for the client to read.
	for key, size := range map[string]*int{"socket.send.buffer.bytes": &scfg.SendBufferBytes, "socket.receive.buffer.bytes": &scfg.ReceiveBufferBytes} {
		if _, set := cfg.Properties().Get(key); !set {
			*size = -1
		}
	}
	// ListClientConnections (KIP-1329) and CloseClientConnections,
	// answered by the server from its registry, on the data plane and the
	// control plane.
	operators := []socketserver.API{
		socketserver.ListClientConnectionsAPI(s.listConnectionsKey, s.authorizer()),
		socketserver.CloseClientConnectionsAPI(s.closeConnectionsKey, s.authorizer()),
	}
	scfg.APIs = append(dataPlaneAPIs(h), operators...)
	if cp := cfg.ControlPlaneListener; cp != "" {
		scfg.PerListener[cp].APIs = append(controlPlaneAPIs(), operators...)
	}
	stores := s.users.Stores()
	for name, l := range scfg.PerListener {
		l.Credentials = stores[name]
		// OAUTHBEARER, as Kafka configures it from each listener's keys
		// (the socket server builds no mechanism of its own).
		if l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security); err != nil {
			return socketserver.Config{}, err
		}
	}
	return scfg, nil
}

// defaultQueuedMaxRequestBytes is the example broker's
// queued.max.request.bytes when the configuration sets none: twice
// socket.request.max.bytes (200 MiB with Kafka's default), so that two of
// the largest requests fit at once.
func defaultQueuedMaxRequestBytes(requestMax int) int {
	return int(min(2*int64(requestMax), math.MaxInt))
}

// brokerProperties returns the properties of broker i of the process: those
// of cfg with every port of listeners and advertised.listeners moved up by
// i*portStep (port 0 stays 0).
func brokerProperties(cfg *brokerConfig, i int) (config.Properties, error) {
	props := maps.Clone(cfg.Properties())
	if props == nil {
		props = config.Properties{}
	}
	for _, key := range []string{config.KeyListeners, config.KeyAdvertisedListeners} {
		value, ok := props.Get(key)
		if !ok {
			if key == config.KeyAdvertisedListeners {
				continue // it defaults to listeners, which moves
			}
			value = config.DefaultListeners
		}
		eps, err := listener.ParseEndPoints(key, value, cfg.SecurityProtocolMap)
		if err != nil {
			return nil, err
		}
		entries := make([]string, len(eps))
		for j, ep := range eps {
			if ep.Port != 0 {
				ep.Port += i * portStep
			}
			if ep.Port > 65535 {
				return nil, &config.Error{Key: key, Value: value, Err: listener.ErrInvalidEndPoint,
					Rule: fmt.Sprintf("broker %d would use port %d for listener %s (configured port + %d*%d), beyond 65535", i, ep.Port, ep.Name, i, portStep)}
			}
			entries[j] = ep.String()
		}
		props[key] = strings.Join(entries, ",")
	}
	return props, nil
}

// brokerConfigs returns the listener configuration of each of n brokers:
// cfg for broker 0, and cfg's properties moved by brokerProperties and
// resolved again for the others.
func brokerConfigs(cfg *brokerConfig, n int) ([]*brokerConfig, error) {
	cfgs := []*brokerConfig{cfg}
	for i := 1; i < n; i++ {
		props, err := brokerProperties(cfg, i)
		if err != nil {
			return nil, err
		}
		c, err := readBrokerConfig(props)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, c)
	}
	return cfgs, nil
}

// cluster is the process's brokers and their shared state.
type cluster struct {
	id       string // cluster id, new for every process
	settings brokerSettings
	state    *state
	brokers  []*broker
	// infos tells clients where each broker listens: its advertised
	// endpoints, with the bound port for an advertised port 0; a reload
	// that changes listeners replaces it (brokerInfos reads it).
	infos atomic.Pointer[[]socketserver.Broker]
	// ready is closed once infos is complete: the inline handlers, which
	// run from Start, wait for it (see ServeKafka).
	ready    chan struct{}
	registry *prometheus.Registry
	log      *slog.Logger
	tel      *otelenv.Telemetry // nil: OpenTelemetry off
	// users are the SASL users of every SASL listener, shared by the
	// brokers (as a Kafka cluster shares its SCRAM credentials), so that a
	// reload reaches every broker at once.
	users     *security.JAASUsers
	reloading sync.Mutex // one reload at a time
	// audit writes each broker's audit trail (-audit-log); nil: none.
	audit *auditlog.Writer
	// watcher reloads the TLS listeners when their PEM files change (see
	// watchTLS); nil when it does not run.
	watcher *security.TLSWatcher
	quotaMu sync.Mutex // one AlterClientQuotas at a time, applied to every broker
	// groups is the group coordinator of every group; each group's
	// requests go to the broker coordinatorOf names.
	groups *coordinator

	stopping chan struct{} // closed when the cluster stops: long polls answer now
	stopOnce sync.Once
	serveCtx context.Context    // of the Serve loops and the TLS watcher
	cancel   context.CancelFunc // ends them
	serving  sync.WaitGroup     // Serve loops
	waiting  sync.WaitGroup     // long-poll fetches, waiting group requests, the coordinator's deadlines
}

// broker is one broker of the cluster: a socket server and its node id.
type broker struct {
	c   *cluster
	id  int32
	cfg *brokerConfig // its listeners: as at start, then as the last reload left them (changed under reloading)
	srv *socketserver.Server
	// quotas measures this broker's clients against the client quotas,
	// which AlterClientQuotas changes on every broker at once.
	quotas *quota.Manager
}

// clusterOption sets an optional part of a cluster before its brokers
// start.
type clusterOption func(*cluster)

// withAuditLog writes the brokers' audit trail to w.
func withAuditLog(w *auditlog.Writer) clusterOption { return func(c *cluster) { c.audit = w } }

// startCluster starts n brokers that share one in-memory state. Broker 0
// uses props as they are; broker i moves every port by i*portStep and has
// node id node.id+i. Each logs to logger, with the request log when it
// logs at debug level, and traces and measures with tel (nil: not). It
// returns once every listener of every broker is bound and served.
func startCluster(ctx context.Context, props config.Properties, n int, logger *slog.Logger, tel *otelenv.Telemetry, opts ...clusterOption) (*cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("want at least 1 broker, not %d", n)
	}
	cfg, err := readBrokerConfig(props)
	if err != nil {
		return nil, err
	}
	set, err := readSettings(cfg)
	if err != nil {
		return nil, err
	}
	cfgs, err := brokerConfigs(cfg, n)
	if err != nil {
		return nil, err
	}
	for _, w := range set.jaasWarnings {
		logger.Warn(w.String())
	}
	serveCtx, cancel := context.WithCancel(context.Background())
	c := &cluster{
		id: newClusterID(), settings: set, state: newState(), registry: prometheus.NewRegistry(), log: logger, tel: tel,
		users: set.users, ready: make(chan struct{}), stopping: make(chan struct{}), serveCtx: serveCtx, cancel: cancel,
	}
	for _, o := range opts {
		o(c)
	}
	c.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c.groups = newCoordinator(set.groups, c.state, logger, c.stopping)
	c.waiting.Go(c.groups.run)
	c.waiting.Go(c.expireRecords)
	for i, bcfg := range cfgs {
		b, err := c.startBroker(ctx, bcfg, set.nodeID+int32(i))
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("broker %d: %w", set.nodeID+int32(i), err)
		}
		c.brokers = append(c.brokers, b)
	}
	// Every listener is bound, so every address is known: only now may
	// requests be served.
	c.updateInfos()
	for i, b := range c.brokers {
		b.logListeners(c.brokerInfos()[i], b.cfg.All)
	}
	close(c.ready)
	for _, b := range c.brokers {
		c.serving.Go(func() { _ = b.srv.Serve(serveCtx, protocolmap.DataPlane, b) })
		if b.cfg.ControlPlaneListener != "" {
			c.serving.Go(func() { _ = b.srv.Serve(serveCtx, protocolmap.ControlPlane, b) })
		}
	}
	return c, nil
}

// startBroker builds and starts one broker's socket server from cfg, with
// every socket-server key of its properties applied, its Prometheus
// metrics, its request log at debug level, and its OpenTelemetry
// instruments, told apart from the other brokers' by kafka.node.id.
func (c *cluster) startBroker(ctx context.Context, cfg *brokerConfig, id int32) (*broker, error) {
	b := &broker{c: c, id: id, cfg: cfg, quotas: newQuotaManager(c.settings.quotas)}
	scfg, err := socketServerConfig(cfg, c.settings, b)
	if err != nil {
		return nil, err
	}
	scfg.Logger = c.log.With("broker", id)
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"node_id": strconv.Itoa(int(id))}, c.registry)
	metrics, err := knprom.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	otel, err := c.tel.Instrument(attribute.Int("kafka.node.id", int(id)))
	if err != nil {
		return nil, err
	}
	scfg.Hooks = append(scfg.Hooks, metrics)
	scfg.Hooks = append(scfg.Hooks, otel.Hooks()...)
	scfg.Hooks = append(scfg.Hooks, loglevel.RequestLog(scfg.Logger)...)
	if c.audit != nil {
		scfg.Hooks = append(scfg.Hooks, c.audit.Hook(id))
	}
	srv, err := socketserver.New(scfg)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, err
	}
	b.srv = srv
	if err := errors.Join(reg.Register(knprom.NewStats(srv)), otel.ObserveStats(srv)); err != nil {
		srv.Close()
		return nil, err
	}
	return b, nil
}

// info returns what clients learn about b: its advertised endpoints, where
// an advertised port 0 becomes the port bound and an empty host (every
// interface) the machine's host name, as in Kafka.
func (b *broker) info() socketserver.Broker { return b.srv.Broker(b.id, b.c.settings.rack) }

// brokerInfos returns where each broker listens, as clients are told.
func (c *cluster) brokerInfos() []socketserver.Broker { return *c.infos.Load() }

// updateInfos takes every broker's advertised endpoints again: at start,
// and after a reload has changed listeners.
func (c *cluster) updateInfos() {
	infos := make([]socketserver.Broker, len(c.brokers))
	for i, b := range c.brokers {
		infos[i] = b.info()
	}
	c.infos.Store(&infos)
}

// logListeners logs "listener started" for each of ls, a listener of b
// that info advertises.
func (b *broker) logListeners(info socketserver.Broker, ls []listener.Listener) {
	for _, l := range ls {
		advertised := "-"
		for _, ep := range info.EndPoints {
			if ep.Name == l.Name {
				advertised = ep.Address()
			}
		}
		b.c.log.Info("listener started", "broker", b.id, "listener", l.Name, "bind", b.srv.Addr(l.Name).String(),
			"advertised", advertised, "protocol", l.SecurityProtocol, "plane", l.Plane)
	}
}

// controllerID is the node id Metadata gives as the controller: broker 0's.
func (c *cluster) controllerID() int32 { return c.settings.nodeID }

// leader returns the node id of the leader of partition p: broker p % N.
func (c *cluster) leader(p int32) int32 {
	return c.settings.nodeID + p%int32(len(c.brokers))
}

// replicas returns the node ids of the replicas of partition p of t, the
// leader first. The state is shared, so every replica is in sync.
func (c *cluster) replicas(t *topic, p int32) []int32 {
	out := make([]int32, t.replication)
	for i := range out {
		out[i] = c.leader(p + int32(i))
	}
	return out
}

// stop makes long polls answer now.
func (c *cluster) stop() { c.stopOnce.Do(func() { close(c.stopping) }) }

// Shutdown shuts every broker down gracefully (see socketserver's
// Shutdown): long-poll fetches are answered at once with what is available,
// requests in flight finish, connections close. If ctx ends first the
// brokers are closed at once.
func (c *cluster) Shutdown(ctx context.Context) error {
	c.stop()
	errs := make([]error, len(c.brokers))
	var wg sync.WaitGroup
	for i, b := range c.brokers {
		wg.Go(func() { errs[i] = b.srv.Shutdown(ctx) })
	}
	wg.Wait()
	c.wait()
	return errors.Join(errs...)
}

// Close stops every broker at once.
func (c *cluster) Close() {
	c.stop()
	for _, b := range c.brokers {
		b.srv.Close()
	}
	c.wait()
}

func (c *cluster) wait() {
	c.cancel()
	c.serving.Wait()
	c.waiting.Wait()
}

// newClusterID returns a random cluster id in Kafka's form: a UUID in
// unpadded URL-safe base64.
func newClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// brokerConfig is a reading of the configuration: its properties and the
// listeners read from them.
type brokerConfig = propset.Set

// readBrokerConfig reads the listeners of props.
func readBrokerConfig(props config.Properties) (*brokerConfig, error) { return propset.Read(props) }
