package connregistry_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/connregistry/connregistrytest"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func filled(n int) connregistry.Registry {
	conns := make([]connregistry.Conn, n)
	for i := range n {
		conns[i] = connregistry.Conn{Info: connregistry.Info{
			ID:         fmt.Sprintf("127.0.0.1:9092-127.0.0.1:%d-0-%d", 10000+i%50000, i),
			Principal:  connregistry.Principal{Type: "User", Name: fmt.Sprint("user", i%100)},
			ClientAddr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(i)),
			Listener:   "CLIENT", SecurityProtocol: protocolmap.SASLSSL, ClientSoftwareName: "kgo", ClientSoftwareVersion: "1.22",
			ConnectedAt: time.Unix(int64(i), 0),
		}, State: connregistry.StateReady}
	}
	return connregistrytest.NewRegistry(0, conns...)
}

// BenchmarkSnapshot measures a whole listing (snapshot and wire encoding)
// at 10,000 and 100,000 registered connections.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		r := filled(n)
		h := &connregistry.ListHandler{Registry: r}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp := h.Handle(context.Background(), connregistry.Principal{Type: "User", Name: "admin"}, &connregistry.ListClientConnectionsRequest{})
				if len(resp.Connections) != n {
					b.Fatal(len(resp.Connections))
				}
				_ = resp.AppendTo(nil)
			}
		})
	}
}
