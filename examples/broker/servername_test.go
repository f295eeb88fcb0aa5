package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connadmin"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// One SSL listener of the example broker serves the certificate of the
// server name a client asks for (kafkanet.ssl.server.names), and the
// default (ssl.keystore.location) to a client that asks for none, as kcat
// sees them: kcat sends the name of the host it dials (librdkafka sends
// none for an IP address), and trusting only one certificate's CA
// (ssl.ca.location) it gets through only when that certificate is the one
// served. localhost is the one name that resolves everywhere: the broker
// advertises it, so that every connection of a client that bootstraps
// through it asks for it; a client that bootstraps through 127.0.0.1
// (no name) reads the metadata on that first connection. The other name is
// checked with Go's TLS client (kgo). The listing shows each connection's
// name and its server-name filter selects by it.
func TestServerNameCertificatesKcat(t *testing.T) {
	kcat := requireTool(t, "kcat", "apt-get install kcat")
	def := socketservertest.NewServerCert(t, "127.0.0.1")
	local := socketservertest.NewServerCert(t, "localhost")
	other := socketservertest.NewServerCert(t, "b.example.com")
	c := startTestCluster(t, 1,
		"listener.security.protocol.map=CLIENT:SSL,REPLICATION:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"advertised.listeners=CLIENT://localhost:0,REPLICATION://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"super.users=User:ANONYMOUS",
		"listener.name.client.ssl.keystore.type=PEM",
		"listener.name.client.ssl.keystore.location="+def.KeyStoreFile,
		"listener.name.client.kafkanet.ssl.server.names=localhost,b.example.com",
		"listener.name.client.kafkanet.ssl.server.name.localhost.ssl.keystore.location="+local.KeyStoreFile,
		"listener.name.client.kafkanet.ssl.server.name.b.example.com.ssl.keystore.location="+other.KeyStoreFile,
	)
	port := strings.TrimPrefix(addr(t, c, 0, "CLIENT"), "127.0.0.1:")

	command := func(ctx context.Context, host, ca string, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, kcat, append([]string{"-b", host + ":" + port, "-X", "security.protocol=SSL",
			"-X", "ssl.ca.location=" + ca}, args...)...)
	}
	run := func(t *testing.T, stdin, host, ca string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := command(ctx, host, ca, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		require.NoError(t, ctx.Err(), "kcat ran into the test's timeout: %s", out.String())
		return out.String(), err
	}
	for _, tt := range []struct {
		name, host string
		ca         *socketservertest.ServerCert
		ok         bool
	}{
		{"localhost gets its certificate", "localhost", local, true},
		{"localhost does not get the default", "localhost", def, false},
		{"no server name gets the default", "127.0.0.1", def, true},
		{"no server name does not get localhost's", "127.0.0.1", local, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := run(t, "", tt.host, tt.ca.CAFile, "-L", "-m", "3")
			if tt.ok {
				require.NoError(t, err, "%s", out)
				assert.Contains(t, out, "broker 0 at localhost:"+port)
				return
			}
			require.Error(t, err, "%s", out)
			assert.Contains(t, out, "certificate verify failed")
		})
	}
	// Every connection of a client of localhost asks for it: produce and
	// consume.
	out, err := run(t, "one\ntwo\n", "localhost", local.CAFile, "-P", "-t", "named")
	require.NoError(t, err, "%s", out)
	out, err = run(t, "", "localhost", local.CAFile, "-C", "-t", "named", "-o", "beginning", "-e", "-q")
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "one\ntwo\n", out)

	// A kcat consumer of localhost and a kgo client of b.example.com stay
	// connected, to be listed.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	consumer := command(ctx, "localhost", local.CAFile, "-C", "-t", "named", "-o", "end", "-q")
	consumer.WaitDelay = 5 * time.Second
	var consumerOut testkit.SyncBuffer
	consumer.Stdout, consumer.Stderr = &consumerOut, &consumerOut
	require.NoError(t, consumer.Start())
	exited := make(chan error, 1)
	go func() { exited <- consumer.Wait() }()
	defer func() {
		stop()
		<-exited
	}()
	b := newClient(t, "127.0.0.1:"+port, kgo.DialTLSConfig(&tls.Config{ServerName: "b.example.com", RootCAs: other.Roots}))
	require.NoError(t, b.Ping(context.Background()))

	admin := connadmin.New(newClient(t, addr(t, c, 0, "REPLICATION"), connadmin.VersionsOpt(connregistry.DefaultListAPIKey)), 0, 0)
	list := func(name *string) map[string]string { // software name -> server name
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := admin.List(ctx, connregistry.Filter{Listener: kmsg.StringPtr("CLIENT"), ServerName: name}, false)
		require.NoError(t, err)
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		got := map[string]string{}
		for _, conn := range res[0].Connections {
			got[conn.SoftwareName] = conn.ServerName
		}
		return got
	}
	require.Eventually(t, func() bool { _, ok := list(nil)["librdkafka"]; return ok }, 20*time.Second, 50*time.Millisecond,
		"kcat's connection is not listed: %s", consumerOut.String())
	assert.Equal(t, map[string]string{"librdkafka": "localhost", "kgo": "b.example.com"}, list(nil))
	assert.Equal(t, map[string]string{"librdkafka": "localhost"}, list(kmsg.StringPtr("LOCALHOST")))
	assert.Equal(t, map[string]string{"kgo": "b.example.com"}, list(kmsg.StringPtr("*.example.com")))
	assert.Empty(t, list(kmsg.StringPtr("")), "every client asked for a name")
	select {
	case err := <-exited:
		exited <- err
		t.Errorf("kcat ended (%v):\n%s", err, consumerOut.String())
	default:
	}
}
