package socketservertest_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// answerMetadata answers Metadata with an empty response.
var answerMetadata = socketserver.HandlerFunc(func(r *socketserver.Request) {
	req, ok := r.Body.(*kmsg.MetadataRequest)
	if !ok {
		_ = r.CloseConnection()
		return
	}
	_ = r.Respond(req.ResponseKind())
})

func metadataAPIs(c *socketserver.Config) {
	c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12)}
}

// ConnectKgo finds the client's connection however it is dialed: with
// kgo's own dialer, TLS (kgo.DialTLSConfig), or a kgo.Dialer of the
// caller's, which is used, not replaced.
func TestConnectKgoWithTheCallersDialer(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	tlsProps := config.Properties{
		"listeners":               "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.type":       "PEM",
		"ssl.keystore.location":   pki.ServerFile,
		"ssl.truststore.type":     "PEM",
		"ssl.truststore.location": pki.CAFile,
	}
	var dialed atomic.Int32
	counting := func(ctx context.Context, network, host string) (net.Conn, error) {
		dialed.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, host)
	}
	recording := &testkit.RecordingDialer{}
	for _, tc := range []struct {
		name     string
		props    config.Properties
		listener protocolmap.ListenerName
		opts     func(srv *socketserver.Server) []kgo.Opt
		// dials is how many times the caller's dialer must have been called.
		dials func() int
	}{
		{name: "kgo's dialer", listener: "PLAINTEXT"},
		{name: "a kgo.Dialer", listener: "PLAINTEXT",
			opts:  func(*socketserver.Server) []kgo.Opt { return []kgo.Opt{kgo.Dialer(counting)} },
			dials: func() int { return int(dialed.Load()) }},
		{name: "a RecordingDialer", listener: "PLAINTEXT",
			opts:  func(*socketserver.Server) []kgo.Opt { return []kgo.Opt{kgo.Dialer(recording.Dial)} },
			dials: func() int { return len(recording.Addrs()) }},
		{name: "kgo.DialTLSConfig", props: tlsProps, listener: "SSL",
			opts: func(*socketserver.Server) []kgo.Opt { return []kgo.Opt{kgo.DialTLSConfig(pki.ClientTLS(false))} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, tc.props, metadataAPIs, answerMetadata)
			var opts []kgo.Opt
			if tc.opts != nil {
				opts = tc.opts(srv)
			}
			_, local := socketservertest.ConnectKgo(t, srv.Addr(tc.listener).String(), opts...)
			require.NotEmpty(t, local)
			if tc.dials != nil {
				require.Equal(t, 1, tc.dials(), "the caller's dialer dialed the connection")
			}
			conns := srv.Registry().Snapshot(connregistry.Filter{})
			require.Len(t, conns, 1)
			require.Equal(t, local, conns[0].ClientAddr.String(), "the local address is the server's client address")
		})
	}
}

// A PipeListener's DialContext reaches a server served on it, with no
// socket: ConnectKgo reports the pipe's address.
func TestConnectKgoOverAPipe(t *testing.T) {
	pipe := socketservertest.NewPipeListener("pipe")
	srv := socketservertest.NewServer(t, nil, func(c *socketserver.Config) {
		metadataAPIs(c)
		c.Listen = func(context.Context, listener.Listener) (net.Listener, error) { return pipe, nil }
	}, answerMetadata)
	_, local := socketservertest.ConnectKgo(t, "pipe:9092", kgo.Dialer(pipe.DialContext))
	require.Equal(t, "pipe", local)
	require.Len(t, srv.Registry().Snapshot(connregistry.Filter{}), 1)
}
