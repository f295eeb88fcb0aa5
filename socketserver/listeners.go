package socketserver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// ErrListenerRemoving is the error of adding a listener whose name a
// listener being removed still has: its connections drain. Add it again
// once the removal has returned.
var ErrListenerRemoving = errors.New("socketserver: a listener of that name is still being removed")

// Listeners returns the server's listener configuration now:
// Config.Listeners as [Server.AddListener], [Server.RemoveListener] and
// [Server.SetListeners] have changed it since. A listener being removed is
// no longer in it. The Set is shared: do not modify it.
func (s *Server) Listeners() *listener.Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set
}

// AddListener adds listener l to the server, configured by lc as an entry
// of Config.PerListener configures a listener (nil: as a listener
// missing there, with Config.APIs, DefaultNumNetworkThreads processors and
// Config.Credentials), while the server runs, as Kafka adds a listener
// when its listeners are updated dynamically (KIP-226). Before Start it
// only joins the configuration, and Start binds it with the others.
//
// l must fit the server's listeners by Kafka's rules
// ([listener.Set.WithListener]): a name not in use, a port no other
// listener binds, a name that the listener.security.protocol.map gives l's
// protocol; a data-plane listener other brokers do not use. Its processors
// take the next ids (Kafka never reuses a processor id). Its SASL
// mechanisms that are a sasl.Service are started, within ctx, and closed
// when it is removed or the server stops; then it is bound (Config.Listen,
// within ctx) and serves. The connection quotas count it as any other:
// Config.ConnectionQuotas (or [Server.SetConnectionQuotas]) may hold its
// ListenerMaxConnections and ListenerMaxConnectionCreationRate entries
// before it is added, and max.connections counts its connections with
// every other listener's. Errors name the listener and wrap the rule's
// sentinel (listener.ErrDuplicateName, listener.ErrDuplicatePort,
// listener.ErrNoSecurityProtocol, listener.ErrInconsistent, in
// *config.Error values; [ErrListenerRemoving]), or say why it
// did not start or bind; the server is then as it was. After Shutdown or
// Close it returns [ErrServerClosed].
//
// Listener changes are made one at a time: AddListener waits for another
// change, but not for a removal's drain.
func (s *Server) AddListener(ctx context.Context, l listener.Listener, lc *ListenerConfig) error {
	s.change.Lock()
	defer s.change.Unlock()
	cur, err := s.current()
	if err != nil {
		return err
	}
	next, err := cur.WithListener(l)
	if err != nil {
		return fmt.Errorf("socketserver: %w", err)
	}
	_, err = s.changeListeners(ctx, next, listener.Changes{Added: []listener.Listener{l}},
		map[protocolmap.ListenerName]*ListenerConfig{l.Name: lc})
	return err
}

// RemoveListener removes the listener called name (compared without
// regard to case) while the server runs, as Kafka removes one when its
// listeners are updated dynamically (KIP-226), and drains its connections
// as [Server.Shutdown] drains the server's: it stops accepting (its
// socket closes at once, so that its port is free), each connection
// finishes the request it is serving, its response is written, and then
// it closes, listed as closed for connregistry.CloseListenerRemoved
// (ListClientConnections' recently closed connections). The other
// listeners and their connections are untouched. When every connection has
// closed, its processors stop, its SASL mechanisms that are a sasl.Service
// are closed, and RemoveListener returns: nothing of the listener is left
// running. If ctx ends first, RemoveListener returns ctx.Err() at once,
// and its connections are closed then, without waiting for them; the
// rest of the removal finishes meanwhile (Close waits for it). Before
// Start it only leaves the configuration.
//
// The inter-broker and control-plane listeners are not removed, as in
// Kafka (listener.ErrNotDynamic), nor an unknown one
// (listener.ErrUnknownListener); the errors wrap *config.Error
// values naming the listener and the rule. After Shutdown or Close it
// returns [ErrServerClosed]. Its name may be used again once the removal
// has finished ([ErrListenerRemoving] until then): when RemoveListener
// returns nil, or soon after it returns ctx.Err(). The drain does not hold
// up other listener changes, so a hook or handler may make them; but one
// that runs on the listener removed (its acceptor's hooks, its
// connections' hooks, an Inline handler of its requests) waits for
// itself, until ctx ends: call RemoveListener from a goroutine of your own
// there.
func (s *Server) RemoveListener(ctx context.Context, name protocolmap.ListenerName) error {
	s.change.Lock()
	cur, err := s.current()
	if err != nil {
		s.change.Unlock()
		return err
	}
	next, err := cur.WithoutListener(name)
	if err != nil {
		s.change.Unlock()
		return fmt.Errorf("socketserver: %w", err)
	}
	l, _ := cur.Listener(name)
	removed, err := s.changeListeners(ctx, next, listener.Changes{Removed: []listener.Listener{l}}, nil)
	s.change.Unlock()
	return errors.Join(err, s.drain(ctx, removed))
}

