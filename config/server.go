package config

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

// Server reads a socket server's configuration from Kafka's keys, once,
// into typed and checked values: the listeners (config.Listeners:
// listeners, advertised.listeners, listener.security.protocol.map, the
// inter-broker and control-plane listeners), then socket.request.max.bytes,
// connections.max.idle.ms, kafkanet.request.min.byte.rate,
// queued.max.requests, num.io.threads, queued.max.request.bytes,
// kafkanet.request.stall.ms, num.network.threads (and its listener-prefixed
// form), kafkanet.connections.max.age.ms and
// kafkanet.connections.max.age.jitter (and their listener-prefixed forms,
// into the listener's ListenerConfig), socket.send.buffer.bytes, socket.receive.buffer.bytes,
// connection.failed.authentication.delay.ms, sasl.server.max.receive.size,
// the connection quotas, each listener's use of the PROXY protocol
// (kafkanet.proxy.protocol and kafkanet.proxy.protocol.trusted.networks,
// see socketserver.ProxyProtocol), and each listener's TLS and SASL
// settings ([Security]) into its ListenerConfig, among them, for
// a listener whose sasl.enabled.mechanisms holds OAUTHBEARER, its
// OAUTHBEARER settings ([OAuthBearer]). It builds no mechanism from
// them: the host does (see socketserver.ListenerConfig.Mechanisms), so that
// only a host that serves OAUTHBEARER links its validators. Credentials are
// the host's to set (security.NewJAASUsers builds them from the users
// [JAASUsers] reads from Kafka's JAAS keys). Errors name the offending key as it was written (with its
// listener prefix). socketserver.New reads no property: a host may change
// any value between the two.
func Server(props Properties) (socketserver.Config, error) {
	cfg, err := Listeners(props)
	if err != nil {
		return socketserver.Config{}, err
	}
	c := socketserver.Config{Listeners: cfg, PerListener: make(map[protocolmap.ListenerName]*socketserver.ListenerConfig, len(cfg.All))}
	if c.RequestMaxBytes, err = frameSize(props, KeySocketRequestMaxBytes, socketserver.DefaultRequestMaxBytes); err != nil {
		return socketserver.Config{}, err
	}
	idleMS, err := props.Int(KeyConnectionsMaxIdleMs, int(listener.DefaultConnectionsMaxIdle/time.Millisecond), -1<<62)
	if err != nil {
		return socketserver.Config{}, err
	}
	c.ConnectionsMaxIdle = time.Duration(idleMS) * time.Millisecond
	if idleMS < 0 {
		c.ConnectionsMaxIdle = -1
	}
	if c.RequestMinByteRate, err = optional(props, KeyRequestMinByteRate, socketserver.DefaultRequestMinByteRate); err != nil {
		return socketserver.Config{}, err
	}
	if c.QueuedMaxRequests, err = props.int32(KeyQueuedMaxRequests, socketserver.DefaultQueuedMaxRequests, 1); err != nil {
		return socketserver.Config{}, err
	}
	if c.IOThreads, err = props.int32(KeyNumIOThreads, socketserver.DefaultNumIOThreads, 1); err != nil {
		return socketserver.Config{}, err
	}
	if c.QueuedMaxRequestBytes, err = queuedMaxRequestBytes(props, c.RequestMaxBytes); err != nil {
		return socketserver.Config{}, err
	}
	stallMS, err := optional(props, KeyRequestStallMs, int(socketserver.DefaultRequestStallTimeout/time.Millisecond))
	if err != nil {
		return socketserver.Config{}, err
	}
	c.RequestStallTimeout = time.Duration(stallMS) * time.Millisecond
	if stallMS < 0 {
		c.RequestStallTimeout = -1
	}
	if c.SendBufferBytes, err = props.int32(KeySocketSendBufferBytes, socketserver.DefaultSocketBufferBytes, -1); err != nil {
		return socketserver.Config{}, err
	}
	if c.ReceiveBufferBytes, err = props.int32(KeySocketReceiveBufferBytes, socketserver.DefaultSocketBufferBytes, -1); err != nil {
		return socketserver.Config{}, err
	}
	if c.FailedAuthenticationDelay, err = failedAuthenticationDelay(props, idleMS); err != nil {
		return socketserver.Config{}, err
	}
	if c.FailedAuthenticationDelay == 0 {
		c.FailedAuthenticationDelay = -1 // set to 0 on purpose: no delay
	}
	if c.SASLMaxReceiveSize, err = frameSize(props, KeySASLServerMaxReceiveSize, socketserver.DefaultSASLMaxReceiveSize); err != nil {
		return socketserver.Config{}, err
	}
	if c.ConnectionQuotas, err = quotas(props, cfg); err != nil {
		return socketserver.Config{}, err
	}
	if c.ConnectionsMaxAge, c.ConnectionsMaxAgeJitter, err = maxAge(props, ""); err != nil {
		return socketserver.Config{}, err
	}
	for _, l := range cfg.All {
		n, err := props.listenerInt32(l.Name, KeyNumNetworkThreads, socketserver.DefaultNumNetworkThreads, 1)
		if err != nil {
			return socketserver.Config{}, err
		}
		sec, err := Security(props, cfg, l.Name)
		if err != nil {
			return socketserver.Config{}, err
		}
		proxy, err := proxyProtocol(props, l.Name)
		if err != nil {
			return socketserver.Config{}, err
		}
		lc := &socketserver.ListenerConfig{NetworkThreads: n, Security: sec, ProxyProtocol: proxy}
		if lc.ConnectionsMaxAge, lc.ConnectionsMaxAgeJitter, err = maxAge(props, l.Name.ConfigPrefix()); err != nil {
			return socketserver.Config{}, err
		}
		c.PerListener[l.Name] = lc
	}
	return c, nil
}

