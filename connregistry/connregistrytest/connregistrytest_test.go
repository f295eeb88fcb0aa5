package connregistrytest_test

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connregistrytest"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

func TestNewRegistry(t *testing.T) {
	t0 := time.Unix(1_777_280_400, 0) // the registry keeps LastActivity as time.Unix gives it
	alice := connregistry.Conn{Info: connregistry.Info{ID: "a", Principal: connregistry.Principal{Type: "User", Name: "alice"},
		ClientAddr: netip.MustParseAddrPort("10.0.0.1:1000"), Listener: "CLIENT", ConnectedAt: t0.Add(time.Second)},
		State: connregistry.StateReady, BytesIn: 100, BytesOut: 50, Requests: 3, LastActivity: t0.Add(time.Minute)}
	bob := connregistry.Conn{Info: connregistry.Info{ID: "b", Principal: connregistry.Principal{Type: "User", Name: "bob"},
		ConnectedAt: t0}, State: connregistry.StateAuthenticating}
	gone := connregistry.Conn{Info: connregistry.Info{ID: "c", ConnectedAt: t0}, ClosedAt: t0.Add(time.Hour), CloseReason: connregistry.CloseIdle}
	r := connregistrytest.NewRegistry(2, alice, bob, gone)

	assert.Equal(t, 2, r.Len())
	open := r.Snapshot(connregistry.Filter{})
	require.Len(t, open, 2)
	assert.Equal(t, "b", open[0].ID, "ordered by connection time")
	assert.Equal(t, "a", open[1].ID)
	assert.Equal(t, alice, open[1], "listed as given, counters included")
	bob.LastActivity = bob.ConnectedAt
	assert.Equal(t, bob, open[0], "a zero LastActivity is ConnectedAt")

	closed := r.Closed(connregistry.Filter{})
	require.Len(t, closed, 1)
	assert.Equal(t, "c", closed[0].ID)
	assert.Equal(t, connregistry.CloseIdle, closed[0].CloseReason)
	assert.True(t, closed[0].ClosedAt.Equal(t0.Add(time.Hour)))
	assert.Equal(t, connregistry.StateClosing, closed[0].State)

	// Closing through the registry closes as a server does: into the
	// history, with the reason given.
	got := r.Close(connregistry.Filter{ConnectionIDs: []string{"a"}}, connregistry.CloseByOperator)
	require.Len(t, got, 1)
	assert.Equal(t, "a", got[0].ID)
	assert.Equal(t, 1, r.Len())
	closed = r.Closed(connregistry.Filter{})
	require.Len(t, closed, 2)
	assert.Equal(t, "a", closed[1].ID)
	assert.Equal(t, connregistry.CloseByOperator, closed[1].CloseReason)
}

// The registry a host holds has no method that writes: its method set is
// the interface's, so that not even reflection reaches the bookkeeping.
func TestRegistryHasNoWriteMethod(t *testing.T) {
	r := connregistrytest.NewRegistry(0, connregistry.Conn{Info: connregistry.Info{ID: "a"}})
	typ := reflect.TypeOf(r)
	var names []string
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	slices.Sort(names)
	assert.Equal(t, []string{"Close", "Closed", "Len", "Snapshot", "Top"}, names)
}
