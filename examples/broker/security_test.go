package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/protocolmap"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// mechanisms are the SASL mechanisms the example broker serves.
var mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// saslMechanism returns kgo's client side of a SASL mechanism.
func saslMechanism(mech, user, password string) sasl.Mechanism {
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	}
	panic("unknown SASL mechanism " + mech)
}

// securitySettings give a broker one listener of each secured kind: SASL
// (SASL_PLAINTEXT), SASLTLS (SASL_SSL) and TLS (SSL, client certificates
// required), each SASL one with the demo users, and a PLAINTEXT
// inter-broker listener; then extra.
func securitySettings(p *socketservertest.PKI, extra ...string) []string {
	return append([]string{
		"listeners=SASL://127.0.0.1:0,SASLTLS://127.0.0.1:0,TLS://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map=SASL:SASL_PLAINTEXT,SASLTLS:SASL_SSL,TLS:SSL,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name=REPLICATION",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.sasl.plain.sasl.jaas.config=" + defaultJAAS,
		"listener.name.sasltls.plain.sasl.jaas.config=" + defaultJAAS,
		"listener.name.sasltls.ssl.keystore.type=PEM",
		"listener.name.sasltls.ssl.keystore.location=" + p.ServerFile,
		"listener.name.tls.ssl.keystore.type=PEM",
		"listener.name.tls.ssl.keystore.location=" + p.ServerFile,
		"listener.name.tls.ssl.truststore.type=PEM",
		"listener.name.tls.ssl.truststore.location=" + p.CAFile,
		"listener.name.tls.ssl.client.auth=required",
	}, extra...)
}

// produceConsume produces n records to a new topic through seed with a
// client made with opts, then consumes them back with another.
func produceConsume(t *testing.T, seed, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	producer := newClient(t, seed, append([]kgo.Opt{kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic)}, opts...)...)
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = kgo.StringRecord(fmt.Sprintf("value-%04d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, producer.ProduceSync(ctx, records...).FirstErr())
	got := consume(t, seed, topic, n, opts...)
	for i, r := range got {
		require.Equal(t, fmt.Sprintf("value-%04d", i), string(r.Value))
	}
}

// login makes one request through a new client with opts, within timeout,
// and returns its error.
func login(t *testing.T, seed string, timeout time.Duration, opts ...kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seed)}, opts...)...)
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err = cl.Request(ctx, kmsg.NewPtrMetadataRequest())
	return err
}

func TestSASLProduceConsume(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	c := startClusterWith(t, 1, config.Properties{}, securitySettings(pki)...)
	for _, l := range []string{"SASL", "SASLTLS"} {
		for _, mech := range mechanisms {
			t.Run(l+"/"+mech, func(t *testing.T) {
				opts := []kgo.Opt{kgo.SASL(saslMechanism(mech, "alice", "alice-secret"))}
				if l == "SASLTLS" {
					opts = append(opts, kgo.DialTLSConfig(pki.ClientTLS(false)))
				}
				produceConsume(t, addr(t, c, 0, protocolmap.ListenerName(l)), strings.ToLower("sasl-"+l+"-"+mech), 100, opts...)
			})
		}
	}
}

func TestSSLClientCertificate(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	c := startClusterWith(t, 1, config.Properties{}, securitySettings(pki)...)
	seed := addr(t, c, 0, "TLS")

	t.Run("with a client certificate", func(t *testing.T) {
		produceConsume(t, seed, "ssl-client-cert", 100, kgo.DialTLSConfig(pki.ClientTLS(true)))
	})
	t.Run("kgo without a client certificate", func(t *testing.T) {
		start := time.Now()
		err := login(t, seed, 3*time.Second, kgo.DialTLSConfig(pki.ClientTLS(false)))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate required")
		t.Logf("kgo without a certificate, after %v: %v", time.Since(start), err)
	})
	t.Run("TLS without a client certificate", func(t *testing.T) {
		// TLS 1.3 finishes the client's side of the handshake before the
		// server checks the certificate: the alert comes with the first read.
		conn, err := tls.Dial("tcp", seed, pki.ClientTLS(false))
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
		_, _ = conn.Write(formatter.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
		_, err = conn.Read(make([]byte, 1))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "certificate required")
	})
	t.Run("certificate from another CA", func(t *testing.T) {
		other := socketservertest.NewPKI(t)
		cfg := other.ClientTLS(true)
		cfg.RootCAs = pki.Roots // the server is trusted, the client is not
		conn, err := tls.Dial("tcp", seed, cfg)
		if err == nil {
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
			_, _ = conn.Write(formatter.AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 1))
			_, err = conn.Read(make([]byte, 1))
		}
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unknown certificate authority")
	})
}

