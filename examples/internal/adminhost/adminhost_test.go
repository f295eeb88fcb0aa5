package adminhost

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
	"github.com/kafkanet/kafkanet/socketserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }

const maxConnections = 8

// The host over real TCP: a client's connections listed from Go and over
// ListClientConnections, closed over CloseClientConnections and by the
// operator's call, refused by max.connections.per.ip changed at run time
// (the operator's connections on ADMIN count toward it), held by
// max.connections until the operator's close frees a slot, and every
// connection's close seen by the hooks with its reason. The socket
// server's own tests cover each limit alone; this one shows them
// together, through a host's calls, and that an operator's close gives
// its quota slot back.
func TestHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Start(ctx, config.Properties{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,ADMIN://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,ADMIN:PLAINTEXT",
		"inter.broker.listener.name":     "ADMIN",
		"max.connections":                "8",
	}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	shut := false
	defer func() {
		if !shut {
			_ = h.Shutdown(ctx)
		}
	}()

	// A client of the data listener, listed by the host.
	app, err := kgo.NewClient(kgo.SeedBrokers(h.Addr("PLAINTEXT")), kgo.ClientID("app"))
	require.NoError(t, err)
	defer app.Close()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, app)
	require.NoError(t, err)
	require.Len(t, md.Brokers, 1)
	assert.Equal(t, h.Addr("PLAINTEXT"), net.JoinHostPort(md.Brokers[0].Host, itoa(md.Brokers[0].Port)))
	assert.Eventually(t, func() bool { return h.Events().Requests(kmsg.Metadata.Int16()) >= 1 }, 5*time.Second, 10*time.Millisecond)
	appConns, err := h.Clients("PLAINTEXT", "User:ANONYMOUS")
	require.NoError(t, err)
	require.NotEmpty(t, appConns)
	for _, c := range appConns {
		assert.Equal(t, "app", c.ClientID)
	}
	noneConns, err := h.Clients("PLAINTEXT", "User:someone")
	require.NoError(t, err)
	assert.Empty(t, noneConns, "the principal filter")

	// The operator's client on ADMIN lists the same connections, then
	// closes them.
	admin, err := kgo.NewClient(kgo.SeedBrokers(h.Addr(Admin)),
		connadmin.VersionsOpt(connregistry.DefaultListAPIKey, connregistry.DefaultCloseAPIKey))
	require.NoError(t, err)
	defer admin.Close()
	plaintext := "PLAINTEXT"
	listed, err := connadmin.New(admin, connregistry.DefaultListAPIKey, connregistry.DefaultCloseAPIKey).List(ctx, connregistry.Filter{Listener: &plaintext}, false)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.NoError(t, listed[0].Err)
	assert.ElementsMatch(t, connIDs(appConns), recordIDs(listed[0].Connections))
	closed, err := connadmin.New(admin, connregistry.DefaultListAPIKey, connregistry.DefaultCloseAPIKey).CloseConnections(ctx, connregistry.Filter{Listener: &plaintext})
	require.NoError(t, err)
	require.Len(t, closed, 1)
	require.NoError(t, closed[0].Err)
	assert.ElementsMatch(t, connIDs(appConns), recordIDs(closed[0].Connections))
	for _, c := range appConns {
		assert.Eventually(t, func() bool { return h.Events().ClosedBecause(c.ID) == connregistry.CloseByOperator }, 5*time.Second, 10*time.Millisecond)
	}
	history, err := h.Closed("PLAINTEXT")
	require.NoError(t, err)
	assert.Subset(t, connIDs(history), connIDs(appConns), "the registry remembers the closed connections")
	app.Close()
	require.Eventually(t, func() bool {
		open, err := h.Clients("PLAINTEXT", "")
		return err == nil && len(open) == 0
	}, 5*time.Second, 10*time.Millisecond, "the app's connections are gone")
	assert.Positive(t, h.Events().Slowest(), "the hooks timed the requests")

	// max.connections.per.ip, lowered while the host runs: one more
	// connection from this address is admitted, the next refused.
	open, err := h.Clients("", "")
	require.NoError(t, err)
	require.NoError(t, h.LimitPerIP(ctx, len(open)+1))
	a := dial(t, h.Addr("PLAINTEXT"))
	require.NoError(t, apiVersions(a, 5*time.Second), "the connection within the per-address limit is served")
	refused := dial(t, h.Addr("PLAINTEXT"))
	_, err = refused.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the connection over the per-address limit is closed")
	require.Eventually(t, func() bool { return len(h.Events().Rejected()) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, h.Events().Rejected()[0], socketserver.ErrTooManyConnections)
	require.NoError(t, h.LimitPerIP(ctx, socketserver.Unlimited))

	// max.connections: the connections over it wait, unanswered, until the
	// operator closes one.
	open, err = h.Clients("", "")
	require.NoError(t, err)
	for range maxConnections - len(open) {
		require.NoError(t, apiVersions(dial(t, h.Addr("PLAINTEXT")), 5*time.Second))
	}
	assert.Empty(t, h.Kick(), "no id closes nothing")
	waiting := dial(t, h.Addr("PLAINTEXT"))
	require.Error(t, apiVersions(waiting, 300*time.Millisecond), "a connection over max.connections waits")
	aID := idOf(t, h, a)
	kicked := h.Kick(aID)
	require.Equal(t, []string{aID}, connIDs(kicked))
	require.NoError(t, apiVersions(waiting, 5*time.Second), "the slot the operator freed admits the waiting connection")
	_, err = a.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
	assert.Eventually(t, func() bool { return h.Events().ClosedBecause(aID) == connregistry.CloseByOperator }, 5*time.Second, 10*time.Millisecond)

	none, err := h.KickFrom("10.0.0.0/8")
	require.NoError(t, err)
	assert.Empty(t, none, "no connection from elsewhere")
	_, err = h.KickFrom("not-an-address")
	assert.ErrorIs(t, err, connregistry.ErrInvalidFilter)

	// Shutdown closes the rest, and every connection's close was seen.
	open, err = h.Clients("", "")
	require.NoError(t, err)
	require.NoError(t, h.Shutdown(ctx))
	shut = true
	for _, c := range open {
		assert.Equal(t, connregistry.CloseServerShutdown, h.Events().ClosedBecause(c.ID), c.ID)
	}
	assert.Equal(t, maxConnections+len(appConns)+1, h.Events().Opened(),
		"the app's, the refused one's, and max.connections' worth")
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// apiVersions sends an ApiVersions v0 request on c and reads its answer
// within d.
func apiVersions(c net.Conn, d time.Duration) error {
	req := kmsg.NewPtrApiVersionsRequest()
	body := req.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len(body)))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, 0) // version
	frame = binary.BigEndian.AppendUint32(frame, 1) // correlation id
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)
	frame = append(frame, body...)
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := c.Write(frame); err != nil {
		return err
	}
	size := make([]byte, 4)
	if _, err := io.ReadFull(c, size); err != nil {
		return err
	}
	_, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(size)))
	return err
}

// idOf finds c's connection id by its client port.
func idOf(t *testing.T, h *Host, c net.Conn) string {
	t.Helper()
	open, err := h.Clients("", "")
	require.NoError(t, err)
	port := c.LocalAddr().(*net.TCPAddr).Port
	i := slices.IndexFunc(open, func(o connregistry.Conn) bool { return int(o.ClientAddr.Port()) == port })
	require.GreaterOrEqual(t, i, 0, "no open connection from port %d", port)
	return open[i].ID
}

// connIDs and recordIDs are the connection ids of a listing from Go and
// of one over the wire.
func connIDs(cs []connregistry.Conn) []string {
	return idsOf(cs, func(c connregistry.Conn) string { return c.ID })
}

func recordIDs(rs []connregistry.ConnectionRecord) []string {
	return idsOf(rs, func(r connregistry.ConnectionRecord) string { return r.ConnectionID })
}

func idsOf[T any](xs []T, id func(T) string) []string {
	var ids []string
	for _, x := range xs {
		ids = append(ids, id(x))
	}
	return ids
}
