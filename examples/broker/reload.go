package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

// errNoConfigFile is reload's error when the broker has no -config file.
var errNoConfigFile = errors.New("no -config file to re-read")

// listenerDrainTimeout bounds the drain of the listeners a reload removes,
// as drainTimeout bounds a shutdown's: their connections still open
// then are closed at once.
const listenerDrainTimeout = drainTimeout

// reload is the broker's SIGHUP: it re-reads the configuration with load
// (the -config file with the -set values over it) and applies, in order,
// to every broker:
//
//   - the TLS configuration of each SSL and SASL_SSL listener
//     (socketserver.Server.ReloadTLSFrom: its key and trust stores, and its
//     other ssl.* keys, for new connections; established connections go
//     on), under Kafka's rule that a certificate for another subject DN, or
//     without some of the names of the one in force, is refused unless
//     ssl.allow.dn.changes or ssl.allow.san.changes allows it; the TLS
//     watcher then watches the files the new reading names;
//   - the connection quotas (max.connections, max.connections.per.ip and
//     its overrides, max.connection.creation.rate, the listener-prefixed
//     forms, kafkanet.ip.connection.creation.rate and its overrides, and
//     kafkanet.max.connections.per.principal and its overrides, also per
//     listener: the next connection is measured against them);
//   - the SASL users it lists, to every SASL listener. Users that are gone
//     can no longer authenticate; their live connections close when their
//     session expires, which connections.max.reauth.ms bounds (otherwise
//     they live on);
//   - its listeners, advertised.listeners and listener.security.protocol.map,
//     as Kafka applies them dynamically (KIP-226, listener.Set.Changes):
//     listeners it adds are bound and served, with their own security,
//     users and quotas; listeners it removes stop accepting and drain (each
//     request in flight is answered, then the connection closes, within
//     listenerDrainTimeout or until ctx ends); Metadata advertises the new
//     endpoints. The inter-broker and control-plane listeners, and an
//     existing listener's protocol or address, change only on a restart:
//     such a change is refused before any step.
//
// Other changed settings take effect only on a restart. A file that does
// not load or is invalid (an invalid key store among them: the error names
// its key) is logged and changes nothing; a refused step leaves it and the
// steps after it as they were. load nil means there is no file to re-read.
// The returned error is what was logged.
func (c *cluster) reload(ctx context.Context, load func() (*brokerConfig, error)) error {
	c.reloading.Lock()
	defer c.reloading.Unlock()
	if load == nil {
		c.log.Warn("reload: nothing to re-read: the broker runs without -config", "err", errNoConfigFile)
		return errNoConfigFile
	}
	cfg, err := load()
	if err == nil {
		_, err = readSettings(cfg)
	}
	var scfg socketserver.Config
	if err == nil {
		scfg, err = config.Server(cfg.Properties())
	}
	var plan listenerPlan
	if err == nil {
		plan, err = c.planListeners(cfg) // a listener change that needs a restart fails the reload before any step
	}
	if err == nil {
		err = c.reloadTLS(cfg, scfg)
	}
	if err == nil {
		// Quotas before users: a quota whose host does not resolve fails
		// the reload before any user changes. An added listener's own
		// quotas (listener.name.<l>.max.connections) are in force before
		// it binds.
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		for _, b := range c.brokers {
			if err = b.srv.SetConnectionQuotas(qctx, *scfg.ConnectionQuotas); err != nil {
				break
			}
		}
		cancel()
		if err == nil {
			q := scfg.ConnectionQuotas
			c.log.Info("reload: connection quotas applied", "max_connections", q.MaxConnections,
				"max_connections_per_ip", q.MaxConnectionsPerIP, "max_connection_creation_rate", q.MaxConnectionCreationRate,
				"ip_connection_creation_rate", q.IPConnectionCreationRate, "ip_connection_creation_rate_overrides", len(q.IPConnectionCreationRateOverrides),
				"max_connections_per_principal", q.MaxConnectionsPerPrincipal.Max,
				"max_connections_per_principal_overrides", len(q.MaxConnectionsPerPrincipal.Overrides),
				"listener_max_connections_per_principal", len(q.ListenerMaxConnectionsPerPrincipal))
		}
	}
	if err == nil {
		// The users before the listeners: an added SASL listener's store
		// is made here (JAASUsers.Reload), a removed one's dropped.
		var (
			changes  []security.UserChange
			warnings []config.JAASWarning
		)
		var lists map[protocolmap.ListenerName]security.ListenerUsers
		if lists, warnings, err = config.JAASUsers(cfg.Props, cfg.Set); err == nil {
			changes, err = c.users.Reload(cfg.Set, lists)
		}
		for _, w := range warnings {
			c.log.Warn(w.String())
		}
		for _, ch := range changes {
			c.log.Info("reload: SASL users", "listener", ch.Listener, "key", ch.Key,
				"added", names(ch.Added), "removed", names(ch.Removed), "password_changed", names(ch.PasswordChanged))
		}
	}
	if err != nil {
		c.log.Error("reload failed: the configuration is invalid or refused; the failing step and those after it changed nothing", "err", err)
		return err
	}
	if err := c.applyListeners(ctx, plan); err != nil {
		c.log.Error("reload: changing listeners failed", "err", err)
		return err
	}
	return nil
}

