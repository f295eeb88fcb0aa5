package main

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/examples/internal/clientprops"
	"github.com/kafkanet/kafkanet/examples/internal/propset"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// The proxy's own keys; the listeners, TLS, SASL users and connection
// quotas are Kafka's broker keys, and the upstream connection Kafka's
// client keys with the upstream. prefix.
const (
	// keyUpstream lists the upstream cluster's bootstrap servers
	// (host:port, comma-separated); -upstream sets it.
	keyUpstream = "upstream.bootstrap.servers"
	// keyUpstreamSetupTimeout bounds dialing, TLS and SASL upstream
	// (Kafka's socket.connection.setup.timeout.ms), and each renewal of
	// the proxy's SASL session.
	keyUpstreamSetupTimeout = "upstream.socket.connection.setup.timeout.ms"
	// keyUpstreamWriteTimeout bounds the writing of a client's request
	// upstream, from its beginning: a streamed body's arrival from the
	// client included. Kafka has no such key: its clients give up on a
	// request after request.timeout.ms (30 s), the default here.
	keyUpstreamWriteTimeout = "upstream.write.timeout.ms"
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
	// keyVirtualClusters lists the virtual clusters (names of letters,
	// digits and '-'): upstream clusters served on the same TLS listeners
	// as the default one (upstream.bootstrap.servers), told apart by the
	// TLS server name the client asks for. Each is configured with the keys
	// after keyVirtualClusterPrefix + <name> + ".".
	keyVirtualClusters = "proxy.virtual.clusters"
	// keyVirtualClusterPrefix begins a virtual cluster's keys:
	// proxy.virtual.cluster.<name>.server.name (keyServerName) and
	// proxy.virtual.cluster.<name>.upstream.bootstrap.servers (keyUpstream),
	// both required, and optionally Kafka's client keys after
	// proxy.virtual.cluster.<name>.upstream., which then replace the
	// upstream. ones for that cluster.
	keyVirtualClusterPrefix = "proxy.virtual.cluster."
	// keyServerName is, after a virtual cluster's prefix, the server name
	// its clients bootstrap with; its broker of node id N is advertised as
	// broker-N.<server name>.
	keyServerName = "server.name"
)

// settings are what the proxy reads beyond the socket server's keys.
type settings struct {
	upstream       []string // bootstrap servers
	upstreamSec    clientprops.Security
	setupTimeout   time.Duration
	writeTimeout   time.Duration
	metadataMaxAge time.Duration
	adminListener  protocolmap.ListenerName // "" when there is none
	listKey        int16
	closeKey       int16
	superUsers     string
	nodeID         int32 // the proxy's own id on the admin listener
	// ports says where each data listener serves each upstream node.
	ports map[protocolmap.ListenerName]portPlan
	// virtual are the virtual clusters, in the order keyVirtualClusters
	// lists them.
	virtual []virtualCluster
}

// virtualCluster is an upstream cluster served by TLS server name (see
// keyVirtualClusters).
type virtualCluster struct {
	name       string   // as keyVirtualClusters lists it
	serverName string   // in lower case
	upstream   []string // bootstrap servers
	sec        clientprops.Security
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
func withProxyDefaults(props config.Properties) config.Properties {
	out := config.Properties{}
	for k, v := range props {
		out[k] = v
	}
	_, named := out.Get(config.KeyInterBrokerListenerName)
	_, byProtocol := out.Get("security.inter.broker.protocol")
	if !named && !byProtocol {
		value, ok := out.Get(config.KeyListeners)
		if !ok {
			value = config.DefaultListeners
		}
		first, _, _ := strings.Cut(value, ",")
		if name, _, ok := strings.Cut(strings.TrimSpace(first), "://"); ok && name != "" {
			out[config.KeyInterBrokerListenerName] = name
		}
	}
	return out
}

// readSettings reads the proxy's settings from cfg.
func readSettings(cfg *proxyConfig) (settings, error) {
	props := cfg.Properties()
	invalid := func(key, value, rule string) error {
		return &config.Error{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: rule}
	}
	var s settings
	var err error
	if s.virtual, err = readVirtualClusters(props); err != nil {
		return settings{}, err
	}
	value, _ := props.Get(keyUpstream)
	if s.upstream, err = bootstrapServers(keyUpstream, value); err != nil {
		return settings{}, err
	}
	if len(s.upstream) == 0 && len(s.virtual) == 0 {
		return settings{}, invalid(keyUpstream, value, "the upstream cluster's bootstrap servers are required (-upstream HOST:PORT), unless "+keyVirtualClusters+" configures virtual clusters")
	}
	if s.upstreamSec, err = clientprops.Read(props, "upstream."); err != nil {
		return settings{}, err
	}
	for i, v := range s.virtual {
		if s.virtual[i].sec, err = virtualSecurity(props, v.name, s.upstreamSec); err != nil {
			return settings{}, err
		}
	}
	ms, err := cfg.Properties().Int(keyUpstreamSetupTimeout, 10000, 1)
	if err != nil {
		return settings{}, err
	}
	s.setupTimeout = time.Duration(ms) * time.Millisecond
	if ms, err = cfg.Properties().Int(keyUpstreamWriteTimeout, 30000, 1); err != nil {
		return settings{}, err
	}
	s.writeTimeout = time.Duration(ms) * time.Millisecond
	if ms, err = cfg.Properties().Int(keyUpstreamMetadataAge, 300000, 100); err != nil {
		return settings{}, err
	}
	s.metadataMaxAge = time.Duration(ms) * time.Millisecond
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
	for _, l := range cfg.All {
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
		return settings{}, invalid(config.KeyListeners, "", "the proxy needs a data-plane listener besides the admin listener")
	}
	if len(s.virtual) > 0 && !slices.ContainsFunc(cfg.All, func(l listener.Listener) bool {
		_, data := s.ports[l.Name]
		return data && l.SecurityProtocol.UsesTLS()
	}) {
		v, _ := props.Get(keyVirtualClusters)
		return settings{}, invalid(keyVirtualClusters, v, "virtual clusters are told apart by TLS server name: a data listener must speak SSL or SASL_SSL")
	}
	return s, nil
}

// bootstrapServers reads a list of bootstrap servers, host:port separated
// by commas, from key's value.
func bootstrapServers(key, value string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(value, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, &config.Error{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: fmt.Sprintf("%q is not host:port", a)}
		}
		out = append(out, a)
	}
	return out, nil
}

