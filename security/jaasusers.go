package security

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// JAASUsers are the user stores of a broker's SASL listeners, read from
// Kafka's JAAS properties, per listener and built-in mechanism:
//
//   - PLAIN's users are the user_<name> options of PlainLoginModule in
//     listener.name.<listener>.plain.sasl.jaas.config.
//   - SCRAM-SHA-256's and SCRAM-SHA-512's are the user_<name> options of
//     ScramLoginModule in listener.name.<listener>.scram-sha-256.sasl.jaas.config
//     and listener.name.<listener>.scram-sha-512.sasl.jaas.config
//     when that key names users; else, the PLAIN key's users log in with
//     the SCRAM mechanism too. (Kafka keeps SCRAM
//     credentials in its metadata instead, and reads only the broker's own
//     username and password from ScramLoginModule; a SCRAM key that names
//     no users is warned about.)
//
// SCRAM credentials are derived from the passwords ([sasl.NewUsers]).
// Listeners that enable no built-in mechanism need no users and get no
// store.
//
// Build them with [NewJAASUsers], hand each of [JAASUsers.Stores] to the
// socket server (the Credentials of the listener's
// socketserver.ListenerConfig), and call [JAASUsers.Reload] to apply a
// changed configuration, for example on SIGHUP. A JAASUsers is safe for
// concurrent use.
type JAASUsers struct {
	mu     sync.Mutex // one Reload at a time
	stores map[protocolmap.ListenerName]*jaasStore
	// users are each listener's user lists, by the JAAS key they are
	// read from; names their user names only: passwords are not kept.
	users map[protocolmap.ListenerName]map[string]*sasl.Users
	names map[protocolmap.ListenerName]map[string][]string
}

// JAASWarning is a sasl.jaas.config setting a broker ignores, or reads
// without effect. With no Reason, it is a key without the listener and
// mechanism prefix (sasl.jaas.config or listener.name.<l>.sasl.jaas.config):
// Kafka logs "Server config sasl.jaas.config should be prefixed with SASL
// mechanism name, ignoring config"; the host should log it too. Else
// Reason says what is wrong with Key: a SCRAM key of a mechanism the
// listener does not enable, or one that names no users.
type JAASWarning struct {
	// Key is the key warned about.
	Key string
	// Listener is a listener it may have been meant for.
	Listener protocolmap.ListenerName
	// Reason is the warning, a sentence naming Key; empty for an
	// un-prefixed key.
	Reason string
}

// String returns the warning to log.
func (w JAASWarning) String() string {
	if w.Reason != "" {
		return w.Reason
	}
	return fmt.Sprintf("ignoring %s: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in %s",
		w.Key, mechanismKey(w.Listener, "PLAIN", KeySASLJAASConfig))
}

// UserChange is what a [JAASUsers.Reload] changed in one list of users of
// a listener. It holds user names only, never passwords, so that it can be
// logged.
type UserChange struct {
	Listener protocolmap.ListenerName
	// Key is the JAAS key the users are read from: the listener's PLAIN
	// key, or a SCRAM mechanism's that names users of its own.
	Key string
	// Added and Removed are the users who joined and left;
	// PasswordChanged those whose password changed. Each is sorted.
	Added, Removed, PasswordChanged []string
}

// NewJAASUsers reads the users of every SASL listener of set that enables a
// built-in mechanism and builds their stores. Errors are
// *config.Error values: those of sasl.enabled.mechanisms;
// wrapping [ErrJAASConfig], a JAAS key that does not parse or does not
// configure the mechanism's login module (its value shown as [hidden]),
// a listener enabling PLAIN whose PLAIN key is not set (Kafka would fall
// back to a static JAAS file, which this package does not read), and, for
// a listener that enables a SCRAM mechanism but not PLAIN, one naming the
// SCRAM key when neither it nor the PLAIN key names users; the warnings are about sasl.jaas.config settings the broker ignores or that
// name no users, each key once.
func NewJAASUsers(set *listener.Set) (*JAASUsers, []JAASWarning, error) {
	read, warnings, err := readJAASUsers(set)
	if err != nil {
		return nil, warnings, err
	}
	u := &JAASUsers{
		stores: map[protocolmap.ListenerName]*jaasStore{},
		users:  map[protocolmap.ListenerName]map[string]*sasl.Users{},
		names:  map[protocolmap.ListenerName]map[string][]string{},
	}
	for _, name := range slices.Sorted(maps.Keys(read)) {
		users, err := newListenerUsers(name, read[name])
		if err != nil {
			return nil, warnings, err
		}
		u.add(name, read[name], users)
	}
	return u, warnings, nil
}

