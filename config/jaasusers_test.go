package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// jaasProps are two SASL listeners, A and B, and a PLAINTEXT one, with
// extra laid over them.
func jaasProps(extra ...string) config.Properties {
	p := config.Properties{
		"listeners":                      "A://127.0.0.1:0,B://127.0.0.1:0,P://127.0.0.1:0",
		"listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT,P:PLAINTEXT",
		"inter.broker.listener.name":     "P",
		"sasl.enabled.mechanisms":        "PLAIN,SCRAM-SHA-256",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}

func jaas(users string) string { return plainModule + " required " + users + ";" }

func resolveJAAS(t testing.TB, extra ...string) resolved {
	t.Helper()
	return resolve(t, jaasProps(extra...))
}

// newJAASUsers builds the stores of the users config.JAASUsers reads
// from r, as a host does.
func newJAASUsers(r resolved) (*security.JAASUsers, []config.JAASWarning, error) {
	users, warnings, err := config.JAASUsers(r.props, r.set)
	if err != nil {
		return nil, warnings, err
	}
	u, err := security.NewJAASUsers(users)
	return u, warnings, err
}

// reload reloads u with the users config.JAASUsers reads from r, as a
// host does.
func reload(u *security.JAASUsers, r resolved) ([]security.UserChange, []config.JAASWarning, error) {
	users, warnings, err := config.JAASUsers(r.props, r.set)
	if err != nil {
		return nil, warnings, err
	}
	changes, err := u.Reload(r.set, users)
	return changes, warnings, err
}

func TestNewJAASUsers(t *testing.T) {
	bothListeners := []string{
		"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret" user_bob="bob-secret"`),
		"listener.name.b.plain.sasl.jaas.config", jaas(`user_carol="carol-secret"`),
	}
	tests := []struct {
		name     string
		kv       []string
		users    map[protocolmap.ListenerName]map[string]string // who logs in with what, per listener
		warnings []config.JAASWarning
		errKey   string
	}{
		{name: "each listener its own users", kv: bothListeners, users: map[protocolmap.ListenerName]map[string]string{
			"A": {"alice": "alice-secret", "bob": "bob-secret"}, "B": {"carol": "carol-secret"},
		}},
		{name: "a listener with only a host's mechanism needs no users", kv: []string{
			"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret"`),
			"listener.name.b.sasl.enabled.mechanisms", "OAUTHBEARER",
		}, users: map[protocolmap.ListenerName]map[string]string{"A": {"alice": "alice-secret"}}},
		{name: "names are case-sensitive: plain is no built-in mechanism", kv: []string{
			"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret"`),
			"listener.name.b.sasl.enabled.mechanisms", "plain",
		}, users: map[protocolmap.ListenerName]map[string]string{"A": {"alice": "alice-secret"}}},
		{name: "un-prefixed sasl.jaas.config is ignored, with a warning once", kv: append([]string{
			"sasl.jaas.config", jaas(`user_eve="eve-secret"`),
		}, bothListeners...), users: map[protocolmap.ListenerName]map[string]string{
			"A": {"alice": "alice-secret"}, "B": {"carol": "carol-secret"},
		}, warnings: []config.JAASWarning{{Key: "sasl.jaas.config", Listener: "A"}}},
		{name: "listener-prefixed without the mechanism is ignored too", kv: append([]string{
			"listener.name.b.sasl.jaas.config", jaas(`user_eve="eve-secret"`),
		}, bothListeners...), users: map[protocolmap.ListenerName]map[string]string{"A": {"bob": "bob-secret"}, "B": {"carol": "carol-secret"}},
			warnings: []config.JAASWarning{{Key: "listener.name.b.sasl.jaas.config", Listener: "B"}}},
		{name: "a SASL listener without users", kv: []string{"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret"`)},
			errKey: "listener.name.b.plain.sasl.jaas.config"},
		{name: "JAAS that does not parse", kv: []string{
			"listener.name.a.plain.sasl.jaas.config", plainModule + ` required user_alice="alice-secret"`,
			"listener.name.b.plain.sasl.jaas.config", jaas(`user_carol="carol-secret"`),
		}, errKey: "listener.name.a.plain.sasl.jaas.config"},
		{name: "an empty mechanism list", kv: append([]string{"sasl.enabled.mechanisms", ","}, bothListeners...), errKey: "sasl.enabled.mechanisms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, warnings, err := newJAASUsers(resolveJAAS(t, tt.kv...))
			assert.Equal(t, tt.warnings, warnings)
			if tt.errKey != "" {
				testkit.RequireConfigError(t, err, tt.errKey, nil)
				assert.Nil(t, u)
				assert.NotContains(t, err.Error(), "alice-secret")
				return
			}
			require.NoError(t, err)
			stores := u.Stores()
			assert.Len(t, stores, len(tt.users))
			for name, users := range tt.users {
				require.Contains(t, stores, name)
				for user, pass := range users {
					assert.True(t, stores[name].CheckPlain(user, pass), "%s %s", name, user)
					_, ok := stores[name].SCRAM("SCRAM-SHA-256", user)
					assert.True(t, ok, "SCRAM credentials derived for %s", user)
				}
				assert.False(t, stores[name].CheckPlain("eve", "eve-secret"), "an ignored key's user logs in")
			}
		})
	}
	assert.Equal(t, "ignoring sasl.jaas.config: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in listener.name.a.plain.sasl.jaas.config",
		config.JAASWarning{Key: "sasl.jaas.config", Listener: "A"}.String())
}

