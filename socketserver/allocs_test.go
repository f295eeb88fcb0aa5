package socketserver_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/socketservertest"
)

// TestAllocationsPerRequest holds the per-request path to its allocation
// budget: at most three heap allocations per small request in the server's
// own code (the request, its frame, and the decoded body; the frame is
// apart so that a host keeping its bytes keeps nothing else:
// TestKeptRecordsDoNotKeepTheConnection), and none for an ApiVersions
// request the server answers itself from its read buffer. The handler here reuses
// one response, so that every allocation counted is the server's. The race
// detector's sync.Pool drops a quarter of what it is given, so under -race
// the response buffers cost a fraction of an allocation more.
func TestAllocationsPerRequest(t *testing.T) {
	resp := kmsg.NewPtrMetadataResponse()
	resp.ClusterID = kmsg.StringPtr("allocs")
	reuse := socketserver.HandlerFunc(func(r *socketserver.Request) { _ = r.Respond(resp) })
	slack := 0.0
	if raceEnabled {
		slack = 0.5
	}
	for _, tt := range []struct {
		name string
		req  kmsg.Request
		max  float64
	}{
		{"ApiVersions v3 answered by the server", apiVersionsReq(3, "allocs", "1.0"), 0},
		{"ApiVersions v0 answered by the server", apiVersionsReq(0, "", ""), 0},
		{"Metadata v12 through the request channel", metadataReq(12), 3},
		{"Metadata v1 through the request channel", metadataReq(1), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := socketservertest.NewServer(t, nil, withAPIs, reuse)
			bc := newBenchClient(socketservertest.Dial(t, srv, "PLAINTEXT"), tt.req)
			for range 100 { // warm the server's buffers and the runtime's caches
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			}
			got := testing.AllocsPerRun(2000, func() {
				if err := bc.roundTrip(); err != nil {
					t.Fatal(err)
				}
			})
			if got > tt.max+slack {
				t.Errorf("%.2f allocations per request, want at most %v", got, tt.max)
			}
			t.Logf("%.2f allocations per request", got)
		})
	}
}
