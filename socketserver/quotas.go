package socketserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver/quota"
)

// Unlimited is the value of a connection limit or rate that does not limit
// (Kafka's Int.MaxValue).
const Unlimited = math.MaxInt32

// ConnectionQuotas are Kafka's connection quotas (its ConnectionQuotas
// class): how many connections, and how many new ones a second, the
// server accepts. The quotas of a client's requests are package
// socketserver/quota's. Start from [DefaultConnectionQuotas]: a zero limit
// is a real limit of zero.
type ConnectionQuotas struct {
	// MaxConnections is max.connections: the broker-wide connection count
	// at which acceptors wait for a connection to close.
	MaxConnections int
	// ListenerMaxConnections is listener.name.<l>.max.connections; a
	// listener missing here is limited by MaxConnections alone. It may
	// name a listener the server does not have yet: the limit applies to
	// a listener added later under that name (Server.AddListener), from
	// its first connection when set before it is added.
	ListenerMaxConnections map[protocolmap.ListenerName]int
	// MaxConnectionsPerIP is max.connections.per.ip, counted across all
	// listeners: a connection beyond it is closed at once.
	MaxConnectionsPerIP int
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides:
	// limits for single hosts, by IP address or host name. A name is
	// resolved when the quotas are applied (by Server.Start, and by
	// Server.SetConnectionQuotas), to one address, as Kafka's InetAddress.getByName
	// does with Java's default preference: the first IPv4 address the
	// resolver gives, or the first address if it gives no IPv4 one. The
	// limit applies to that address alone.
	MaxConnectionsPerIPOverrides map[string]int
	// MaxConnectionCreationRate is max.connection.creation.rate (KIP-612),
	// connections per second broker-wide: connections beyond it are
	// delayed, then accepted.
	MaxConnectionCreationRate int
	// ListenerMaxConnectionCreationRate is
	// listener.name.<l>.max.connection.creation.rate, by listener name as
	// ListenerMaxConnections.
	ListenerMaxConnectionCreationRate map[protocolmap.ListenerName]int
	// IPConnectionCreationRate limits each client address to this many new
	// connections per second: a connection beyond it is held for the
	// throttle delay, then closed (Kafka sets it as the default ip entity's
	// connection_creation_rate quota; here it is
	// kafkanet.ip.connection.creation.rate).
	IPConnectionCreationRate int
	// IPConnectionCreationRateOverrides gives single client addresses their
	// own creation rate instead of IPConnectionCreationRate (Kafka's
	// connection_creation_rate quota of a named ip entity; here
	// kafkanet.ip.connection.creation.rate.overrides). Unlimited exempts an
	// address, zero admits none of its connections. An IPv4-mapped address
	// stands for its IPv4 address.
	IPConnectionCreationRateOverrides map[netip.Addr]int
	// MaxConnectionsPerPrincipal limits the connections of each principal
	// across all listeners (kafkanet.max.connections.per.principal and
	// kafkanet.max.connections.per.principal.overrides, keys of kafkanet's
	// own): see [PrincipalLimits]. Kafka limits connections per address
	// only; behind a NAT or a proxy every tenant shares one.
	MaxConnectionsPerPrincipal PrincipalLimits
	// ListenerMaxConnectionsPerPrincipal limits the connections of each
	// principal on single listeners
	// (listener.name.<l>.kafkanet.max.connections.per.principal and
	// listener.name.<l>.kafkanet.max.connections.per.principal.overrides),
	// counted on that listener alone, in addition to
	// MaxConnectionsPerPrincipal, as listener.name.<l>.max.connections
	// applies in addition to max.connections. A listener missing here has
	// no limit of its own; one named here may be added later.
	ListenerMaxConnectionsPerPrincipal map[protocolmap.ListenerName]PrincipalLimits
	// WindowNum and WindowSize are quota.window.num and
	// quota.window.size.seconds: rates are measured over WindowNum samples
	// of WindowSize, and no delay is longer than WindowSize.
	WindowNum  int
	WindowSize time.Duration
}

