package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/auditlog"
	"github.com/kafkanet/kafkanet/examples/internal/clientprops"
	"github.com/kafkanet/kafkanet/examples/internal/loglevel"
	"github.com/kafkanet/kafkanet/examples/internal/otelenv"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	"github.com/kafkanet/kafkanet/socketserver"
)

// proxy is the whole proxy: a socket server for the clients, and the
// upstream brokers it forwards their requests to.
//
// Each client connection is a session with at most one upstream
// connection, to the broker its port stands for (any broker for the
// bootstrap port): the socket server reads one request at a time per
// connection, so the session forwards one at a time, and the client's
// order, correlation ids and acks=0 produces (written upstream, nothing
// awaited) carry over as they are. Most APIs are forwarded by their bytes
// (raw.go); those whose answers name brokers are decoded at the client's
// version, their broker addresses rewritten (rewrite.go), and answered.
// forward.go is the per-request path.
//
// A watch per upstream broker holds a connection of its own to it, to
// learn of new brokers and to notice when the broker goes away: the
// sessions routed to a broker that cannot be reached any more are closed,
// so that their clients reconnect and refresh their metadata.
//
// The proxy serves one upstream cluster or several: the default one
// (upstream.bootstrap.servers), whose brokers have ports of their own on
// each data listener, and virtual clusters (proxy.virtual.clusters), told
// apart on the TLS listeners by the server name the client asked for,
// whose brokers are names (broker-<id>.<server name>) on the listener's
// own port (see clusterFor).
type proxy struct {
	cfg      *proxyConfig
	set      settings
	log      *slog.Logger
	srv      *socketserver.Server
	apis     []socketserver.API // what the data listeners forward
	def      *cluster           // the default cluster; nil when there are only virtual ones
	clusters []*cluster         // the default one first, then the virtual ones

	ctx    context.Context // ends when the proxy closes: watches stop
	cancel context.CancelFunc
	work   sync.WaitGroup // forwarding goroutines, watches and the TLS watcher

	answerLinger time.Duration // see defaultAnswerLinger; set before Start

	reloading sync.Mutex           // one reload at a time (reload.go)
	watcher   *security.TLSWatcher // reloads the TLS listeners when their files change; nil when not running

	mu        sync.Mutex
	stopped   bool
	listeners map[protocolmap.ListenerName]*portSet
}

// cluster is an upstream cluster the proxy serves. Its nodes and next are
// guarded by the proxy's mu.
type cluster struct {
	name       string // "" for the default cluster, else the virtual cluster's
	serverName string // a virtual cluster's bootstrap server name, in lower case
	bootstrap  []string
	up         *upstreamClient
	nodes      map[int32]*node
	next       int  // round robin over nodes for bootstrap sessions
	book       book // the addressBook of its sessions' responses
}

// virtual reports whether c is a virtual cluster, served by server name.
func (c *cluster) virtual() bool { return c.serverName != "" }

// brokerPrefix begins the name of a virtual cluster's broker:
// broker-<id>.<server name>.
const brokerPrefix = "broker-"

// brokerName is the name a virtual cluster's node id is advertised as.
func (c *cluster) brokerName(id int32) string {
	return brokerPrefix + strconv.Itoa(int(id)) + "." + c.serverName
}

// node is an upstream broker.
type node struct {
	c        *cluster
	id       int32
	addr     string // host:port, as upstream advertises it
	down     bool   // its watch cannot reach it
	sessions map[*session]struct{}
}

// errNodeDown: the client's broker is known to be unreachable.
var errNodeDown = errors.New("the upstream broker is unavailable")

// upstreamCloseReason is why the proxy closes a client connection whose
// upstream broker went away.
const upstreamCloseReason connregistry.CloseReason = "upstream-broker-unavailable"