// The PLAIN keys of listeners A and B.
const (
	aPlain = "listener.name.a.plain.sasl.jaas.config"
	bPlain = "listener.name.b.plain.sasl.jaas.config"
)

func TestJAASUsersReload(t *testing.T) {
	start := []string{
		"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret" user_bob="bob-secret"`),
		"listener.name.b.plain.sasl.jaas.config", jaas(`user_carol="carol-secret"`),
	}
	// only: listener A alone is SASL; B is gone.
	only := []string{
		"listeners", "A://127.0.0.1:0,P://127.0.0.1:0", "listener.security.protocol.map", "A:SASL_PLAINTEXT,P:PLAINTEXT",
		"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-secret"`),
	}
	tests := []struct {
		name    string
		kv      []string
		changes []security.UserChange
		err     string
		is      error // the sentinel err wraps, if any
	}{
		{name: "nothing changed", kv: start, changes: []security.UserChange{{Listener: "A", Key: aPlain}, {Listener: "B", Key: bPlain}}},
		{name: "added, removed, password changed", kv: []string{
			"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-new" user_dave="dave-secret" user_erin="erin-secret"`),
			"listener.name.b.plain.sasl.jaas.config", jaas(`user_carol="carol-secret"`),
		}, changes: []security.UserChange{
			{Listener: "A", Key: aPlain, Added: []string{"dave", "erin"}, Removed: []string{"bob"}, PasswordChanged: []string{"alice"}},
			{Listener: "B", Key: bPlain},
		}},
		{name: "a listener no longer SASL", kv: append([]string{"listener.security.protocol.map", "A:SASL_PLAINTEXT,B:PLAINTEXT,P:PLAINTEXT"}, start...),
			err: "listener B is no SASL listener with a built-in mechanism in the new configuration", is: listener.ErrNotDynamic},
		{name: "a listener with no built-in mechanism left", kv: append([]string{"listener.name.b.sasl.enabled.mechanisms", "OAUTHBEARER"}, start...),
			err: "listener B is no SASL listener with a built-in mechanism", is: listener.ErrNotDynamic},
		{name: "JAAS that does not parse", kv: []string{
			"listener.name.a.plain.sasl.jaas.config", jaas(`user_alice="alice-new`),
			"listener.name.b.plain.sasl.jaas.config", jaas(`user_carol="carol-secret"`),
		}, err: "listener.name.a.plain.sasl.jaas.config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, _, err := newJAASUsers(resolveJAAS(t, start...))
			require.NoError(t, err)
			stores := u.Stores()
			changes, _, err := reload(u, resolveJAAS(t, tt.kv...))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				if tt.is != nil {
					assert.ErrorIs(t, err, tt.is)
				}
				assert.Nil(t, changes)
				assert.True(t, stores["A"].CheckPlain("alice", "alice-secret"), "a failed reload changed the users")
				assert.True(t, stores["A"].CheckPlain("bob", "bob-secret"))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.changes, changes)
			for _, ch := range changes {
				for _, user := range append(append(ch.Added, ch.Removed...), ch.PasswordChanged...) {
					assert.NotContains(t, user, "secret", "a password in a change")
				}
			}
			if tt.name == "added, removed, password changed" {
				assert.True(t, stores["A"].CheckPlain("alice", "alice-new"), "the stores handed out change in place")
				assert.False(t, stores["A"].CheckPlain("alice", "alice-secret"))
				assert.False(t, stores["A"].CheckPlain("bob", "bob-secret"))
				assert.True(t, stores["A"].CheckPlain("dave", "dave-secret"))
			}
		})
	}

	t.Run("listeners added and removed", func(t *testing.T) {
		u, _, err := newJAASUsers(resolveJAAS(t, only...))
		require.NoError(t, err)
		a := u.Stores()["A"]
		changes, _, err := reload(u, resolveJAAS(t, start...))
		require.NoError(t, err)
		assert.Equal(t, []security.UserChange{
			{Listener: "A", Key: aPlain, Added: []string{"bob"}},
			{Listener: "B", Key: bPlain, Added: []string{"carol"}},
		}, changes)
		b := u.Stores()["B"]
		require.NotNil(t, b, "a listener added gets a store")
		assert.True(t, b.CheckPlain("carol", "carol-secret"))
		assert.Same(t, a, u.Stores()["A"], "a kept listener keeps its store")

		// B removed: its store goes, its users reported removed.
		changes, _, err = reload(u, resolveJAAS(t, only...))
		require.NoError(t, err)
		assert.Equal(t, []security.UserChange{
			{Listener: "A", Key: aPlain, Removed: []string{"bob"}},
			{Listener: "B", Key: bPlain, Removed: []string{"carol"}},
		}, changes)
		assert.NotContains(t, u.Stores(), protocolmap.ListenerName("B"))
	})
	// Stores may be called while a reload adds and removes listeners (a
	// host hands a new listener its store from another goroutine): the
	// race detector saw Stores read the map Reload wrote.
	t.Run("stores beside reloads", func(t *testing.T) {
		u, _, err := newJAASUsers(resolveJAAS(t, only...))
		require.NoError(t, err)
		withB, withoutB := resolveJAAS(t, start...), resolveJAAS(t, only...)
		done := make(chan struct{})
		seen := make(chan int, 1)
		go func() {
			defer close(seen)
			most := 0
			for {
				select {
				case <-done:
					seen <- most
					return
				default:
					most = max(most, len(u.Stores()))
				}
			}
		}()
		for range 200 {
			_, _, err := reload(u, withB)
			require.NoError(t, err)
			_, _, err = reload(u, withoutB)
			require.NoError(t, err)
		}
		close(done)
		assert.Positive(t, <-seen, "Stores returned the stores while reloads ran")
		assert.Len(t, u.Stores(), 1, "B removed last")
	})
	t.Run("warnings on reload", func(t *testing.T) {
		u, _, err := newJAASUsers(resolveJAAS(t, start...))
		require.NoError(t, err)
		_, warnings, err := reload(u, resolveJAAS(t, append([]string{"sasl.jaas.config", jaas(`user_eve="x"`)}, start...)...))
		require.NoError(t, err)
		require.Len(t, warnings, 1)
		assert.True(t, strings.HasPrefix(warnings[0].String(), "ignoring sasl.jaas.config"))
	})
}
