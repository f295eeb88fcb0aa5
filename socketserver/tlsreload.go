package socketserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// ErrNoTLS is wrapped by the error of [Server.ReloadTLS] for a listener
// that speaks neither SSL nor SASL_SSL.
var ErrNoTLS = errors.New("socketserver: listener does not use TLS")

// listenerTLS is a listener's TLS configuration, which reloads replace.
// Each handshake takes the configuration in force when it begins
// (config), so that a reload applies to the connections accepted after it
// and leaves the others as they are.
type listenerTLS struct {
	current atomic.Pointer[tls.Config]
	// mu serialises reloads, each a check against the configuration in
	// force and a swap; ReloadTLSFrom holds the mu of every listener it
	// reloads, taken in the order of the server's listeners.
	mu sync.Mutex
	// settings hold the ssl.allow.dn.changes and ssl.allow.san.changes in
	// force (the rest is unused here); under mu.
	settings security.Settings
}

func newListenerTLS(conf security.Settings) *listenerTLS {
	t := &listenerTLS{settings: conf}
	t.current.Store(serverTLS(conf.TLS))
	return t
}

// config returns the configuration a handshake beginning now uses.
func (t *listenerTLS) config() *tls.Config { return t.current.Load() }

// serverTLS returns the configuration a listener serves for cfg: a copy,
// so that the host may change cfg afterwards, with TLS 1.2 at least.
func serverTLS(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// tlsListener returns the TLS state of listener name, or an error
// wrapping listener.ErrUnknownListener or ErrNoTLS. The listeners may change
// (AddListener, RemoveListener): they are those served now.
func (s *Server) tlsListener(name protocolmap.ListenerName) (*listenerState, error) {
	n := protocolmap.ListenerName(normalise(name))
	for _, ls := range s.serving() {
		if ls.cfg.Name != n {
			continue
		}
		if ls.sec.tls == nil {
			return nil, fmt.Errorf("%w: listener %s speaks %s", ErrNoTLS, ls.cfg.Name, ls.cfg.SecurityProtocol)
		}
		return ls, nil
	}
	return nil, fmt.Errorf("socketserver: %w: %s", listener.ErrUnknownListener, name)
}

// ReloadTLS replaces the TLS configuration of listener name (an SSL or
// SASL_SSL listener; the name is compared without regard to case) with
// cfg, for the connections it accepts from then on: a connection whose
// handshake has begun keeps the configuration it began with, and
// established connections are not touched. It rotates a listener's
// certificate (its key store) and the certificates its client
// authentication trusts (its trust store) without a restart, as Kafka
// reconfigures them (KIP-226). [Server.TLSConfig] returns the configuration
// in force, for a host that changes only its certificate or its trust
// store; [Server.ReloadTLSFrom] reloads from Kafka's keys; and
// security.TLSWatcher calls ReloadTLS when the PEM files change.
//
// cfg is first checked as Kafka checks a new key store, under the
// listener's ssl.allow.dn.changes and ssl.allow.san.changes (its
// ListenerConfig.Security, or the settings of the last ReloadTLSFrom): its
// certificate must have the subject DN of the one in force and all of its
// subject alternative names (see security.Settings.CheckCertificateChange).
// A cfg refused changes nothing; the error is then a
// *config.Error naming the allow key, wrapping
// security.ErrCertificateChange. Whatever else cfg holds applies as given
// (client authentication, versions, cipher suites, callbacks): unlike
// Kafka, which reconfigures only the stores, a reload may change them.
// cfg is copied, so the caller may change it afterwards, and a version
// below TLS 1.2 is raised to it, as in New.
//
// A name that is no listener of the server gives an error wrapping
// listener.ErrUnknownListener; a listener without TLS, one wrapping ErrNoTLS; a cfg
// that serves no certificate (nil, or without Certificates,
// GetCertificate and GetConfigForClient), one wrapping
// security.ErrTLSConfig.
func (s *Server) ReloadTLS(name protocolmap.ListenerName, cfg *tls.Config) error {
	ls, err := s.tlsListener(name)
	if err != nil {
		return err
	}
	t := ls.sec.tls
	t.mu.Lock()
	defer t.mu.Unlock()
	next, err := t.check(ls, cfg, t.settings)
	if err != nil {
		return err
	}
	old := t.current.Swap(next)
	s.logReload(ls, old, next)
	return nil
}

// check returns the configuration listener ls would serve for cfg, or why
// settings refuse it. It requires t.mu.
func (t *listenerTLS) check(ls *listenerState, cfg *tls.Config, settings security.Settings) (*tls.Config, error) {
	if err := settings.CheckCertificateChange(t.config(), cfg); err != nil {
		return nil, fmt.Errorf("socketserver: listener %s: TLS reload refused: %w", ls.cfg.Name, err)
	}
	return serverTLS(cfg), nil
}

// ReloadTLSFrom reloads the TLS configuration of the server's TLS
// listeners from cfg, a configuration that config.Server read from
// Kafka's keys again (the properties changed, or the PEM files they name
// were rotated): each listener takes cfg.PerListener[name].Security.TLS,
// as [Server.ReloadTLS] takes a configuration, checked under that entry's
// AllowDNChanges and AllowSANChanges, which become the listener's for
// later reloads. Every listener takes its new configuration, or, when one
// is refused, none does; the error names the listener and, through its
// *config.Error, the key.
//
// A TLS listener that cfg does not configure with TLS (it is missing from
// cfg.PerListener, or speaks another protocol there: a change of
// listeners, which this method does not make) keeps its configuration.
// Nothing else of cfg is applied: [Server.SetConnectionQuotas] applies its quotas.
func (s *Server) ReloadTLSFrom(cfg Config) error {
	type change struct {
		ls       *listenerState
		next     *tls.Config
		settings security.Settings
	}
	var changes []change
	for _, ls := range s.serving() { // in the server's order, which a listener change keeps
		t := ls.sec.tls
		lc := cfg.PerListener[ls.cfg.Name]
		if t == nil || lc == nil || lc.Security.TLS == nil {
			continue
		}
		t.mu.Lock()
		defer t.mu.Unlock() // held until every listener is checked and swapped
		next, err := t.check(ls, lc.Security.TLS, lc.Security)
		if err != nil {
			return err
		}
		changes = append(changes, change{ls, next, lc.Security})
	}
	for _, c := range changes {
		t := c.ls.sec.tls
		old := t.current.Swap(c.next)
		t.settings = c.settings
		s.logReload(c.ls, old, c.next)
	}
	return nil
}

// TLSConfig returns a copy of the TLS configuration listener name serves
// new connections with, nil for a listener without TLS or a name that is
// no listener of the server. A host that rotates only the certificate
// (or only the trust store) changes Certificates (or ClientCAs) in the
// copy and hands it to [Server.ReloadTLS].
func (s *Server) TLSConfig(name protocolmap.ListenerName) *tls.Config {
	ls, err := s.tlsListener(name)
	if err != nil {
		return nil
	}
	return ls.sec.tls.config().Clone()
}

// logReload logs a listener's new TLS configuration and its certificate:
// at info level when the certificate changed, at debug level when the
// reload kept it (the watcher's first reading, a SIGHUP that changed no
// file).
func (s *Server) logReload(ls *listenerState, old, cfg *tls.Config) {
	attrs := []any{"listener", ls.cfg.Name}
	leaf := firstLeaf(cfg)
	if leaf != nil {
		attrs = append(attrs, "subject", security.SubjectDN(leaf), "serial", fmt.Sprintf("%x", leaf.SerialNumber), "not_after", leaf.NotAfter)
	}
	if prev := firstLeaf(old); leaf != nil && prev != nil && bytes.Equal(prev.Raw, leaf.Raw) {
		s.log.Debug("TLS configuration reloaded; the certificate is the same", attrs...)
		return
	}
	s.log.Info("TLS configuration reloaded; new connections use it", attrs...)
}

// firstLeaf returns the leaf of cfg's first certificate, or nil.
func firstLeaf(cfg *tls.Config) *x509.Certificate {
	if cfg == nil || len(cfg.Certificates) == 0 {
		return nil
	}
	c := cfg.Certificates[0]
	if c.Leaf != nil {
		return c.Leaf
	}
	if len(c.Certificate) == 0 {
		return nil
	}
	leaf, _ := x509.ParseCertificate(c.Certificate[0])
	return leaf
}