// PrincipalLimits limit how many connections each principal may have
// open. A connection is counted under its principal once the principal is
// known (after its TLS handshake and SASL exchange; at once on a listener
// without authentication), until it closes. One that would take its
// principal over a limit is closed then, before any request is read, as
// Kafka closes a connection over max.connections.per.ip: it is listed as
// closed for connregistry.ClosePrincipalLimit, and the client retries
// after its reconnect backoff. Its principal's other connections, and
// other principals, are not affected. [Server.SetConnectionQuotas]
// changes the limits for new connections; connections already open stay.
type PrincipalLimits struct {
	// Max is the limit of every principal but User:ANONYMOUS, which the
	// per-address limits already cover: unauthenticated connections are
	// limited only by an override naming User:ANONYMOUS. Unlimited limits
	// nothing (DefaultConnectionQuotas); zero admits only the principals
	// Overrides names, and is valid only with Overrides.
	Max int
	// Overrides give single principals their own limit instead of Max:
	// zero admits none of their connections, Unlimited exempts them.
	Overrides map[connregistry.Principal]int
}

// limit is principal p's limit.
func (pl PrincipalLimits) limit(p connregistry.Principal) int {
	if n, ok := pl.Overrides[p]; ok {
		return n
	}
	if p == connregistry.Anonymous() {
		return Unlimited
	}
	return pl.Max
}

// validate checks pl; what names where pl was set, for the error.
func (pl PrincipalLimits) validate(what string) error {
	if pl.Max < 0 {
		return fmt.Errorf("%w: %s is negative", ErrInvalidConnectionQuotas, what)
	}
	if pl.Max == 0 && len(pl.Overrides) == 0 {
		return fmt.Errorf("%w: %s can be set to zero only if its overrides are set", ErrInvalidConnectionQuotas, what)
	}
	for p, n := range pl.Overrides {
		if n < 0 {
			return fmt.Errorf("%w: the overrides of %s give %s a negative limit", ErrInvalidConnectionQuotas, what, p)
		}
	}
	return nil
}

// DefaultConnectionQuotas returns Kafka's defaults: nothing limited, rates
// measured over quota.DefaultSamples (11) windows of quota.DefaultWindow
// (one second).
func DefaultConnectionQuotas() ConnectionQuotas {
	return ConnectionQuotas{
		MaxConnections:             Unlimited,
		MaxConnectionsPerIP:        Unlimited,
		MaxConnectionCreationRate:  Unlimited,
		IPConnectionCreationRate:   Unlimited,
		MaxConnectionsPerPrincipal: PrincipalLimits{Max: Unlimited},
		WindowNum:                  quota.DefaultSamples,
		WindowSize:                 quota.DefaultWindow,
	}
}

// Errors from the connection quotas.
var (
	// ErrTooManyConnections: the client address already has the most
	// connections allowed; the new one was closed.
	ErrTooManyConnections = errors.New("socketserver: too many connections from address")
	// ErrConnectionThrottled: the client address opens connections faster
	// than its creation rate; the new one was held, then closed.
	ErrConnectionThrottled = errors.New("socketserver: connection creation rate exceeded for address")
	// ErrTooManyPrincipalConnections: the connection's principal already
	// has the most connections allowed (PrincipalLimits); the new one was
	// closed. No call returns it: it is the err attribute of the line the
	// server logs, and its text the Reason of the AuditConnectionRefused
	// event; the connection's close reason ([HookConnClosed]) is
	// connregistry.ClosePrincipalLimit. A principal is known only after
	// authentication, so [HookConnRejected], which per-address quotas
	// call before, is not called.
	ErrTooManyPrincipalConnections = errors.New("socketserver: too many connections of principal")
	// ErrInvalidConnectionQuotas: a quota is negative or contradicts another.
	ErrInvalidConnectionQuotas = errors.New("socketserver: invalid connection quotas")
)

