package config_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/xdg-go/scram"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

const scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"

func scramJAAS(options string) string { return scramModule + " required " + options + ";" }

// The keys of listener A.
const (
	aSHA256 = "listener.name.a.scram-sha-256.sasl.jaas.config"
	aSHA512 = "listener.name.a.scram-sha-512.sasl.jaas.config"
)

func TestParseSCRAMJAAS(t *testing.T) {
	for _, tt := range []struct {
		name  string
		value string
		users map[string]string
		err   string
	}{
		{name: "users, not the broker's own identity", value: scramJAAS(`username="admin" password="admin-secret" user_alice="alice-secret" tokenauth=false`),
			users: map[string]string{"alice": "alice-secret"}},
		{name: "Kafka's usual: the broker's identity alone", value: scramJAAS(`username="admin" password="admin-secret"`), users: map[string]string{}},
		{name: "PLAIN's module", value: jaas(`user_alice="alice-secret"`), err: "is not " + scramModule},
		{name: "an empty password", value: scramJAAS(`user_alice=""`), err: `user "alice" has an empty password, which SASL/SCRAM never accepts`},
		{name: "no terminating semicolon", value: scramModule + ` required user_alice="x"`, err: "not terminated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			users, err := config.ParseSCRAMJAAS(tt.value)
			if tt.err != "" {
				require.ErrorIs(t, err, security.ErrJAASConfig)
				assert.Contains(t, err.Error(), tt.err)
				assert.NotContains(t, err.Error(), "alice-secret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.users, users)
		})
	}
	assert.Equal(t, aSHA512, config.MechanismKey("A", "SCRAM-SHA-512", config.KeySASLJAASConfig))
	assert.Equal(t, aPlain, config.MechanismKey("A", "PLAIN", config.KeySASLJAASConfig))
}

// scramLogsIn reports whether store lets user log in with password over
// mechanism: the credential the store gives matches the password's.
func scramLogsIn(t *testing.T, store sasl.CredentialStore, mechanism, user, password string) bool {
	t.Helper()
	c, ok := store.SCRAM(mechanism, user)
	if !ok {
		return false
	}
	h := scram.SHA512
	if mechanism == sasl.SCRAMSHA256 {
		h = scram.SHA256
	}
	client, err := h.NewClientUnprepped(user, password, "")
	require.NoError(t, err)
	got, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(c.Salt), Iters: c.Iterations})
	require.NoError(t, err)
	return bytes.Equal(got.StoredKey, c.StoredKey)
}

// A listener's SCRAM users come from Kafka's SCRAM JAAS keys
// (ScramLoginModule's user_<name> options) when they name users, else from
// the PLAIN key; a SCRAM-only listener without users is told the SCRAM
// key, and a SCRAM key that is ignored or names no users is warned about.
func TestNewJAASUsersSCRAMKeys(t *testing.T) {
	type login struct{ mechanism, user, password string }
	for _, tt := range []struct {
		name     string
		mechs    string // listener A's sasl.enabled.mechanisms
		kv       []string
		logIn    []login // log in
		refused  []login // do not
		warnings []config.JAASWarning
		errKey   string
		errText  []string
	}{
		{name: "SCRAM-only, users under Kafka's SCRAM key", mechs: "SCRAM-SHA-512",
			kv:      []string{aSHA512, scramJAAS(`username="admin" password="admin-secret" user_alice="alice-secret"`)},
			logIn:   []login{{"SCRAM-SHA-512", "alice", "alice-secret"}},
			refused: []login{{"SCRAM-SHA-512", "admin", "admin-secret"}, {"SCRAM-SHA-256", "alice", "alice-secret"}, {"PLAIN", "alice", "alice-secret"}}},
		{name: "SCRAM-only without users names the SCRAM key", mechs: "SCRAM-SHA-512",
			errKey: aSHA512, errText: []string{"SASL/SCRAM-SHA-512 on listener A needs its users in " + aSHA512, scramModule, "or in " + aPlain}},
		{name: "SCRAM-only, the SCRAM key without users and no PLAIN key", mechs: "SCRAM-SHA-256",
			kv:     []string{aSHA256, scramJAAS(`username="admin" password="admin-secret"`)},
			errKey: aSHA256, errText: []string{aSHA256 + " names no users", "broker's own, for inter-broker connections", "SASL/SCRAM-SHA-256 on listener A needs"}},
		{name: "SCRAM-only, the SCRAM key without users falls back to PLAIN's, with a warning", mechs: "SCRAM-SHA-256",
			kv:    []string{aSHA256, scramJAAS(`username="admin" password="admin-secret"`), aPlain, jaas(`user_bob="bob-secret"`)},
			logIn: []login{{"SCRAM-SHA-256", "bob", "bob-secret"}}, refused: []login{{"SCRAM-SHA-256", "admin", "admin-secret"}},
			warnings: []config.JAASWarning{{Key: aSHA256, Listener: "A", Reason: aSHA256 + " names no users (user_<name> options): its username and password are the broker's own, for inter-broker connections, and kafkanet keeps no SCRAM credentials in a metadata log as Kafka does; SCRAM-SHA-256 on listener A logs in the users of " + aPlain}}},
		{name: "SCRAM-only, users under the PLAIN key, as before", mechs: "SCRAM-SHA-512",
			kv:    []string{aPlain, jaas(`user_bob="bob-secret"`)},
			logIn: []login{{"SCRAM-SHA-512", "bob", "bob-secret"}}},
		{name: "each mechanism its own users", mechs: "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
			kv:      []string{aPlain, jaas(`user_bob="bob-secret"`), aSHA256, scramJAAS(`user_carol="carol-secret"`)},
			logIn:   []login{{"PLAIN", "bob", "bob-secret"}, {"SCRAM-SHA-256", "carol", "carol-secret"}, {"SCRAM-SHA-512", "bob", "bob-secret"}},
			refused: []login{{"PLAIN", "carol", "carol-secret"}, {"SCRAM-SHA-256", "bob", "bob-secret"}, {"SCRAM-SHA-512", "carol", "carol-secret"}}},
		{name: "a SCRAM key of a mechanism not enabled is ignored, with a warning", mechs: "PLAIN",
			kv:    []string{aPlain, jaas(`user_bob="bob-secret"`), aSHA512, scramJAAS(`user_carol="carol-secret"`)},
			logIn: []login{{"PLAIN", "bob", "bob-secret"}}, refused: []login{{"SCRAM-SHA-512", "carol", "carol-secret"}},
			warnings: []config.JAASWarning{{Key: aSHA512, Listener: "A",
				Reason: "ignoring " + aSHA512 + ": listener A does not enable SCRAM-SHA-512 (sasl.enabled.mechanisms)"}}},
		{name: "PLAIN's module under a SCRAM key", mechs: "SCRAM-SHA-256",
			kv: []string{aSHA256, jaas(`user_bob="bob-secret"`)}, errKey: aSHA256, errText: []string{"is not " + scramModule}},
		{name: "PLAIN enabled still needs the PLAIN key", mechs: "PLAIN,SCRAM-SHA-256",
			kv: []string{aSHA256, scramJAAS(`user_carol="carol-secret"`)}, errKey: aPlain, errText: []string{"SASL/PLAIN on listener A needs its users"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			props := append([]string{
				"listeners", "A://127.0.0.1:0,P://127.0.0.1:0", "listener.security.protocol.map", "A:SASL_PLAINTEXT,P:PLAINTEXT",
				"sasl.enabled.mechanisms", tt.mechs,
			}, tt.kv...)
			u, warnings, err := newJAASUsers(resolveJAAS(t, props...))
			assert.Equal(t, tt.warnings, warnings)
			for _, w := range warnings {
				assert.Equal(t, w.Reason, w.String())
			}
			if tt.errKey != "" {
				ce := testkit.RequireConfigError(t, err, tt.errKey, security.ErrJAASConfig)
				for _, text := range tt.errText {
					assert.Contains(t, ce.Error(), text)
				}
				assert.NotContains(t, err.Error(), "secret")
				return
			}
			require.NoError(t, err)
			store := u.Stores()["A"]
			require.NotNil(t, store)
			try := func(l login) bool {
				if l.mechanism == "PLAIN" {
					return store.CheckPlain(l.user, l.password)
				}
				return scramLogsIn(t, store, l.mechanism, l.user, l.password)
			}
			for _, l := range tt.logIn {
				assert.True(t, try(l), "%+v", l)
			}
			for _, l := range tt.refused {
				assert.False(t, try(l), "%+v", l)
			}
		})
	}
}