// SetListeners makes next the server's listener configuration, as Kafka
// applies a dynamic update of listeners, advertised.listeners and
// listener.security.protocol.map (KIP-226): for a host that re-reads its
// configuration (next from config.Server or
// config.Listeners). The changes are those of [listener.Set.Changes],
// which also says which changes need a restart (they are refused, and
// nothing changes): the listeners next lacks are removed and drain as
// [Server.RemoveListener] drains one, and those it adds are added as
// [Server.AddListener] adds one, configured by their entries in
// perListener (as Config.PerListener); the removed ones' sockets close
// first, so that an added listener may bind a removed one's port. Entries
// of perListener for listeners the server has already are ignored: a
// listener's settings do not change while it serves (its TLS stores and
// SASL users are reloaded by other means). From then on [Server.Broker]
// advertises next's endpoints, listeners kept included.
//
// ctx bounds the drain of the removed listeners and the start of the
// added ones. If an added listener fails to start or bind, SetListeners
// returns its error, naming it, with the listeners before it added and
// those after it not; [Server.Listeners] says what the server serves.
func (s *Server) SetListeners(ctx context.Context, next *listener.Set, perListener map[protocolmap.ListenerName]*ListenerConfig) error {
	s.change.Lock()
	cur, err := s.current()
	if err != nil {
		s.change.Unlock()
		return err
	}
	ch, err := cur.Changes(next)
	if err != nil {
		s.change.Unlock()
		return fmt.Errorf("socketserver: %w", err)
	}
	for name := range perListener {
		if !slices.ContainsFunc(next.All, func(l listener.Listener) bool { return l.Name == name }) {
			s.change.Unlock()
			return fmt.Errorf("socketserver: SetListeners' perListener names listener %s, which is not configured", name)
		}
	}
	removed, err := s.changeListeners(ctx, next, ch, perListener)
	s.change.Unlock()
	return errors.Join(err, s.drain(ctx, removed))
}

// current returns the listener configuration now, or ErrServerClosed once
// the server shuts down.
func (s *Server) current() (*listener.Set, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() || s.draining.Load() {
		return nil, ErrServerClosed
	}
	return s.set, nil
}

// newListenerState builds the runtime of listener l, configured by lc,
// its processors numbered from firstID.
func (s *Server) newListenerState(l listener.Listener, lc ListenerConfig, firstID int) (*listenerState, error) {
	if lc.NetworkThreads < 0 {
		return nil, fmt.Errorf("socketserver: listener %s: NetworkThreads (%d) must not be negative", l.Name, lc.NetworkThreads)
	}
	apis := s.cfg.APIs
	if lc.APIs != nil {
		apis = lc.APIs
	}
	table, err := newAPITable(apis)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", l.Name, err)
	}
	sec, err := newListenerSecurity(l, lc, s.cfg)
	if err != nil {
		return nil, err
	}
	proxy := lc.ProxyProtocol
	if err := proxy.validate(l.Name); err != nil {
		return nil, fmt.Errorf("socketserver: listener %s: %w", l.Name, err)
	}
	proxy.TrustedNetworks = slices.Clone(proxy.TrustedNetworks)
	age, jitter, err := s.cfg.maxAge(lc)
	if err != nil {
		return nil, fmt.Errorf("socketserver: listener %s: %w", l.Name, err)
	}
	ls := &listenerState{cfg: l, apis: table, sec: sec,
		queue: s.queues[l.Plane], inline: s.inline[l.Plane], turns: s.turns[l.Plane], memory: s.memory[l.Plane], proxy: proxy,
		maxAge: age, maxAgeJitter: jitter,
		drainStarted: make(chan struct{}), quit: make(chan struct{}), acceptDone: make(chan struct{})}
	for i := range networkThreads(l, lc) {
		ls.processors = append(ls.processors, newProcessor(s, ls, firstID+i))
	}
	return ls, nil
}