// session is one client connection of a data listener.
type session struct {
	p      *proxy
	id     string // the socket server's connection id
	l      protocolmap.ListenerName
	target int32 // the node its port or server name stands for, or bootstrapTarget

	mu         sync.Mutex
	c          *cluster // the cluster it is for, once its first request has said
	node       *node    // the node it is routed to, once it is
	up         *upConn  // nil until the first forwarded request, and after a failure
	inFlight   int      // requests forwarded and not yet answered
	answered   time.Time
	doomed     bool // its broker went away, or a request failed: it closes, at the latest at its next request
	brokerDown bool // its broker went away (closeIdle): it closes for upstreamCloseReason
	watched    bool // its end is hooked to the connection's context
	ended      bool
	held       []*socketserver.Request // refused, answered once the connection has closed (refuse)
	// The requests handed to its writer (writer.go), oldest first; whether
	// the writer has requests in hand (writing), whether its goroutine runs
	// (writer), and whether that goroutine waits for the next request
	// (writerIdle), which wake wakes it from.
	queue      []outgoing
	writing    bool
	writer     bool
	writerIdle bool
	wake       chan struct{}
}

type sessionKey struct{}

// newProxy builds the proxy from a resolved configuration: it reads the
// proxy's settings, asks the upstream cluster for its brokers and the API
// versions they support, and builds the socket server, which logs to log
// (with the request log when log logs at debug level) and traces and
// measures with tel (nil: not), and writes its audit trail to audit (nil:
// none). Nothing is bound.
func newProxy(ctx context.Context, cfg *proxyConfig, log *slog.Logger, tel *otelenv.Telemetry, dial func(ctx context.Context, network, addr string) (net.Conn, error),
	audit *auditlog.Writer) (*proxy, error) {
	set, err := readSettings(cfg)
	if err != nil {
		return nil, err
	}
	if cp := cfg.ControlPlaneListener; cp != "" && cp != set.adminListener {
		return nil, &config.Error{Key: config.KeyControlPlaneListenerName, Value: string(cp), Err: listener.ErrInvalidValue,
			Rule: "the proxy serves a control plane only as its admin listener (" + keyAdminListener + ")"}
	}
	if dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &proxy{
		cfg: cfg, set: set, log: log, ctx: pctx, cancel: cancel,
		listeners: map[protocolmap.ListenerName]*portSet{}, answerLinger: defaultAnswerLinger,
	}
	newCluster := func(name, serverName string, bootstrap []string, sec clientprops.Security) *cluster {
		c := &cluster{name: name, serverName: serverName, bootstrap: bootstrap, nodes: map[int32]*node{},
			up: &upstreamClient{sec: sec, dial: dial, dialTimeout: set.setupTimeout, clientID: "kafkanet-proxy"}}
		c.book = book{p, c}
		return c
	}
	if len(set.upstream) > 0 {
		p.def = newCluster("", "", set.upstream, set.upstreamSec)
		p.clusters = append(p.clusters, p.def)
	}
	for _, v := range set.virtual {
		p.clusters = append(p.clusters, newCluster(v.name, v.serverName, v.upstream, v.sec))
	}
	// The data listeners serve what every cluster supports: the socket
	// server answers ApiVersions before a client's cluster is known.
	var versions map[int16]versionRange
	for i, c := range p.clusters {
		theirs, err := p.discover(ctx, c)
		if err != nil {
			cancel()
			if c.virtual() {
				return nil, fmt.Errorf("virtual cluster %s: %w", c.name, err)
			}
			return nil, err
		}
		if i == 0 {
			versions = theirs
		} else {
			versions = intersect(versions, theirs)
		}
	}
	p.apis = forwardedAPIs(versions, set, socketserver.HandlerFunc(p.forward))

	scfg, err := config.Server(cfg.Properties())
	if err != nil {
		cancel()
		return nil, err
	}
	lists, warnings, err := config.JAASUsers(cfg.Props, cfg.Set)
	if err != nil {
		cancel()
		return nil, err
	}
	for _, w := range warnings {
		log.Warn(w.String())
	}
	users, err := security.NewJAASUsers(lists)
	if err != nil {
		cancel()
		return nil, err
	}
	scfg.APIs = p.apis
	// Every API is answered in place (API.Inline): the data plane's one
	// worker only closes what no listener should have let through, so
	// num.io.threads (read and checked by config.Server) sets nothing here.
	scfg.IOThreads = 1
	osSocketBuffers(cfg.Properties(), &scfg)
	stores := users.Stores()
	for name, l := range scfg.PerListener {
		l.Credentials = stores[name]
		// OAUTHBEARER, as Kafka configures it from a client listener's keys.
		if l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security); err != nil {
			cancel()
			return nil, err
		}
	}
	if set.adminListener != "" {
		scfg.PerListener[set.adminListener].APIs = p.adminAPIs()
	}
	scfg.Listen = p.listen
	scfg.ConnContext = p.connContext
	scfg.Logger = log
	otel, err := tel.Instrument()
	if err != nil {
		cancel()
		return nil, err
	}
	scfg.Hooks = append(scfg.Hooks, otel.Hooks()...)
	scfg.Hooks = append(scfg.Hooks, loglevel.RequestLog(log)...)
	if audit != nil {
		scfg.Hooks = append(scfg.Hooks, audit.Hook(set.nodeID))
	}
	if p.srv, err = socketserver.New(scfg); err != nil {
		cancel()
		return nil, err
	}
	if err := otel.ObserveStats(p.srv); err != nil {
		p.srv.Close()
		cancel()
		return nil, err
	}
	return p, nil
}

