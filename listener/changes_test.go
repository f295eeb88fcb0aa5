package listener_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// running is the configuration of a running broker in the tests below:
// a SASL_SSL listener for clients, REPLICATION between brokers and
// CONTROLLER for the control plane, with a map that also names EXTERNAL.
func running(t *testing.T) *listener.Set {
	t.Helper()
	set, err := config.Listeners(config.Properties{
		"listeners":                      "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095",
		"advertised.listeners":           "REPLICATION://broker1:9093,CLIENT://broker1:9092,CONTROLLER://broker1:9095",
		"listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTERNAL:SASL_SSL,PLAIN:PLAINTEXT",
		"inter.broker.listener.name":     "REPLICATION",
		"control.plane.listener.name":    "CONTROLLER",
		"num.network.threads":            "2",
	})
	require.NoError(t, err)
	return set
}

func names(ls []listener.Listener) []protocolmap.ListenerName {
	var out []protocolmap.ListenerName
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

// requireConfigError checks that err is a config.Error of key wrapping
// want whose message names the listener.
func requireConfigError(t *testing.T, err error, key string, want error, listenerName string) {
	t.Helper()
	require.Error(t, err)
	var ce *config.Error
	require.ErrorAs(t, err, &ce, "%v", err)
	assert.Equal(t, key, ce.Key)
	if want != nil {
		assert.ErrorIs(t, err, want)
	}
	assert.Contains(t, err.Error(), listenerName)
}

// A listener added at run time is held to Kafka's rules, like those of
// listeners: a new name, a free port, a name the map gives its protocol.
func TestWithListener(t *testing.T) {
	external := codeListener("EXTERNAL", protocolmap.SASLSSL, "127.0.0.1", 9096)
	for _, tc := range []struct {
		name    string
		change  func(l *listener.Listener)
		set     func(s *listener.Set)
		wantKey string
		wantErr error
	}{
		{name: "a new SASL_SSL listener"},
		{name: "not advertised", change: func(l *listener.Listener) { l.Advertised = listener.EndPoint{} }},
		{name: "on port 0, as another could be", change: func(l *listener.Listener) { l.Bind.Port = 0 }},
		{name: "the name in use", change: func(l *listener.Listener) {
			*l = codeListener("CLIENT", protocolmap.SASLSSL, "127.0.0.1", 9096)
		}, wantKey: "listeners", wantErr: listener.ErrDuplicateName},
		{name: "a port in use", change: func(l *listener.Listener) { l.Bind.Port = 9093 },
			wantKey: "listeners", wantErr: listener.ErrDuplicatePort},
		{name: "a name not in the map", change: func(l *listener.Listener) {
			*l = codeListener("ADMIN", protocolmap.SASLSSL, "127.0.0.1", 9096)
		}, wantKey: "listeners", wantErr: listener.ErrNoSecurityProtocol},
		{name: "a protocol the map does not give the name", change: func(l *listener.Listener) {
			*l = codeListener("EXTERNAL", protocolmap.SSL, "127.0.0.1", 9096)
		}, wantErr: listener.ErrInconsistent},
		{name: "a second control plane", change: func(l *listener.Listener) { l.Plane = protocolmap.ControlPlane },
			wantErr: listener.ErrInconsistent},
		{name: "a second inter-broker listener", change: func(l *listener.Listener) { l.InterBroker = true },
			wantErr: listener.ErrInconsistent},
		{name: "advertising 0.0.0.0", change: func(l *listener.Listener) { l.Advertised.Host = "0.0.0.0" },
			wantKey: "advertised.listeners", wantErr: listener.ErrNonRoutable},
		{name: "a name not normalised", change: func(l *listener.Listener) {
			*l = codeListener("external", protocolmap.SASLSSL, "127.0.0.1", 9096)
		}, wantErr: listener.ErrInconsistent},
		{name: "without a map, the listener's protocol makes its entry", set: func(s *listener.Set) {
			s.SecurityProtocolMap = nil
		}, change: func(l *listener.Listener) { *l = codeListener("ADMIN", protocolmap.SSL, "127.0.0.1", 9096) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := running(t)
			if tc.set != nil {
				cur = &listener.Set{All: cur.All, SecurityProtocolMap: cur.SecurityProtocolMap,
					InterBrokerListener: cur.InterBrokerListener, ControlPlaneListener: cur.ControlPlaneListener}
				tc.set(cur)
			}
			before := append([]listener.Listener(nil), cur.All...)
			l := external
			if tc.change != nil {
				tc.change(&l)
			}
			next, err := cur.WithListener(l)
			assert.Equal(t, before, cur.All, "the current Set changed")
			if tc.wantErr != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.wantErr)
				assert.Contains(t, err.Error(), string(l.Name))
				if tc.wantKey != "" {
					requireConfigError(t, err, tc.wantKey, tc.wantErr, string(l.Name))
				}
				return
			}
			require.NoError(t, err)
			require.NoError(t, next.Validate())
			got, ok := next.Listener(l.Name)
			require.True(t, ok)
			assert.Equal(t, l, got)
			assert.Len(t, next.All, len(before)+1)
			if l.IsAdvertised() {
				eps := next.AdvertisedEndPoints()
				assert.Equal(t, l.Advertised, eps[len(eps)-1], "advertised last")
			}
		})
	}
}