func TestSASLWrongPasswordFailsPromptly(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	c := startClusterWith(t, 1, config.Properties{}, securitySettings(pki)...)
	for _, l := range []string{"SASL", "SASLTLS"} {
		for _, mech := range mechanisms {
			for _, user := range []string{"alice", "mallory"} {
				t.Run(l+"/"+mech+"/"+user, func(t *testing.T) {
					opts := []kgo.Opt{kgo.SASL(saslMechanism(mech, user, "wrong-password"))}
					if l == "SASLTLS" {
						opts = append(opts, kgo.DialTLSConfig(pki.ClientTLS(false)))
					}
					start := time.Now()
					err := login(t, addr(t, c, 0, protocolmap.ListenerName(l)), 10*time.Second, opts...)
					elapsed := time.Since(start)
					require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
					assert.Contains(t, err.Error(), "Authentication failed")
					assert.Less(t, elapsed, 3*time.Second, "kgo gave up only after retrying")
				})
			}
		}
	}
}

func TestSASLClientWithoutSASLIsRefused(t *testing.T) {
	c := startDefaultCluster(t)
	err := login(t, addr(t, c, 0, "CLIENT"), 2*time.Second)
	require.Error(t, err, "a client without SASL got an answer from a SASL listener")
	// The PLAINTEXT listeners need no SASL.
	require.NoError(t, login(t, addr(t, c, 0, "INTERNAL"), 10*time.Second))
}

// TestDefaultsServeSASL runs the built-in settings: the demo users log in
// to CLIENT with each mechanism.
func TestDefaultsServeSASL(t *testing.T) {
	c := startDefaultCluster(t)
	for _, user := range []struct{ name, password string }{{"alice", "alice-secret"}, {"bob", "bob-secret"}} {
		for _, mech := range mechanisms {
			t.Run(user.name+"/"+mech, func(t *testing.T) {
				topic := strings.ToLower("default-" + user.name + "-" + mech)
				produceConsume(t, addr(t, c, 0, "CLIENT"), topic, 10, kgo.SASL(saslMechanism(mech, user.name, user.password)))
			})
		}
	}
}

// saslFile is a configuration file of one SASL_PLAINTEXT listener, CLIENT,
// with the users of jaasUsers (user_<name>="<password>" options), and the
// PLAINTEXT inter-broker listener; then extra lines.
func saslFile(jaasUsers string, extra ...string) string {
	return strings.Join(append([]string{
		"listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name=REPLICATION",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"listener.name.client.plain.sasl.jaas.config=" + config.PlainLoginModule + " required " + jaasUsers + ";",
	}, extra...), "\n") + "\n"
}

