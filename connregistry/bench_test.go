package connregistry_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
)

func filled(n int) *connregistry.Registry {
	r := connregistry.New(0)
	for i := range n {
		r.Add(connregistry.Conn{Info: connregistry.Info{
			ID:         fmt.Sprintf("127.0.0.1:9092-127.0.0.1:%d-0-%d", 10000+i%50000, i),
			Principal:  connregistry.Principal{Type: "User", Name: fmt.Sprint("user", i%100)},
			ClientAddr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(i)),
			Listener:   "CLIENT", SecurityProtocol: protocolmap.SASLSSL, ClientSoftwareName: "kgo", ClientSoftwareVersion: "1.22",
			ConnectedAt: time.Unix(int64(i), 0),
		}, State: connregistry.Ready}, nil)
	}
	return r
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

// BenchmarkRequestUpdate is the per-request cost the registry adds to the
// data plane.
func BenchmarkRequestUpdate(b *testing.B) {
	r := filled(1)
	e := r.Add(connregistry.Conn{Info: connregistry.Info{ID: "x", ConnectedAt: time.Now()}}, nil)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		e.Request(now, 100, "kgo")
		e.Response(now, 50)
	}
}