// validate checks q the way Kafka validates the quota keys.
func (q ConnectionQuotas) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConnectionQuotas, fmt.Sprintf(format, args...))
	}
	if q.MaxConnections < 0 || q.MaxConnectionsPerIP < 0 || q.MaxConnectionCreationRate < 0 || q.IPConnectionCreationRate < 0 {
		return bad("limits must not be negative")
	}
	for ip, n := range q.IPConnectionCreationRateOverrides {
		if !ip.IsValid() {
			return bad("kafkanet.ip.connection.creation.rate.overrides holds an invalid address")
		}
		if n < 0 {
			return bad("kafkanet.ip.connection.creation.rate.overrides gives %s a negative rate", ip)
		}
	}
	for l, n := range q.ListenerMaxConnections {
		if n < 0 {
			return bad("max.connections of listener %s is negative", l)
		}
	}
	for l, n := range q.ListenerMaxConnectionCreationRate {
		if n < 0 {
			return bad("max.connection.creation.rate of listener %s is negative", l)
		}
	}
	for h, n := range q.MaxConnectionsPerIPOverrides {
		if n < 0 {
			return bad("max.connections.per.ip.overrides gives %s a negative limit", h)
		}
	}
	if q.MaxConnectionsPerIP == 0 && len(q.MaxConnectionsPerIPOverrides) == 0 {
		return bad("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.")
	}
	if q.WindowNum < 1 || q.WindowSize <= 0 {
		return bad("quota.window.num and quota.window.size.seconds must be positive")
	}
	if err := q.MaxConnectionsPerPrincipal.validate("kafkanet.max.connections.per.principal"); err != nil {
		return err
	}
	for l, pl := range q.ListenerMaxConnectionsPerPrincipal {
		if err := pl.validate("kafkanet.max.connections.per.principal of listener " + string(l)); err != nil {
			return err
		}
	}
	return nil
}

// lookupFunc resolves a host name, as net.Resolver.LookupNetIP.
type lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// resolveOverrides turns override hosts into addresses, once, within ctx:
// each host to one address, as Kafka's ConnectionQuotas does with
// InetAddress.getByName (see ConnectionQuotas.MaxConnectionsPerIPOverrides).
func resolveOverrides(ctx context.Context, lookup lookupFunc, overrides map[string]int) (map[netip.Addr]int, error) {
	out := make(map[netip.Addr]int, len(overrides))
	for host, n := range overrides {
		if addr, err := netip.ParseAddr(host); err == nil {
			out[addr.Unmap()] = n
			continue
		}
		addrs, err := lookup(ctx, "ip", host)
		if err == nil && len(addrs) == 0 {
			err = errors.New("no addresses")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: max.connections.per.ip.overrides host %q: %w", ErrInvalidConnectionQuotas, host, err)
		}
		out[firstAddress(addrs)] = n
	}
	return out, nil
}

// firstAddress is the address Java's InetAddress.getByName returns of a
// name's addresses, with java.net.preferIPv6Addresses at its default
// (false): the first IPv4 address, or the first address when there is no
// IPv4 one.
func firstAddress(addrs []netip.Addr) netip.Addr {
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap()
		}
	}
	return addrs[0].Unmap()
}

// connectionQuotas enforces ConnectionQuotas for one server. Acceptors acquire a slot
// per connection; connections release it exactly once when they close.
type connectionQuotas struct {
	mu          sync.Mutex
	q           ConnectionQuotas
	overrides   map[netip.Addr]int // max.connections.per.ip.overrides, resolved
	ipRates     map[netip.Addr]int // q.IPConnectionCreationRateOverrides, unmapped and without zones
	interBroker protocolmap.ListenerName
	listeners   int // listeners of the server: protection needs more than one

	total      int
	shedding   int // connections being closed to bring total under MaxConnections
	byListener map[protocolmap.ListenerName]int
	byIP       map[netip.Addr]int
	// Connections by principal, across listeners and on each (see
	// acquirePrincipal); a principal without connections has no entry.
	// User:ANONYMOUS is counted in anonymous (and listenerState.anonymous)
	// instead.
	byPrincipal         map[connregistry.Principal]int
	byListenerPrincipal map[listenerPrincipal]int
	anonymous           atomic.Int64
	anonymousLimited    atomic.Bool // an override limits User:ANONYMOUS (limitsAnonymous); changed under mu

	brokerRate   *quota.Rate
	listenerRate map[protocolmap.ListenerName]*quota.Rate
	ipRate       map[netip.Addr]*quota.Rate
	ipRateSwept  time.Time // when ipRate was last rid of expired rates

	changed chan struct{} // closed and replaced when a slot frees or the quotas change
	excess  chan struct{} // closed and replaced when the broker-wide count goes over its limit
	now     func() time.Time
	applied bool // the overrides are resolved: by Start's resolvePending or by set
}

