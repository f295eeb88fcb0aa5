package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/listener/sasl"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// saslUsers are the users of each SASL listener, as read from the
// configuration: listener name → user name → password.
type saslUsers map[protocolmap.ListenerName]map[string]string

// readSASLUsers reads the users of every SASL listener of cfg from Kafka's
// listener.name.<listener>.plain.sasl.jaas.config (the user_<name> options
// of PlainLoginModule). The same users log in with every mechanism the
// listener enables: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. (Kafka keeps
// SCRAM credentials in its metadata instead; the example has none.)
//
// It also checks that the socket server implements every mechanism of
// sasl.enabled.mechanisms, so that -check refuses what serving would, and
// returns a warning for each sasl.jaas.config setting that lacks the
// listener and mechanism prefix (sasl.jaas.config,
// listener.name.<l>.sasl.jaas.config), which a broker ignores, for the
// caller to log.
func readSASLUsers(cfg *listener.Config) (users saslUsers, warnings []string, err error) {
	users = saslUsers{}
	var ignored []string
	for _, l := range cfg.Listeners {
		if !l.SecurityProtocol.UsesSASL() {
			continue
		}
		sec, err := cfg.Security(l.Name)
		if err != nil {
			return nil, nil, err
		}
		for _, mech := range sec.SASLMechanisms {
			if _, err := sasl.Builtin(mech, noUsers{}); err != nil {
				v, from, _ := cfg.ListenerValue(l.Name, listener.KeySASLEnabledMechanisms)
				return nil, nil, &protocolmap.ConfigError{Key: from, Value: v, Err: listener.ErrSASLMechanism, Rule: fmt.Sprintf(
					"the socket server does not implement SASL mechanism %s (listener %s): use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech, l.Name)}
			}
		}
		u, skipped, err := cfg.PlainUsers(l.Name)
		if skipped != "" && !slices.Contains(ignored, skipped) {
			ignored = append(ignored, skipped)
			warnings = append(warnings, ignoredJAASWarning(skipped, l.Name))
		}
		if err != nil {
			return nil, nil, err
		}
		users[l.Name] = u
	}
	return users, warnings, nil
}

// ignoredJAASWarning is the warning for a sasl.jaas.config setting without
// the mechanism prefix, which a broker does not read (Kafka logs "Server config
// sasl.jaas.config should be prefixed with SASL mechanism name, ignoring
// config"); want is a listener it was meant for.
func ignoredJAASWarning(key string, want protocolmap.ListenerName) string {
	return fmt.Sprintf("ignoring %s: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in %s",
		key, listener.KeyPlainJAASConfig(want))
}

// noUsers is an empty credential store, for checking mechanism names.
type noUsers struct{}

func (noUsers) CheckPlain(string, string) bool { return false }
func (noUsers) SCRAM(string, string) (sasl.SCRAMCredential, bool) {
	return sasl.SCRAMCredential{}, false
}

// credentials are the cluster's SASL user stores, one per SASL listener,
// shared by all brokers of the process (as a Kafka cluster shares its
// SCRAM credentials), so that a reload reaches every broker at once.
type credentials struct {
	stores map[protocolmap.ListenerName]*sasl.Users
	names  map[protocolmap.ListenerName][]string // user names only: passwords are not kept
}

// newCredentials builds the stores of users.
func newCredentials(users saslUsers) (*credentials, error) {
	c := &credentials{stores: map[protocolmap.ListenerName]*sasl.Users{}, names: map[protocolmap.ListenerName][]string{}}
	for name, u := range users {
		store, err := sasl.NewUsers(u)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", name, err)
		}
		c.stores[name] = store
		c.names[name] = slices.Sorted(maps.Keys(u))
	}
	return c, nil
}

// forServer returns the stores in the form socketserver.Config's
// ListenerCredentials takes.
func (c *credentials) forServer() map[protocolmap.ListenerName]sasl.CredentialStore {
	out := map[protocolmap.ListenerName]sasl.CredentialStore{}
	for name, store := range c.stores {
		out[name] = store
	}
	return out
}

// userChange is what a reload changed on one listener: user names only.
type userChange struct {
	listener                protocolmap.ListenerName
	added, removed, changed []string // changed: the password changed
}

// replace swaps every listener's users for those of next, which must name
// every SASL listener the stores serve; it returns what changed. All lists
// are checked before any is applied.
func (c *credentials) replace(next saslUsers) ([]userChange, error) {
	names := slices.Sorted(maps.Keys(c.stores))
	for _, name := range names {
		if _, ok := next[name]; !ok {
			return nil, fmt.Errorf("listener %s is no SASL listener in the new configuration: changing listeners needs a restart", name)
		}
	}
	var changes []userChange
	for _, name := range names {
		store, users := c.stores[name], next[name]
		ch := userChange{listener: name}
		for _, user := range slices.Sorted(maps.Keys(users)) {
			switch {
			case !store.Has(user):
				ch.added = append(ch.added, user)
			case !store.CheckPlain(user, users[user]):
				ch.changed = append(ch.changed, user)
			}
		}
		for _, user := range c.names[name] {
			if _, ok := users[user]; !ok {
				ch.removed = append(ch.removed, user)
			}
		}
		if err := store.Replace(users); err != nil {
			return changes, fmt.Errorf("listener %s: %w", name, err)
		}
		c.names[name] = slices.Sorted(maps.Keys(users))
		changes = append(changes, ch)
	}
	return changes, nil
}

// errNoConfigFile is reload's error when the broker has no -config file.
var errNoConfigFile = errors.New("no -config file to re-read")

// reload re-reads the configuration with load (the -config file with the
// -set values over it) and applies the SASL users it lists to every SASL
// listener of every broker; other changed settings take effect only on a
// restart. Users that are gone can no longer authenticate; their live
// connections close when their session expires, which
// connections.max.reauth.ms bounds (otherwise they live on). A file that
// does not load or is invalid is logged and changes nothing. load nil
// means there is no file to re-read. The returned error is what was
// logged.
func (c *cluster) reload(load func() (*listener.Config, error)) error {
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
	var users saslUsers
	var warnings []string
	if err == nil {
		users, warnings, err = readSASLUsers(cfg)
	}
	var scfg socketserver.Config
	if err == nil {
		scfg, err = socketserver.ConfigFromProperties(cfg)
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
			c.log.Info("reload: connection quotas applied", "max_connections", scfg.Quotas.MaxConnections,
				"max_connections_per_ip", scfg.Quotas.MaxConnectionsPerIP, "max_connection_creation_rate", scfg.Quotas.MaxConnectionCreationRate)
		}
	}
	if err == nil {
		for _, w := range warnings {
			c.log.Warn(w)
		}
		var changes []userChange
		changes, err = c.creds.replace(users)
		for _, ch := range changes {
			c.log.Info("reload: SASL users", "listener", ch.listener,
				"added", names(ch.added), "removed", names(ch.removed), "password_changed", names(ch.changed))
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