// discover asks upstream cluster cl for its brokers, through the first
// bootstrap server that answers, and each reachable broker for its API
// versions; it returns their intersection.
func (p *proxy) discover(ctx context.Context, cl *cluster) (map[int16]versionRange, error) {
	var errs []error
	for _, addr := range cl.bootstrap {
		c, err := cl.up.connect(ctx, addr)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		versions, err := apiVersions(c)
		var meta *kmsg.MetadataResponse
		if err == nil {
			meta, err = metadata(c, versions)
		}
		c.close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		for _, b := range meta.Brokers {
			p.learn(cl, b.NodeID, b.Host, b.Port)
		}
		for _, b := range meta.Brokers {
			baddr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
			bc, err := cl.up.connect(ctx, baddr)
			if err != nil {
				p.log.Warn("an upstream broker does not answer; its API versions are not taken into account", "node", b.NodeID, "addr", baddr, "err", err)
				continue
			}
			theirs, err := apiVersions(bc)
			bc.close()
			if err != nil {
				p.log.Warn("an upstream broker's API versions are unknown", "node", b.NodeID, "addr", baddr, "err", err)
				continue
			}
			versions = intersect(versions, theirs)
		}
		p.log.Info("upstream cluster", "cluster", cl.name, "server_name", cl.serverName, "bootstrap", addr,
			"brokers", len(meta.Brokers), "apis", len(versions))
		return versions, nil
	}
	return nil, fmt.Errorf("no upstream bootstrap server answered: %w", errors.Join(errs...))
}

// listen is the socket server's Config.Listen: each data listener is a
// portSet; other listeners (the admin listener) bind as usual.
func (p *proxy) listen(ctx context.Context, l listener.Listener) (net.Listener, error) {
	plan, ok := p.set.ports[l.Name]
	if !ok {
		return socketserver.ListenTCP(ctx, l)
	}
	ps, err := newPortSet(ctx, l, plan, p.log)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.listeners[l.Name] = ps
	p.mu.Unlock()
	return ps, nil
}

// connContext is the socket server's Config.ConnContext: a connection of
// a data listener gets a session, routed by the port it arrived on until
// its first request says which server name it asked for (see bind).
func (p *proxy) connContext(ctx context.Context, nc net.Conn, info connregistry.Info) context.Context {
	p.mu.Lock()
	ps := p.listeners[info.Listener]
	p.mu.Unlock()
	if ps == nil {
		return ctx
	}
	s := &session{p: p, id: info.ID, l: info.Listener, target: ps.route(nc.LocalAddr())}
	return context.WithValue(ctx, sessionKey{}, s)
}