// queuedMaxRequestBytes reads queued.max.request.bytes (a long, default -1)
// with Kafka's rule that a limit is at least socket.request.max.bytes.
func queuedMaxRequestBytes(props Properties, requestMax int) (int, error) {
	v, ok := props.Get(KeyQueuedMaxRequestBytes)
	if !ok {
		return -1, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, &Error{Key: KeyQueuedMaxRequestBytes, Value: v, Err: listener.ErrInvalidValue,
			Rule: fmt.Sprintf("Expected value to be a %d-bit integer", strconv.IntSize)}
	}
	if n > 0 && n < requestMax {
		return 0, &Error{Key: KeyQueuedMaxRequestBytes, Value: v, Err: listener.ErrInvalidValue,
			Rule: fmt.Sprintf("a limit must be at least %s (%d), or -1 for none", KeySocketRequestMaxBytes, requestMax)}
	}
	return n, nil
}

// frameSize reads a key that bounds a frame, an int in Kafka: from 1 to
// math.MaxInt32, Kafka's largest frame.
func frameSize(props Properties, key string, def int) (int, error) {
	return props.int32(key, def, 1)
}

// optional reads a kafkanet. key of a feature that can be off, by the
// convention of docs/configuration.md: unset is def, -1 turns the feature
// off (the result is -1), a positive value is the value. 0 is refused, so
// that nobody reads it as a default or as off: the error says to use -1.
func optional(props Properties, key string, def int) (int, error) {
	v, ok := props.Get(key)
	if !ok {
		return def, nil
	}
	n, err := props.Int(key, def, -1)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, &Error{Key: key, Value: v, Err: listener.ErrInvalidValue,
			Rule: "Value must be positive, or -1 to turn the feature off (0 is not accepted)"}
	}
	return n, nil
}