func newConnectionQuotas(q ConnectionQuotas, overrides map[netip.Addr]int, interBroker protocolmap.ListenerName, listeners int) *connectionQuotas {
	q = clonePrincipalLimits(q)
	cq := &connectionQuotas{
		q: q, overrides: overrides, ipRates: ipRates(q.IPConnectionCreationRateOverrides), interBroker: interBroker, listeners: listeners,
		byListener: map[protocolmap.ListenerName]int{}, byIP: map[netip.Addr]int{},
		byPrincipal: map[connregistry.Principal]int{}, byListenerPrincipal: map[listenerPrincipal]int{},
		brokerRate:   quota.NewRate(q.WindowNum, q.WindowSize),
		listenerRate: map[protocolmap.ListenerName]*quota.Rate{}, ipRate: map[netip.Addr]*quota.Rate{},
		changed: make(chan struct{}), excess: make(chan struct{}),
		now: time.Now,
	}
	cq.anonymousLimited.Store(limitsAnonymous(q))
	return cq
}

// ipRates copies the per-address creation rates, keyed as acquire looks
// addresses up.
func ipRates(overrides map[netip.Addr]int) map[netip.Addr]int {
	out := make(map[netip.Addr]int, len(overrides))
	for ip, n := range overrides {
		out[ip.Unmap().WithZone("")] = n
	}
	return out
}

// resolvePending resolves the host names among the overrides the quotas
// were made with, unless that was done or set has replaced them since:
// Start calls it, so that New does no DNS.
func (cq *connectionQuotas) resolvePending(ctx context.Context, lookup lookupFunc) error {
	cq.mu.Lock()
	q, applied := cq.q, cq.applied
	cq.mu.Unlock()
	if applied {
		return nil
	}
	overrides, err := resolveOverrides(ctx, lookup, q.MaxConnectionsPerIPOverrides)
	if err != nil {
		return err
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if !cq.applied { // else SetConnectionQuotas applied newer quotas meanwhile
		cq.overrides, cq.applied = overrides, true
	}
	return nil
}

// set replaces the quotas while the server runs: raised limits wake waiting
// acceptors; lowered ones apply to new connections. A changed creation rate
// applies to the next connection, measured against the connections already
// recorded: as Kafka's ConnectionQuotas.updateIpConnectionRateQuota, which
// changes the bound of the existing rate sensor and keeps its samples.
func (cq *connectionQuotas) set(q ConnectionQuotas, overrides map[netip.Addr]int) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.applied = true
	if q.WindowNum != cq.q.WindowNum || q.WindowSize != cq.q.WindowSize {
		cq.brokerRate = quota.NewRate(q.WindowNum, q.WindowSize)
		clear(cq.listenerRate)
		clear(cq.ipRate)
	}
	q = clonePrincipalLimits(q)
	cq.q, cq.overrides, cq.ipRates = q, overrides, ipRates(q.IPConnectionCreationRateOverrides)
	cq.anonymousLimited.Store(limitsAnonymous(q))
	cq.notifyLocked()
}

// ipRateLimit is the creation rate of client address ip: its override, or
// the default (Kafka's ConnectionQuotas.connectionRateForIp). A zone does
// not count, as Java's InetAddress.equals ignores the scope.
func (cq *connectionQuotas) ipRateLimit(ip netip.Addr) int {
	if n, ok := cq.ipRates[ip.WithZone("")]; ok {
		return n
	}
	return cq.q.IPConnectionCreationRate
}

func (cq *connectionQuotas) notifyLocked() {
	close(cq.changed)
	cq.changed = make(chan struct{})
}

// addListener counts a listener added to the server (AddListener): with
// more than one, the inter-broker listener is protected.
func (cq *connectionQuotas) addListener() {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.listeners++
	cq.notifyLocked()
}

