package socketserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// serverDN is the subject of testPKI's server certificate.
var serverDN = pkix.Name{CommonName: "localhost", Organization: []string{"Kafkanet Test"}}

// renewed issues a server certificate as a renewal would: the subject and
// names of the first, a new key and serial number.
func (p *testPKI) renewed() tls.Certificate {
	return p.issue(serverDN, x509.ExtKeyUsageServerAuth)
}

// writeKeystore replaces the PEM key store at path with cert's key and
// chain (and the CA), in one rename.
func (p *testPKI) writeKeystore(path string, cert tls.Certificate) {
	p.t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	require.NoError(p.t, err)
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	for _, c := range cert.Certificate {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ca.Raw})...)
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	require.NoError(p.t, os.WriteFile(tmp, data, 0o600))
	require.NoError(p.t, os.Rename(tmp, path))
}

// requireConfigError asserts that err wraps a *config.Error for
// key and sentinel.
func requireConfigError(t testing.TB, err error, key string, sentinel error) {
	t.Helper()
	var ce *config.Error
	require.True(t, errors.As(err, &ce), "error %v (%T) is no config.Error", err, err)
	assert.Equal(t, key, ce.Key, "error: %v", err)
	assert.ErrorIs(t, err, sentinel)
}

// serial returns the serial number of a certificate's leaf.
func serial(t testing.TB, cert tls.Certificate) *big.Int {
	t.Helper()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	require.NoError(t, err)
	return leaf.SerialNumber
}

// tlsConn is a TLS connection to a listener that has made one round trip.
type tlsConn struct {
	t    testing.TB
	c    *tls.Conn
	corr int32
}

// dialTLS connects to listener name with cfg and makes a Metadata round
// trip (the server must answer Metadata, as echoMetadata does).
func dialTLS(t testing.TB, srv *socketserver.Server, name protocolmap.ListenerName, cfg *tls.Config) *tlsConn {
	t.Helper()
	c := &tlsConn{t: t, c: tls.Client(socketservertest.Dial(t, srv, name), cfg)}
	require.NoError(t, c.c.Handshake())
	c.roundTrip()
	return c
}

// roundTrip sends a Metadata request and reads its answer.
func (c *tlsConn) roundTrip() {
	c.t.Helper()
	c.corr++
	send(c.t, c.c, metadataReq(9), c.corr)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	readResponse(c.t, c.c, resp, c.corr)
}

// peerSerial is the serial number of the certificate the server presented.
func (c *tlsConn) peerSerial() *big.Int {
	return c.c.ConnectionState().PeerCertificates[0].SerialNumber
}

// sslProps are one SSL listener with the PKI's key and trust stores, and
// a PLAINTEXT one, under extra.
func sslProps(p *testPKI, extra config.Properties) config.Properties {
	return merge(p.props(""), config.Properties{
		"listeners":                      "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"security.inter.broker.protocol": "PLAINTEXT",
	}, extra)
}

