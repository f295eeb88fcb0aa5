package clientprops_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/examples/internal/clientprops"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	pki := socketservertest.NewPKI(t)
	ca, key := pki.CAFile, pki.ClientFile

	tests := []struct {
		name      string
		props     config.Properties
		prefix    string
		protocol  protocolmap.SecurityProtocol
		mechanism string
		principal string
		tls       bool
		errKey    string // the key the error names
	}{
		{"nothing is PLAINTEXT", config.Properties{}, "", protocolmap.Plaintext, "", "", false, ""},
		{"SASL defaults to PLAIN", config.Properties{"security.protocol": "sasl_plaintext", "sasl.username": "bob", "sasl.password": "x"},
			"", protocolmap.SASLPlaintext, "PLAIN", "User:bob", false, ""},
		{"prefixed SCRAM over TLS", config.Properties{"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "scram-sha-512",
			"upstream.sasl.username": "proxy", "upstream.sasl.password": "x", "upstream.ssl.truststore.location": ca,
			"upstream.ssl.keystore.location": key}, "upstream.", protocolmap.SASLSSL, "SCRAM-SHA-512", "User:proxy", true, ""},
		{"unprefixed keys are not the prefixed ones", config.Properties{"security.protocol": "SSL"}, "upstream.", protocolmap.Plaintext, "", "", false, ""},
		{"unknown protocol", config.Properties{"upstream.security.protocol": "TLS"}, "upstream.", 0, "", "", false, "upstream.security.protocol"},
		{"unknown mechanism", config.Properties{"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "a"},
			"", 0, "", "", false, "sasl.mechanism"},
		{"no user", config.Properties{"security.protocol": "SASL_SSL"}, "", 0, "", "", false, "sasl.username"},
		{"missing trust store", config.Properties{"security.protocol": "SSL", "ssl.truststore.location": filepath.Join(dir, "none.pem")},
			"", 0, "", "", false, "ssl.truststore.location"},
		{"trust store without certificates", config.Properties{"security.protocol": "SSL", "ssl.truststore.location": key + "x"},
			"", 0, "", "", false, "ssl.truststore.location"},
		{"bad key store", config.Properties{"security.protocol": "SSL", "ssl.keystore.location": ca}, "", 0, "", "", false, "ssl.keystore.location"},
		{"bad algorithm", config.Properties{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"},
			"", 0, "", "", false, "ssl.endpoint.identification.algorithm"},
	}
	require.NoError(t, os.WriteFile(key+"x", []byte("no certificates here"), 0o600))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := clientprops.Read(tt.props, tt.prefix)
			if tt.errKey != "" {
				var ce *config.Error
				require.True(t, errors.As(err, &ce), "%v", err)
				assert.Equal(t, tt.errKey, ce.Key)
				assert.ErrorIs(t, err, listener.ErrInvalidValue)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.protocol, s.Protocol)
			assert.Equal(t, tt.mechanism, s.Mechanism)
			assert.Equal(t, tt.principal, s.Principal())
			assert.Equal(t, tt.tls, s.TLS != nil)
			assert.Equal(t, tt.mechanism != "", s.SASL != nil)
			if s.SASL != nil {
				assert.Equal(t, tt.mechanism, s.SASL.Name())
			}
			if tt.tls {
				assert.Len(t, s.TLS.Certificates, 1, "the key store's certificate")
				assert.False(t, s.TLS.InsecureSkipVerify)
			}
			assert.Len(t, s.KgoOpts(), map[bool]int{true: 1}[s.TLS != nil]+map[bool]int{true: 1}[s.SASL != nil])
		})
	}
}

// An empty ssl.endpoint.identification.algorithm verifies the chain but
// not the host name; the default verifies both.
func TestEndpointIdentification(t *testing.T) {
	pki := socketservertest.NewPKI(t)
	cert, err := tls.LoadX509KeyPair(pki.ServerFile, pki.ServerFile)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	ca, other := pki.CAFile, socketservertest.NewPKI(t).CAFile

	for _, tc := range []struct {
		name    string
		props   config.Properties
		wantErr bool
	}{
		{"https checks the host: the certificate does not name broker.example", config.Properties{"ssl.truststore.location": ca}, true},
		{"empty checks the chain only", config.Properties{"ssl.truststore.location": ca, "ssl.endpoint.identification.algorithm": ""}, false},
		{"empty still checks the chain", config.Properties{"ssl.truststore.location": other, "ssl.endpoint.identification.algorithm": ""}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.props["security.protocol"] = "SSL"
			s, err := clientprops.Read(tc.props, "")
			require.NoError(t, err)
			cfg := s.TLS.Clone()
			cfg.ServerName = "broker.example"
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
			if tc.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			c.Close()
		})
	}
}
