package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// listenersFile is a configuration with listeners as given, among CLIENT
// (SASL_PLAINTEXT, alice), REPLICATION (PLAINTEXT, inter-broker), OLD
// (PLAINTEXT) and EXTERNAL (SASL_SSL with pki's certificate, carol), and
// extra lines after.
func listenersFile(pki *socketservertest.PKI, listeners string, extra ...string) string {
	return saslFile(`user_alice="alice-secret"`, append([]string{
		"listeners=" + listeners,
		"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT,OLD:PLAINTEXT,EXTERNAL:SASL_SSL",
		"listener.name.external.plain.sasl.jaas.config=" + config.PlainLoginModule + ` required user_carol="carol-secret";`,
		"listener.name.external.ssl.keystore.type=PEM",
		"listener.name.external.ssl.keystore.location=" + pki.ServerFile,
		"listener.name.external.num.network.threads=2",
	}, extra...)...)
}

// A reload (SIGHUP) applies listeners as Kafka does at run time, on every
// broker: OLD, removed, drains (its Fetch in flight is answered, then its
// connection closes, listed as closed for the removal); EXTERNAL, added,
// serves kcat and kgo over TLS with its own users, and Metadata through it
// gives every broker's EXTERNAL address; CLIENT is advertised anew; the
// connections of the listeners kept are untouched. A change that needs a
// restart is refused and changes nothing.
func TestReloadChangesListeners(t *testing.T) {
	kcat := requireTool(t, "kcat", "apt-get install kcat")
	pki := socketservertest.NewPKI(t)
	var log testkit.SyncBuffer
	path := writeProperties(t, listenersFile(pki, "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,OLD://127.0.0.1:0"))
	c, load := startFromFile(t, path, 2, &log)
	alice := kgo.SASL(saslMechanism("SCRAM-SHA-256", "alice", "alice-secret"))
	require.NoError(t, login(t, addr(t, c, 0, "CLIENT"), 10*time.Second, alice))
	replication := dialRaw(t, addr(t, c, 0, "REPLICATION"))
	roundTrip[*kmsg.ApiVersionsResponse](replication, kmsg.NewPtrApiVersionsRequest())
	old := dialRaw(t, addr(t, c, 0, "OLD"))
	createTopic(t, old, "reload-listeners", 1)
	oldAddr := addr(t, c, 0, "OLD")

	// A Fetch long poll on OLD is in flight when the reload removes it.
	fetchCorr := old.send(fetchRequest(1500*time.Millisecond, "reload-listeners", 0, 0))
	// The broker has read it (its second request) before the reload: on a
	// loaded machine a fixed pause was once not enough.
	oldName := "OLD"
	require.Eventually(t, func() bool {
		for _, cn := range c.brokers[0].srv.Registry().Snapshot(connregistry.Filter{Listener: &oldName}) {
			if cn.Requests >= 2 {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the Fetch reached the broker")
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, os.WriteFile(path, []byte(listenersFile(pki, "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"advertised.listeners=CLIENT://localhost:0,REPLICATION://127.0.0.1:0,EXTERNAL://127.0.0.1:0")), 0o600))
	start := time.Now()
	require.NoError(t, c.reload(context.Background(), load))
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the reload waited for OLD's Fetch in flight")
	fetched := fetchRequest(0, "", 0, 0).ResponseKind().(*kmsg.FetchResponse)
	fetched.Version = 12
	old.read(fetched, fetchCorr)
	require.Len(t, fetched.Topics, 1, "the Fetch in flight was answered")
	old.requireClosed()
	for i := range 2 {
		assert.Contains(t, log.String(), fmt.Sprintf(`msg="reload: listener removed" broker=%d listener=OLD`, i))
		assert.Regexp(t, fmt.Sprintf(`msg="listener started" broker=%d listener=EXTERNAL bind=127\.0\.0\.1:\d+`, i), log.String())
		assert.Regexp(t, fmt.Sprintf(`msg="reload: listener advertised anew" broker=%d listener=CLIENT advertised=localhost:\d+`, i), log.String())
		assert.Nil(t, c.brokers[i].srv.Addr("OLD"))
	}
	closed := c.brokers[0].srv.Registry().Closed(connregistry.Filter{})
	require.NotEmpty(t, closed)
	for _, rec := range closed {
		if rec.Listener == "OLD" {
			assert.Equal(t, connregistry.CloseListenerRemoved, rec.CloseReason)
		}
	}
	if conn, err := net.DialTimeout("tcp", oldAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("OLD's address %s still accepts", oldAddr)
	}

	// EXTERNAL, with kgo and kcat: carol logs in over TLS, and Metadata
	// through EXTERNAL names both brokers at their EXTERNAL addresses.
	external := addr(t, c, 0, "EXTERNAL")
	carol := []kgo.Opt{kgo.SASL(saslMechanism("PLAIN", "carol", "carol-secret")), kgo.DialTLSConfig(pki.ClientTLS(false))}
	cl := newClient(t, external, carol...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, md.Brokers, 2)
	for i, b := range md.Brokers {
		assert.Equal(t, addr(t, c, i, "EXTERNAL"), fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	assert.ErrorIs(t, login(t, external, 5*time.Second, alice, kgo.DialTLSConfig(pki.ClientTLS(false))), kerr.SaslAuthenticationFailed,
		"EXTERNAL has its own users")
	out, err := exec.CommandContext(ctx, kcat, "-L", "-b", external, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+pki.CAFile,
		"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret").CombinedOutput()
	require.NoError(t, err, "kcat: %s", out)
	assert.Contains(t, string(out), " 2 brokers:")
	assert.Contains(t, string(out), "at "+addr(t, c, 1, "EXTERNAL"))
	// CLIENT is advertised at its new host; REPLICATION as before.
	for _, info := range c.brokerInfos() {
		for _, ep := range info.EndPoints {
			want := map[protocolmap.ListenerName]string{"CLIENT": "localhost", "REPLICATION": "127.0.0.1", "EXTERNAL": "127.0.0.1"}[ep.Name]
			assert.Equal(t, want, ep.Host, "listener %s", ep.Name)
			assert.NotZero(t, ep.Port, "listener %s advertises the port bound", ep.Name)
		}
	}
	roundTrip[*kmsg.ApiVersionsResponse](replication, kmsg.NewPtrApiVersionsRequest()) // untouched
	require.NoError(t, login(t, addr(t, c, 0, "CLIENT"), 10*time.Second, alice))

	// Moving EXTERNAL needs a restart: refused, nothing changes.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := free.Addr().(*net.TCPAddr).Port
	require.NoError(t, free.Close())
	require.NoError(t, os.WriteFile(path, []byte(listenersFile(pki,
		fmt.Sprintf("CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,EXTERNAL://127.0.0.1:%d", port))), 0o600))
	err = c.reload(context.Background(), load)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Configs cannot be updated dynamically for existing listener EXTERNAL")
	assert.Contains(t, log.String(), `level=ERROR msg="reload failed: the configuration is invalid or refused; the failing step and those after it changed nothing"`)
	assert.Equal(t, external, addr(t, c, 0, "EXTERNAL"))
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	// So does removing the inter-broker listener.
	require.NoError(t, os.WriteFile(path, []byte(listenersFile(pki, "CLIENT://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"inter.broker.listener.name=CLIENT")), 0o600))
	require.ErrorContains(t, c.reload(context.Background(), load), "inter.broker.listener.name")
	roundTrip[*kmsg.ApiVersionsResponse](replication, kmsg.NewPtrApiVersionsRequest())
}

// The example broker applies listener changes on a real SIGHUP: a listener
// added to the file is bound and served, and one removed stops serving; a
// TLS listener added where there was none has its files watched.
func TestRunAppliesListenersOnSIGHUP(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	path := writeProperties(t, listenersFile(pki, "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0"))
	stderr, sighup := serveBroker(t, "-config", path, "-tls-watch-interval", "20ms")

	require.NoError(t, os.WriteFile(path, []byte(listenersFile(pki, "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,OLD://127.0.0.1:0")), 0o600))
	sighup()
	started := regexp.MustCompile(`msg="listener started" broker=0 listener=OLD bind=(\S+)`)
	require.Eventually(t, func() bool { return started.MatchString(stderr.String()) }, 10*time.Second, 10*time.Millisecond, "stderr: %s", stderr)
	bind := started.FindStringSubmatch(stderr.String())[1]
	conn := dialRaw(t, bind)
	md := roundTrip[*kmsg.MetadataResponse](conn, metadataRequest(12, false))
	require.Len(t, md.Brokers, 1)
	assert.Equal(t, bind, fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port), "OLD advertises the port it bound")

	// EXTERNAL, a TLS listener where the broker started with none, is
	// added too, and from then on its certificate is reloaded when its
	// file changes, without another signal.
	require.NoError(t, os.WriteFile(path, []byte(listenersFile(pki, "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0,EXTERNAL://127.0.0.1:0")), 0o600))
	sighup()
	require.Eventually(t, func() bool {
		return strings.Contains(stderr.String(), `msg="reload: listener removed" broker=0 listener=OLD`)
	},
		10*time.Second, 10*time.Millisecond, "stderr: %s", stderr)
	conn.requireClosed()
	externalStarted := regexp.MustCompile(`msg="listener started" broker=0 listener=EXTERNAL bind=(\S+)`)
	require.Eventually(t, func() bool { return externalStarted.MatchString(stderr.String()) }, 10*time.Second, 10*time.Millisecond, "stderr: %s", stderr)
	external := externalStarted.FindStringSubmatch(stderr.String())[1]
	cert, err := pki.RotateServer("", time.Hour)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return serverCert(t, pki, external).SerialNumber.Cmp(cert.SerialNumber) == 0 },
		10*time.Second, 10*time.Millisecond, "the added TLS listener's renewed certificate is served; stderr: %s", &stderr)
	assert.NotContains(t, stderr.String(), "level=ERROR", "the watcher met no listener it could not reload")
}
