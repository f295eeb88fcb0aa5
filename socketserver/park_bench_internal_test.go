package socketserver

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkParkCycle measures what a connection that parks between its
// requests pays: each iteration asks the idle connection to park, waits
// until it has, then does an ApiVersions round trip that wakes it. Compare
// with the same round trip on a connection that never parks (the "warm"
// sub-benchmark; BenchmarkHotPath measures it too).
func BenchmarkParkCycle(b *testing.B) {
	for _, park := range []bool{false, true} {
		name := "warm"
		if park {
			name = "parked"
		}
		b.Run(name, func(b *testing.B) {
			srv, c, roundTrip := parkTestConn(b)
			defer srv.Close()
			roundTrip()
			b.ReportAllocs()
			for b.Loop() {
				if park {
					for c.wait.Load() != waitAwaiting {
						runtime.Gosched()
					}
					c.active.Store(0) // idle since the server's epoch, as far as askToPark can tell
					c.parkMoved.Store(0)
					c.parkDelay.Store(0) // and parkAfter is long enough, however soon the last park ended
					c.askToPark(time.Now())
					for srv.parked.Load() != 1 {
						runtime.Gosched()
					}
				}
				roundTrip()
			}
		})
	}
}

// parkTestConn starts a plaintext server with one client connection. It
// returns the server, its side of the connection, and a function that
// does an ApiVersions round trip on it, failing tb on any error. The
// connection closes with tb.
func parkTestConn(tb testing.TB) (*Server, *conn, func()) {
	tb.Helper()
	srv, err := New(Config{Listeners: loopbackSet("PLAINTEXT")})
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	nc, err := net.Dial("tcp", srv.Addr("PLAINTEXT").String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	req := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench")).AppendRequest(nil, &kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: "bench", ClientSoftwareVersion: "1"}, 1)
	resp := make([]byte, 4096)
	roundTrip := func() {
		if _, err := nc.Write(req); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(nc, resp[:4]); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(nc, resp[:binary.BigEndian.Uint32(resp)]); err != nil {
			tb.Fatal(err)
		}
	}
	roundTrip()
	return srv, onlyConn(tb, srv), roundTrip
}

// onlyConn returns the server's one connection.
func onlyConn(tb testing.TB, srv *Server) *conn {
	for _, ls := range srv.listeners {
		for _, p := range ls.processors {
			p.mu.Lock()
			for c := range p.conns {
				p.mu.Unlock()
				return c
			}
			p.mu.Unlock()
		}
	}
	tb.Fatal("no connection")
	return nil
}
