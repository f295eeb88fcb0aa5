package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/clientprops"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// The proxy's own keys; the listeners, TLS, SASL users and connection
// quotas are Kafka's broker keys, and the upstream connection Kafka's
// client keys with the upstream. prefix.
const (
	// keyUpstream lists the upstream cluster's bootstrap servers
	// (host:port, comma-separated); -upstream sets it.
	keyUpstream = "upstream.bootstrap.servers"
	// keyUpstreamSetupTimeout bounds dialing, TLS and SASL upstream
	// (Kafka's socket.connection.setup.timeout.ms).
	keyUpstreamSetupTimeout = "upstream.socket.connection.setup.timeout.ms"
	// keyUpstreamMetadataAge is how often the proxy asks each upstream
	// broker for metadata, to learn of new brokers (Kafka's
	// metadata.max.age.ms).
	keyUpstreamMetadataAge = "upstream.metadata.max.age.ms"
	// keyPortBase is the port of upstream node 0 on a listener: node N is
	// served on base+N. listener.name.<l>.proxy.broker.port.base sets it
	// per listener; the default is the listener's port + 1 (and
	// ephemeral ports for a listener on port 0).
	keyPortBase = "proxy.broker.port.base"
	// keyPortMapping maps node ids to ports (nodeId:port,...), before the
	// base; listener-prefixed per listener as keyPortBase.
	keyPortMapping = "proxy.broker.port.mapping"
	// keyAdminListener names the listener operators use: the proxy answers
	// its Metadata itself (it is the only broker there), and serves
	// ListClientConnections and CloseClientConnections on it. Nothing is
	// forwarded from it.
	keyAdminListener = "proxy.admin.listener.name"
	// keyListKey and keyCloseKey are the API keys of
	// ListClientConnections and CloseClientConnections on the admin
	// listener.
	keyListKey  = "kafkanet.list.client.connections.api.key"
	keyCloseKey = "kafkanet.close.client.connections.api.key"
)

// settings are what the proxy reads beyond the socket server's keys.
type settings struct {
	upstream       []string // bootstrap servers
	upstreamSec    clientprops.Security
	setupTimeout   time.Duration
	metadataMaxAge time.Duration
	adminListener  protocolmap.ListenerName // "" when there is none
	listKey        int16
	closeKey       int16
	superUsers     string
	nodeID         int32 // the proxy's own id on the admin listener
	ioThreads      int
	// ports says where each data listener serves each upstream node.
	ports map[protocolmap.ListenerName]portPlan
}

// portPlan is where one data listener serves upstream nodes: the mapping
// first, then base+node id; base 0 means ephemeral ports.
type portPlan struct {
	base    int
	mapping map[int32]int
}

// port returns the port node id is served on, 0 for an ephemeral one, and
// false when the node cannot be served (beyond 65535 without a mapping).
func (p portPlan) port(id int32) (int, bool) {
	if port, ok := p.mapping[id]; ok {
		return port, true
	}
	if p.base == 0 {
		return 0, true
	}
	if id < 0 || p.base+int(id) > 65535 {
		return 0, false
	}
	return p.base + int(id), true
}

// withProxyDefaults fills what a proxy needs and a broker's defaults do
// not give: with neither inter.broker.listener.name nor
// security.inter.broker.protocol set, the first listener is the
// inter-broker one (a proxy has no inter-broker traffic, but Kafka's rules
// want the listener to exist).
func withProxyDefaults(props listener.Properties) listener.Properties {
	out := listener.Properties{}
	for k, v := range props {
		out[k] = v
	}
	_, named := out.Get(listener.KeyInterBrokerListenerName)
	_, byProtocol := out.Get("security.inter.broker.protocol")
	if !named && !byProtocol {
		value, ok := out.Get(listener.KeyListeners)
		if !ok {
			value = listener.DefaultListeners
		}
		first, _, _ := strings.Cut(value, ",")
		if name, _, ok := strings.Cut(strings.TrimSpace(first), "://"); ok && name != "" {
			out[listener.KeyInterBrokerListenerName] = name
		}
	}
	return out
}