// listenerPlan is a reload's change of every broker's listeners, checked.
type listenerPlan struct {
	sets    []*brokerConfig    // each broker's listeners in the new configuration
	changes []listener.Changes // what they add, remove and advertise anew
}

// planListeners works out each broker's listeners in cfg (broker i's
// ports moved by i*portStep, as at start) and checks that a running broker
// may change to them (listener.Set.Changes); it changes nothing.
func (c *cluster) planListeners(cfg *brokerConfig) (listenerPlan, error) {
	sets, err := brokerConfigs(cfg, len(c.brokers))
	if err != nil {
		return listenerPlan{}, err
	}
	plan := listenerPlan{sets: sets}
	for i, b := range c.brokers {
		ch, err := b.srv.Listeners().Changes(sets[i].Set)
		if err != nil {
			return listenerPlan{}, fmt.Errorf("broker %d: %w", b.id, err)
		}
		plan.changes = append(plan.changes, ch)
	}
	return plan, nil
}

// applyListeners makes each broker's listeners those of plan
// (Server.SetListeners): an added listener is configured as at start
// (socketServerConfig: its security, the broker's APIs, its users), a
// removed one drains within listenerDrainTimeout, and Metadata then
// advertises what every broker serves. It logs each change.
func (c *cluster) applyListeners(ctx context.Context, plan listenerPlan) error {
	ctx, cancel := context.WithTimeout(ctx, listenerDrainTimeout)
	defer cancel()
	var errs []error
	for i, b := range c.brokers {
		ch := plan.changes[i]
		var per map[protocolmap.ListenerName]*socketserver.ListenerConfig
		if len(ch.Added) > 0 {
			scfg, err := socketServerConfig(plan.sets[i], c.settings, b)
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %d: %w", b.id, err))
				continue
			}
			per = map[protocolmap.ListenerName]*socketserver.ListenerConfig{}
			for _, l := range ch.Added {
				per[l.Name] = scfg.PerListener[l.Name]
			}
		}
		for _, l := range ch.Removed {
			c.log.Info("reload: removing listener: it accepts no more connections, and its connections drain", "broker", b.id, "listener", l.Name)
		}
		if err := b.srv.SetListeners(ctx, plan.sets[i].Set, per); err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", b.id, err))
		}
		b.cfg = &brokerConfig{Set: b.srv.Listeners(), Props: plan.sets[i].Props}
		for _, l := range ch.Removed {
			c.log.Info("reload: listener removed", "broker", b.id, "listener", l.Name)
		}
	}
	c.updateInfos()
	for i, b := range c.brokers {
		info := c.brokerInfos()[i]
		var added []listener.Listener
		for _, l := range plan.changes[i].Added {
			if l, ok := b.cfg.Listener(l.Name); ok && b.srv.Addr(l.Name) != nil {
				added = append(added, l)
			}
		}
		b.logListeners(info, added)
		for _, l := range plan.changes[i].Readvertised {
			advertised := "-"
			for _, ep := range info.EndPoints {
				if ep.Name == l.Name {
					advertised = ep.Address()
				}
			}
			c.log.Info("reload: listener advertised anew", "broker", b.id, "listener", l.Name, "advertised", advertised)
		}
	}
	return errors.Join(errs...)
}

// reloadTLS applies the TLS configurations of scfg, read from cfg, to every
// broker. The watcher is pointed at cfg's files first, so that nothing it
// read from the old ones can undo the reload.
func (c *cluster) reloadTLS(cfg *brokerConfig, scfg socketserver.Config) error {
	if c.watcher != nil {
		c.watcher.SetListeners(config.TLSSources(cfg.Props, cfg.Set))
	}
	for _, b := range c.brokers {
		if err := b.srv.ReloadTLSFrom(scfg); err != nil {
			return err
		}
	}
	return nil
}

// watchTLS starts reloading the TLS listeners of every broker when the PEM
// files their settings name change on disk, reading them every interval,
// until the cluster stops; it does nothing with an interval that is not
// positive. It runs without a TLS listener too (it then reads no file),
// so that one a reload adds is watched from then on.
func (c *cluster) watchTLS(cfg *brokerConfig, interval time.Duration) {
	if interval <= 0 {
		return
	}
	c.watcher = security.NewTLSWatcher(config.TLSSources(cfg.Props, cfg.Set), c.applyTLS)
	c.watcher.Interval = interval
	c.watcher.Logger = c.log
	c.waiting.Go(func() { _ = c.watcher.Run(c.serveCtx) })
}

// applyTLS gives a listener of every broker a TLS configuration the
// watcher read. A listener the servers do not have (yet) is skipped: the watcher is
// pointed at a new reading before a reload adds its listeners, which are
// built from the same files.
func (c *cluster) applyTLS(name protocolmap.ListenerName, cfg *tls.Config) error {
	for _, b := range c.brokers {
		if err := b.srv.ReloadTLS(name, cfg); err != nil && !errors.Is(err, listener.ErrUnknownListener) {
			return err
		}
	}
	return nil
}

// names formats user names for the log.
func names(users []string) string { return "[" + strings.Join(users, ",") + "]" }