// Start binds the listeners, opens the port of every upstream broker known
// and starts watching the brokers.
func (p *proxy) Start(ctx context.Context) error {
	if err := p.srv.Start(ctx); err != nil {
		return err
	}
	// The hosts clients are given: each listener's advertised host (the
	// machine's name for a wildcard), as a broker advertises it, and its
	// port, which a virtual cluster's brokers share.
	for _, ep := range p.srv.Broker(p.set.nodeID, "").EndPoints {
		if ps := p.listeners[ep.Name]; ps != nil {
			ps.setAdvertised(ep.Host, ep.Port)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.clusters {
		for _, n := range c.nodes {
			if c == p.def {
				for _, ps := range p.listeners {
					ps.open(n.id)
				}
			}
			p.startWatch(n)
		}
	}
	return nil
}

// Serve runs the handler loops until the server stops. Every API the proxy
// serves is answered in place (API.Inline), so the loops only close what
// no listener should have let through.
func (p *proxy) Serve(ctx context.Context) error {
	refuse := socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.CloseConnection() })
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { errs[0] = p.srv.Serve(ctx, protocolmap.DataPlane, refuse) })
	if p.cfg.ControlPlaneListener != "" {
		wg.Go(func() { errs[1] = p.srv.Serve(ctx, protocolmap.ControlPlane, refuse) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Shutdown drains as a broker does: no new connections, each request in
// flight is forwarded and answered, then every connection closes; then
// the watches stop. If ctx ends first, everything closes at once.
func (p *proxy) Shutdown(ctx context.Context) error {
	err := p.srv.Shutdown(ctx)
	p.stop()
	return err
}

// Close stops the proxy at once.
func (p *proxy) Close() {
	p.srv.Close()
	p.stop()
}

func (p *proxy) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
	p.work.Wait()
}

// Addr returns the bound address of a listener.
func (p *proxy) Addr(name protocolmap.ListenerName) net.Addr { return p.srv.Addr(name) }

// conn returns the session's upstream connection, dialing it on first use
// in the cluster serverName says (see bind).
func (s *session) conn(ctx context.Context, serverName string) (*upConn, error) {
	s.mu.Lock()
	up := s.up
	s.mu.Unlock()
	if up != nil {
		return up, nil
	}
	c, err := s.bind(serverName)
	if err != nil {
		return nil, err
	}
	n, addr, err := s.p.route(c, s.target)
	if err != nil {
		return nil, err
	}
	up, err = c.up.connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		up.close()
		return nil, net.ErrClosed
	}
	s.up = up
	if n != nil && s.node == nil {
		s.p.mu.Lock()
		s.node = n
		n.sessions[s] = struct{}{}
		s.p.mu.Unlock()
	}
	return up, nil
}

// drop forgets a failed upstream connection (up, or the current one when
// up is nil) and ends the request in flight.
func (s *session) drop(up *upConn) {
	s.mu.Lock()
	if up == nil {
		up = s.up
	}
	if up != nil && s.up == up {
		s.up = nil
	}
	s.inFlight = 0
	s.doomed = true // the requests are answered by closing the connection
	s.mu.Unlock()
	if up != nil {
		up.close()
	}
}

// end runs when the client connection closes: the upstream connection
// closes too (a forward in flight sees it fail and stops), and the
// requests refuse held are answered.
func (s *session) end() {
	s.mu.Lock()
	s.ended = true
	up, n, held := s.up, s.node, s.held
	s.up, s.node, s.held = nil, nil, nil
	s.wakeWriterLocked() // a waiting writer ends
	s.mu.Unlock()
	for _, r := range held {
		_ = r.CloseConnection() // closed already, for its reason
	}
	if up != nil {
		up.close()
	}
	if n != nil {
		s.p.mu.Lock()
		delete(n.sessions, s)
		s.p.mu.Unlock()
	}
}

// errNoCluster: a client asked for a server name no virtual cluster has,
// or for none, and there is no default cluster.
var errNoCluster = errors.New("no upstream cluster is served under the server name")

// bind decides, at the session's first forwarded request, which cluster
// it is for and returns it: the virtual cluster whose server name the
// client asked for (its bootstrap), or whose broker-<id>.<server name> it
// asked for (that node); else the default cluster, with the node of the
// port the connection arrived on.
func (s *session) bind(serverName string) (*cluster, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		return s.c, nil
	}
	c, target, ok := s.p.clusterFor(serverName)
	if !ok {
		if s.p.def == nil {
			return nil, fmt.Errorf("%w %q", errNoCluster, serverName)
		}
		c, target = s.p.def, s.target
	}
	s.c, s.target = c, target
	return c, nil
}

