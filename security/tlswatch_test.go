package security_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// lockedBuffer is a log for a watcher that runs on another goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// applied is one configuration a watcher handed to its apply function.
type applied struct {
	name protocolmap.ListenerName
	cfg  *tls.Config
}

// sources are the TLS sources of the listeners testkit.SecurityListeners
// gives, with kv laid over them.
func sources(t testing.TB, kv ...string) map[protocolmap.ListenerName]security.TLSSource {
	t.Helper()
	props := testkit.SecurityListeners(kv...)
	set, err := config.Listeners(props)
	require.NoError(t, err)
	return config.TLSSources(props, set)
}

// watch runs a watcher of set, polling every few milliseconds, until the
// test ends; apply's results come from refuse (nil: accept). It returns
// the configurations applied and the log.
func watch(t *testing.T, set map[protocolmap.ListenerName]security.TLSSource, refuse func(*tls.Config) error) (*security.TLSWatcher, <-chan applied, *lockedBuffer) {
	t.Helper()
	ch := make(chan applied, 16)
	w := security.NewTLSWatcher(set, func(name protocolmap.ListenerName, cfg *tls.Config) error {
		if refuse != nil {
			if err := refuse(cfg); err != nil {
				return err
			}
		}
		ch <- applied{name, cfg}
		return nil
	})
	w.Interval = 5 * time.Millisecond
	log := &lockedBuffer{}
	w.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return w, ch, log
}

// next returns the next configuration applied, failing after a while.
func next(t *testing.T, ch <-chan applied) applied {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was applied")
		return applied{}
	}
}

// none asserts that nothing is applied over many polls.
func none(t *testing.T, ch <-chan applied) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("listener %s was reloaded", a.name)
	case <-time.After(100 * time.Millisecond):
	}
}

