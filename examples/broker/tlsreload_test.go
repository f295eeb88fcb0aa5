package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// tlsFile is a configuration file with an SSL listener, TLS, whose key
// store is the PKI's server file, and a PLAINTEXT inter-broker listener;
// then extra lines.
func tlsFile(p *socketservertest.PKI, extra ...string) string {
	return strings.Join(append([]string{
		"listeners=TLS://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map=TLS:SSL,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name=REPLICATION",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + p.ServerFile,
	}, extra...), "\n") + "\n"
}

// serverCert returns the certificate a new TLS connection to addr is
// served, checked against the PKI's CA.
func serverCert(t *testing.T, p *socketservertest.PKI, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&dialer, "tcp", addr, p.ClientTLS(false))
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

var dialer = net.Dialer{Timeout: 5 * time.Second}

// lines collects what a program writes, line by line.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, s)
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// Rotation with real clients: kcat and kgo consume, and kgo produces, over
// TLS while the broker's certificate is rotated (the same DN, a new key
// and expiry), by the file watcher and by a reload (SIGHUP). New
// connections see each new certificate; the clients' connections are not
// cut; every record produced is consumed by both, once, in order. A
// certificate for another DN is refused (by the watcher and by the reload)
// until ssl.allow.dn.changes allows it, and an invalid key store is
// refused with an error naming its key; meanwhile the certificate in force
// stays.
func TestTLSRotationWithRealClients(t *testing.T) {
	requireTool(t, "kcat", "apt-get install kcat")
	pki := socketservertest.NewPKI(t)
	path := writeProperties(t, tlsFile(pki))
	var log testkit.SyncBuffer
	c, load := startFromFile(t, path, 1, &log)
	c.watchTLS(c.brokers[0].cfg, 20*time.Millisecond)
	seed := addr(t, c, 0, "TLS")
	clientTLS := kgo.DialTLSConfig(pki.ClientTLS(false))
	initial := serverCert(t, pki, seed)
	const topic = "rotation"

	// The producer: one record every few milliseconds until stopped.
	producer := newClient(t, seed, clientTLS, kgo.ClientID("rotation-producer"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, producer.ProduceSync(ctx, kgo.StringRecord("r-00000")).FirstErr())
	var produced lines
	produced.add("r-00000")
	stopProducing := make(chan struct{})
	producing := make(chan error, 1)
	go func() {
		defer close(producing)
		for i := 1; ; i++ {
			select {
			case <-stopProducing:
				return
			case <-time.After(5 * time.Millisecond):
			}
			v := fmt.Sprintf("r-%05d", i)
			if err := producer.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				producing <- err
				return
			}
			produced.add(v)
		}
	}()

	// The consumers: kgo, and kcat in a process of its own.
	var kgoGot, kcatGot lines
	consumer := newClient(t, seed, clientTLS, kgo.ClientID("rotation-kgo"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ConnIdleTimeout(10*time.Minute))
	consuming := make(chan struct{})
	go func() {
		defer close(consuming)
		for ctx.Err() == nil {
			fetches := consumer.PollFetches(ctx)
			fetches.EachRecord(func(r *kgo.Record) { kgoGot.add(string(r.Value)) })
		}
	}()
	kcatCtx, stopKcat := context.WithCancel(ctx)
	defer stopKcat()
	kcat := exec.CommandContext(kcatCtx, "kcat", "-b", seed, "-X", "security.protocol=SSL", "-X", "ssl.ca.location="+pki.CAFile,
		"-X", "client.id=rotation-kcat", "-C", "-t", topic, "-o", "beginning", "-u", "-q", "-f", "%s\n")
	stdout, err := kcat.StdoutPipe()
	require.NoError(t, err)
	var kcatErr strings.Builder
	kcat.Stderr = &kcatErr
	require.NoError(t, kcat.Start())
	kcatDone := make(chan struct{})
	go func() {
		defer close(kcatDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			kcatGot.add(sc.Text())
		}
	}()
	defer func() {
		stopKcat()
		<-kcatDone
		_ = kcat.Wait()
	}()

	// Both consume before the rotations begin.
	require.Eventually(t, func() bool { return len(kgoGot.get()) > 20 && len(kcatGot.get()) > 20 }, 30*time.Second, 10*time.Millisecond,
		"kgo consumed %d, kcat %d records; kcat: %s", len(kgoGot.get()), len(kcatGot.get()), &kcatErr)
	registry := c.brokers[0].srv.Registry()
	before := registry.Snapshot(connregistry.Filter{})
	require.NotEmpty(t, before)

	// waitServed waits until new connections are served want.
	waitServed := func(t *testing.T, want *x509.Certificate) {
		t.Helper()
		require.Eventually(t, func() bool { return serverCert(t, pki, seed).SerialNumber.Cmp(want.SerialNumber) == 0 },
			10*time.Second, 10*time.Millisecond, "log: %s", &log)
		got := serverCert(t, pki, seed)
		assert.True(t, got.NotAfter.Equal(want.NotAfter), "expiry %v, want %v", got.NotAfter, want.NotAfter)
	}

	// consumed waits until both consumers have consumed more records: they
	// go on across each rotation.
	consumed := func(t *testing.T) {
		t.Helper()
		k, c := len(kgoGot.get()), len(kcatGot.get())
		require.Eventually(t, func() bool { return len(kgoGot.get()) > k+10 && len(kcatGot.get()) > c+10 }, 30*time.Second, 10*time.Millisecond,
			"kgo consumed %d, kcat %d records; kcat: %s", len(kgoGot.get()), len(kcatGot.get()), &kcatErr)
	}

	var inForce *x509.Certificate
	t.Run("renewed file, seen by the watcher", func(t *testing.T) {
		cert, err := pki.RotateServer("", 48*time.Hour)
		require.NoError(t, err)
		require.NotEqual(t, initial.NotAfter, cert.NotAfter)
		waitServed(t, cert)
		inForce = cert
		assert.Contains(t, log.String(), `msg="TLS files changed; reloaded" listener=TLS`)
		consumed(t)
	})
	t.Run("renewed file, applied by a reload (SIGHUP)", func(t *testing.T) {
		cert, err := pki.RotateServer("", 72*time.Hour)
		require.NoError(t, err)
		require.NoError(t, c.reload(context.Background(), load))
		assert.Equal(t, cert.SerialNumber, serverCert(t, pki, seed).SerialNumber, "the reload applied at once")
		waitServed(t, cert)
		inForce = cert
		consumed(t)
	})
	t.Run("another DN refused", func(t *testing.T) {
		_, err := pki.RotateServer("elsewhere", 72*time.Hour)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return strings.Contains(log.String(), `msg="TLS reload refused; the configuration in force stays" listener=TLS`)
		}, 10*time.Second, 10*time.Millisecond, "log: %s", &log)
		err = c.reload(context.Background(), load)
		require.ErrorIs(t, err, security.ErrCertificateChange)
		assert.ErrorContains(t, err, "allow it with ssl.allow.dn.changes=true")
		assert.Equal(t, inForce.SerialNumber, serverCert(t, pki, seed).SerialNumber)
		consumed(t)
	})
	t.Run("an invalid key store refused", func(t *testing.T) {
		require.NoError(t, os.WriteFile(pki.ServerFile, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600))
		require.Eventually(t, func() bool {
			return strings.Contains(log.String(), `msg="TLS files do not load; the configuration in force stays" listener=TLS`)
		}, 10*time.Second, 10*time.Millisecond, "log: %s", &log)
		err := c.reload(context.Background(), load)
		require.ErrorIs(t, err, security.ErrTLSConfig)
		assert.ErrorContains(t, err, "configuration ssl.keystore.location:")
		assert.Equal(t, inForce.SerialNumber, serverCert(t, pki, seed).SerialNumber)
		consumed(t)
	})
	t.Run("another DN, allowed", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, []byte(tlsFile(pki, "listener.name.tls.ssl.allow.dn.changes=true")), 0o600))
		cert, err := pki.RotateServer("elsewhere", 96*time.Hour)
		require.NoError(t, err)
		require.NoError(t, c.reload(context.Background(), load))
		waitServed(t, cert)
		assert.Equal(t, "elsewhere", serverCert(t, pki, seed).Subject.CommonName)
		consumed(t)
	})

	// Some more records after the last rotation, then everything produced
	// must have been consumed by both, once and in order.
	n := len(produced.get())
	require.Eventually(t, func() bool { return len(produced.get()) > n+20 }, 30*time.Second, 10*time.Millisecond)
	close(stopProducing)
	require.NoError(t, <-producing)
	want := produced.get()
	require.Eventually(t, func() bool { return len(kgoGot.get()) >= len(want) && len(kcatGot.get()) >= len(want) }, 30*time.Second, 10*time.Millisecond,
		"of %d records kgo consumed %d, kcat %d; kcat: %s", len(want), len(kgoGot.get()), len(kcatGot.get()), &kcatErr)
	assert.Equal(t, want, kgoGot.get(), "kgo")
	assert.Equal(t, want, kcatGot.get(), "kcat")

	// The clients' connections were not cut: the connections open before
	// the rotations still are, unless their client closed them.
	open := map[string]bool{}
	for _, conn := range registry.Snapshot(connregistry.Filter{}) {
		open[conn.ID] = true
	}
	clients := map[string]bool{}
	for _, conn := range before {
		if open[conn.ID] {
			clients[conn.ClientID] = true
			continue
		}
		for _, closed := range registry.Closed(connregistry.Filter{}) {
			if closed.ID == conn.ID {
				assert.Equal(t, connregistry.CloseByClient, closed.CloseReason, "connection %s of %s", conn.ID, conn.ClientID)
			}
		}
	}
	for _, id := range []string{"rotation-kgo", "rotation-kcat", "rotation-producer"} {
		assert.True(t, clients[id], "no connection of %s lasted through the rotations", id)
	}
	t.Logf("%d records through %d rotations; connections open throughout: %v", len(want), 3, clients)
}

// The command reloads TLS from the files every -tls-watch-interval, and
// on SIGHUP.
func TestRunReloadsTLS(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	path := writeProperties(t, tlsFile(pki))
	for _, tt := range []struct {
		name  string
		watch string
	}{{"watching the files", "20ms"}, {"on SIGHUP", "0"}} {
		t.Run(tt.name, func(t *testing.T) {
			stderr, sighup := serveBroker(t, "-config", path, "-tls-watch-interval", tt.watch)
			m := regexp.MustCompile(`msg="listener started" broker=0 listener=TLS bind=(\S+)`).FindStringSubmatch(stderr.String())
			require.NotNil(t, m, "stderr: %s", stderr)
			bind := m[1]

			cert, err := pki.RotateServer("", time.Hour)
			require.NoError(t, err)
			if tt.watch == "0" {
				// No watcher: nothing changes without the signal.
				require.NotEqual(t, cert.SerialNumber, serverCert(t, pki, bind).SerialNumber)
				sighup()
			}
			require.Eventually(t, func() bool { return serverCert(t, pki, bind).SerialNumber.Cmp(cert.SerialNumber) == 0 },
				10*time.Second, 10*time.Millisecond, "stderr: %s", stderr)
		})
	}
}
