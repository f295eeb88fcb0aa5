package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

// errNoConfigFile is reload's error when the broker has no -config file.
var errNoConfigFile = errors.New("no -config file to re-read")

// reload re-reads the configuration with load (the -config file with the
// -set values over it) and applies its connection quotas to every broker
// (max.connections, max.connections.per.ip and its overrides,
// max.connection.creation.rate, the listener-prefixed forms, and
// kafkanet.ip.connection.creation.rate and its overrides: the next
// connection is measured against them) and the SASL users it lists to
// every SASL listener of every broker; other changed settings take effect
// only on a restart. Users that are gone can no longer authenticate; their live
// connections close when their session expires, which
// connections.max.reauth.ms bounds (otherwise they live on). A file that
// does not load or is invalid is logged and changes nothing. load nil
// means there is no file to re-read. The returned error is what was
// logged.
func (c *cluster) reload(load func() (*listener.Set, error)) error {
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
		scfg, err = socketserver.ConfigFromProperties(cfg.Properties())
	}
	if err == nil {
		// Quotas first: a quota whose host does not resolve fails the reload
		// before any user changes.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, b := range c.brokers {
			if err = b.srv.SetQuotas(ctx, *scfg.Quotas); err != nil {
				break
			}
		}
		cancel()
		if err == nil {
			q := scfg.Quotas
			c.log.Info("reload: connection quotas applied", "max_connections", q.MaxConnections,
				"max_connections_per_ip", q.MaxConnectionsPerIP, "max_connection_creation_rate", q.MaxConnectionCreationRate,
				"ip_connection_creation_rate", q.IPConnectionCreationRate, "ip_connection_creation_rate_overrides", len(q.IPConnectionCreationRateOverrides))
		}
	}
	if err == nil {
		var (
			changes  []security.UserChange
			warnings []security.JAASWarning
		)
		changes, warnings, err = c.users.Reload(cfg)
		for _, w := range warnings {
			c.log.Warn(w.String())
		}
		for _, ch := range changes {
			c.log.Info("reload: SASL users", "listener", ch.Listener, "key", ch.Key,
				"added", names(ch.Added), "removed", names(ch.Removed), "password_changed", names(ch.PasswordChanged))
		}
	}
	if err != nil {
		c.log.Error("reload failed: the configuration is invalid; the SASL users and connection quotas stay as they were", "err", err)
		return err
	}
	return nil
}

// names formats user names for the log.
func names(users []string) string { return "[" + strings.Join(users, ",") + "]" }