// ReloadTLS from values: new connections see the new certificate, the
// established one goes on; a certificate with another DN, or fewer names,
// is refused and the one in force stays; the errors name the listener and
// the key.
func TestReloadTLS(t *testing.T) {
	pki := newTestPKI(t)
	var log testkit.SyncBuffer
	srv := socketservertest.NewServer(t, sslProps(pki, nil), func(c *socketserver.Config) {
		withAPIs(c)
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	}, echoMetadata)
	client := pki.clientConfig()
	established := dialTLS(t, srv, "SSL", client)
	first := established.peerSerial()

	renewed := pki.renewed()
	cfg := srv.TLSConfig("ssl") // names are compared without regard to case
	require.NotNil(t, cfg)
	cfg.Certificates = []tls.Certificate{renewed}
	require.NoError(t, srv.ReloadTLS("SSL", cfg))
	cfg.Certificates = nil // the server took a copy

	fresh := dialTLS(t, srv, "SSL", client)
	assert.Equal(t, serial(t, renewed), fresh.peerSerial(), "a new connection sees the new certificate")
	assert.NotEqual(t, first, fresh.peerSerial())
	established.roundTrip() // the established connection goes on
	assert.Equal(t, first, established.peerSerial())
	assert.Equal(t, renewed.Certificate[0], srv.TLSConfig("SSL").Certificates[0].Certificate[0])
	assert.Contains(t, log.String(), `msg="TLS configuration reloaded; new connections use it" listener=SSL subject="CN=localhost,O=Kafkanet Test" serial=`+serial(t, renewed).Text(16))

	// The same certificate again (the watcher's first reading, a SIGHUP
	// that changed no file) is logged at debug level only.
	infos := strings.Count(log.String(), "new connections use it")
	require.NoError(t, srv.ReloadTLS("SSL", srv.TLSConfig("SSL")))
	assert.Equal(t, infos, strings.Count(log.String(), "new connections use it"))

	refusals := []struct {
		name    string
		cert    tls.Certificate
		key     string
		errText string
	}{
		{"another DN", pki.issue(pkix.Name{CommonName: "elsewhere", Organization: []string{"Kafkanet Test"}}, x509.ExtKeyUsageServerAuth),
			"ssl.allow.dn.changes", "subject DN CN=elsewhere,O=Kafkanet Test differs from the current one's, CN=localhost,O=Kafkanet Test"},
		{"names dropped", func() tls.Certificate {
			c := pki.issue(serverDN, x509.ExtKeyUsageClientAuth) // a client certificate has no names
			return c
		}(), "ssl.allow.san.changes", "lacks the subject alternative names DNS:localhost, IP:127.0.0.1"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			next := srv.TLSConfig("SSL")
			next.Certificates = []tls.Certificate{tt.cert}
			err := srv.ReloadTLS("SSL", next)
			requireConfigError(t, err, tt.key, security.ErrCertificateChange)
			assert.ErrorContains(t, err, "socketserver: listener SSL: TLS reload refused")
			assert.ErrorContains(t, err, tt.errText)
			assert.Equal(t, serial(t, renewed), dialTLS(t, srv, "SSL", client).peerSerial(), "the refused certificate is served")
		})
	}
	t.Run("errors", func(t *testing.T) {
		assert.ErrorIs(t, srv.ReloadTLS("NOPE", srv.TLSConfig("SSL")), listener.ErrUnknownListener)
		assert.ErrorIs(t, srv.ReloadTLS("PLAINTEXT", srv.TLSConfig("SSL")), socketserver.ErrNoTLS)
		assert.ErrorIs(t, srv.ReloadTLS("SSL", nil), security.ErrTLSConfig)
		assert.ErrorIs(t, srv.ReloadTLS("SSL", &tls.Config{}), security.ErrTLSConfig)
		assert.Nil(t, srv.TLSConfig("PLAINTEXT"))
		assert.Nil(t, srv.TLSConfig("NOPE"))
		assert.Equal(t, serial(t, renewed), dialTLS(t, srv, "SSL", client).peerSerial())
	})
	t.Run("a version below TLS 1.2 is raised", func(t *testing.T) {
		next := srv.TLSConfig("SSL")
		next.MinVersion = tls.VersionTLS10
		require.NoError(t, srv.ReloadTLS("SSL", next))
		assert.Equal(t, uint16(tls.VersionTLS12), srv.TLSConfig("SSL").MinVersion)
		old := pki.clientConfig()
		old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
		c := tls.Client(socketservertest.Dial(t, srv, "SSL"), old)
		require.Error(t, c.Handshake())
	})
	established.roundTrip()
}

// With ssl.allow.dn.changes and ssl.allow.san.changes set for the
// listener, a certificate for another subject is taken.
func TestReloadTLSAllowedChanges(t *testing.T) {
	pki := newTestPKI(t)
	srv := socketservertest.NewServer(t, sslProps(pki, config.Properties{
		"listener.name.ssl.ssl.allow.dn.changes":  "true",
		"listener.name.ssl.ssl.allow.san.changes": "true",
	}), withAPIs, echoMetadata)
	other := pki.issue(pkix.Name{CommonName: "elsewhere"}, x509.ExtKeyUsageServerAuth)
	next := srv.TLSConfig("SSL")
	next.Certificates = []tls.Certificate{other}
	require.NoError(t, srv.ReloadTLS("SSL", next))
	c := dialTLS(t, srv, "SSL", pki.clientConfig())
	assert.Equal(t, "elsewhere", c.c.ConnectionState().PeerCertificates[0].Subject.CommonName)
}