// changeListeners makes next, which ch tells from the configuration now,
// the server's listener configuration: under s.change, which the caller
// holds. What may fail without changing anything comes first (the added
// listeners' runtimes, from per). Then the removed listeners leave: their
// sockets close and their connections begin to drain; the caller waits
// for them without s.change (drain), and changeListeners returns them.
// Then each added listener starts, binds and joins, in order.
func (s *Server) changeListeners(ctx context.Context, next *listener.Set, ch listener.Changes, per map[protocolmap.ListenerName]*ListenerConfig) (removed []*listenerState, err error) {
	s.mu.Lock()
	for _, l := range ch.Added {
		if _, ok := s.removing[l.Name]; ok {
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: listener %s", ErrListenerRemoving, l.Name)
		}
	}
	s.mu.Unlock()
	// sets[i] is the configuration once the first i added listeners have
	// joined: next without the others.
	sets := make([]*listener.Set, len(ch.Added)+1)
	sets[len(ch.Added)] = next
	for i := len(ch.Added) - 1; i >= 0; i-- {
		if sets[i], err = sets[i+1].WithoutListener(ch.Added[i].Name); err != nil {
			return nil, fmt.Errorf("socketserver: %w", err)
		}
	}
	added := make([]*listenerState, len(ch.Added))
	id := s.nextProcessorID
	for i, l := range ch.Added {
		var lc ListenerConfig
		if c := per[l.Name]; c != nil {
			lc = *c
		}
		if added[i], err = s.newListenerState(l, lc, id); err != nil {
			return nil, err
		}
		id += len(added[i].processors)
	}

	s.mu.Lock()
	if s.isClosed() || s.draining.Load() {
		s.mu.Unlock()
		return nil, ErrServerClosed
	}
	started := s.started
	if started && len(added) > 0 {
		// The joins' services and sockets are the server's from here:
		// Done waits for the joins, which close them if Close comes first,
		// and Close cuts their waits short (their context ends with it).
		s.workers.Add(1)
		defer s.workers.Done()
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-s.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	if len(ch.Removed) > 0 {
		keep := make([]*listenerState, 0, len(s.listeners))
		for _, ls := range s.listeners {
			if !slices.ContainsFunc(ch.Removed, func(l listener.Listener) bool { return l.Name == ls.cfg.Name }) {
				keep = append(keep, ls)
				continue
			}
			if !started {
				s.quotas.removeListener(ls.cfg.Name)
				continue
			}
			// As Shutdown, for this listener: the flag first, then the
			// wakes (drain).
			ls.draining.Store(true)
			close(ls.drainStarted)
			ls.ln.Close()
			s.removing[ls.cfg.Name] = ls
			s.workers.Add(1) // the drain's: the server's Done waits for it
			removed = append(removed, ls)
			s.log.Info("removing listener: its connections drain", "listener", ls.cfg.Name)
		}
		s.listeners = keep
	}
	if len(ch.Removed) > 0 || len(ch.Added) == 0 {
		s.set = sets[0] // else the first listener to join sets it: a failure leaves the server as it was
	}
	s.mu.Unlock()

	for i, ls := range added {
		if err := s.join(ctx, ls, sets[i+1], started); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// join starts and binds ls, once the server has started, and adds it to
// the server, whose configuration becomes set. On failure the server is as
// it was.
func (s *Server) join(ctx context.Context, ls *listenerState, set *listener.Set, started bool) error {
	if started {
		lss := []*listenerState{ls}
		if err := s.startServices(ctx, lss); err != nil {
			return err
		}
		if err := s.listen(ctx, lss); err != nil {
			ls.closeServices(s.log)
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() || s.draining.Load() {
		if started {
			ls.ln.Close()
			ls.closeServices(s.log)
		}
		return ErrServerClosed
	}
	s.listeners = append(slices.Clip(s.listeners), ls) // a new array: copies taken before stay as they were
	s.set = set
	s.nextProcessorID = ls.processors[len(ls.processors)-1].id + 1
	s.quotas.addListener()
	if started {
		s.serveListener(ls)
		s.log.Info("listener added", "listener", ls.cfg.Name, "address", ls.ln.Addr().String(),
			"security_protocol", ls.cfg.SecurityProtocol, "processors", len(ls.processors))
	}
	return nil
}

// drain ends listeners removed from the running server (changeListeners
// closed their sockets and set their draining flags), as Shutdown ends the
// server: each connection finishes its request in flight and closes;
// connections waiting for a request close now. When they have all ended
// their processors stop, their services close and their names are free
// again (finishRemoval). If ctx ends first, drain closes their connections
// at once and returns ctx's error without waiting for the rest, which
// finishes on its own goroutine (counted in the server's workers, so Close
// waits for it): the caller may be one of the goroutines it waits for, a
// hook's or an Inline handler's on a removed listener.
func (s *Server) drain(ctx context.Context, lss []*listenerState) error {
	if len(lss) == 0 {
		return nil
	}
	closeNow := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		s.finishRemoval(lss, closeNow)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		close(closeNow)
		return fmt.Errorf("socketserver: removing listeners: their connections were closed before they drained: %w", ctx.Err())
	}
}

// finishRemoval waits for the acceptors of the removed listeners lss to
// return, drains their connections and waits for them to end, closing
// them at once when closeNow closes; then it stops their processors,
// closes their services and frees their names.
func (s *Server) finishRemoval(lss []*listenerState, closeNow <-chan struct{}) {
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		for _, ls := range lss {
			for _, p := range ls.processors {
				p.closeAll() // a connection registered after it sees the draining flag and closes
			}
		}
	}
	for _, ls := range lss {
		select {
		case <-ls.acceptDone: // no connection reaches its processors any more
		case <-closeNow:
			closeAll()
			<-ls.acceptDone
		}
		for _, p := range ls.processors {
			p.drain()
		}
	}
	idle := make(chan struct{})
	go func() {
		for _, ls := range lss {
			ls.conns.Wait()
		}
		close(idle)
	}()
	select {
	case <-idle:
	case <-closeNow:
		closeAll()
		<-idle
	}
	for _, ls := range lss {
		close(ls.quit)
		ls.workers.Wait()
		ls.closeServices(s.log)
		s.quotas.removeListener(ls.cfg.Name)
		s.mu.Lock()
		delete(s.removing, ls.cfg.Name)
		s.mu.Unlock()
		s.log.Info("listener removed", "listener", ls.cfg.Name)
		s.workers.Done()
	}
}