// newListenerUsers builds the user lists of listener name, by key.
func newListenerUsers(name protocolmap.ListenerName, lu listenerUsers) (map[string]*sasl.Users, error) {
	out := map[string]*sasl.Users{}
	for _, key := range slices.Sorted(maps.Keys(lu.byKey)) {
		store, err := sasl.NewUsers(lu.byKey[key])
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %w", name, key, err)
		}
		out[key] = store
	}
	return out, nil
}

// add gives listener name its store, over users, read as lu.
func (u *JAASUsers) add(name protocolmap.ListenerName, lu listenerUsers, users map[string]*sasl.Users) {
	u.users[name], u.names[name] = users, map[string][]string{}
	for key, list := range lu.byKey {
		u.names[name][key] = slices.Sorted(maps.Keys(list))
	}
	u.stores[name] = &jaasStore{}
	u.stores[name].route.Store(lu.route(users))
}

// Stores returns each listener's store, for the Credentials of its
// socketserver.ListenerConfig. The stores stay the same across reloads: a reload
// changes their contents.
func (u *JAASUsers) Stores() map[protocolmap.ListenerName]sasl.CredentialStore {
	out := make(map[protocolmap.ListenerName]sasl.CredentialStore, len(u.stores))
	for name, store := range u.stores {
		out[name] = store
	}
	return out
}