// quotas reads Kafka's connection quota keys: max.connections
// and max.connection.creation.rate (each also per listener),
// max.connections.per.ip, max.connections.per.ip.overrides,
// quota.window.num, quota.window.size.seconds, and this library's
// kafkanet.ip.connection.creation.rate and
// kafkanet.ip.connection.creation.rate.overrides (see
// ipConnectionCreationRateOverrides).
func quotas(props Properties, cfg *listener.Set) (*socketserver.ConnectionQuotas, error) {
	q := socketserver.DefaultConnectionQuotas()
	var err error
	if q.MaxConnections, err = props.int32(KeyMaxConnections, socketserver.Unlimited, 0); err != nil {
		return nil, err
	}
	if q.MaxConnectionsPerIP, err = props.int32(KeyMaxConnectionsPerIP, socketserver.Unlimited, 0); err != nil {
		return nil, err
	}
	if q.MaxConnectionCreationRate, err = props.int32(KeyMaxConnectionCreationRate, socketserver.Unlimited, 0); err != nil {
		return nil, err
	}
	if q.IPConnectionCreationRate, err = props.int32(KeyIPConnectionCreationRate, socketserver.Unlimited, 0); err != nil {
		return nil, err
	}
	if q.WindowNum, err = props.int32(KeyQuotaWindowNum, q.WindowNum, 1); err != nil {
		return nil, err
	}
	seconds, err := props.int32(KeyQuotaWindowSizeSeconds, int(q.WindowSize/time.Second), 1)
	if err != nil {
		return nil, err
	}
	q.WindowSize = time.Duration(seconds) * time.Second
	if q.ListenerMaxConnections, err = listenerOverrides(props, cfg, KeyMaxConnections); err != nil {
		return nil, err
	}
	if q.ListenerMaxConnectionCreationRate, err = listenerOverrides(props, cfg, KeyMaxConnectionCreationRate); err != nil {
		return nil, err
	}
	const overridesKey = KeyMaxConnectionsPerIPOverrides
	if v, ok := props.Get(overridesKey); ok {
		entries, err := protocolmap.ParseCSVMap(overridesKey, v)
		if err != nil {
			return nil, err
		}
		var invalid []string
		for _, e := range entries {
			if !listener.ValidHost(e.Key) {
				invalid = append(invalid, e.Key)
			}
		}
		if len(invalid) > 0 {
			return nil, &Error{Key: overridesKey, Value: v, Err: socketserver.ErrInvalidConnectionQuotas,
				Rule: overridesKey + " contains invalid addresses : " + strings.Join(invalid, ",")}
		}
		q.MaxConnectionsPerIPOverrides = map[string]int{}
		for _, e := range entries {
			n, err := strconv.Atoi(e.Value)
			if err != nil || n < 0 || n > math.MaxInt32 { // Kafka reads each limit as an int
				return nil, &Error{Key: overridesKey, Value: v, Err: socketserver.ErrInvalidConnectionQuotas,
					Rule: fmt.Sprintf("the limit %q of %s is not a non-negative 32-bit integer", e.Value, e.Key)}
			}
			q.MaxConnectionsPerIPOverrides[e.Key] = n
		}
	}
	if q.IPConnectionCreationRateOverrides, err = ipConnectionCreationRateOverrides(props); err != nil {
		return nil, err
	}
	if q.MaxConnectionsPerPrincipal, q.ListenerMaxConnectionsPerPrincipal, err = principalLimits(props, cfg); err != nil {
		return nil, err
	}
	if q.MaxConnectionsPerIP == 0 && len(q.MaxConnectionsPerIPOverrides) == 0 {
		return nil, &Error{Key: KeyMaxConnectionsPerIP, Value: "0", Err: socketserver.ErrInvalidConnectionQuotas,
			Rule: KeyMaxConnectionsPerIP + " can be set to zero only if " + KeyMaxConnectionsPerIPOverrides + " property is set."}
	}
	return &q, nil
}

// maxAge reads kafkanet.connections.max.age.ms (unset or -1: no maximum;
// 0 is refused, see optional) and kafkanet.connections.max.age.jitter
// into Config's values: no maximum is -1, no jitter (0) -1. With prefix,
// a listener's listener.name.<l>. prefix, it reads that listener's own
// keys into its ListenerConfig's values, where unset is 0 (the server's).
func maxAge(props Properties, prefix string) (time.Duration, float64, error) {
	age, jitter := time.Duration(-1), socketserver.DefaultConnectionsMaxAgeJitter
	if prefix != "" {
		age, jitter = 0, 0
	}
	ageKey, jitterKey := prefix+KeyConnectionsMaxAgeMs, prefix+KeyConnectionsMaxAgeJitter
	if _, ok := props.Get(ageKey); ok {
		ms, err := optional(props, ageKey, -1)
		if err != nil {
			return 0, 0, err
		}
		age = -1
		if ms > 0 {
			age = time.Duration(min(ms, int(math.MaxInt64/time.Millisecond))) * time.Millisecond
		}
	}
	if v, ok := props.Get(jitterKey); ok {
		j, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(j >= 0 && j < 1) {
			return 0, 0, &Error{Key: jitterKey, Value: v, Err: listener.ErrInvalidValue,
				Rule: "Expected a number from 0 to less than 1"}
		}
		jitter = j
		if j == 0 {
			jitter = -1 // set to 0 on purpose: none
		}
	}
	return age, jitter, nil
}

