package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// portSet is the net.Listener the proxy serves one data listener on: the
// listener's own (bootstrap) port and a port per upstream broker, opened as
// brokers become known, all accepted into one stream. The socket server
// sees one listener, with its security, quotas and connection ids; the
// port a connection arrived on says which upstream broker it is for (see
// route).
type portSet struct {
	name     protocolmap.ListenerName
	tls      bool // the listener speaks TLS: it serves the virtual clusters
	plan     portPlan
	bindHost string
	log      *slog.Logger
	lc       net.ListenConfig

	bootstrap net.Listener
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	loops     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	nodes  map[int32]net.Listener // open broker ports
	byPort map[int]int32          // local port -> node id
	failed map[int32]error        // nodes whose port could not be opened
	// advertised and advertisedPortNum are the host and port clients are
	// given for this listener; set once the server has started (see
	// setAdvertised).
	advertised        string
	advertisedPortNum int
}

// bootstrapTarget is the target of a connection to the bootstrap port: any
// upstream broker.
const bootstrapTarget int32 = -1

// newPortSet opens l's bootstrap port.
func newPortSet(ctx context.Context, l listener.Listener, plan portPlan, log *slog.Logger) (*portSet, error) {
	ps := &portSet{
		name: l.Name, tls: l.SecurityProtocol.UsesTLS(), plan: plan, bindHost: l.Bind.Host, log: log,
		conns: make(chan net.Conn), done: make(chan struct{}),
		nodes: map[int32]net.Listener{}, byPort: map[int]int32{}, failed: map[int32]error{},
	}
	ln, err := ps.lc.Listen(ctx, "tcp", l.Bind.Address())
	if err != nil {
		return nil, err
	}
	ps.bootstrap = ln
	ps.loops.Add(1)
	go ps.acceptLoop(ln, "bootstrap")
	return ps, nil
}

// Accept returns the next connection on any of the ports.
func (ps *portSet) Accept() (net.Conn, error) {
	select {
	case c := <-ps.conns:
		return c, nil
	case <-ps.done:
		return nil, net.ErrClosed
	}
}

// Addr is the bootstrap port's address.
func (ps *portSet) Addr() net.Addr { return ps.bootstrap.Addr() }

// Close closes every port and waits for their accept loops.
func (ps *portSet) Close() error {
	ps.closeOnce.Do(func() {
		ps.mu.Lock()
		ps.closed = true
		close(ps.done)
		ps.bootstrap.Close()
		for _, ln := range ps.nodes {
			ln.Close()
		}
		ps.mu.Unlock()
		ps.loops.Wait()
	})
	return nil
}

// acceptLoop hands the connections of one port to Accept until the port
// closes; other accept errors are retried after a growing pause.
func (ps *portSet) acceptLoop(ln net.Listener, what string) {
	defer ps.loops.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			ps.log.Warn("accept failed; retrying", "listener", ps.name, "port", what, "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, time.Second)
				continue
			case <-ps.done:
				return
			}
		}
		backoff = 5 * time.Millisecond
		select {
		case ps.conns <- c:
		case <-ps.done:
			c.Close()
			return
		}
	}
}

// open makes sure node id has its port on this listener and returns it;
// false when the node cannot be served here (no port in the plan, or the
// port could not be bound: logged once).
func (ps *portSet) open(id int32) (int, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ln, ok := ps.nodes[id]; ok {
		return ln.Addr().(*net.TCPAddr).Port, true
	}
	if ps.closed || ps.failed[id] != nil {
		return 0, false
	}
	port, ok := ps.plan.port(id)
	if !ok {
		ps.failed[id] = fmt.Errorf("node %d has no port: %s + %d is beyond 65535; give it one in %s", id, keyPortBase, id, keyPortMapping)
		ps.log.Error("cannot serve an upstream broker", "listener", ps.name, "node", id, "err", ps.failed[id])
		return 0, false
	}
	ln, err := ps.lc.Listen(context.Background(), "tcp", net.JoinHostPort(ps.bindHost, strconv.Itoa(port)))
	if err != nil {
		ps.failed[id] = err
		ps.log.Error("cannot open the port of an upstream broker", "listener", ps.name, "node", id, "port", port, "err", err)
		return 0, false
	}
	bound := ln.Addr().(*net.TCPAddr).Port
	ps.nodes[id], ps.byPort[bound] = ln, id
	ps.loops.Add(1)
	go ps.acceptLoop(ln, "node "+strconv.Itoa(int(id)))
	ps.log.Info("serving an upstream broker", "listener", ps.name, "node", id, "port", bound)
	return bound, true
}

// route returns the upstream node a connection accepted on local is for:
// bootstrapTarget for the bootstrap port.
func (ps *portSet) route(local net.Addr) int32 {
	a, ok := local.(*net.TCPAddr)
	if !ok {
		return bootstrapTarget
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if id, ok := ps.byPort[a.Port]; ok {
		return id
	}
	return bootstrapTarget
}

// setAdvertised sets the host and port clients are given for this
// listener.
func (ps *portSet) setAdvertised(host string, port int) {
	ps.mu.Lock()
	ps.advertised, ps.advertisedPortNum = host, port
	ps.mu.Unlock()
}

// advertisedPort is the listener's port as clients are given it: a
// virtual cluster's brokers are served on it.
func (ps *portSet) advertisedPort() int32 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return int32(ps.advertisedPortNum)
}

// endpoint returns the address clients are given for node id.
func (ps *portSet) endpoint(id int32) (string, int32, bool) {
	port, ok := ps.open(id)
	if !ok {
		return "", 0, false
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.advertised, int32(port), true
}
