package config

import (
	"fmt"
	"slices"

	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
)

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
		w.Key, MechanismKey(w.Listener, "PLAIN", KeySASLJAASConfig))
}

// JAASUsers reads from props the users of every SASL listener of set that
// enables a built-in mechanism, for security.NewJAASUsers and
// security.JAASUsers.Reload, each list named after its key:
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
// Listeners that enable no built-in mechanism need no users and have no
// entry. Errors are [*Error] values: those of sasl.enabled.mechanisms;
// wrapping security.ErrJAASConfig, a JAAS key that does not parse or does
// not configure the mechanism's login module (its value shown as [hidden]),
// a listener enabling PLAIN whose PLAIN key is not set (Kafka would fall
// back to a static JAAS file, which kafkanet does not read), and, for a
// listener that enables a SCRAM mechanism but not PLAIN, one naming the
// SCRAM key when neither it nor the PLAIN key names users. The warnings
// are about sasl.jaas.config settings the broker ignores or that name no
// users, each key once.
func JAASUsers(props Properties, set *listener.Set) (map[protocolmap.ListenerName]security.ListenerUsers, []JAASWarning, error) {
	c := reader{props, set}
	out := map[protocolmap.ListenerName]security.ListenerUsers{}
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
		mechs, err := c.saslMechanisms(l.Name)
		if err != nil {
			return nil, warnings, err
		}
		if !slices.ContainsFunc(mechs, func(m string) bool { return slices.Contains(sasl.Builtins(), m) }) {
			continue
		}
		plainKey := MechanismKey(l.Name, "PLAIN", KeySASLJAASConfig)
		plain, ignored, plainErr := plainUsers(props, l.Name)
		if ignored != "" {
			warn(JAASWarning{Key: ignored, Listener: l.Name})
		}
		_, plainSet := props.Get(plainKey)
		lu := security.ListenerUsers{Lists: map[string]map[string]string{}}
		if slices.Contains(mechs, sasl.Plain) {
			if plainErr != nil {
				return nil, warnings, plainErr
			}
			lu.Plain, lu.Lists[plainKey] = plainKey, plain
		}
		for _, mech := range []string{sasl.SCRAMSHA256, sasl.SCRAMSHA512} {
			key := MechanismKey(l.Name, mech, KeySASLJAASConfig)
			users, keySet, err := scramUsers(props, l.Name, mech)
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
					return nil, warnings, &Error{Key: key, Rule: rule, Err: security.ErrJAASConfig}
				}
				if keySet {
					warn(JAASWarning{Key: key, Listener: l.Name, Reason: fmt.Sprintf(
						"%s names no users (user_<name> options): its username and password are the broker's own, for inter-broker connections, and kafkanet keeps no SCRAM credentials in a metadata log as Kafka does; %s on listener %s logs in the users of %s",
						key, mech, l.Name, plainKey)})
				}
				from, users = plainKey, plain
			}
			lu.Lists[from] = users
			if mech == sasl.SCRAMSHA256 {
				lu.SCRAMSHA256 = from
			} else {
				lu.SCRAMSHA512 = from
			}
		}
		out[l.Name] = lu
	}
	return out, warnings, nil
}
