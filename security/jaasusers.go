package security

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security/sasl"
)

// ErrJAASConfig is wrapped by the errors of config.JAASUsers about a JAAS
// configuration that does not parse, does not configure the mechanism's
// login module, or is missing where a listener's built-in mechanism needs
// its users, and by NewJAASUsers' and Reload's when a mechanism names a
// list of users its ListenerUsers does not hold.
var ErrJAASConfig = errors.New("invalid JAAS configuration")

// ListenerUsers are the users of one listener's built-in SASL mechanisms
// (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512), as plain values: lists of
// users (user name → password), each under a name of its own, and the list
// each mechanism logs in. config.JAASUsers reads them from Kafka's JAAS
// keys and names each list after the key it was read from
// (listener.name.<listener>.plain.sasl.jaas.config, ...); a host may build
// them in code, under names of its choosing, to the same effect.
type ListenerUsers struct {
	// Lists are the user lists, by name. A user name or password must
	// not be empty.
	Lists map[string]map[string]string
	// Plain, SCRAMSHA256 and SCRAMSHA512 name the list of Lists each
	// mechanism logs in; "" for a mechanism the listener does not enable
	// (it then logs nobody in). Mechanisms may share a list.
	Plain, SCRAMSHA256, SCRAMSHA512 string
}

// JAASUsers are the credential stores of a broker's SASL listeners that
// enable a built-in mechanism, one per listener, built from each
// listener's [ListenerUsers]: each mechanism asks the list its
// ListenerUsers name. SCRAM credentials are derived from the passwords
// ([sasl.NewUsers]).
//
// Build them with [NewJAASUsers] (from config.JAASUsers, which reads
// Kafka's JAAS keys, or from users built in code), hand each of
// [JAASUsers.Stores] to the socket server (the Credentials of the
// listener's socketserver.ListenerConfig), and call [JAASUsers.Reload] to
// apply changed users, for example on SIGHUP. A JAASUsers is safe for
// concurrent use.
type JAASUsers struct {
	mu     sync.Mutex // guards the maps: one Reload at a time, and Stores beside it
	stores map[protocolmap.ListenerName]*jaasStore
	// users are each listener's user lists, by name; names their user
	// names only: passwords are not kept.
	users map[protocolmap.ListenerName]map[string]*sasl.Users
	names map[protocolmap.ListenerName]map[string][]string
}

// UserChange is what a [JAASUsers.Reload] changed in one list of users of
// a listener. It holds user names only, never passwords, so that it can be
// logged.
type UserChange struct {
	Listener protocolmap.ListenerName
	// Key names the list in [ListenerUsers.Lists]: as config.JAASUsers
	// reads them, the JAAS key the users are read from (the listener's
	// PLAIN key, or a SCRAM mechanism's that names users of its own).
	Key string
	// Added and Removed are the users who joined and left;
	// PasswordChanged those whose password changed. Each is sorted.
	Added, Removed, PasswordChanged []string
}

// NewJAASUsers builds the store of each listener of users. Each mechanism
// of a listener must name a list of its ListenerUsers (or none), and every
// list must hold users with non-empty names and passwords; errors name the
// listener and the list.
func NewJAASUsers(users map[protocolmap.ListenerName]ListenerUsers) (*JAASUsers, error) {
	if err := checkUsers(users); err != nil {
		return nil, err
	}
	u := &JAASUsers{
		stores: map[protocolmap.ListenerName]*jaasStore{},
		users:  map[protocolmap.ListenerName]map[string]*sasl.Users{},
		names:  map[protocolmap.ListenerName]map[string][]string{},
	}
	for _, name := range slices.Sorted(maps.Keys(users)) {
		lists, err := newListenerUsers(name, users[name])
		if err != nil {
			return nil, err
		}
		u.add(name, users[name], lists)
	}
	return u, nil
}

// checkUsers checks that each mechanism of users names a list of its
// listener's.
func checkUsers(users map[protocolmap.ListenerName]ListenerUsers) error {
	for _, name := range slices.Sorted(maps.Keys(users)) {
		lu := users[name]
		for _, m := range []struct{ mechanism, list string }{
			{sasl.Plain, lu.Plain}, {sasl.SCRAMSHA256, lu.SCRAMSHA256}, {sasl.SCRAMSHA512, lu.SCRAMSHA512},
		} {
			if _, ok := lu.Lists[m.list]; m.list != "" && !ok {
				return fmt.Errorf("security: listener %s: %s logs in the users of list %q, which its ListenerUsers.Lists does not hold: %w", name, m.mechanism, m.list, ErrJAASConfig)
			}
		}
	}
	return nil
}