// The inter-broker and control-plane listeners are not removed while a
// broker runs; others are.
func TestWithoutListener(t *testing.T) {
	for _, tc := range []struct {
		name    protocolmap.ListenerName
		wantErr error
	}{
		{name: "CLIENT"},
		{name: "client"}, // names compare without regard to case
		{name: "REPLICATION", wantErr: listener.ErrNotDynamic},
		{name: "CONTROLLER", wantErr: listener.ErrNotDynamic},
		{name: "EXTERNAL", wantErr: listener.ErrUnknownListener},
	} {
		t.Run(string(tc.name), func(t *testing.T) {
			cur := running(t)
			next, err := cur.WithoutListener(tc.name)
			assert.Len(t, cur.All, 3, "the current Set changed")
			if tc.wantErr != nil {
				requireConfigError(t, err, "listeners", tc.wantErr, string(tc.name))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []protocolmap.ListenerName{"REPLICATION", "CONTROLLER"}, names(next.All))
			assert.Equal(t, []protocolmap.ListenerName{"REPLICATION", "CONTROLLER"}, func() (out []protocolmap.ListenerName) {
				for _, ep := range next.AdvertisedEndPoints() {
					out = append(out, ep.Name)
				}
				return out
			}(), "advertised.listeners' order stays")
		})
	}
}