// Reload follows SCRAM keys that come, change and go: each list of users
// is reported under its key, and a mechanism whose key goes logs in the
// PLAIN key's users again.
func TestJAASUsersReloadSCRAMKeys(t *testing.T) {
	base := []string{
		"listeners", "A://127.0.0.1:0,P://127.0.0.1:0", "listener.security.protocol.map", "A:SASL_PLAINTEXT,P:PLAINTEXT",
		"sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512",
		aPlain, jaas(`user_bob="bob-secret"`),
	}
	u, _, err := newJAASUsers(resolveJAAS(t, base...))
	require.NoError(t, err)
	store := u.Stores()["A"]
	require.True(t, scramLogsIn(t, store, "SCRAM-SHA-512", "bob", "bob-secret"))

	changes, _, err := reload(u, resolveJAAS(t, append(base, aSHA512, scramJAAS(`user_carol="carol-secret"`))...))
	require.NoError(t, err)
	assert.Equal(t, []security.UserChange{{Listener: "A", Key: aPlain}, {Listener: "A", Key: aSHA512, Added: []string{"carol"}}}, changes)
	assert.True(t, scramLogsIn(t, store, "SCRAM-SHA-512", "carol", "carol-secret"), "the store handed out follows")
	assert.False(t, scramLogsIn(t, store, "SCRAM-SHA-512", "bob", "bob-secret"))
	assert.True(t, store.CheckPlain("bob", "bob-secret"))

	changes, _, err = reload(u, resolveJAAS(t, append(base, aSHA512, scramJAAS(`user_carol="carol-new" user_dave="dave-secret"`))...))
	require.NoError(t, err)
	assert.Equal(t, []security.UserChange{{Listener: "A", Key: aPlain},
		{Listener: "A", Key: aSHA512, Added: []string{"dave"}, PasswordChanged: []string{"carol"}}}, changes)
	assert.True(t, scramLogsIn(t, store, "SCRAM-SHA-512", "carol", "carol-new"))

	changes, _, err = reload(u, resolveJAAS(t, base...))
	require.NoError(t, err)
	assert.Equal(t, []security.UserChange{{Listener: "A", Key: aPlain}, {Listener: "A", Key: aSHA512, Removed: []string{"carol", "dave"}}}, changes)
	assert.False(t, scramLogsIn(t, store, "SCRAM-SHA-512", "carol", "carol-new"))
	assert.True(t, scramLogsIn(t, store, "SCRAM-SHA-512", "bob", "bob-secret"))

	// An error changes nothing.
	_, _, err = reload(u, resolveJAAS(t, append(base, aSHA512, jaas(`user_eve="eve-secret"`))...))
	testkit.RequireConfigError(t, err, aSHA512, security.ErrJAASConfig)
	assert.True(t, scramLogsIn(t, store, "SCRAM-SHA-512", "bob", "bob-secret"))
}