// Reload re-reads the users from set, a new reading of the broker's
// configuration, and swaps every store's users for them: added users can
// log in at once, removed ones no more (their open connections last until
// their session expires, which connections.max.reauth.ms bounds). It
// returns what changed in each list of users of each listener, by
// listener and key; a list whose key no longer names users is reported
// with all its users removed. A listener still in set that has a store
// must still enable a built-in mechanism (changing a listener's protocol
// or mechanisms needs a restart). The listeners set adds, as a broker adds
// listeners at run time (listener.Set.Changes), get stores of their own,
// which [JAASUsers.Stores] then returns, and their users are reported
// added; those it removes lose theirs (their users reported removed).
// On error nothing changes.
func (u *JAASUsers) Reload(set *listener.Set) ([]UserChange, []JAASWarning, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	next, warnings, err := readJAASUsers(set)
	if err != nil {
		return nil, warnings, err
	}
	var names, gone []protocolmap.ListenerName
	for _, name := range slices.Sorted(maps.Keys(u.stores)) {
		_, ok := next[name]
		_, kept := set.Listener(name)
		switch {
		case ok:
			names = append(names, name)
		case kept:
			return nil, warnings, fmt.Errorf("listener %s is no SASL listener with a built-in mechanism in the new configuration: changing a listener's protocol or mechanisms needs a restart", name)
		default:
			gone = append(gone, name)
		}
	}
	// Lists new in set are built first, so that an error changes nothing.
	fresh := map[protocolmap.ListenerName]map[string]*sasl.Users{}
	added := map[protocolmap.ListenerName]map[string]*sasl.Users{}
	var changes []UserChange
	for _, name := range slices.Sorted(maps.Keys(next)) {
		if _, ok := u.stores[name]; ok {
			continue
		}
		users, err := newListenerUsers(name, next[name])
		if err != nil {
			return nil, warnings, err
		}
		added[name] = users
		for key, list := range next[name].byKey {
			changes = append(changes, UserChange{Listener: name, Key: key, Added: slices.Sorted(maps.Keys(list))})
		}
	}
	for _, name := range gone {
		for key, list := range u.names[name] {
			changes = append(changes, UserChange{Listener: name, Key: key, Removed: list})
		}
	}
	for _, name := range names {
		old, lists := u.users[name], next[name].byKey
		fresh[name] = map[string]*sasl.Users{}
		for _, key := range slices.Sorted(maps.Keys(lists)) {
			users := lists[key]
			ch := UserChange{Listener: name, Key: key}
			store, ok := old[key]
			if !ok {
				if store, err = sasl.NewUsers(users); err != nil {
					return nil, warnings, fmt.Errorf("listener %s: %s: %w", name, key, err)
				}
				fresh[name][key] = store
				ch.Added = slices.Sorted(maps.Keys(users))
				changes = append(changes, ch)
				continue
			}
			for _, user := range slices.Sorted(maps.Keys(users)) {
				switch {
				case !store.Has(user):
					ch.Added = append(ch.Added, user)
				case !store.CheckPlain(user, users[user]):
					ch.PasswordChanged = append(ch.PasswordChanged, user)
				}
			}
			for _, user := range u.names[name][key] {
				if _, ok := users[user]; !ok {
					ch.Removed = append(ch.Removed, user)
				}
			}
			changes = append(changes, ch)
		}
		for _, key := range slices.Sorted(maps.Keys(old)) {
			if _, ok := lists[key]; !ok {
				changes = append(changes, UserChange{Listener: name, Key: key, Removed: u.names[name][key]})
			}
		}
	}
	slices.SortStableFunc(changes, func(a, b UserChange) int {
		return cmp.Or(cmp.Compare(a.Listener, b.Listener), cmp.Compare(a.Key, b.Key))
	})
	for _, name := range names {
		lists := next[name].byKey
		for _, key := range slices.Sorted(maps.Keys(lists)) {
			if store, ok := u.users[name][key]; ok {
				// parsePlainJAAS and parseSCRAMJAAS refuse what Replace
				// would; Replace fails only if the system's random source
				// does.
				if err := store.Replace(lists[key]); err != nil {
					return changes, warnings, fmt.Errorf("listener %s: %s: %w", name, key, err)
				}
			} else {
				u.users[name][key] = fresh[name][key]
			}
			u.names[name][key] = slices.Sorted(maps.Keys(lists[key]))
		}
		for key := range u.users[name] {
			if _, ok := lists[key]; !ok {
				delete(u.users[name], key)
				delete(u.names[name], key)
			}
		}
		u.stores[name].route.Store(next[name].route(u.users[name]))
	}
	for name, users := range added {
		u.add(name, next[name], users)
	}
	for _, name := range gone {
		delete(u.stores, name)
		delete(u.users, name)
		delete(u.names, name)
	}
	return changes, warnings, nil
}

// jaasStore is a listener's credential store: each built-in mechanism
// asks the user list its JAAS key gives it. Reload swaps the route.
type jaasStore struct {
	route atomic.Pointer[jaasRoute]
}

// jaasRoute is the user list of each built-in mechanism; nil for one the
// listener does not enable.
type jaasRoute struct {
	plain, sha256, sha512 *sasl.Users
}

// CheckPlain implements sasl.CredentialStore with PLAIN's users.
func (s *jaasStore) CheckPlain(user, password string) bool {
	r := s.route.Load()
	if r.plain == nil {
		return false
	}
	return r.plain.CheckPlain(user, password)
}

// SCRAM implements sasl.CredentialStore with the mechanism's users.
func (s *jaasStore) SCRAM(mechanism, user string) (sasl.SCRAMCredential, bool) {
	r := s.route.Load()
	users := r.sha512
	if mechanism == sasl.SCRAMSHA256 {
		users = r.sha256
	}
	if users == nil {
		return sasl.SCRAMCredential{}, false
	}
	return users.SCRAM(mechanism, user)
}

// listenerUsers are the user lists of one listener, by JAAS key, and the
// key each built-in mechanism reads.
type listenerUsers struct {
	byKey                 map[string]map[string]string
	plain, sha256, sha512 string // "" for a mechanism not enabled
}