// removeListener forgets listener l, removed from the server once its
// connections have ended, as Kafka's ConnectionQuotas.removeListener: its
// count (zero by then) and its creation rate go. ConnectionQuotas.ListenerMaxConnections
// and ListenerMaxConnectionCreationRate keep any entry of its name, which
// applies again to a listener added later under it.
func (cq *connectionQuotas) removeListener(l protocolmap.ListenerName) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	cq.listeners--
	if cq.byListener[l] == 0 {
		delete(cq.byListener, l)
	}
	delete(cq.listenerRate, l)
	cq.notifyLocked() // the inter-broker listener may have lost its protection
}

// protected reports whether l is exempt from the broker-wide limits: the
// inter-broker listener, when the server has more than one listener.
func (cq *connectionQuotas) protected(l protocolmap.ListenerName) bool {
	return l == cq.interBroker && cq.listeners > 1
}

func (cq *connectionQuotas) listenerMax(l protocolmap.ListenerName) int {
	if n, ok := cq.q.ListenerMaxConnections[l]; ok {
		return n
	}
	return cq.q.MaxConnections
}

func (cq *connectionQuotas) listenerRateLimit(l protocolmap.ListenerName) int {
	if n, ok := cq.q.ListenerMaxConnectionCreationRate[l]; ok {
		return n
	}
	return cq.q.MaxConnectionCreationRate
}

func (cq *connectionQuotas) slotAvailableLocked(l protocolmap.ListenerName) bool {
	return cq.byListener[l] < cq.listenerMax(l) && (cq.protected(l) || cq.total < cq.q.MaxConnections)
}

// recordLocked records a new connection on the listener's and (unless the
// listener is protected) the broker's rate, and returns the longer of their
// throttle delays.
func (cq *connectionQuotas) recordLocked(l protocolmap.ListenerName, now time.Time) time.Duration {
	var d time.Duration
	if limit := cq.listenerRateLimit(l); limit != Unlimited {
		r := cq.listenerRate[l]
		if r == nil {
			r = quota.NewRate(cq.q.WindowNum, cq.q.WindowSize)
			cq.listenerRate[l] = r
		}
		r.Record(1, now)
		d = max(d, connectionThrottle(r, float64(limit), now))
	}
	if limit := cq.q.MaxConnectionCreationRate; limit != Unlimited && !cq.protected(l) {
		cq.brokerRate.Record(1, now)
		d = max(d, connectionThrottle(cq.brokerRate, float64(limit), now))
	}
	return d
}

// unrecordLocked takes back a connection recorded by recordLocked.
func (cq *connectionQuotas) unrecordLocked(l protocolmap.ListenerName, now time.Time) {
	if r := cq.listenerRate[l]; r != nil {
		r.Record(-1, now)
	}
	if cq.q.MaxConnectionCreationRate != Unlimited && !cq.protected(l) {
		cq.brokerRate.Record(-1, now)
	}
}

// acquireResult says what an acquire decided beyond success.
type acquireResult struct {
	blocked  time.Duration // the acceptor waited this long (rate delay or no slot)
	throttle time.Duration // the listener/broker rate delay within blocked
	ipHold   time.Duration // with ErrConnectionThrottled: hold the connection this long, then close it
}

