package main

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// The SERVER-NAME column shows the TLS server name each client asked for
// ("-" without one), --server-name selects by it in --list and --close,
// and --output json carries it as ServerName.
func TestServerNameColumnAndFilter(t *testing.T) {
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	a := socketservertest.NewServerCert(t, "a.example.com")
	b := socketservertest.NewServerCert(t, "b.example.com")
	srv := socketservertest.NewServerFunc(t, config.Properties{
		"listeners":                      "PLAIN://127.0.0.1:0,SSL://127.0.0.1:0",
		"listener.security.protocol.map": "PLAIN:PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name":     "PLAIN",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          def.KeyStoreFile,
		"kafkanet.ssl.server.names":      "a.example.com,b.example.com",
		"kafkanet.ssl.server.name.a.example.com.ssl.keystore.location": a.KeyStoreFile,
		"kafkanet.ssl.server.name.b.example.com.ssl.keystore.location": b.KeyStoreFile,
	}, func(c *socketserver.Config) {
		c.APIs = []socketserver.API{socketserver.KmsgAPI(kmsg.Metadata, 0, 12),
			socketserver.ListClientConnectionsAPI(connregistry.DefaultListAPIKey, nil),
			socketserver.CloseClientConnectionsAPI(connregistry.DefaultCloseAPIKey, nil)}
	}, func(srv *socketserver.Server) socketserver.Handler {
		return socketserver.HandlerFunc(func(r *socketserver.Request) {
			if m, ok := r.Body.(*kmsg.MetadataRequest); ok {
				_ = r.Respond(srv.SingleNodeMetadata(m, r.Conn.Listener, socketserver.SingleNode{}))
				return
			}
			_ = r.CloseConnection()
		})
	})
	// A TLS client per server name, each with a request answered, so that
	// the server has finished its handshake.
	ssl := srv.Addr("SSL").String()
	clients := map[string]string{} // the name asked for ("-": none) -> the client's address
	for name, cfg := range map[string]*tls.Config{
		"a.example.com": {ServerName: "a.example.com", RootCAs: a.Roots},
		"b.example.com": {ServerName: "b.example.com", RootCAs: b.Roots},
		"-":             {ServerName: "127.0.0.1", RootCAs: def.Roots}, // an IP address: no server name
	} {
		raw, err := net.DialTimeout("tcp", ssl, 10*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { raw.Close() })
		require.NoError(t, raw.SetDeadline(time.Now().Add(time.Minute)))
		c := tls.Client(raw, cfg)
		_, err = c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		require.NoError(t, err, name)
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		require.NoError(t, err, name)
		_, err = io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:])))
		require.NoError(t, err, name)
		clients[name] = raw.LocalAddr().String()
	}

	plain := srv.Addr("PLAIN").String()
	res := runCLI(t, "--bootstrap-server", plain, "--list", "--listener", "SSL")
	require.Equal(t, 0, res.code, res.stderr)
	header, rows := table(t, res.stdout)
	assert.Equal(t, tableHeader[1:], header)
	require.Len(t, rows, 3, res.stdout)
	for name, addr := range clients {
		row, ok := rowAt(rows, addr)
		require.True(t, ok, "%s's connection %s is missing:\n%s", name, addr, res.stdout)
		assert.Equal(t, name, row["SERVER-NAME"])
		assert.Equal(t, "SSL", row["PROTOCOL"])
	}

	for filter, want := range map[string][]string{
		"A.example.com":   {"a.example.com"},
		"*.example.com":   {"a.example.com", "b.example.com"},
		"":                {"-"},
		"c.example.com":   nil,
		"b.example.com.":  {"b.example.com"},
		"*.b.example.com": nil,
	} {
		res := runCLI(t, "--bootstrap-server", plain, "--list", "--listener", "SSL", "--server-name", filter)
		require.Equal(t, 0, res.code, res.stderr)
		_, rows := table(t, res.stdout)
		var got []string
		for _, r := range rows {
			got = append(got, r["SERVER-NAME"])
		}
		assert.ElementsMatch(t, want, got, "--server-name %q:\n%s", filter, res.stdout)
	}

	res = runCLI(t, "--bootstrap-server", plain, "--list", "--server-name", "b.example.com", "--output", "json")
	require.Equal(t, 0, res.code, res.stderr)
	assert.Contains(t, res.stdout, `"ServerName": "b.example.com"`)

	// --server-name alone is a filter --close accepts.
	res = runCLI(t, "--bootstrap-server", plain, "--close", "--server-name", "b.example.com")
	require.Equal(t, 0, res.code, res.stderr)
	_, rows = table(t, res.stdout)
	require.Len(t, rows, 1, res.stdout)
	assert.Equal(t, clients["b.example.com"], net.JoinHostPort(rows[0]["CLIENT-ADDRESS"], rows[0]["PORT"]))
	require.Eventually(t, func() bool {
		return len(srv.Registry().Snapshot(connregistry.Filter{ServerName: new("b.example.com")})) == 0
	}, 5*time.Second, 5*time.Millisecond)
	assert.Len(t, srv.Registry().Snapshot(connregistry.Filter{ServerName: new("a.example.com")}), 1)
}
