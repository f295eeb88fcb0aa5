package listener

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/kafkanet/kafkanet/listener/sasl"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// JAASUsers are the user stores of a broker's SASL listeners, read from
// Kafka's JAAS properties: each listener's users are the user_<name>
// options of PlainLoginModule in
// listener.name.<listener>.plain.sasl.jaas.config ([Config.PlainUsers]).
// The same users log in with every built-in mechanism the listener enables
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): their SCRAM credentials are
// derived from the passwords ([sasl.NewUsers]). (Kafka keeps SCRAM
// credentials in its metadata instead.) Listeners that enable no built-in
// mechanism need no users and get no store.
//
// Build them with [NewJAASUsers], hand [JAASUsers.Stores] to the socket
// server (its ListenerCredentials), and call [JAASUsers.Reload] to apply a
// changed configuration, for example on SIGHUP. A JAASUsers is safe for
// concurrent use.
type JAASUsers struct {
	mu     sync.Mutex // one Reload at a time
	stores map[protocolmap.ListenerName]*sasl.Users
	names  map[protocolmap.ListenerName][]string // user names only: passwords are not kept
}

// JAASWarning is a sasl.jaas.config setting a broker ignores: one without
// the listener and mechanism prefix (sasl.jaas.config or
// listener.name.<l>.sasl.jaas.config). Kafka logs "Server config
// sasl.jaas.config should be prefixed with SASL mechanism name, ignoring
// config"; the host should log it too.
type JAASWarning struct {
	// Key is the ignored key.
	Key string
	// Listener is a listener it may have been meant for.
	Listener protocolmap.ListenerName
}

// String returns the warning to log.
func (w JAASWarning) String() string {
	return fmt.Sprintf("ignoring %s: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in %s",
		w.Key, KeyPlainJAASConfig(w.Listener))
}

// UserChange is what a [JAASUsers.Reload] changed on one listener. It holds
// user names only, never passwords, so that it can be logged.
type UserChange struct {
	Listener protocolmap.ListenerName
	// Added and Removed are the users who joined and left;
	// PasswordChanged those whose password changed. Each is sorted.
	Added, Removed, PasswordChanged []string
}

// NewJAASUsers reads the users of every SASL listener of cfg that enables a
// built-in mechanism and builds their stores. Errors are those of
// [Config.PlainUsers] and of sasl.enabled.mechanisms; the warnings are
// about sasl.jaas.config settings the broker ignores, each key once.
func NewJAASUsers(cfg *Config) (*JAASUsers, []JAASWarning, error) {
	users, warnings, err := readJAASUsers(cfg)
	if err != nil {
		return nil, warnings, err
	}
	u := &JAASUsers{stores: map[protocolmap.ListenerName]*sasl.Users{}, names: map[protocolmap.ListenerName][]string{}}
	for _, name := range slices.Sorted(maps.Keys(users)) {
		store, err := sasl.NewUsers(users[name])
		if err != nil {
			return nil, warnings, fmt.Errorf("listener %s: %w", name, err)
		}
		u.stores[name] = store
		u.names[name] = slices.Sorted(maps.Keys(users[name]))
	}
	return u, warnings, nil
}

// Stores returns each listener's store, in the form of the socket server's
// ListenerCredentials. The stores stay the same across reloads: a reload
// changes their contents.
func (u *JAASUsers) Stores() map[protocolmap.ListenerName]sasl.CredentialStore {
	out := make(map[protocolmap.ListenerName]sasl.CredentialStore, len(u.stores))
	for name, store := range u.stores {
		out[name] = store
	}
	return out
}

// Reload re-reads the users from cfg, a new reading of the broker's
// configuration, and swaps every store's users for them: added users can
// log in at once, removed ones no more (their open connections last until
// their session expires, which connections.max.reauth.ms bounds). It
// returns what changed on each listener. Every listener with a store must
// still enable a built-in mechanism (changing listeners needs a restart;
// listeners new in cfg are left alone). On error nothing changes.
func (u *JAASUsers) Reload(cfg *Config) ([]UserChange, []JAASWarning, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	next, warnings, err := readJAASUsers(cfg)
	if err != nil {
		return nil, warnings, err
	}
	names := slices.Sorted(maps.Keys(u.stores))
	for _, name := range names {
		if _, ok := next[name]; !ok {
			return nil, warnings, fmt.Errorf("listener %s is no SASL listener with a built-in mechanism in the new configuration: changing listeners needs a restart", name)
		}
	}
	changes := make([]UserChange, 0, len(names))
	for _, name := range names {
		store, users := u.stores[name], next[name]
		ch := UserChange{Listener: name}
		for _, user := range slices.Sorted(maps.Keys(users)) {
			switch {
			case !store.Has(user):
				ch.Added = append(ch.Added, user)
			case !store.CheckPlain(user, users[user]):
				ch.PasswordChanged = append(ch.PasswordChanged, user)
			}
		}
		for _, user := range u.names[name] {
			if _, ok := users[user]; !ok {
				ch.Removed = append(ch.Removed, user)
			}
		}
		changes = append(changes, ch)
	}
	for i, name := range names {
		// ParsePlainJAAS refuses what Replace would; Replace fails only if
		// the system's random source does.
		if err := u.stores[name].Replace(next[name]); err != nil {
			return changes[:i], warnings, fmt.Errorf("listener %s: %w", name, err)
		}
		u.names[name] = slices.Sorted(maps.Keys(next[name]))
	}
	return changes, warnings, nil
}

// readJAASUsers reads the users of every SASL listener of cfg that enables
// a built-in mechanism: listener name → user name → password.
func readJAASUsers(cfg *Config) (map[protocolmap.ListenerName]map[string]string, []JAASWarning, error) {
	users := map[protocolmap.ListenerName]map[string]string{}
	var warnings []JAASWarning
	for _, l := range cfg.Listeners {
		if !l.SecurityProtocol.UsesSASL() {
			continue
		}
		mechs, err := cfg.saslMechanisms(l.Name)
		if err != nil {
			return nil, warnings, err
		}
		if !slices.ContainsFunc(mechs, func(m string) bool { return slices.Contains(sasl.Builtins, m) }) {
			continue
		}
		u, ignored, err := cfg.PlainUsers(l.Name)
		if ignored != "" && !slices.ContainsFunc(warnings, func(w JAASWarning) bool { return w.Key == ignored }) {
			warnings = append(warnings, JAASWarning{Key: ignored, Listener: l.Name})
		}
		if err != nil {
			return nil, warnings, err
		}
		users[l.Name] = u
	}
	return users, warnings, nil
}