// startFromFile starts the brokers of the configuration file at path, as
// run does, logging to log; it returns the cluster and the reload function
// run would use.
func startFromFile(t *testing.T, path string, n int, log *testkit.SyncBuffer) (*cluster, func() (*brokerConfig, error)) {
	t.Helper()
	cfg, err := resolve(path, nil)
	require.NoError(t, err)
	c, err := startCluster(context.Background(), cfg.Properties(), n, slog.New(slog.NewTextHandler(log, nil)), nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, func() (*brokerConfig, error) { return resolve(path, nil) }
}

func TestReloadUsers(t *testing.T) {
	var log testkit.SyncBuffer
	path := writeProperties(t, saslFile(`user_alice="alice-secret" user_bob="bob-secret"`))
	c, load := startFromFile(t, path, 2, &log)
	seeds := []string{addr(t, c, 0, "CLIENT"), addr(t, c, 1, "CLIENT")}
	// works reports whether user logs in with password and mech on every
	// broker.
	works := func(mech, user, password string) bool {
		t.Helper()
		for _, seed := range seeds {
			err := login(t, seed, 10*time.Second, kgo.SASL(saslMechanism(mech, user, password)))
			if err != nil {
				require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
				return false
			}
		}
		return true
	}
	for _, mech := range mechanisms {
		require.True(t, works(mech, "bob", "bob-secret"))
		require.False(t, works(mech, "carol", "carol-secret"))
	}

	// carol joins, bob leaves, alice changes her password.
	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-new" user_carol="carol-secret"`)), 0o600))
	require.NoError(t, c.reload(context.Background(), load))
	assert.Contains(t, log.String(), `msg="reload: SASL users" listener=CLIENT key=listener.name.client.plain.sasl.jaas.config added=[carol] removed=[bob] password_changed=[alice]`)
	for _, secret := range []string{"alice-new", "carol-secret", "alice-secret", "bob-secret"} {
		assert.NotContains(t, log.String(), secret, "a password in the log")
	}
	for _, mech := range mechanisms {
		assert.True(t, works(mech, "carol", "carol-secret"), mech)
		assert.True(t, works(mech, "alice", "alice-new"), mech)
		assert.False(t, works(mech, "alice", "alice-secret"), mech)
		assert.False(t, works(mech, "bob", "bob-secret"), mech)
	}

	// Invalid files change nothing.
	invalid := []struct {
		name, text, want string
	}{
		{"JAAS that does not parse", saslFile(`user_carol="carol-secret`), "listener.name.client.plain.sasl.jaas.config"},
		{"no JAAS", strings.Replace(saslFile(""), "listener.name.client.plain", "listener.name.other.plain", 1), "listener.name.client.plain.sasl.jaas.config"},
		{"invalid listeners", saslFile(`user_carol="carol-secret"`, "listeners=CLIENT://127.0.0.1:99999"), "listeners"},
		{"CLIENT no longer SASL", saslFile(`user_carol="carol-secret"`, "listener.security.protocol.map=CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT"), "Security protocol cannot be updated for existing listener CLIENT"},
		{"an unknown mechanism", saslFile(`user_carol="carol-secret"`, "sasl.enabled.mechanisms=PLAIN,GSSAPI"), "sasl.enabled.mechanisms"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(path, []byte(tt.text), 0o600))
			err := c.reload(context.Background(), load)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, log.String(), `level=ERROR msg="reload failed: the configuration is invalid or refused; the failing step and those after it changed nothing"`)
			assert.True(t, works("PLAIN", "carol", "carol-secret"))
			assert.True(t, works("SCRAM-SHA-256", "alice", "alice-new"))
		})
	}
	t.Run("missing file", func(t *testing.T) {
		require.NoError(t, os.Remove(path))
		require.Error(t, c.reload(context.Background(), load))
		assert.True(t, works("PLAIN", "carol", "carol-secret"))
	})
	t.Run("no -config", func(t *testing.T) {
		require.ErrorIs(t, c.reload(context.Background(), nil), errNoConfigFile)
	})
}

func TestReloadWarnsAboutUnprefixedJAAS(t *testing.T) {
	var log testkit.SyncBuffer
	path := writeProperties(t, saslFile(`user_alice="alice-secret"`, "sasl.jaas.config="+config.PlainLoginModule+` required user_eve="eve";`))
	c, load := startFromFile(t, path, 1, &log)
	want := `level=WARN msg="ignoring sasl.jaas.config: a broker reads JAAS settings only with the listener and SASL mechanism prefix, as in listener.name.client.plain.sasl.jaas.config"`
	assert.Equal(t, 1, strings.Count(log.String(), want), "log: %s", &log)
	require.NoError(t, c.reload(context.Background(), load))
	assert.Equal(t, 2, strings.Count(log.String(), want), "log: %s", &log)
	require.ErrorIs(t, login(t, addr(t, c, 0, "CLIENT"), 10*time.Second, kgo.SASL(saslMechanism("PLAIN", "eve", "eve"))), kerr.SaslAuthenticationFailed)
}