// cluster returns the cluster the session is bound to.
func (s *session) cluster() *cluster {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

// clusterFor returns the virtual cluster a server name is for, and the
// node it names (bootstrapTarget for the cluster's own server name); false
// when it names none.
func (p *proxy) clusterFor(serverName string) (*cluster, int32, bool) {
	name := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if name == "" {
		return nil, 0, false
	}
	for _, c := range p.clusters {
		if !c.virtual() {
			continue
		}
		if name == c.serverName {
			return c, bootstrapTarget, true
		}
		label, ok := strings.CutSuffix(name, "."+c.serverName)
		if !ok {
			continue
		}
		digits, ok := strings.CutPrefix(label, brokerPrefix)
		id, err := strconv.ParseInt(digits, 10, 32)
		if !ok || err != nil || id < 0 || strconv.FormatInt(id, 10) != digits {
			return nil, 0, false
		}
		return c, int32(id), true
	}
	return nil, 0, false
}

// route returns the node of cluster c a session for target dials, and its
// address: the node itself, or for the bootstrap the next broker known to
// be up (the bootstrap servers while none is).
func (p *proxy) route(c *cluster, target int32) (*node, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if target != bootstrapTarget {
		n := c.nodes[target]
		if n == nil {
			return nil, "", fmt.Errorf("upstream node %d is unknown", target)
		}
		if n.down {
			return nil, "", fmt.Errorf("%w: node %d (%s)", errNodeDown, n.id, n.addr)
		}
		return n, n.addr, nil
	}
	ids := make([]int32, 0, len(c.nodes))
	for id, n := range c.nodes {
		if !n.down {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		addr := c.bootstrap[c.next%len(c.bootstrap)]
		c.next++
		return nil, addr, nil
	}
	slices.Sort(ids)
	n := c.nodes[ids[c.next%len(ids)]]
	c.next++
	return n, n.addr, nil
}

// learn notes a broker of upstream cluster c: a new one gets a watch (and
// ports on the data listeners, for the default cluster, as endpoint asks
// for them).
func (p *proxy) learn(c *cluster, id int32, host string, port int32) {
	if id < 0 || host == "" || port <= 0 {
		return
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if n, ok := c.nodes[id]; ok {
		if n.addr != addr {
			p.log.Info("an upstream broker moved", "cluster", c.name, "node", id, "from", n.addr, "to", addr)
			n.addr = addr
		}
		return
	}
	n := &node{c: c, id: id, addr: addr, sessions: map[*session]struct{}{}}
	c.nodes[id] = n
	if p.srv == nil || p.stopped { // discovering: Start opens the ports and watches
		return
	}
	p.log.Info("new upstream broker", "cluster", c.name, "node", id, "addr", addr)
	p.startWatch(n)
}

// endpoint returns the proxy's address of node id of cluster c on
// listener l: for the default cluster, the listener's host and the node's
// port; for a virtual cluster, which a TLS listener serves,
// broker-<id>.<server name> and the listener's port.
func (p *proxy) endpoint(c *cluster, l protocolmap.ListenerName, id int32) (string, int32, bool) {
	p.mu.Lock()
	ps := p.listeners[l]
	_, known := c.nodes[id]
	p.mu.Unlock()
	if ps == nil || !known {
		return "", 0, false
	}
	if !c.virtual() {
		return ps.endpoint(id)
	}
	if !ps.tls {
		return "", 0, false
	}
	return c.brokerName(id), ps.advertisedPort(), true
}

// book is the addressBook of the responses of one cluster's sessions.
type book struct {
	p *proxy
	c *cluster
}

func (b book) learn(id int32, host string, port int32) { b.p.learn(b.c, id, host, port) }

func (b book) endpoint(l protocolmap.ListenerName, id int32) (string, int32, bool) {
	return b.p.endpoint(b.c, l, id)
}

// startWatch starts n's watch; p.mu is held.
func (p *proxy) startWatch(n *node) {
	p.work.Add(1)
	go func() {
		defer p.work.Done()
		p.watch(n)
	}()
}

// watch keeps a connection to n until the proxy stops. It refreshes the
// cluster's metadata every upstream.metadata.max.age.ms and otherwise
// waits in a read, so that it sees at once when n closes the connection.
// When n cannot be reached, the sessions routed to it are closed; the
// watch then tries again with growing pauses until n is back.
func (p *proxy) watch(n *node) {
	backoff := 100 * time.Millisecond
	for p.ctx.Err() == nil {
		p.mu.Lock()
		addr := n.addr
		p.mu.Unlock()
		c, err := n.c.up.connect(p.ctx, addr)
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			p.setDown(n, err)
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 5*time.Second)
			case <-p.ctx.Done():
				return
			}
			continue
		}
		backoff = 100 * time.Millisecond
		p.setUp(n)
		err = p.follow(n.c, c)
		c.close()
		if p.ctx.Err() == nil {
			p.log.Info("lost the watch connection to an upstream broker; reconnecting", "cluster", n.c.name, "node", n.id, "addr", addr, "err", err)
		}
	}
}