// replace writes data to path whole, in one rename, as a certificate
// manager does.
func replace(t *testing.T, path string, data string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(data), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func leafOf(t *testing.T, a applied) string {
	t.Helper()
	require.NotEmpty(t, a.cfg.Certificates)
	return string(a.cfg.Certificates[0].Certificate[0])
}

func TestTLSWatcher(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	renewal := func() testkit.TLSKeyPair {
		return testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "broker"}, DNS: []string{"localhost"}})
	}
	first, second := renewal(), renewal()
	store := func(p testkit.TLSKeyPair) string { return p.PKCS8PEM(t) + p.CertPEM() + f.CA.CertPEM() }
	keystore := testkit.WritePEMFile(t, dir, "server.pem", store(first))
	truststore := testkit.WritePEMFile(t, dir, "ca.pem", f.CA.CertPEM())
	set := sources(t, "ssl.keystore.type", "PEM", "listener.name.ssl.ssl.keystore.location", keystore,
		"listener.name.client.ssl.keystore.location", testkit.WritePEMFile(t, dir, "client-listener.pem", store(renewal())),
		"ssl.truststore.type", "PEM", "listener.name.ssl.ssl.truststore.location", truststore,
		"listener.name.sasl_ssl.ssl.keystore.key", first.PKCS8PEM(t), "listener.name.sasl_ssl.ssl.keystore.certificate.chain", first.CertPEM(),
		"listener.name.sasl_client.ssl.keystore.key", first.PKCS8PEM(t), "listener.name.sasl_client.ssl.keystore.certificate.chain", first.CertPEM(),
		"sasl.enabled.mechanisms", "PLAIN")
	var refusing sync.Mutex
	refuseAll := false
	_, ch, log := watch(t, set, func(*tls.Config) error {
		refusing.Lock()
		defer refusing.Unlock()
		if refuseAll {
			return errors.New("refused by the server")
		}
		return nil
	})

	// At start, every listener with files: SSL and CLIENT, not the
	// listeners whose PEM is inline.
	got := map[protocolmap.ListenerName]bool{}
	for range 2 {
		a := next(t, ch)
		got[a.name] = true
		if a.name == "SSL" {
			assert.Equal(t, string(first.Cert.Raw), leafOf(t, a))
			assert.True(t, a.cfg.ClientCAs.Equal(f.CAPool()))
		}
	}
	assert.Equal(t, map[protocolmap.ListenerName]bool{"SSL": true, "CLIENT": true}, got)
	none(t, ch)

	t.Run("the key store is renewed", func(t *testing.T) {
		replace(t, keystore, store(second))
		a := next(t, ch)
		assert.Equal(t, protocolmap.ListenerName("SSL"), a.name)
		assert.Equal(t, string(second.Cert.Raw), leafOf(t, a))
		none(t, ch)
		assert.Contains(t, log.String(), `msg="TLS files changed; reloaded" listener=SSL`)
	})
	t.Run("the same content written again", func(t *testing.T) {
		replace(t, keystore, store(second))
		none(t, ch)
	})
	t.Run("the trust store changes", func(t *testing.T) {
		other := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "other CA"}})
		replace(t, truststore, f.CA.CertPEM()+other.CertPEM())
		a := next(t, ch)
		assert.Equal(t, protocolmap.ListenerName("SSL"), a.name)
		assert.False(t, a.cfg.ClientCAs.Equal(f.CAPool()), "the new trust store")
	})
	t.Run("files that do not load", func(t *testing.T) {
		replace(t, keystore, first.PKCS8PEM(t)+second.CertPEM()) // the key is not the certificate's
		none(t, ch)
		assert.Equal(t, 1, strings.Count(log.String(), `msg="TLS files do not load; the configuration in force stays" listener=SSL`),
			"an error logged once per change: %s", log)
		assert.Contains(t, log.String(), "ssl.keystore.location")
		require.NoError(t, os.Remove(keystore))
		none(t, ch)
		replace(t, keystore, store(first))
		assert.Equal(t, string(first.Cert.Raw), leafOf(t, next(t, ch)))
	})
	t.Run("apply refuses", func(t *testing.T) {
		refusing.Lock()
		refuseAll = true
		refusing.Unlock()
		replace(t, keystore, store(second))
		require.Eventually(t, func() bool {
			return strings.Contains(log.String(), `msg="TLS reload refused; the configuration in force stays" listener=SSL`)
		}, 10*time.Second, 5*time.Millisecond)
		refusing.Lock()
		refuseAll = false
		refusing.Unlock()
		none(t, ch) // tried again only when the files change again
		replace(t, keystore, store(first))
		assert.Equal(t, string(first.Cert.Raw), leafOf(t, next(t, ch)))
	})
}

// Kubernetes updates a mounted secret by writing a new directory and
// swapping the ..data symbolic link to it; the files the properties name
// are links through ..data, so the files themselves never change.
func TestTLSWatcherKubernetesSecret(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	mount := t.TempDir()
	version := func(name string, p testkit.TLSKeyPair) {
		d := filepath.Join(mount, name)
		require.NoError(t, os.Mkdir(d, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(d, "keystore.pem"), []byte(p.PKCS8PEM(t)+p.CertPEM()), 0o600))
		tmp := filepath.Join(mount, "..data_tmp")
		require.NoError(t, os.Symlink(name, tmp))
		require.NoError(t, os.Rename(tmp, filepath.Join(mount, "..data")))
	}
	first := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "broker"}})
	version("..2026_01_01_00_00_00.1", first)
	keystore := filepath.Join(mount, "keystore.pem")
	require.NoError(t, os.Symlink(filepath.Join("..data", "keystore.pem"), keystore))
	info, err := os.Lstat(keystore)
	require.NoError(t, err)
	set := sources(t, "ssl.keystore.type", "PEM", "listener.name.ssl.ssl.keystore.location", keystore,
		"listener.name.client.ssl.keystore.location", keystore, "ssl.enabled.protocols", "TLSv1.3",
		"listener.name.sasl_ssl.ssl.keystore.location", keystore, "listener.name.sasl_client.ssl.keystore.location", keystore,
		"sasl.enabled.mechanisms", "PLAIN")
	_, ch, _ := watch(t, set, nil)
	for range 4 { // each TLS listener at start
		assert.Equal(t, string(first.Cert.Raw), leafOf(t, next(t, ch)))
	}
	none(t, ch)

	second := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "broker"}})
	version("..2026_02_01_00_00_00.2", second)
	for range 4 {
		a := next(t, ch)
		assert.Equal(t, string(second.Cert.Raw), leafOf(t, a), "listener %s", a.name)
		assert.Equal(t, uint16(tls.VersionTLS13), a.cfg.MinVersion, "the configuration is built from all the listener's keys")
	}
	after, err := os.Lstat(keystore)
	require.NoError(t, err)
	assert.Equal(t, info.ModTime(), after.ModTime(), "the link itself did not change")
}

