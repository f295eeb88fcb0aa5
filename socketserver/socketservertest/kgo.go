package socketservertest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KgoSASL returns the kgo option that logs in as user with password, with
// mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
func KgoSASL(mechanism, user, password string) kgo.Opt {
	switch mechanism {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism())
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism())
	}
	panic("socketservertest: unknown mechanism " + mechanism)
}

// ConnectKgo opens a kgo client seeded with addr alone and makes it send a
// Metadata request there, so that it holds exactly one connection, to that
// broker. It returns the client, closed when the test ends, and the local
// address of its connection. opts add to the client's options: a login
// (KgoSASL), TLS (kgo.DialTLSConfig), a kgo.Dialer of the caller's (such
// as a PipeListener's DialContext), hooks. The connection is
// found with a kgo.HookBrokerConnect, not a dialer of ConnectKgo's own, so
// any of them works; only a kgo.SeedBrokers among opts, which would replace
// addr, makes no sense here.
func ConnectKgo(t testing.TB, addr string, opts ...kgo.Opt) (*kgo.Client, string) {
	t.Helper()
	conns := &connectHook{}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr),
		kgo.ConnIdleTimeout(time.Minute), kgo.RequestRetries(1)}, append(opts, kgo.WithHooks(conns))...)...)
	if err != nil {
		t.Fatalf("socketservertest: %v", err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
		t.Fatalf("socketservertest: Metadata from %s: %v", addr, err)
	}
	addrs := conns.addrs()
	if len(addrs) != 1 {
		t.Fatalf("socketservertest: the client holds %d connections, want 1", len(addrs))
	}
	return cl, addrs[0]
}

// connectHook records the local address of each connection a kgo client
// opens and initializes (ApiVersions and any SASL exchange done), however
// it was dialed.
type connectHook struct {
	mu    sync.Mutex
	local []string
}

// OnBrokerConnect implements kgo.HookBrokerConnect.
func (h *connectHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, c net.Conn, err error) {
	if err != nil || c == nil {
		return
	}
	h.mu.Lock()
	h.local = append(h.local, c.LocalAddr().String())
	h.mu.Unlock()
}

func (h *connectHook) addrs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.local...)
}