// readSettings reads the proxy's settings from cfg.
func readSettings(cfg *listener.Set) (settings, error) {
	props := cfg.Properties()
	invalid := func(key, value, rule string) error {
		return &protocolmap.ConfigError{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: rule}
	}
	var s settings
	value, _ := props.Get(keyUpstream)
	for _, a := range strings.Split(value, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return settings{}, invalid(keyUpstream, value, fmt.Sprintf("%q is not host:port", a))
		}
		s.upstream = append(s.upstream, a)
	}
	if len(s.upstream) == 0 {
		return settings{}, invalid(keyUpstream, value, "the upstream cluster's bootstrap servers are required (-upstream HOST:PORT)")
	}
	var err error
	if s.upstreamSec, err = clientprops.Read(props, "upstream."); err != nil {
		return settings{}, err
	}
	ms, err := cfg.Properties().Int(keyUpstreamSetupTimeout, 10000, 1)
	if err != nil {
		return settings{}, err
	}
	s.setupTimeout = time.Duration(ms) * time.Millisecond
	if ms, err = cfg.Properties().Int(keyUpstreamMetadataAge, 300000, 100); err != nil {
		return settings{}, err
	}
	s.metadataMaxAge = time.Duration(ms) * time.Millisecond
	if s.ioThreads, err = cfg.Properties().Int("num.io.threads", socketserver.DefaultNumIOThreads, 1); err != nil {
		return settings{}, err
	}
	idKey := "node.id"
	if _, ok := props.Get(idKey); !ok {
		idKey = "broker.id"
	}
	id, err := cfg.Properties().Int(idKey, 0, 0)
	if err != nil {
		return settings{}, err
	}
	s.nodeID = int32(min(id, 1<<31-1))
	s.superUsers, _ = props.Get("super.users")

	for _, k := range []struct {
		key string
		def int16
		out *int16
	}{{keyListKey, connregistry.DefaultListAPIKey, &s.listKey}, {keyCloseKey, connregistry.DefaultCloseAPIKey, &s.closeKey}} {
		v, err := cfg.Properties().Int(k.key, int(k.def), 0)
		if err != nil {
			return settings{}, err
		}
		if v > 32767 || kmsg.RequestForKey(int16(v)) != nil && v != int(connregistry.DefaultListAPIKey) {
			return settings{}, invalid(k.key, strconv.Itoa(v), "must be an API key no other served API uses")
		}
		*k.out = int16(v)
	}
	if s.listKey == s.closeKey {
		return settings{}, invalid(keyCloseKey, strconv.Itoa(int(s.closeKey)), "must differ from "+keyListKey)
	}

	if name, ok := props.Get(keyAdminListener); ok && strings.TrimSpace(name) != "" {
		l, found := cfg.Listener(protocolmap.ListenerName(strings.TrimSpace(name)))
		if !found {
			return settings{}, invalid(keyAdminListener, name, "must name a listener of listeners")
		}
		s.adminListener = l.Name
	}
	s.ports = map[protocolmap.ListenerName]portPlan{}
	for _, l := range cfg.Listeners {
		if l.Name == s.adminListener || l.Plane == protocolmap.ControlPlane {
			continue
		}
		plan := portPlan{mapping: map[int32]int{}}
		if l.Bind.Port != 0 {
			plan.base = l.Bind.Port + 1
		}
		if v, from, ok := cfg.Properties().ListenerValue(l.Name, keyPortBase); ok {
			base, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || base < 0 || base > 65535 {
				return settings{}, invalid(from, v, "want a port, 0 to 65535 (0: ephemeral ports)")
			}
			plan.base = base
		}
		if v, from, ok := cfg.Properties().ListenerValue(l.Name, keyPortMapping); ok && strings.TrimSpace(v) != "" {
			for _, entry := range strings.Split(v, ",") {
				idText, portText, found := strings.Cut(strings.TrimSpace(entry), ":")
				id, err1 := strconv.ParseInt(strings.TrimSpace(idText), 10, 32)
				port, err2 := strconv.Atoi(strings.TrimSpace(portText))
				if !found || err1 != nil || err2 != nil || id < 0 || port < 1 || port > 65535 {
					return settings{}, invalid(from, v, fmt.Sprintf("%q is not nodeId:port", entry))
				}
				plan.mapping[int32(id)] = port
			}
		}
		s.ports[l.Name] = plan
	}
	if len(s.ports) == 0 {
		return settings{}, invalid(listener.KeyListeners, "", "the proxy needs a data-plane listener besides the admin listener")
	}
	return s, nil
}