// principalLimitsFromProperties reads kafkanet.max.connections.per.principal
// and its overrides, broker-wide and per listener (listener.name.<l>.
// prefixed: a listener that sets neither has no entry).
func principalLimits(props Properties, cfg *listener.Set) (socketserver.PrincipalLimits, map[protocolmap.ListenerName]socketserver.PrincipalLimits, error) {
	read := func(maxKey, overridesKey string, maxSet bool) (socketserver.PrincipalLimits, error) {
		pl := socketserver.PrincipalLimits{Max: socketserver.Unlimited}
		var err error
		if maxSet {
			if pl.Max, err = props.int32(maxKey, socketserver.Unlimited, 0); err != nil { // as its overrides
				return pl, err
			}
		}
		if v, ok := props.Get(overridesKey); ok {
			if pl.Overrides, err = parsePrincipalOverrides(overridesKey, v); err != nil {
				return pl, err
			}
		}
		if pl.Max == 0 && len(pl.Overrides) == 0 {
			return pl, &Error{Key: maxKey, Value: "0", Err: socketserver.ErrInvalidConnectionQuotas,
				Rule: maxKey + " can be set to zero only if " + overridesKey + " is set"}
		}
		return pl, nil
	}
	all, err := read(KeyMaxConnectionsPerPrincipal, KeyMaxConnectionsPerPrincipalOverrides, true)
	if err != nil {
		return socketserver.PrincipalLimits{}, nil, err
	}
	var byListener map[protocolmap.ListenerName]socketserver.PrincipalLimits
	for _, l := range cfg.All {
		prefix := l.Name.ConfigPrefix()
		_, maxSet := props.Get(prefix + KeyMaxConnectionsPerPrincipal)
		_, overridesSet := props.Get(prefix + KeyMaxConnectionsPerPrincipalOverrides)
		if !maxSet && !overridesSet {
			continue
		}
		pl, err := read(prefix+KeyMaxConnectionsPerPrincipal, prefix+KeyMaxConnectionsPerPrincipalOverrides, maxSet)
		if err != nil {
			return socketserver.PrincipalLimits{}, nil, err
		}
		if byListener == nil {
			byListener = map[protocolmap.ListenerName]socketserver.PrincipalLimits{}
		}
		byListener[l.Name] = pl
	}
	return all, byListener, nil
}

// parsePrincipalOverrides parses the value v of key, a
// kafkanet.max.connections.per.principal.overrides: principal:count
// entries separated by semicolons (blank ones skipped), each principal
// Type:name as in super.users, its count after the entry's last colon, an
// integer from 0 to 2147483647. Each principal may be named once.
func parsePrincipalOverrides(key, v string) (map[connregistry.Principal]int, error) {
	bad := func(format string, args ...any) error {
		return &Error{Key: key, Value: v, Err: socketserver.ErrInvalidConnectionQuotas, Rule: fmt.Sprintf(format, args...)}
	}
	var out map[connregistry.Principal]int
	for entry := range strings.SplitSeq(v, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.LastIndexByte(entry, ':')
		if i < 0 {
			return nil, bad("the entry %q is not principal:count, such as User:alice:2", entry)
		}
		name, count := strings.TrimSpace(entry[:i]), strings.TrimSpace(entry[i+1:])
		typ, pname, ok := strings.Cut(name, ":")
		if !ok || typ == "" || pname == "" {
			return nil, bad("%q is not a principal: Type:name, such as User:alice", name)
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 || n > socketserver.Unlimited {
			return nil, bad("the limit %q of %s is not an integer from 0 to %d", count, name, socketserver.Unlimited)
		}
		p := connregistry.Principal{Type: typ, Name: pname}
		if _, dup := out[p]; dup {
			return nil, bad("principal %s is given more than once", p)
		}
		if out == nil {
			out = map[connregistry.Principal]int{}
		}
		out[p] = n
	}
	return out, nil
}

// ipConnectionCreationRateOverrides reads
// kafkanet.ip.connection.creation.rate.overrides; nil when it is not set.
func ipConnectionCreationRateOverrides(props Properties) (map[netip.Addr]int, error) {
	const key = KeyIPConnectionCreationRateOverrides
	v, ok := props.Get(key)
	if !ok {
		return nil, nil
	}
	entries, err := protocolmap.ParseCSVMap(key, v)
	if err != nil {
		return nil, err
	}
	out := make(map[netip.Addr]int, len(entries))
	for _, e := range entries {
		ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(e.Key, "["), "]"))
		if err != nil {
			return nil, &Error{Key: key, Value: v, Err: socketserver.ErrInvalidConnectionQuotas,
				Rule: fmt.Sprintf("%q is not an IP address (host names are not accepted)", e.Key)}
		}
		ip = ip.Unmap().WithZone("") // a zone does not tell addresses apart, as in Java
		if _, dup := out[ip]; dup {
			return nil, &Error{Key: key, Value: v, Err: socketserver.ErrInvalidConnectionQuotas,
				Rule: fmt.Sprintf("address %s is given more than once", ip)}
		}
		n, err := strconv.Atoi(e.Value)
		if err != nil || n < 0 || n > socketserver.Unlimited {
			return nil, &Error{Key: key, Value: v, Err: socketserver.ErrInvalidConnectionQuotas,
				Rule: fmt.Sprintf("the rate %q of %s is not an integer from 0 to %d", e.Value, e.Key, socketserver.Unlimited)}
		}
		out[ip] = n
	}
	return out, nil
}