// SetListeners points the watcher at the files of a new reading of the
// properties; it applies them at its next reading, changed or not.
func TestTLSWatcherSetListeners(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	a := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "a"}})
	b := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "b"}})
	fileA := testkit.WritePEMFile(t, dir, "a.pem", a.PKCS8PEM(t)+a.CertPEM())
	fileB := testkit.WritePEMFile(t, dir, "b.pem", b.PKCS8PEM(t)+b.CertPEM())
	only := func(file string) map[protocolmap.ListenerName]security.TLSSource {
		props := config.Properties{
			"listeners": "SSL://127.0.0.1:9093", "listener.security.protocol.map": "SSL:SSL",
			"security.inter.broker.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": file,
		}
		c, err := config.Listeners(props)
		require.NoError(t, err)
		return config.TLSSources(props, c)
	}
	w, ch, _ := watch(t, only(fileA), nil)
	assert.Equal(t, string(a.Cert.Raw), leafOf(t, next(t, ch)))
	none(t, ch)
	w.SetListeners(only(fileB))
	assert.Equal(t, string(b.Cert.Raw), leafOf(t, next(t, ch)))
	none(t, ch)
	replace(t, fileA, b.PKCS8PEM(t)+b.CertPEM()) // no longer watched
	none(t, ch)
	w.SetListeners(only(fileB)) // the same files: applied again all the same
	assert.Equal(t, string(b.Cert.Raw), leafOf(t, next(t, ch)))
}

// A watcher of no listeners runs, reading nothing, until SetListeners
// gives it a listener's files, as when a reload adds a TLS listener to a
// broker that had none (config.TLSSources' map is then empty, not nil).
func TestTLSWatcherStartsWithNoListeners(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	a := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "a"}})
	file := testkit.WritePEMFile(t, t.TempDir(), "a.pem", a.PKCS8PEM(t)+a.CertPEM())
	w, ch, _ := watch(t, map[protocolmap.ListenerName]security.TLSSource{}, nil)
	none(t, ch)
	w.SetListeners(sources(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", file))
	assert.Equal(t, string(a.Cert.Raw), leafOf(t, next(t, ch)))
}

func TestTLSWatcherRun(t *testing.T) {
	set := sources(t, "ssl.keystore.type", "PEM", "ssl.keystore.location", filepath.Join(t.TempDir(), "missing.pem"))
	t.Run("no apply function", func(t *testing.T) {
		assert.Error(t, security.NewTLSWatcher(set, nil).Run(context.Background()))
	})
	t.Run("no map of sources", func(t *testing.T) {
		assert.Error(t, security.NewTLSWatcher(nil, func(protocolmap.ListenerName, *tls.Config) error { return nil }).Run(context.Background()))
	})
	t.Run("twice at once", func(t *testing.T) {
		w, _, log := watch(t, set, nil) // its key store is missing: it logs
		require.Eventually(t, func() bool { return log.String() != "" }, 5*time.Second, time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := w.Run(ctx)
		require.Error(t, err)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "a second Run ran alongside the first")
	})
	t.Run("returns when its context ends", func(t *testing.T) {
		w := security.NewTLSWatcher(set, func(protocolmap.ListenerName, *tls.Config) error { return nil })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, w.Run(ctx), context.Canceled)
	})
}