// route returns the stores of stores (by key) that each mechanism asks.
func (lu listenerUsers) route(stores map[string]*sasl.Users) *jaasRoute {
	return &jaasRoute{plain: stores[lu.plain], sha256: stores[lu.sha256], sha512: stores[lu.sha512]}
}

// readJAASUsers reads the user lists of every SASL listener of set that
// enables a built-in mechanism.
func readJAASUsers(set *listener.Set) (map[protocolmap.ListenerName]listenerUsers, []JAASWarning, error) {
	out := map[protocolmap.ListenerName]listenerUsers{}
	var warnings []JAASWarning
	warn := func(w JAASWarning) {
		if !slices.ContainsFunc(warnings, func(o JAASWarning) bool { return o.Key == w.Key }) {
			warnings = append(warnings, w)
		}
	}
	for _, l := range set.All {
		if !l.SecurityProtocol.UsesSASL() {
			continue
		}
		mechs, err := view(set).saslMechanisms(l.Name)
		if err != nil {
			return nil, warnings, err
		}
		if !slices.ContainsFunc(mechs, func(m string) bool { return slices.Contains(sasl.Builtins(), m) }) {
			continue
		}
		plainKey := mechanismKey(l.Name, "PLAIN", KeySASLJAASConfig)
		plain, ignored, plainErr := plainUsers(set, l.Name)
		if ignored != "" {
			warn(JAASWarning{Key: ignored, Listener: l.Name})
		}
		_, plainSet := view(set).props.Get(plainKey)
		lu := listenerUsers{byKey: map[string]map[string]string{}}
		if slices.Contains(mechs, sasl.Plain) {
			if plainErr != nil {
				return nil, warnings, plainErr
			}
			lu.plain, lu.byKey[plainKey] = plainKey, plain
		}
		for _, mech := range []string{sasl.SCRAMSHA256, sasl.SCRAMSHA512} {
			key := mechanismKey(l.Name, mech, KeySASLJAASConfig)
			users, keySet, err := scramUsers(set, l.Name, mech)
			if !slices.Contains(mechs, mech) {
				if keySet {
					warn(JAASWarning{Key: key, Listener: l.Name, Reason: fmt.Sprintf(
						"ignoring %s: listener %s does not enable %s (%s)", key, l.Name, mech, KeySASLEnabledMechanisms)})
				}
				continue
			}
			if err != nil {
				return nil, warnings, err
			}
			from := key
			if len(users) == 0 {
				// The PLAIN key's users log in with this mechanism.
				if plainErr != nil && plainSet {
					return nil, warnings, plainErr // the PLAIN key does not parse
				}
				if plainErr != nil {
					rule := fmt.Sprintf("SASL/%s on listener %s needs its users in %s (%s required user_<name>=\"<password>\" ...;), or in %s (%s required user_<name>=\"<password>\" ...;), whose users log in with every built-in mechanism",
						mech, l.Name, key, ScramLoginModule, plainKey, PlainLoginModule)
					if keySet {
						rule = fmt.Sprintf("%s names no users (user_<name> options): its username and password are the broker's own, for inter-broker connections, and kafkanet keeps no SCRAM credentials in a metadata log as Kafka does; ", key) + rule
					}
					if ignored != "" {
						rule += fmt.Sprintf("; %s is set but a broker ignores it without the listener and mechanism prefix", ignored)
					}
					return nil, warnings, &configerr.Error{Key: key, Rule: rule, Err: ErrJAASConfig}
				}
				if keySet {
					warn(JAASWarning{Key: key, Listener: l.Name, Reason: fmt.Sprintf(
						"%s names no users (user_<name> options): its username and password are the broker's own, for inter-broker connections, and kafkanet keeps no SCRAM credentials in a metadata log as Kafka does; %s on listener %s logs in the users of %s",
						key, mech, l.Name, plainKey)})
				}
				from, users = plainKey, plain
			}
			lu.byKey[from] = users
			if mech == sasl.SCRAMSHA256 {
				lu.sha256 = from
			} else {
				lu.sha512 = from
			}
		}
		out[l.Name] = lu
	}
	return out, warnings, nil
}
