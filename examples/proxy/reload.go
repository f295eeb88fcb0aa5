package main

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
)

// reload is the proxy's SIGHUP: it re-reads the configuration with load
// (the -config file, the -set values and -upstream) and applies the TLS
// settings of its SSL and SASL_SSL listeners (Server.ReloadTLSFrom): their
// key and trust stores, and their other ssl.* keys, serve new connections
// on every port of the listener, while established connections go on. As
// in Kafka, a certificate for another subject DN, or without some of the
// names of the one in force, is refused unless ssl.allow.dn.changes or
// ssl.allow.san.changes allows it. The TLS watcher then watches the files
// the new reading names. Then it applies the connection quotas
// (Server.SetConnectionQuotas), among them the per-principal limits
// (kafkanet.max.connections.per.principal and its overrides, also per
// listener) to new connections; open ones stay. Other settings need a
// restart. A configuration that does not load or is refused is logged and
// changes nothing; the returned error is what was logged. The audit trail
// records the reload, applied or refused (auditReload).
func (p *proxy) reload(load func() (*proxyConfig, error)) error {
	p.reloading.Lock()
	defer p.reloading.Unlock()
	cfg, err := load()
	var scfg socketserver.Config
	if err == nil {
		scfg, err = config.Server(cfg.Properties())
	}
	if err == nil {
		if p.watcher != nil {
			p.watcher.SetListeners(config.TLSSources(cfg.Props, cfg.Set)) // first: nothing it read before can undo the reload
		}
		err = p.srv.ReloadTLSFrom(scfg)
	}
	if err != nil {
		p.log.Error("reload failed: the configuration is invalid or refused; the TLS settings stay as they were", "err", err)
		p.audit(auditReload, "nothing applied", err)
		return err
	}
	p.log.Info("reload: TLS settings applied")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the per-IP overrides' host names are resolved
	defer cancel()
	if err := p.srv.SetConnectionQuotas(ctx, *scfg.ConnectionQuotas); err != nil {
		p.log.Error("reload failed: the connection quotas stay as they were", "err", err)
		p.audit(auditReload, "tls-settings applied, connection-quotas unchanged", err)
		return err
	}
	q := scfg.ConnectionQuotas
	p.log.Info("reload: connection quotas applied", "max_connections_per_principal", q.MaxConnectionsPerPrincipal.Max,
		"max_connections_per_principal_overrides", len(q.MaxConnectionsPerPrincipal.Overrides),
		"listener_max_connections_per_principal", len(q.ListenerMaxConnectionsPerPrincipal))
	p.audit(auditReload, "tls-settings applied, connection-quotas applied", nil)
	return nil
}

// watchTLS starts reloading the proxy's TLS listeners when the PEM files
// their settings name change on disk, reading them every interval, until
// the proxy stops; it does nothing without a TLS listener or with an
// interval that is not positive.
func (p *proxy) watchTLS(interval time.Duration) {
	if interval <= 0 || !usesTLS(p.cfg) {
		return
	}
	w := security.NewTLSWatcher(config.TLSSources(p.cfg.Props, p.cfg.Set), func(name protocolmap.ListenerName, cfg *tls.Config) error {
		err := p.srv.ReloadTLS(name, cfg)
		p.auditTLSReload(name, err)
		return err
	})
	w.Interval = interval
	w.Logger = p.log
	p.reloading.Lock()
	p.watcher = w
	p.reloading.Unlock()
	p.work.Go(func() { _ = w.Run(p.ctx) })
}

// usesTLS reports whether a listener of cfg speaks SSL or SASL_SSL.
func usesTLS(cfg *proxyConfig) bool {
	for _, l := range cfg.All {
		if l.SecurityProtocol.UsesTLS() {
			return true
		}
	}
	return false
}