// acquire admits a connection from ip on listener l, as Kafka's
// ConnectionQuotas.inc does: it waits while the listener's or broker's
// creation rate is exceeded or no slot is free (the acceptor blocks; the
// connection is accepted later), then applies the per-IP creation rate
// (ErrConnectionThrottled) and the per-IP count (ErrTooManyConnections);
// a connection with no IP address (ip is the zero Addr) skips those two. On
// success the caller must release exactly once. quit (the server's) and
// stop (the listener's removal) end a wait early with ErrServerClosed.
func (cq *connectionQuotas) acquire(l protocolmap.ListenerName, ip netip.Addr, quit, stop <-chan struct{}) (acquireResult, error) {
	var res acquireResult
	cq.mu.Lock()
	now := cq.now()
	res.throttle = cq.recordLocked(l, now)
	if res.throttle > 0 || !cq.slotAvailableLocked(l) {
		start := time.Now()
		end := now.Add(res.throttle)
		for {
			remaining := end.Sub(cq.now())
			if remaining <= 0 && cq.slotAvailableLocked(l) {
				break
			}
			changed := cq.changed
			cq.mu.Unlock()
			var timer *time.Timer
			var timeout <-chan time.Time
			if remaining > 0 {
				timer = time.NewTimer(remaining)
				timeout = timer.C
			}
			select {
			case <-changed:
			case <-timeout:
			case <-quit:
			case <-stop:
			}
			if timer != nil {
				timer.Stop()
			}
			select {
			case <-quit:
				return res, ErrServerClosed
			case <-stop:
				return res, ErrServerClosed
			default:
			}
			cq.mu.Lock()
		}
		res.blocked = time.Since(start)
	}
	now = cq.now()
	cq.sweepIPRatesLocked(now)
	cq.byListener[l]++
	cq.total++
	var err error
	if res.ipHold, err = cq.acquireIPLocked(l, ip, now); err == nil {
		cq.noteExcessLocked()
	}
	cq.mu.Unlock()
	return res, err
}

// acquireIP applies the per-address quotas to a connection from ip whose
// listener slot acquire took without an address: on a listener that
// requires the PROXY protocol, once the header has given the client's
// address. On success the connection releases with ip; on error (as
// acquire's) the listener's slot is given back, and the caller releases
// nothing. A throttled connection is to be held for the delay returned,
// then closed.
func (cq *connectionQuotas) acquireIP(l protocolmap.ListenerName, ip netip.Addr) (time.Duration, error) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	now := cq.now()
	cq.sweepIPRatesLocked(now)
	return cq.acquireIPLocked(l, ip, now)
}

// acquireIPLocked applies the per-address creation rate
// (ErrConnectionThrottled, with the delay to hold the connection for) and
// count (ErrTooManyConnections) to a connection from ip counted on
// listener l. On error the connection is counted out: its listener slot
// is released, and a throttled one's listener and broker rates take it
// back, as Kafka's ConnectionQuotas does. A connection with no IP address
// (ip is the zero Addr) passes.
func (cq *connectionQuotas) acquireIPLocked(l protocolmap.ListenerName, ip netip.Addr, now time.Time) (time.Duration, error) {
	if !ip.IsValid() { // not an IP connection (Config.Listen), or a PROXY header still to come: no per-address quotas
		return 0, nil
	}
	if limit := cq.ipRateLimit(ip); limit != Unlimited {
		r := cq.ipRate[ip]
		if r == nil {
			r = quota.NewRate(cq.q.WindowNum, cq.q.WindowSize)
			cq.ipRate[ip] = r
		}
		r.Record(1, now)
		if d := connectionThrottle(r, float64(limit), now); d > 0 {
			r.Record(-1, now)
			cq.unrecordLocked(l, now)
			cq.releaseLocked(l, netip.Addr{})
			return d, fmt.Errorf("%w %s (%d per second)", ErrConnectionThrottled, ip, limit)
		}
	}
	limit := cq.q.MaxConnectionsPerIP
	if n, ok := cq.overrides[ip]; ok {
		limit = n
	}
	if cq.byIP[ip] >= limit {
		cq.releaseLocked(l, netip.Addr{})
		return 0, fmt.Errorf("%w %s (maximum = %d)", ErrTooManyConnections, ip, limit)
	}
	cq.byIP[ip]++
	return 0, nil
}

// listenerPrincipal is a principal's count on one listener.
type listenerPrincipal struct {
	l protocolmap.ListenerName
	p connregistry.Principal
}

