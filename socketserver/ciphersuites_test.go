package socketserver_test

import (
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// ssl.cipher.suites over TCP: a client that offers only suites the list
// leaves out fails the handshake, one that offers a listed suite gets it;
// without TLS 1.3 suites in the list a TLS 1.3 client gets TLS 1.2, with
// all three it gets TLS 1.3. (The test PKI's keys are ECDSA.)
func TestTLSCipherSuites(t *testing.T) {
	pki := newTestPKI(t)
	const listed = tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
	tests := []struct {
		name    string
		suites  string
		client  []uint16 // suites the client offers; nil: Go's
		maxV    uint16   // the client's highest version; 0: TLS 1.3
		wantErr bool
		version uint16
		suite   uint16 // 0: any
	}{
		{name: "only an unlisted suite", suites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
			client: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}, maxV: tls.VersionTLS12, wantErr: true},
		{name: "the listed suite among others", suites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
			client: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, listed}, maxV: tls.VersionTLS12, version: tls.VersionTLS12, suite: listed},
		{name: "a TLS 1.3 client, no TLS 1.3 suite listed", suites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", version: tls.VersionTLS12, suite: listed},
		{name: "a TLS 1.3 client, TLS 1.3's listed", suites: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384," + "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256",
			version: tls.VersionTLS13},
		{name: "a TLS 1.2 client of a list of TLS 1.3's alone", suites: "TLS_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256",
			maxV: tls.VersionTLS12, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, sslProps(pki, config.Properties{"listener.name.ssl.ssl.cipher.suites": tt.suites}), withAPIs, echoMetadata)
			cfg := pki.clientConfig()
			cfg.CipherSuites, cfg.MaxVersion = tt.client, tt.maxV
			if tt.wantErr {
				c := tls.Client(socketservertest.Dial(t, srv, "SSL"), cfg)
				require.Error(t, c.Handshake())
				requireConnCount(t, srv, "SSL", 0)
				return
			}
			c := dialTLS(t, srv, "SSL", cfg)
			state := c.c.ConnectionState()
			assert.Equal(t, tt.version, state.Version, "version %s", tls.VersionName(state.Version))
			if tt.suite != 0 {
				assert.Equal(t, tt.suite, state.CipherSuite, "suite %s", tls.CipherSuiteName(state.CipherSuite))
			}
		})
	}
}
