package connregistry_test

import (
	"fmt"
	"testing"

	"github.com/kafkanet/kafkanet/connregistry"
)

// BenchmarkDecodeResponse decodes a ListClientConnections response of 100
// records, as the admin client does.
func BenchmarkDecodeResponse(b *testing.B) {
	var resp connregistry.ListClientConnectionsResponse
	for i := range 100 {
		resp.Connections = append(resp.Connections, connregistry.ConnectionRecord{
			ConnectionID: fmt.Sprintf("127.0.0.1:9092-127.0.0.1:%d-0-%d", 40000+i, i), State: "ready",
		})
	}
	wire := resp.AppendTo(nil)
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		var got connregistry.ListClientConnectionsResponse
		if err := got.ReadFrom(wire); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeRequest decodes a filtered ListClientConnections request,
// as the server does for every listing.
func BenchmarkDecodeRequest(b *testing.B) {
	wire := (&connregistry.ListClientConnectionsRequest{PrincipalFilter: sp("User:alice"), IncludeClosed: true}).AppendTo(nil)
	b.ReportAllocs()
	for b.Loop() {
		var got connregistry.ListClientConnectionsRequest
		if err := got.ReadFrom(wire); err != nil {
			b.Fatal(err)
		}
	}
}
