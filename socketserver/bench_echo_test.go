package socketserver_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// BenchmarkHotPathEcho is BenchmarkHotPath's floor: the same client and
// request against a server of a goroutine, a bufio reader and writer and
// nothing else, answering with as many bytes as the server's ApiVersions
// answer (62 and its size). Run the two alternately to compare them in
// one process (docs/performance.md):
//
//	go test -c -o ss.test ./socketserver
//	./ss.test -test.run '^$' -test.bench 'HotPath(Echo)?$' -test.benchtime 60000x
func BenchmarkHotPathEcho(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	resp := make([]byte, 66)
	binary.BigEndian.PutUint32(resp, 62)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		bw := bufio.NewWriter(c)
		var hdr [12]byte
		for {
			if _, err := io.ReadFull(br, hdr[:4]); err != nil {
				return
			}
			n := binary.BigEndian.Uint32(hdr[:4])
			body := make([]byte, n)
			if _, err := io.ReadFull(br, body); err != nil {
				return
			}
			copy(resp[4:8], body[4:8])
			bw.Write(resp)
			if err := bw.Flush(); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bc := newBenchClient(c, apiVersionsReq(3, "bench", "1.0"))
	for b.Loop() {
		if err := bc.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
}