// SetListeners waits for a reading in progress: once it returns, nothing
// read under the old listeners is applied.
func TestTLSWatcherSetListenersWaitsForAReading(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	p := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "a"}})
	set := sources(t, "ssl.keystore.type", "PEM", "listener.name.ssl.ssl.keystore.location", testkit.WritePEMFile(t, t.TempDir(), "a.pem", p.PKCS8PEM(t)+p.CertPEM()))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	w := security.NewTLSWatcher(set, func(protocolmap.ListenerName, *tls.Config) error {
		once.Do(func() { close(entered); <-release })
		return nil
	})
	w.Interval = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-entered
	returned := make(chan struct{})
	go func() { w.SetListeners(set); close(returned) }()
	select {
	case <-returned:
		t.Fatal("SetListeners returned while apply ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("SetListeners did not return after the reading ended")
	}
}

// A server name's key store (kafkanet.ssl.server.names) is a file of its
// own: renewing it alone reloads the listener, with the name's new
// certificate.
func TestTLSWatcherServerNameKeyStore(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	leaf := func(name string) testkit.TLSKeyPair {
		return testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: name}, DNS: []string{name}})
	}
	store := func(p testkit.TLSKeyPair) string { return p.PKCS8PEM(t) + p.CertPEM() + f.CA.CertPEM() }
	first, second := leaf("b.example.com"), leaf("b.example.com")
	named := testkit.WritePEMFile(t, dir, "b.pem", store(first))
	set := sources(t, "ssl.keystore.type", "PEM",
		"listener.name.ssl.ssl.keystore.location", testkit.WritePEMFile(t, dir, "server.pem", store(leaf("localhost"))),
		"listener.name.ssl.kafkanet.ssl.server.names", "b.example.com",
		"listener.name.ssl.kafkanet.ssl.server.name.b.example.com.ssl.keystore.location", named)
	_, ch, _ := watch(t, set, nil)
	nameCert := func(a applied) string {
		t.Helper()
		cert, err := a.cfg.GetCertificate(&tls.ClientHelloInfo{ServerName: "b.example.com"})
		require.NoError(t, err)
		return string(cert.Certificate[0])
	}
	a := next(t, ch)
	require.Equal(t, protocolmap.ListenerName("SSL"), a.name)
	assert.Equal(t, string(first.Cert.Raw), nameCert(a))
	none(t, ch)

	replace(t, named, store(second))
	a = next(t, ch)
	assert.Equal(t, protocolmap.ListenerName("SSL"), a.name)
	assert.Equal(t, string(second.Cert.Raw), nameCert(a), "the name's renewed certificate")
}

// A TLSSource built in code is watched as config.TLSSources' are: the
// same files, and Load called when their content changes.
func TestTLSWatcherSourceBuiltInCode(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	dir := t.TempDir()
	first := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "broker"}})
	second := testkit.IssueLeaf(t, f, testkit.LeafSpec{Subject: pkix.Name{CommonName: "broker"}})
	keystore := testkit.WritePEMFile(t, dir, "server.pem", first.PKCS8PEM(t)+first.CertPEM())
	fromProps := sources(t, "ssl.keystore.type", "PEM", "listener.name.ssl.ssl.keystore.location", keystore)
	require.Contains(t, fromProps, protocolmap.ListenerName("SSL"))
	code := map[protocolmap.ListenerName]security.TLSSource{"SSL": {Files: []string{keystore}, Load: func() (*tls.Config, error) {
		data, err := os.ReadFile(keystore)
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(data, data)
		return &tls.Config{Certificates: []tls.Certificate{cert}}, err
	}}}
	assert.Equal(t, code["SSL"].Files, fromProps["SSL"].Files)
	_, ch, _ := watch(t, code, nil)
	assert.Equal(t, string(first.Cert.Raw), leafOf(t, next(t, ch)))
	none(t, ch)
	replace(t, keystore, second.PKCS8PEM(t)+second.CertPEM())
	a := next(t, ch)
	assert.Equal(t, protocolmap.ListenerName("SSL"), a.name)
	assert.Equal(t, string(second.Cert.Raw), leafOf(t, a))
}
