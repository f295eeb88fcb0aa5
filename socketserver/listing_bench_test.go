package socketserver_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/connreg"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// BenchmarkDataPlaneP99WithListing measures what listing connections costs
// the data plane: 8 connections do Metadata round trips through a host
// handler while the server's registry holds 10,000 connections, with no
// listing, a listing every second (an operator's dashboard), and listings
// back to back (the worst case). It reports the round trips' p50 and p99.
//
//	go test -run '^$' -bench DataPlaneP99WithListing -benchtime 3s ./socketserver/
func BenchmarkDataPlaneP99WithListing(b *testing.B) {
	for _, mode := range []string{"none", "every-second", "back-to-back"} {
		b.Run(mode, func(b *testing.B) {
			srv := socketservertest.NewServer(b, nil, withAPIs, echoMetadata)
			reg := srv.Registry()
			for i := range 10_000 {
				e := connreg.Add(reg.(*connreg.Registry), connregistry.Conn{Info: connregistry.Info{
					ID: fmt.Sprint("fake-", i), Principal: connregistry.Principal{Type: "User", Name: "u"},
					ClientAddr: netip.MustParseAddrPort("10.0.0.1:1000"), Listener: "PLAINTEXT", ConnectedAt: time.Now(),
				}}, nil)
				defer e.Remove(time.Now(), connregistry.CloseByClient)
			}
			h := &connregistry.ListHandler{Registry: reg}
			stop := make(chan struct{})
			var lister sync.WaitGroup
			listings := 0
			if mode != "none" {
				lister.Go(func() {
					interval := time.Second
					if mode == "back-to-back" {
						interval = 0
					}
					for {
						resp := h.Handle(context.Background(), connregistry.Principal{Type: "User", Name: "admin"}, &connregistry.ListClientConnectionsRequest{})
						_ = resp.AppendTo(nil)
						listings++
						select {
						case <-stop:
							return
						case <-time.After(interval):
						}
					}
				})
			}
			const conns = 8
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			var wg sync.WaitGroup
			per := max(b.N/conns, 1)
			for range conns {
				c := socketservertest.Dial(b, srv, "PLAINTEXT")
				bc := newBenchClient(c, kmsg.NewPtrMetadataRequest())
				wg.Go(func() {
					mine := make([]time.Duration, 0, per)
					for range per {
						start := time.Now()
						if err := bc.roundTrip(); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(start))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			b.StopTimer()
			close(stop)
			lister.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(listings), "listings")
		})
	}
}
