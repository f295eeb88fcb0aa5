package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/socketserver"
)

// FuzzConfig runs a server.properties text through the whole configuration
// path a host uses, config.ParseProperties, config.Listeners and
// Server, and checks that it never panics, that every error
// after reading names the key and value it refuses (a
// *config.Error, or a plain error naming a key), and that an
// accepted configuration has sane values.
func FuzzConfig(f *testing.F) {
	for _, s := range []string{
		"listeners=PLAINTEXT://127.0.0.1:9092",
		"listeners=CLIENT://:9092,REPLICATION://[::1]:9093,CONTROLLER://localhost:9094\n" +
			"listener.security.protocol.map=CLIENT:SASL_SSL,REPLICATION:PLAINTEXT,CONTROLLER:SSL\n" +
			"inter.broker.listener.name=REPLICATION\ncontrol.plane.listener.name=CONTROLLER\n" +
			"advertised.listeners=CLIENT://broker.example:9092,REPLICATION://[::1]:9093\n" +
			"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\nlistener.name.client.num.network.threads=2\n" +
			"ssl.client.auth=requested\nssl.keystore.type=PEM\nssl.keystore.key=x\n",
		"listeners=A://:1,B://:2\nlistener.security.protocol.map=A:PLAINTEXT,B:PLAINTEXT\nsecurity.inter.broker.protocol=PLAINTEXT\n",
		"listeners=PLAINTEXT://:9092\nmax.connections=10\nmax.connections.per.ip=0\nmax.connections.per.ip.overrides=127.0.0.1:5,[::1]:7,localhost:2\n" +
			"max.connection.creation.rate=3\nlistener.name.plaintext.max.connections=4\nqueued.max.requests=1\n" +
			"socket.request.max.bytes=-1\nconnections.max.idle.ms=0\nsasl.server.max.receive.size=100\n",
		"listeners=SASL_PLAINTEXT://:9092\nsasl.kerberos.principal.to.local.rules=RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT\n" +
			"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";\n" +
			"ssl.principal.mapping.rules=RULE:^CN=(.*)$/$1/U,DEFAULT\nconnection.failed.authentication.delay.ms=5\n",
		"listeners = PLAINTEXT://\\u0041:9\\\n 092\n! comment\n# another\nnum.network.threads:0\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		props, err := config.ParseProperties(text)
		if err != nil {
			return
		}
		for k := range props {
			// A location names a file, and a fuzzer may name /dev/zero.
			if strings.HasSuffix(k, ".location") {
				t.Skip("reads files")
			}
		}
		cfg, err := config.Listeners(props)
		if err != nil {
			checkConfigError(t, props, err)
			return
		}
		if len(cfg.All) == 0 {
			t.Fatalf("Resolve accepted %q with no listeners", text)
		}
		sc, err := config.Server(props)
		if err != nil {
			checkConfigError(t, props, err)
			return
		}
		if sc.RequestMaxBytes < 0 || sc.QueuedMaxRequests < 1 || sc.ConnectionsMaxIdle < 0 || sc.SASLMaxReceiveSize < 0 {
			t.Fatalf("Server accepted out-of-range values from %q: %+v", text, sc)
		}
		for name, l := range sc.PerListener {
			if l.NetworkThreads < 1 {
				t.Fatalf("listener %s got %d network threads from %q", name, l.NetworkThreads, text)
			}
		}
	})
}

// checkConfigError fails unless err names a key that is set in props, or a
// key with a default (whose absence or combination is the fault).
func checkConfigError(t *testing.T, props config.Properties, err error) {
	t.Helper()
	var ce *config.Error
	if errors.As(err, &ce) {
		if ce.Key == "" || ce.Rule == "" {
			t.Fatalf("a config.Error without its key or rule: %#v", ce)
		}
		return
	}
	if err.Error() == "" {
		t.Fatalf("an empty error")
	}
	msg := err.Error()
	for k := range props {
		if strings.Contains(msg, k) {
			return
		}
	}
	for _, k := range []string{"listener", "ssl.", "sasl", "max.connections", "principal"} {
		if strings.Contains(msg, k) {
			return
		}
	}
	t.Fatalf("error %q names no key", msg)
}

// FuzzPrincipalOverrides runs any text through the parser of
// kafkanet.max.connections.per.principal.overrides: it never panics, a
// refusal is a config.Error naming the key, and what it accepts is
// principals with a type and a name, each with a count from 0 to
// Unlimited, which written back in the key's syntax parse to the same.
func FuzzPrincipalOverrides(f *testing.F) {
	for _, s := range []string{
		"User:alice:2;User:CN=bob,O=acme:50", " User:alice:0 ; ;User:ANONYMOUS: 3 ;", "User:a:b:c:7",
		"User:alice:2147483648", "User::1", ":a:1", "alice", ";;", "User:alice:1;User:alice:2", "User:x:+5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := config.ParsePrincipalOverrides(v)
		if err != nil {
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Key != config.KeyMaxConnectionsPerPrincipalOverrides || !errors.Is(err, socketserver.ErrInvalidConnectionQuotas) {
				t.Fatalf("%q: error %v is not a config.Error of the key", v, err)
			}
			return
		}
		var b strings.Builder
		for p, n := range got {
			if p.Type == "" || p.Name == "" || strings.Contains(p.Type, ":") || strings.ContainsRune(p.String(), ';') {
				t.Fatalf("%q: accepted principal %q", v, p)
			}
			if n < 0 || n > socketserver.Unlimited {
				t.Fatalf("%q: accepted count %d of %s", v, n, p)
			}
			fmt.Fprintf(&b, "%s:%d;", p, n)
		}
		again, err := config.ParsePrincipalOverrides(b.String())
		if err != nil {
			// A name that ends in blanks, or a type that starts with them,
			// is trimmed when written back between separators.
			if strings.TrimSpace(b.String()) != b.String() {
				return
			}
			t.Fatalf("%q: written back as %q, refused: %v", v, b.String(), err)
		}
		if len(again) != len(got) {
			t.Fatalf("%q: written back as %q, parsed to %v, not %v", v, b.String(), again, got)
		}
	})
}