// ReloadTLSFrom, from Kafka's keys read again: the rotated PEM file is
// served to new connections; an invalid store is refused when the keys are
// read (the error names the key) and the store in force stays; a refused
// listener leaves every listener as it was; the allow keys of the new
// reading govern the reload; other TLS keys apply too (here
// ssl.client.auth), to new connections only.
func TestReloadTLSFrom(t *testing.T) {
	pki := newTestPKI(t)
	second := filepath.Join(pki.dir, "second.keystore.pem")
	pki.writeKeystore(second, pki.renewed())
	props := merge(pki.props(""), config.Properties{
		"listeners":                                  "SSL://127.0.0.1:0,SECOND://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"listener.security.protocol.map":             "SSL:SSL,SECOND:SSL,PLAINTEXT:PLAINTEXT",
		"security.inter.broker.protocol":             "PLAINTEXT",
		"listener.name.second.ssl.keystore.location": second,
	})
	srv := socketservertest.NewServer(t, props, withAPIs, echoMetadata)
	client := pki.clientConfig()
	established := dialTLS(t, srv, "SSL", client)
	reload := func(p config.Properties) error {
		t.Helper()
		cfg, err := config.Server(p)
		if err != nil {
			return err
		}
		return srv.ReloadTLSFrom(cfg)
	}

	rotated := pki.renewed()
	pki.writeKeystore(pki.keystore, rotated)
	require.NoError(t, reload(props))
	assert.Equal(t, serial(t, rotated), dialTLS(t, srv, "SSL", client).peerSerial())
	established.roundTrip()

	t.Run("an invalid store", func(t *testing.T) {
		require.NoError(t, os.WriteFile(pki.keystore, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600))
		err := reload(props)
		requireConfigError(t, err, "ssl.keystore.location", security.ErrTLSConfig)
		assert.Equal(t, serial(t, rotated), dialTLS(t, srv, "SSL", client).peerSerial(), "the store in force stays")
	})
	t.Run("one listener refused, none changed", func(t *testing.T) {
		secondBefore := dialTLS(t, srv, "SECOND", client).peerSerial()
		pki.writeKeystore(pki.keystore, pki.renewed())
		pki.writeKeystore(second, pki.issue(pkix.Name{CommonName: "elsewhere"}, x509.ExtKeyUsageServerAuth))
		err := reload(props)
		// SECOND's key store is set with its prefix, so is the key that
		// would allow the change.
		requireConfigError(t, err, "listener.name.second.ssl.allow.dn.changes", security.ErrCertificateChange)
		assert.ErrorContains(t, err, "listener SECOND")
		assert.Equal(t, serial(t, rotated), dialTLS(t, srv, "SSL", client).peerSerial(), "SSL changed though SECOND was refused")
		assert.Equal(t, secondBefore, dialTLS(t, srv, "SECOND", client).peerSerial())
	})
	t.Run("the new reading allows the change", func(t *testing.T) {
		allowed := merge(props, config.Properties{"listener.name.second.ssl.allow.dn.changes": "true"})
		require.NoError(t, reload(allowed))
		assert.Equal(t, "elsewhere", dialTLS(t, srv, "SECOND", client).c.ConnectionState().PeerCertificates[0].Subject.CommonName)
		// The allowance stays the listener's for reloads by value.
		next := srv.TLSConfig("SECOND")
		next.Certificates = []tls.Certificate{pki.renewed()}
		require.NoError(t, srv.ReloadTLS("SECOND", next))
	})
	t.Run("client authentication required from now on", func(t *testing.T) {
		pki.writeKeystore(pki.keystore, rotated)
		pki.writeKeystore(second, pki.renewed())
		require.NoError(t, reload(merge(props, config.Properties{"listener.name.ssl.ssl.client.auth": "required"})))
		c := tls.Client(socketservertest.Dial(t, srv, "SSL"), client)
		err := c.Handshake()
		if err == nil { // TLS 1.3: the refusal comes with the first read
			send(t, c, metadataReq(9), 1)
			_, err = c.Read(make([]byte, 1))
		}
		require.Error(t, err)
		dialTLS(t, srv, "SSL", pki.clientConfig(pki.clientCert(aliceDN)))
		established.roundTrip()
	})
	t.Run("listeners the new reading lacks keep theirs", func(t *testing.T) {
		cfg, err := config.Server(merge(props, config.Properties{
			"listeners":                      "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
			"listener.security.protocol.map": "SSL:SSL,SECOND:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		}))
		require.NoError(t, err)
		before := dialTLS(t, srv, "SECOND", client).peerSerial()
		require.NoError(t, srv.ReloadTLSFrom(cfg))
		assert.Equal(t, before, dialTLS(t, srv, "SECOND", client).peerSerial())
	})
}

// Handshakes that run while the certificate is reloaded over and over
// each see one whole configuration: every one succeeds, with one of the
// two certificates.
func TestReloadTLSDuringHandshakes(t *testing.T) {
	pki := newTestPKI(t)
	srv := socketservertest.NewServer(t, sslProps(pki, nil), withAPIs, echoMetadata)
	certs := []tls.Certificate{pki.renewed(), pki.renewed()}
	serials := map[string]bool{serial(t, certs[0]).String(): true, serial(t, certs[1]).String(): true}
	first := srv.TLSConfig("SSL")
	first.Certificates = certs[:1]
	require.NoError(t, srv.ReloadTLS("SSL", first))
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var handshakes atomic.Int64
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				c, err := tls.Dial("tcp", srv.Addr("SSL").String(), pki.clientConfig())
				if err != nil {
					errs <- err
					return
				}
				s := c.ConnectionState().PeerCertificates[0].SerialNumber.String()
				c.Close()
				handshakes.Add(1)
				if !serials[s] {
					errs <- errors.New("a handshake saw the serial " + s)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(time.Second)
	for i := 0; time.Now().Before(deadline) || handshakes.Load() < 50; i++ {
		next := srv.TLSConfig("SSL")
		next.Certificates = []tls.Certificate{certs[i%2]}
		require.NoError(t, srv.ReloadTLS("SSL", next))
		require.Less(t, time.Since(deadline), 30*time.Second, "only %d handshakes", handshakes.Load())
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