// follow refreshes cluster cl's metadata on c and waits for the next
// refresh, until c fails or the proxy stops.
func (p *proxy) follow(cl *cluster, c *upConn) error {
	stop := context.AfterFunc(p.ctx, c.close)
	defer stop()
	versions, err := apiVersions(c)
	if err != nil {
		return err
	}
	var one [1]byte
	for {
		meta, err := metadata(c, versions)
		if err != nil {
			return err
		}
		for _, b := range meta.Brokers {
			p.learn(cl, b.NodeID, b.Host, b.Port)
		}
		_ = c.nc.SetReadDeadline(time.Now().Add(p.set.metadataMaxAge))
		_, err = c.br.Read(one[:])
		if err == nil {
			return fmt.Errorf("%w: bytes nobody asked for", errUpstreamResponse)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
			return err
		}
		_ = c.nc.SetReadDeadline(time.Time{})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// setUp marks n reachable.
func (p *proxy) setUp(n *node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n.down {
		p.log.Info("upstream broker reachable again", "cluster", n.c.name, "node", n.id, "addr", n.addr)
	}
	n.down = false
}

// setDown marks n unreachable and closes the client connections routed to
// it: at once those with nothing in flight, and the others when their
// request fails (or at their next request, if it was answered).
func (p *proxy) setDown(n *node, err error) {
	p.mu.Lock()
	if n.down {
		p.mu.Unlock()
		return
	}
	n.down = true
	sessions := make([]*session, 0, len(n.sessions))
	for s := range n.sessions {
		sessions = append(sessions, s)
	}
	p.mu.Unlock()
	p.log.Warn("upstream broker unavailable; closing its client connections", "cluster", n.c.name, "node", n.id, "addr", n.addr,
		"connections", len(sessions), "err", err)
	if len(sessions) > 0 {
		p.auditUpstreamDown(n.c.name, n.id, n.addr, len(sessions))
	}
	p.closeIdle(sessions)
	// A response handed to the socket server a moment ago may still be on
	// its way to the client: those sessions are closed a little later.
	if len(sessions) > 0 {
		p.closeIdleAfterGrace(sessions)
	}
}

// closeIdleAfterGrace closes the idle ones of sessions (closeIdle) once
// a response handed to the socket server now has had answerGrace to be
// written, unless the proxy stops first (it closes every connection then).
// Its caller must not hold p.mu.
func (p *proxy) closeIdleAfterGrace(sessions []*session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped { // stop waits for work already: add none
		return
	}
	p.work.Add(1)
	go func() {
		defer p.work.Done()
		select {
		case <-time.After(answerGrace * 2):
			p.closeIdle(sessions)
		case <-p.ctx.Done():
		}
	}()
}

// answerGrace is how long after handing a response to the socket server a
// session is left to write it before the proxy closes the connection.
const answerGrace = 200 * time.Millisecond

// closeIdle dooms sessions, whose broker went away, and closes through the
// server's registry, for upstreamCloseReason, the connections of those
// with no request in flight and no response just handed over; the others
// close for the same reason when their request fails (failed) or once it
// is answered (done), or at their next request (refuse).
func (p *proxy) closeIdle(sessions []*session) {
	var ids []string
	for _, s := range sessions {
		s.mu.Lock()
		s.doomed, s.brokerDown = true, true
		if !s.ended && s.inFlight == 0 && time.Since(s.answered) > answerGrace {
			ids = append(ids, s.id)
		}
		s.mu.Unlock()
	}
	if len(ids) > 0 {
		p.srv.Registry().Close(connregistry.Filter{ConnectionIDs: ids}, upstreamCloseReason)
	}
}

// apiVersions asks c's broker for its API versions.
func apiVersions(c *upConn) (map[int16]versionRange, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kafkanet-proxy", "1"
	raw, err := c.roundTrip(req, c.c.clientID, true)
	if err != nil {
		return nil, err
	}
	resp := raw.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("ApiVersions: %w", err)
	}
	out := make(map[int16]versionRange, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = versionRange{k.MinVersion, k.MaxVersion}
	}
	return out, nil
}

// metadata asks c's broker for the cluster's brokers (no topics), at the
// newest version both sides know.
func metadata(c *upConn, versions map[int16]versionRange) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	v, ok := versions[int16(kmsg.Metadata)]
	if !ok || v.min > 1 {
		return nil, errors.New("the upstream broker serves no Metadata version from 1 up")
	}
	req.Version = min(v.max, req.MaxVersion())
	req.Topics = []kmsg.MetadataRequestTopic{} // none: v1+ reads an empty list as no topics
	raw, err := c.roundTrip(req, c.c.clientID, true)
	if err != nil {
		return nil, err
	}
	return raw.(*kmsg.MetadataResponse), nil
}

// osSocketBuffers leaves the client connections' socket buffers to the
// operating system (SO_RCVBUF and SO_SNDBUF not set: Linux sizes them as
// the traffic needs) unless socket.receive.buffer.bytes or
// socket.send.buffer.bytes says otherwise. Kafka's defaults (100 KiB each)
// suit a broker's many connections; a proxy moves every byte twice, and
// with a 100 KiB window a producer's requests reach it in pieces, each
// read opening the window and sending the client's next segments on the
// proxy's time. HAProxy and kroxylicious leave the buffers to the system
// too.
func osSocketBuffers(props config.Properties, scfg *socketserver.Config) {
	if _, ok := props.Get("socket.receive.buffer.bytes"); !ok {
		scfg.ReceiveBufferBytes = -1
	}
	if _, ok := props.Get("socket.send.buffer.bytes"); !ok {
		scfg.SendBufferBytes = -1
	}
}