// Changes reports what a re-read configuration adds, removes and
// advertises anew, and refuses what Kafka does not change at run time.
func TestChanges(t *testing.T) {
	base := config.Properties{
		"listeners":                      "CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095",
		"advertised.listeners":           "REPLICATION://broker1:9093,CLIENT://broker1:9092,CONTROLLER://broker1:9095",
		"listener.security.protocol.map": "CLIENT:SASL_SSL,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTERNAL:SASL_SSL,PLAIN:PLAINTEXT",
		"inter.broker.listener.name":     "REPLICATION",
		"control.plane.listener.name":    "CONTROLLER",
	}
	for _, tc := range []struct {
		name                         string
		set                          []string
		added, removed, readvertised []protocolmap.ListenerName
		wantKey                      string
		wantErr                      error
	}{
		{name: "nothing changes"},
		{name: "a listener added", set: []string{
			"listeners=CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095,EXTERNAL://127.0.0.1:9096",
			"advertised.listeners=REPLICATION://broker1:9093,CLIENT://broker1:9092,CONTROLLER://broker1:9095,EXTERNAL://broker1:9096",
		}, added: []protocolmap.ListenerName{"EXTERNAL"}},
		{name: "a listener added with its map entry", set: []string{
			"listeners=CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095,ADMIN://127.0.0.1:9096",
			"advertised.listeners=REPLICATION://broker1:9093,CLIENT://broker1:9092,CONTROLLER://broker1:9095",
			"listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT,ADMIN:SSL",
		}, added: []protocolmap.ListenerName{"ADMIN"}},
		{name: "a listener removed", set: []string{
			"listeners=REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095",
			"advertised.listeners=REPLICATION://broker1:9093,CONTROLLER://broker1:9095",
		}, removed: []protocolmap.ListenerName{"CLIENT"}},
		{name: "a listener renamed on its port", set: []string{
			"listeners=EXTERNAL://127.0.0.1:9092,REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095",
			"advertised.listeners=REPLICATION://broker1:9093,EXTERNAL://broker1:9092,CONTROLLER://broker1:9095",
		}, added: []protocolmap.ListenerName{"EXTERNAL"}, removed: []protocolmap.ListenerName{"CLIENT"}},
		{name: "advertised anew", set: []string{
			"advertised.listeners=REPLICATION://broker1:9093,CLIENT://lb.example:19092,CONTROLLER://broker1:9095",
		}, readvertised: []protocolmap.ListenerName{"CLIENT"}},
		{name: "no longer advertised", set: []string{
			"advertised.listeners=REPLICATION://broker1:9093,CONTROLLER://broker1:9095",
		}, readvertised: []protocolmap.ListenerName{"CLIENT"}},
		{name: "the inter-broker listener removed", set: []string{
			"listeners=CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9095",
			"advertised.listeners=CLIENT://broker1:9092,CONTROLLER://broker1:9095",
			"inter.broker.listener.name=CLIENT",
		}, wantKey: "inter.broker.listener.name", wantErr: listener.ErrNotDynamic},
		{name: "another inter-broker listener", set: []string{"inter.broker.listener.name=CLIENT"},
			wantKey: "inter.broker.listener.name", wantErr: listener.ErrNotDynamic},
		{name: "the control-plane listener removed", set: []string{
			"listeners=CLIENT://127.0.0.1:9092,REPLICATION://127.0.0.1:9093",
			"advertised.listeners=REPLICATION://broker1:9093,CLIENT://broker1:9092",
			"control.plane.listener.name=",
		}, wantKey: "control.plane.listener.name", wantErr: listener.ErrNotDynamic},
		{name: "a listener's protocol changed", set: []string{
			"listener.security.protocol.map=CLIENT:SSL,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
		}, wantKey: "listener.security.protocol.map", wantErr: listener.ErrNotDynamic},
		{name: "a listener moved", set: []string{
			"listeners=CLIENT://127.0.0.1:9099,REPLICATION://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095",
		}, wantKey: "listeners", wantErr: listener.ErrNotDynamic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := config.Listeners(base)
			require.NoError(t, err)
			props, err := base.With(tc.set...)
			require.NoError(t, err)
			if v, _ := props.Get("control.plane.listener.name"); v == "" {
				delete(props, "control.plane.listener.name")
			}
			next, err := config.Listeners(props)
			require.NoError(t, err)
			c, err := cur.Changes(next)
			if tc.wantErr != nil {
				require.Error(t, err)
				var ce *config.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.wantKey, ce.Key)
				assert.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.added, names(c.Added), "added")
			assert.Equal(t, tc.removed, names(c.Removed), "removed")
			assert.Equal(t, tc.readvertised, names(c.Readvertised), "advertised anew")
			assert.Equal(t, tc.added == nil && tc.removed == nil && tc.readvertised == nil, c.Empty())
		})
	}
}

// A Set built in code is checked before its changes are computed.
func TestChangesOfAnInvalidSet(t *testing.T) {
	cur := running(t)
	bad := &listener.Set{All: []listener.Listener{codeListener("CLIENT", protocolmap.SASLSSL, "127.0.0.1", 9092)}}
	_, err := cur.Changes(bad)
	require.Error(t, err)
	assert.False(t, errors.Is(err, listener.ErrNotDynamic))
	_, err = cur.Changes(nil)
	assert.ErrorIs(t, err, listener.ErrInconsistent)
}