// acquirePrincipal counts a connection of principal p on listener l, as
// acquireIPLocked counts one of an address: it fails with
// ErrTooManyPrincipalConnections, counting nothing, when p already has
// the connections its limit allows, across listeners
// (ConnectionQuotas.MaxConnectionsPerPrincipal) or on l
// (ConnectionQuotas.ListenerMaxConnectionsPerPrincipal). Every
// connection is counted, whatever the limits, so that limits changed
// later (Server.SetConnectionQuotas) measure the connections already
// open. On success the caller calls releasePrincipal with the same
// arguments exactly once.
//
// User:ANONYMOUS, the principal of every connection of a listener without
// authentication, is counted in atomics (broker-wide here, on its listener
// in onListener), without the lock while no override limits it: a burst
// of plaintext connections then neither waits on the lock the acceptors
// take nor hashes a key each.
func (cq *connectionQuotas) acquirePrincipal(l protocolmap.ListenerName, p connregistry.Principal, onListener *atomic.Int64) error {
	anonymous := p == connregistry.Anonymous()
	if anonymous && !cq.anonymousLimited.Load() {
		cq.anonymous.Add(1)
		onListener.Add(1)
		return nil
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	key := listenerPrincipal{l, p}
	count, countOnListener := cq.byPrincipal[p], cq.byListenerPrincipal[key]
	if anonymous {
		count, countOnListener = int(cq.anonymous.Load()), int(onListener.Load())
	}
	if limit := cq.q.MaxConnectionsPerPrincipal.limit(p); count >= limit {
		return fmt.Errorf("%w %s (maximum = %d)", ErrTooManyPrincipalConnections, p, limit)
	}
	if pl, ok := cq.q.ListenerMaxConnectionsPerPrincipal[l]; ok {
		if limit := pl.limit(p); countOnListener >= limit {
			return fmt.Errorf("%w %s on listener %s (maximum = %d)", ErrTooManyPrincipalConnections, p, l, limit)
		}
	}
	if anonymous {
		cq.anonymous.Add(1)
		onListener.Add(1)
		return nil
	}
	cq.byPrincipal[p]++
	cq.byListenerPrincipal[key]++
	return nil
}

// releasePrincipal uncounts a connection acquirePrincipal counted.
func (cq *connectionQuotas) releasePrincipal(l protocolmap.ListenerName, p connregistry.Principal, onListener *atomic.Int64) {
	if p == connregistry.Anonymous() {
		cq.anonymous.Add(-1)
		onListener.Add(-1)
		return
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	key := listenerPrincipal{l, p}
	n, ok := cq.byListenerPrincipal[key]
	if !ok {
		panic(fmt.Sprintf("socketserver: released a connection of %s that was never counted", p))
	}
	if n == 1 {
		delete(cq.byListenerPrincipal, key)
	} else {
		cq.byListenerPrincipal[key] = n - 1
	}
	if n := cq.byPrincipal[p]; n == 1 {
		delete(cq.byPrincipal, p)
	} else {
		cq.byPrincipal[p] = n - 1
	}
}

// clonePrincipalLimits returns q with copies of its principal limits'
// maps: the server keeps them, the caller may change its own.
func clonePrincipalLimits(q ConnectionQuotas) ConnectionQuotas {
	q.MaxConnectionsPerPrincipal.Overrides = maps.Clone(q.MaxConnectionsPerPrincipal.Overrides)
	if q.ListenerMaxConnectionsPerPrincipal != nil {
		byListener := make(map[protocolmap.ListenerName]PrincipalLimits, len(q.ListenerMaxConnectionsPerPrincipal))
		for l, pl := range q.ListenerMaxConnectionsPerPrincipal {
			pl.Overrides = maps.Clone(pl.Overrides)
			byListener[l] = pl
		}
		q.ListenerMaxConnectionsPerPrincipal = byListener
	}
	return q
}

// limitsAnonymous reports whether q limits User:ANONYMOUS anywhere: only
// an override names it.
func limitsAnonymous(q ConnectionQuotas) bool {
	if _, ok := q.MaxConnectionsPerPrincipal.Overrides[connregistry.Anonymous()]; ok {
		return true
	}
	for _, pl := range q.ListenerMaxConnectionsPerPrincipal {
		if _, ok := pl.Overrides[connregistry.Anonymous()]; ok {
			return true
		}
	}
	return false
}

// principalCounts returns the connections counted per principal across
// listeners (tests).
func (cq *connectionQuotas) principalCounts() map[connregistry.Principal]int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	out := maps.Clone(cq.byPrincipal)
	if n := cq.anonymous.Load(); n > 0 {
		out[connregistry.Anonymous()] = int(n)
	}
	return out
}

// noteExcessLocked wakes the processors when the broker-wide count has gone
// over its limit (see claimExcess).
func (cq *connectionQuotas) noteExcessLocked() {
	if cq.total > cq.q.MaxConnections {
		close(cq.excess)
		cq.excess = make(chan struct{})
	}
}

// sweepIPRatesLocked forgets, once per rate span (quota.window.num windows),
// the per-address rates whose samples have all expired: they measure as a
// new rate would, and an address that opens no connection for that long
// must not hold memory for ever (many client addresses come and go; Kafka
// drops an address's rate sensor an hour after its last record).
func (cq *connectionQuotas) sweepIPRatesLocked(now time.Time) {
	if now.Sub(cq.ipRateSwept) < time.Duration(cq.q.WindowNum)*cq.q.WindowSize {
		return
	}
	cq.ipRateSwept = now
	for ip, r := range cq.ipRate {
		if r.Expired(now) {
			delete(cq.ipRate, ip)
		}
	}
}

// release gives back a connection's slot.
func (cq *connectionQuotas) release(l protocolmap.ListenerName, ip netip.Addr) {
	cq.mu.Lock()
	cq.releaseLocked(l, ip)
	cq.mu.Unlock()
}

// releaseLocked gives back a slot; ip is the zero Addr for a connection
// that is not IP, which acquire did not count by address.
func (cq *connectionQuotas) releaseLocked(l protocolmap.ListenerName, ip netip.Addr) {
	if ip.IsValid() {
		n, ok := cq.byIP[ip]
		if !ok {
			panic(fmt.Sprintf("socketserver: released a connection from %s that was never counted", ip))
		}
		if n == 1 {
			delete(cq.byIP, ip) // its rate, if any, stays until sweepIPRatesLocked finds it expired
		} else {
			cq.byIP[ip] = n - 1
		}
	}
	cq.byListener[l]--
	cq.total--
	cq.notifyLocked()
}

// claimExcess reports whether listener l must shed a connection: the
// broker-wide count is over its limit (the protected inter-broker listener
// went past it) and l is not protected. A true answer claims one closing,
// so that processors woken together do not close more than needed; the
// caller calls shed when it has closed a connection or found none. It also
// returns the channel closed the next time the count goes over.
func (cq *connectionQuotas) claimExcess(l protocolmap.ListenerName) (bool, <-chan struct{}) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.total-cq.shedding > cq.q.MaxConnections && !cq.protected(l) {
		cq.shedding++
		return true, cq.excess
	}
	return false, cq.excess
}

