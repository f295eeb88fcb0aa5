package socketserver_test

import (
	"context"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// connMarker is a value each connection's context carries (ConnContext),
// so that a weak pointer to it tells whether anything still reaches the
// connection.
type connMarker struct{ id string }

type markerKey struct{}

// TestKeptRecordsDoNotKeepTheConnection checks the promise of
// Request.Body: a host may keep a Produce's record batches after it has
// answered, and that keeps the frame's bytes, not the connection. A
// connection that has closed must be collectable although the host holds
// the batches of every request it read, small frames and large alike.
func TestKeptRecordsDoNotKeepTheConnection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values int // bytes of record value in the one Produce each connection sends
	}{
		{"small frame", 10},
		{"large frame", 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var markers []weak.Pointer[connMarker]
			var kept [][]byte
			srv := newUnstarted(t, config.Properties{"num.io.threads": "1", "listeners": "PLAINTEXT://127.0.0.1:0"}, func(cfg *socketserver.Config) {
				cfg.ConnContext = func(ctx context.Context, _ net.Conn, info connregistry.Info) context.Context {
					m := &connMarker{id: info.ID}
					mu.Lock()
					markers = append(markers, weak.Make(m))
					mu.Unlock()
					return context.WithValue(ctx, markerKey{}, m)
				}
			})
			require.NoError(t, srv.Start(context.Background()))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() {
				served <- srv.Serve(ctx, protocolmap.DataPlane, socketserver.HandlerFunc(func(r *socketserver.Request) {
					req := r.Body.(*kmsg.ProduceRequest)
					mu.Lock()
					for _, tp := range req.Topics {
						for _, p := range tp.Partitions {
							kept = append(kept, p.Records) // a slice of the frame, kept
						}
					}
					mu.Unlock()
					_ = r.Respond(req.ResponseKind())
				}))
			}()
			const conns = 20
			for range conns {
				c, err := net.Dial("tcp", srv.Addr("PLAINTEXT").String())
				require.NoError(t, err)
				send(t, c, produceWithRecords(tc.values), 1)
				readRawFrame(t, c)
				require.NoError(t, c.Close())
			}
			require.Eventually(t, func() bool { return srv.Stats().ConnectionCount["PLAINTEXT"] == 0 }, 5*time.Second, 5*time.Millisecond)
			require.Eventually(t, func() bool {
				runtime.GC()
				mu.Lock()
				defer mu.Unlock()
				alive := 0
				for _, w := range markers {
					if w.Value() != nil {
						alive++
					}
				}
				return alive == 0
			}, 5*time.Second, 20*time.Millisecond, "closed connections are still reachable while the host keeps their record batches")
			mu.Lock()
			require.Len(t, kept, conns)
			mu.Unlock()
			cancel()
			<-served
		})
	}
}

// produceWithRecords is a Produce request (v9, acks=1) whose one partition
// carries n bytes as its records field: the server passes them through
// undecoded.
func produceWithRecords(n int) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 1000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = make([]byte, n)
	tp.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	req.Topics = []kmsg.ProduceRequestTopic{tp}
	return req
}