// TestRevokedUserLosesConnections removes a user whose client keeps
// producing: with connections.max.reauth.ms=2000 its session expires within
// two seconds (kgo re-authenticates a second before), re-authentication
// fails and the server closes the connections. (With 1000 kgo would
// re-authenticate before every request, and Kafka refuses
// re-authentications less than a second apart.)
func TestRevokedUserLosesConnections(t *testing.T) {
	var log testkit.SyncBuffer
	path := writeProperties(t, saslFile(`user_alice="alice-secret" user_bob="bob-secret"`, "connections.max.reauth.ms=2000"))
	c, load := startFromFile(t, path, 1, &log)
	seed := addr(t, c, 0, "CLIENT")
	connections := func() int { return c.brokers[0].srv.Stats().ConnectionCount[protocolmap.ListenerName("CLIENT")] }

	cl := newClient(t, seed, kgo.SASL(saslMechanism("SCRAM-SHA-256", "bob", "bob-secret")),
		kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("revoke"), kgo.RecordRetries(0),
		// After a failed produce kgo waits for a metadata refresh before it
		// fails the record, and refreshes at most every MetadataMinAge
		// (5 s by default): shorten that to see the server's timing.
		kgo.MetadataMinAge(100*time.Millisecond))
	var produced atomic.Int64
	errs := make(chan error, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := cl.ProduceSync(ctx, kgo.StringRecord("bob")).FirstErr()
			cancel()
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				continue
			}
			produced.Add(1)
		}
	}()
	defer func() { close(stop); <-done }()

	// bob produces across several session lifetimes: kgo re-authenticates
	// every second.
	started := time.Now()
	for time.Since(started) < 4500*time.Millisecond || produced.Load() < 5 {
		select {
		case err := <-errs:
			t.Fatalf("bob's producer failed before bob was removed: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		require.Less(t, time.Since(started), 30*time.Second, "bob produced only %d records", produced.Load())
	}
	before := produced.Load()
	open := connections()
	require.Positive(t, open)

	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-secret"`, "connections.max.reauth.ms=2000")), 0o600))
	removed := time.Now()
	require.NoError(t, c.reload(context.Background(), load))
	select {
	case err := <-errs:
		elapsed := time.Since(removed)
		t.Logf("bob's producer failed %v after bob was removed: %v", elapsed, err)
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
		assert.Less(t, elapsed, 3*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatalf("bob still produces 5 s after he was removed (%d records since)", produced.Load()-before)
	}
	require.Eventually(t, func() bool { return connections() < open }, 3*time.Second, 10*time.Millisecond,
		"bob's connections stay open: %d", open)
	// A failed re-authentication closes an established connection.
	assert.Regexp(t, `msg="closing connection" broker=0 conn_id=\S+ err="socketserver: SASL authentication failed: mechanism SCRAM-SHA-256`, log.String())
}

func TestRunReloadsOnSIGHUP(t *testing.T) {
	path := writeProperties(t, saslFile(`user_alice="alice-secret"`))
	stderr, sighup := serveBroker(t, "-config", path)
	m := regexp.MustCompile(`msg="listener started" broker=0 listener=CLIENT bind=(\S+)`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m, "stderr: %s", stderr)
	bind := m[1]
	carol := kgo.SASL(saslMechanism("SCRAM-SHA-512", "carol", "carol-secret"))
	require.ErrorIs(t, login(t, bind, 10*time.Second, carol), kerr.SaslAuthenticationFailed)

	require.NoError(t, os.WriteFile(path, []byte(saslFile(`user_alice="alice-secret" user_carol="carol-secret"`)), 0o600))
	sighup()
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "added=[carol]") }, 10*time.Second, 10*time.Millisecond, "stderr: %s", stderr)
	require.NoError(t, login(t, bind, 10*time.Second, carol))
}

// A listener that enables SCRAM alone takes its users from Kafka's SCRAM
// JAAS key (ScramLoginModule's user_<name> options); the broker's own
// username and password there log no one in, and PLAIN is not offered.
func TestSCRAMOnlyListenerFromKafkasJAASKey(t *testing.T) {
	c := startClusterWith(t, 1, config.Properties{},
		"listeners=SASL://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map=SASL:SASL_PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name=REPLICATION",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl.scram-sha-512.sasl.jaas.config="+config.ScramLoginModule+
			` required username="admin" password="admin-secret" user_carol="carol-secret";`,
	)
	seed := addr(t, c, 0, "SASL")
	require.NoError(t, login(t, seed, 10*time.Second, kgo.SASL(saslMechanism("SCRAM-SHA-512", "carol", "carol-secret"))))
	require.ErrorIs(t, login(t, seed, 10*time.Second, kgo.SASL(saslMechanism("SCRAM-SHA-512", "admin", "admin-secret"))), kerr.SaslAuthenticationFailed)
	require.Error(t, login(t, seed, 3*time.Second, kgo.SASL(saslMechanism("PLAIN", "carol", "carol-secret"))))
}