// listenerOverrides reads listener.name.<l>.<key> for every listener that
// sets it; listeners without it are left out (the broker-wide value
// applies).
func listenerOverrides(props Properties, cfg *listener.Set, key string) (map[protocolmap.ListenerName]int, error) {
	var out map[protocolmap.ListenerName]int
	for _, l := range cfg.All {
		if _, from, ok := props.ListenerValue(l.Name, key); !ok || from == key {
			continue
		}
		n, err := props.listenerInt32(l.Name, key, socketserver.Unlimited, 0)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[protocolmap.ListenerName]int{}
		}
		out[l.Name] = n
	}
	return out, nil
}

// proxyProtocol reads listener l's kafkanet.proxy.protocol
// and kafkanet.proxy.protocol.trusted.networks, each from its
// listener-prefixed key if set, else the broker-wide one.
func proxyProtocol(props Properties, l protocolmap.ListenerName) (socketserver.ProxyProtocol, error) {
	var p socketserver.ProxyProtocol
	v, modeFrom, ok := props.ListenerValue(l, KeyProxyProtocol)
	if ok {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "none":
		case "required":
			p.Mode = socketserver.ProxyProtocolRequired
		default:
			return socketserver.ProxyProtocol{}, &Error{Key: modeFrom, Value: v, Err: listener.ErrInvalidValue, Rule: "must be none or required"}
		}
	}
	v, from, ok := props.ListenerValue(l, KeyProxyProtocolTrustedNetworks)
	if ok {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := parseTrustedNetwork(s)
			if err != nil {
				return socketserver.ProxyProtocol{}, &Error{Key: from, Value: v, Err: listener.ErrInvalidValue,
					Rule: fmt.Sprintf("%q is neither a CIDR prefix (10.0.0.0/8, fd00::/8) nor an IP address", s)}
			}
			if !slices.Contains(p.TrustedNetworks, n) {
				p.TrustedNetworks = append(p.TrustedNetworks, n)
			}
		}
	}
	if p.Mode == socketserver.ProxyProtocolRequired && len(p.TrustedNetworks) == 0 {
		if !ok { // the key to set: the trusted networks' beside the mode's, broker-wide or the listener's
			from = strings.TrimSuffix(modeFrom, KeyProxyProtocol) + KeyProxyProtocolTrustedNetworks
		}
		return socketserver.ProxyProtocol{}, &Error{Key: from, Value: v, Err: listener.ErrInvalidValue,
			Rule: KeyProxyProtocol + "=required needs the networks of the load balancers that send the PROXY header " +
				"(a header from anywhere else could claim any client address); 0.0.0.0/0,::/0 trusts every address"}
	}
	return p, nil
}

// parseTrustedNetwork parses a CIDR prefix, masked, or a single address as
// a prefix of its full length; an IPv4-mapped prefix becomes its IPv4 one.
func parseTrustedNetwork(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(strings.Trim(s, "[]"))
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, errors.New("not an address")
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	n, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := n.Addr(); a.Is4In6() && n.Bits() >= 96 {
		n = netip.PrefixFrom(a.Unmap(), n.Bits()-96)
	}
	return n.Masked(), nil
}

// failedAuthenticationDelay reads connection.failed.authentication.delay.ms
// (KIP-306; default security.DefaultFailedAuthenticationDelay, at least
// 0): how long a broker waits before it answers a failed SASL
// authentication and closes the connection. As Kafka requires, it must be
// less than connections.max.idle.ms (idleMS) unless that is negative;
// otherwise the error, a [*Error] for
// connection.failed.authentication.delay.ms wrapping
// [listener.ErrInvalidValue], has Kafka's message. Both keys are
// broker-wide.
func failedAuthenticationDelay(props Properties, idleMS int) (time.Duration, error) {
	delay, err := props.int32(KeyConnectionFailedAuthenticationDelayMs, int(security.DefaultFailedAuthenticationDelay/time.Millisecond), 0)
	if err != nil {
		return 0, err
	}
	if idleMS >= 0 && delay >= idleMS {
		v, ok := props.Get(KeyConnectionFailedAuthenticationDelayMs)
		if !ok {
			v = strconv.Itoa(delay)
		}
		return 0, &Error{Key: KeyConnectionFailedAuthenticationDelayMs, Value: v, Err: listener.ErrInvalidValue, Rule: fmt.Sprintf(
			"%s=%d should always be less than %s=%d to prevent failed authentication responses from timing out",
			KeyConnectionFailedAuthenticationDelayMs, delay, KeyConnectionsMaxIdleMs, idleMS)}
	}
	return time.Duration(delay) * time.Millisecond, nil
}