// readVirtualClusters reads keyVirtualClusters and each listed cluster's
// server name and bootstrap servers (not its security: virtualSecurity).
// Server names must be DNS names, and none may be another's or lie below
// another's: broker-N.<name> must say which cluster it is of.
func readVirtualClusters(props config.Properties) ([]virtualCluster, error) {
	list, _ := props.Get(keyVirtualClusters)
	invalid := func(key, value, rule string) error {
		return &config.Error{Key: key, Value: value, Err: listener.ErrInvalidValue, Rule: rule}
	}
	var out []virtualCluster
	for _, name := range protocolmap.SplitList(list) {
		if name == "" {
			continue
		}
		if !validName(name, false) {
			return nil, invalid(keyVirtualClusters, list, fmt.Sprintf("%q is not a cluster name: letters, digits and '-'", name))
		}
		if slices.ContainsFunc(out, func(v virtualCluster) bool { return v.name == name }) {
			return nil, invalid(keyVirtualClusters, list, fmt.Sprintf("virtual cluster %s is listed twice", name))
		}
		prefix := keyVirtualClusterPrefix + name + "."
		v := virtualCluster{name: name}
		sn, _ := props.Get(prefix + keyServerName)
		v.serverName = strings.ToLower(strings.TrimSuffix(sn, "."))
		if !validName(v.serverName, true) {
			return nil, invalid(prefix+keyServerName, sn, fmt.Sprintf(
				"virtual cluster %s needs the TLS server name its clients bootstrap with, a DNS name (its brokers are broker-<node id>.<server name>)", name))
		}
		for _, o := range out {
			if o.serverName == v.serverName || strings.HasSuffix(v.serverName, "."+o.serverName) || strings.HasSuffix(o.serverName, "."+v.serverName) {
				return nil, invalid(prefix+keyServerName, sn, fmt.Sprintf(
					"virtual cluster %s's server name must be neither virtual cluster %s's (%s) nor below or above it: a broker's name broker-<node id>.<server name> must say whose it is",
					name, o.name, o.serverName))
			}
		}
		servers, _ := props.Get(prefix + keyUpstream)
		var err error
		if v.upstream, err = bootstrapServers(prefix+keyUpstream, servers); err != nil {
			return nil, err
		}
		if len(v.upstream) == 0 {
			return nil, invalid(prefix+keyUpstream, servers, fmt.Sprintf("virtual cluster %s needs its upstream cluster's bootstrap servers", name))
		}
		out = append(out, v)
	}
	return out, nil
}

// validName reports whether s is a name of letters, digits and '-', or
// with dots a DNS name of such labels.
func validName(s string, dots bool) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || !dots && label != s {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// virtualSecurity is how the proxy connects to virtual cluster name's
// upstream: Kafka's client keys after its prefix
// (proxy.virtual.cluster.<name>.upstream.security.protocol, ...) when any
// is set, else the upstream. ones (shared).
func virtualSecurity(props config.Properties, name string, shared clientprops.Security) (clientprops.Security, error) {
	prefix := keyVirtualClusterPrefix + name + ".upstream."
	for k := range props {
		if strings.HasPrefix(k, prefix) && k != keyVirtualClusterPrefix+name+"."+keyUpstream {
			return clientprops.Read(props, prefix)
		}
	}
	return shared, nil
}

// proxyConfig is a reading of the configuration: its properties and the
// listeners read from them.
type proxyConfig = propset.Set

// readProxyConfig reads the listeners of props.
func readProxyConfig(props config.Properties) (*proxyConfig, error) { return propset.Read(props) }
