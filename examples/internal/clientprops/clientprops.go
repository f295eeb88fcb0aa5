// Package clientprops reads how a Kafka client connects to brokers from
// Kafka's client properties: the command-config file of Kafka's tools
// (examples/kafka-client-connections) and the upstream.-prefixed keys of
// the proxy (examples/proxy), which is a client of its upstream cluster.
//
// The keys, each after the caller's prefix: security.protocol (PLAINTEXT,
// SSL, SASL_PLAINTEXT, SASL_SSL; default PLAINTEXT), sasl.mechanism
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; default PLAIN), sasl.username and
// sasl.password (Kafka's sasl.jaas.config is not read), and for TLS
// ssl.truststore.location (PEM certificates to trust; the system's when
// unset), ssl.keystore.location (a PEM file with the client's key and
// certificate chain, for brokers that want client certificates) and
// ssl.endpoint.identification.algorithm (https, the default, checks that
// the broker's certificate names the host dialed; empty turns that check
// off, as in Kafka, and only the chain is verified).
package clientprops

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// The keys read, before the prefix.
const (
	KeySecurityProtocol  = "security.protocol"
	KeySASLMechanism     = "sasl.mechanism"
	KeySASLUsername      = "sasl.username"
	KeySASLPassword      = "sasl.password"
	KeyTruststore        = "ssl.truststore.location"
	KeyKeystore          = "ssl.keystore.location"
	KeyEndpointAlgorithm = "ssl.endpoint.identification.algorithm"
)

// Security is how a client connects: the protocol, the TLS configuration
// (nil without TLS) and the SASL mechanism (nil without SASL), with the
// principal it logs in as.
type Security struct {
	Protocol protocolmap.SecurityProtocol
	// TLS is the client's TLS configuration; set ServerName on a clone per
	// broker (kgo does) unless InsecureSkipVerify says the host is not
	// checked.
	TLS *tls.Config
	// SASL logs in with Mechanism as Username.
	SASL      sasl.Mechanism
	Mechanism string
	Username  string
}

// Principal is the principal a broker's default principal builder gives
// the login, User:<sasl.username>, or "" without SASL.
func (s Security) Principal() string {
	if s.SASL == nil {
		return ""
	}
	return "User:" + s.Username
}

// Read reads the keys of the package documentation, each after prefix
// ("" for a command-config file, "upstream." for the proxy), from p.
// Errors name the key, with its prefix.
func Read(p config.Properties, prefix string) (Security, error) {
	get := func(key string) string { v, _ := p.Get(prefix + key); return strings.TrimSpace(v) }
	invalid := func(key, value, rule string) error {
		return &config.Error{Key: prefix + key, Value: value, Err: listener.ErrInvalidValue, Rule: rule}
	}
	var s Security
	value := get(KeySecurityProtocol)
	if value == "" {
		value = "PLAINTEXT"
	}
	protocol, err := protocolmap.ParseSecurityProtocol(strings.ToUpper(value))
	if err != nil {
		return Security{}, invalid(KeySecurityProtocol, value, "want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
	}
	s.Protocol = protocol
	if protocol.UsesTLS() {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if path := get(KeyTruststore); path != "" {
			pem, err := os.ReadFile(path)
			if err != nil {
				return Security{}, invalid(KeyTruststore, path, err.Error())
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return Security{}, invalid(KeyTruststore, path, "the file holds no PEM certificate")
			}
		}
		if path := get(KeyKeystore); path != "" {
			cert, err := tls.LoadX509KeyPair(path, path)
			if err != nil {
				return Security{}, invalid(KeyKeystore, path, "want a PEM file with the key and the certificate chain: "+err.Error())
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		algorithm, set := p.Get(prefix + KeyEndpointAlgorithm)
		switch algorithm = strings.TrimSpace(algorithm); {
		case !set || strings.EqualFold(algorithm, "https"):
		case algorithm == "":
			verifyChainOnly(cfg)
		default:
			return Security{}, invalid(KeyEndpointAlgorithm, algorithm, "want https, or empty to leave the host name unchecked")
		}
		s.TLS = cfg
	}
	if protocol.UsesSASL() {
		s.Mechanism = strings.ToUpper(get(KeySASLMechanism))
		if s.Mechanism == "" {
			s.Mechanism = "PLAIN"
		}
		s.Username = get(KeySASLUsername)
		password, _ := p.Get(prefix + KeySASLPassword)
		if s.Username == "" {
			return Security{}, invalid(KeySASLUsername, "", fmt.Sprintf("%s%s %s needs %s%s and %s%s (sasl.jaas.config is not read)",
				prefix, KeySecurityProtocol, protocol, prefix, KeySASLUsername, prefix, KeySASLPassword))
		}
		switch s.Mechanism {
		case "PLAIN":
			s.SASL = plain.Auth{User: s.Username, Pass: password}.AsMechanism()
		case "SCRAM-SHA-256":
			s.SASL = scram.Auth{User: s.Username, Pass: password}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			s.SASL = scram.Auth{User: s.Username, Pass: password}.AsSha512Mechanism()
		default:
			return Security{}, invalid(KeySASLMechanism, s.Mechanism, "want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
		}
	}
	return s, nil
}

// verifyChainOnly makes cfg verify the broker's certificate chain against
// its roots without checking the host name, as Kafka does with an empty
// ssl.endpoint.identification.algorithm.
func verifyChainOnly(cfg *tls.Config) {
	roots := cfg.RootCAs
	cfg.InsecureSkipVerify = true // the chain is verified below
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("clientprops: the broker sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, c := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(opts)
		return err
	}
}

// KgoOpts returns the kgo options that connect as s says.
func (s Security) KgoOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.TLS.Clone()))
	}
	if s.SASL != nil {
		opts = append(opts, kgo.SASL(s.SASL))
	}
	return opts
}
