package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// tlsProxySettings give a proxy one SSL listener, SECURE, whose key store
// is the PKI's server file; then extra.
func tlsProxySettings(p *socketservertest.PKI, extra ...string) []string {
	return append([]string{
		"listeners=SECURE://127.0.0.1:0",
		"listener.security.protocol.map=SECURE:SSL",
		"listener.name.secure.ssl.keystore.type=PEM",
		"listener.name.secure.ssl.keystore.location=" + p.ServerFile,
	}, extra...)
}

// servedCert returns the certificate a new TLS connection to addr is
// served, checked against the PKI's CA.
func servedCert(t *testing.T, p *socketservertest.PKI, addr string) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, p.ClientTLS(false))
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// The proxy's TLS listener takes a renewed certificate from its file (the
// watcher) and on a reload (SIGHUP), on its bootstrap port and its broker
// ports, while a kgo client produces and consumes through it on the
// connections it had; another DN is refused, and the certificate in force
// stays. The audit trail records the watcher's reload and both of the
// SIGHUP's, the applied one and the refused one.
func TestTLSReloadThroughProxy(t *testing.T) {
	up := startUpstream(t, 2)
	pki := socketservertest.NewPKI(t)
	sets := tlsProxySettings(pki)
	audit, trail := auditBuffer()
	tp := startProxy(t, up.Addr(0, "INTERNAL"), &proxyOptions{audit: audit}, sets...)
	tp.watchTLS(20 * time.Millisecond)
	load := func() (*proxyConfig, error) { return resolve("", sets, up.Addr(0, "INTERNAL")) }
	seed := tp.addr(t, "SECURE")

	var disconnects disconnectCounter
	cl := newClient(t, seed, kgo.DialTLSConfig(pki.ClientTLS(false)), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("proxy-rotation"),
		kgo.ConsumeTopics("proxy-rotation"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(&disconnects))
	produced := 0
	roundTrip := func(t *testing.T) {
		t.Helper()
		ctx := ctxFor(t, 30*time.Second)
		v := fmt.Sprintf("v-%03d", produced)
		require.NoError(t, cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr())
		produced++
		for {
			fetches := cl.PollRecords(ctx, 1)
			require.NoError(t, fetches.Err0())
			if recs := fetches.Records(); len(recs) > 0 {
				require.Equal(t, v, string(recs[0].Value), "records consumed in order, none lost")
				return
			}
		}
	}
	roundTrip(t)
	// ports are the proxy's bootstrap port and its ports of the upstream
	// brokers, which Metadata names.
	ports := []string{seed}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctxFor(t, 30*time.Second), cl)
	require.NoError(t, err)
	for _, b := range meta.Brokers {
		ports = append(ports, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	require.Len(t, ports, 3)

	cert, err := pki.RotateServer("", 48*time.Hour)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return servedCert(t, pki, seed).SerialNumber.Cmp(cert.SerialNumber) == 0 }, 10*time.Second, 10*time.Millisecond)
	roundTrip(t)

	cert, err = pki.RotateServer("", 72*time.Hour)
	require.NoError(t, err)
	require.NoError(t, tp.reload(load))
	for _, a := range ports {
		assert.Equal(t, cert.SerialNumber, servedCert(t, pki, a).SerialNumber, "port %s", a)
	}
	roundTrip(t)

	_, err = pki.RotateServer("elsewhere", 72*time.Hour)
	require.NoError(t, err)
	err = tp.reload(load)
	require.ErrorIs(t, err, security.ErrCertificateChange)
	assert.Equal(t, cert.SerialNumber, servedCert(t, pki, seed).SerialNumber)
	roundTrip(t)
	assert.Zero(t, disconnects.n.Load(), "the client's connections were cut")

	var watched, reloads []map[string]any
	require.Eventually(t, func() bool {
		watched, reloads = nil, nil
		for _, r := range auditRecords(t, trail.String()) {
			switch str(r, "api", "operation") {
			case auditReloadTLS:
				watched = append(watched, r)
			case auditReload:
				reloads = append(reloads, r)
			}
		}
		return len(watched) > 0 && len(reloads) == 2
	}, 5*time.Second, 10*time.Millisecond, "the audit trail:\n%s", trail.String())
	assert.EqualValues(t, 1, watched[0]["status_id"], "the watcher's first reload was applied")
	assert.Contains(t, str(watched[0], "unmapped", "detail"), "listener=SECURE")
	assert.EqualValues(t, 1, reloads[0]["status_id"])
	assert.EqualValues(t, 2, reloads[1]["status_id"])
	assert.Contains(t, str(reloads[1], "status_detail"), "CN=elsewhere")
}

// disconnectCounter counts the connections a kgo client lost or closed.
type disconnectCounter struct{ n atomic.Int64 }

func (d *disconnectCounter) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }

// The command reloads the TLS settings on SIGHUP.
func TestCommandReloadsTLSOnSIGHUP(t *testing.T) {
	hup := make(chan os.Signal, 1) // the test catches SIGHUP too, so that an early one cannot end it
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	up := startUpstream(t, 1)
	pki := socketservertest.NewPKI(t)
	config := filepath.Join(t.TempDir(), "proxy.properties")
	require.NoError(t, os.WriteFile(config, []byte(strings.Join(tlsProxySettings(pki), "\n")+"\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-upstream", up.Addr(0, "INTERNAL"), "-config", config, "-tls-watch-interval", "0"}, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, stderr.String())
		case <-time.After(20 * time.Second):
			t.Error("the command did not stop")
		}
	}()
	listening := regexp.MustCompile(`msg=listening listener=SECURE addr=(\S+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond, "the command logs no listener:\n%s", &stderr)

	cert, err := pki.RotateServer("", time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, cert.SerialNumber, servedCert(t, pki, addr).SerialNumber, "reloaded without a signal")
	p, err := os.FindProcess(os.Getpid())
	require.NoError(t, err)
	if err := p.Signal(syscall.SIGHUP); err != nil {
		t.Skipf("cannot send SIGHUP here: %v", err)
	}
	require.Eventually(t, func() bool { return servedCert(t, pki, addr).SerialNumber.Cmp(cert.SerialNumber) == 0 },
		10*time.Second, 10*time.Millisecond, "stderr: %s", &stderr)
	assert.Contains(t, stderr.String(), `msg="reload: TLS settings applied"`)
}