// newListenerUsers builds the user lists of listener name, by key.
func newListenerUsers(name protocolmap.ListenerName, lu ListenerUsers) (map[string]*sasl.Users, error) {
	out := map[string]*sasl.Users{}
	for _, key := range slices.Sorted(maps.Keys(lu.Lists)) {
		store, err := sasl.NewUsers(lu.Lists[key])
		if err != nil {
			return nil, fmt.Errorf("listener %s: %s: %w", name, key, err)
		}
		out[key] = store
	}
	return out, nil
}

// add gives listener name its store, over users, read as lu.
func (u *JAASUsers) add(name protocolmap.ListenerName, lu ListenerUsers, users map[string]*sasl.Users) {
	u.users[name], u.names[name] = users, map[string][]string{}
	for key, list := range lu.Lists {
		u.names[name][key] = slices.Sorted(maps.Keys(list))
	}
	u.stores[name] = &jaasStore{}
	u.stores[name].route.Store(lu.route(users))
}

// Stores returns each listener's store, for the Credentials of its
// socketserver.ListenerConfig. The stores stay the same across reloads: a reload
// changes their contents.
func (u *JAASUsers) Stores() map[protocolmap.ListenerName]sasl.CredentialStore {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[protocolmap.ListenerName]sasl.CredentialStore, len(u.stores))
	for name, store := range u.stores {
		out[name] = store
	}
	return out
}

// Reload swaps every store's users for next, the users of a new reading
// of the broker's configuration, whose listeners are set: added users can
// log in at once, removed ones no more (their open connections last until
// their session expires, which connections.max.reauth.ms bounds). It
// returns what changed in each list of users of each listener, by
// listener and list; a list that next no longer holds is reported with
// all its users removed. A listener still in set that has a store must
// still have users in next: changing a listener's protocol or mechanisms
// needs a restart, and the error then wraps listener.ErrNotDynamic. The
// listeners next adds, as a broker adds listeners at run time
// (listener.Set.Changes), get stores of their own, which
// [JAASUsers.Stores] then returns, and their users are reported added;
// those it removes lose theirs (their users reported removed). On error
// nothing changes.
func (u *JAASUsers) Reload(set *listener.Set, next map[protocolmap.ListenerName]ListenerUsers) ([]UserChange, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := checkUsers(next); err != nil {
		return nil, err
	}
	var names, gone []protocolmap.ListenerName
	for _, name := range slices.Sorted(maps.Keys(u.stores)) {
		_, ok := next[name]
		_, kept := set.Listener(name)
		switch {
		case ok:
			names = append(names, name)
		case kept:
			return nil, fmt.Errorf("%w: listener %s is no SASL listener with a built-in mechanism in the new configuration (its protocol or mechanisms changed)", listener.ErrNotDynamic, name)
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
			return nil, err
		}
		added[name] = users
		for key, list := range next[name].Lists {
			changes = append(changes, UserChange{Listener: name, Key: key, Added: slices.Sorted(maps.Keys(list))})
		}
	}
	for _, name := range gone {
		for key, list := range u.names[name] {
			changes = append(changes, UserChange{Listener: name, Key: key, Removed: list})
		}
	}
	for _, name := range names {
		old, lists := u.users[name], next[name].Lists
		fresh[name] = map[string]*sasl.Users{}
		for _, key := range slices.Sorted(maps.Keys(lists)) {
			users := lists[key]
			ch := UserChange{Listener: name, Key: key}
			store, ok := old[key]
			if !ok {
				var err error
				if store, err = sasl.NewUsers(users); err != nil {
					return nil, fmt.Errorf("listener %s: %s: %w", name, key, err)
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
		lists := next[name].Lists
		for _, key := range slices.Sorted(maps.Keys(lists)) {
			if store, ok := u.users[name][key]; ok {
				// parsePlainJAAS and parseSCRAMJAAS refuse what Replace
				// would; Replace fails only if the system's random source
				// does.
				if err := store.Replace(lists[key]); err != nil {
					return changes, fmt.Errorf("listener %s: %s: %w", name, key, err)
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
	return changes, nil
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

// route returns the stores of stores (by key) that each mechanism asks.
func (lu ListenerUsers) route(stores map[string]*sasl.Users) *jaasRoute {
	return &jaasRoute{plain: stores[lu.Plain], sha256: stores[lu.SCRAMSHA256], sha512: stores[lu.SCRAMSHA512]}
}