// shed ends a closing claimed by claimExcess.
func (cq *connectionQuotas) shed() {
	cq.mu.Lock()
	cq.shedding--
	cq.mu.Unlock()
}

// counts returns the total, per-listener and per-address counts (tests and
// stats).
func (cq *connectionQuotas) counts() (int, map[protocolmap.ListenerName]int, map[netip.Addr]int) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.total, maps.Clone(cq.byListener), maps.Clone(cq.byIP)
}

// connectionThrottle returns how long to delay a connection that r, with
// the connection recorded, measures above bound: Kafka's
// QuotaUtils.boundedThrottleTime capped at one window, as ConnectionQuotas
// caps it; zero within bound. A bound of zero admits nothing: the infinite
// delay is capped to the window.
func connectionThrottle(r *quota.Rate, bound float64, now time.Time) time.Duration {
	return quota.BoundedThrottleTime(r.Measure(now), bound, r.WindowSize(now), r.Window())
}

// logEvery is how often a logLimiter lets a line through.
const logEvery = 10 * time.Second

// logLimiter logs a kind of event without flooding: the first at once,
// then at most one line every logEvery, telling how many it held back
// since (a client that retries a refused connection every few
// milliseconds would otherwise write a line each time).
type logLimiter struct {
	mu   sync.Mutex
	last time.Time
	held int
}

// allow reports whether to log the event at now, and how many events it
// held back before it.
func (l *logLimiter) allow(now time.Time) (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.held++
		return false, 0
	}
	held, l.held, l.last = l.held, 0, now
	return true, held
}
