package main

import (
	"encoding/binary"
	"io"
	"math"
	"net"
	"slices"
	"testing"
	"time"
)

// The bare floor answers each frame with the echo answer carrying the
// request's correlation id, frames of any length in one write or split,
// and closes on a frame too short to hold a request header.
func TestBareConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		bareConn(c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	frame := func(corr uint32, clientID string) []byte {
		f := binary.BigEndian.AppendUint32(nil, uint32(8+2+len(clientID)))
		f = binary.BigEndian.AppendUint16(f, 18) // ApiVersions
		f = binary.BigEndian.AppendUint16(f, 0)
		f = binary.BigEndian.AppendUint32(f, corr)
		f = binary.BigEndian.AppendUint16(f, uint16(len(clientID)))
		return append(f, clientID...)
	}
	long := string(make([]byte, 300)) // longer than the header array: discarded through it
	for i, f := range [][]byte{frame(7, "bench"), frame(8, long), append(frame(9, ""), frame(10, "x")...)} {
		for _, part := range [][]byte{f[:3], f[3:]} { // split inside the size
			if _, err := c.Write(part); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		want := []uint32{7}
		switch i {
		case 1:
			want = []uint32{8}
		case 2:
			want = []uint32{9, 10}
		}
		for _, corr := range want {
			var resp [echoResponseSize]byte
			if _, err := io.ReadFull(c, resp[:]); err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if size, got := binary.BigEndian.Uint32(resp[:]), binary.BigEndian.Uint32(resp[4:]); size != echoResponseSize-4 || got != corr {
				t.Fatalf("frame %d: answer of size %d for correlation id %d, want %d for %d", i, size, got, echoResponseSize-4, corr)
			}
		}
	}
	if _, err := c.Write([]byte{0, 0, 0, 4, 0, 18, 0, 0, 0, 0, 0, 0}); err != nil { // a 4-byte frame
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after a short frame, want the connection closed", n)
	}
	<-done
}

// TestIdleEndToEnd runs scenario c with 200 idle connections: every server
// has a figure opened 32 at a time and one opened one at a time, and
// those that speak TLS one over TLS.
func TestIdleEndToEnd(t *testing.T) {
	rows := runScenarios(t, options{scenarios: []string{"c"}, rounds: 1, idleCounts: []int{200}, settle: 100 * time.Millisecond})
	for _, server := range []serverKind{kafkanetServer, brokerServer, kfakeServer, echoServer, bareServer} {
		for _, m := range idleModes {
			if m.tls && !idleTLS(server) {
				continue
			}
			if got := find(t, rows, "200 conns"+m.suffix, "RSS MiB", server).Median; got <= 0 {
				t.Errorf("%s, 200 conns%s: RSS %v MiB", server, m.suffix, got)
			}
		}
	}
	if got := find(t, rows, "200 conns, one at a time", "stacks/conn KiB", kafkanetServer).Median; got <= 0 {
		t.Errorf("kafkanet's stacks per connection, one at a time: %v KiB", got)
	}
	// The kept memory is reported; 200 connections may fit in spans the
	// runtime kept already, so it need not grow.
	for _, metric := range []string{"heap kept/conn KiB", "heap free kept/conn KiB", "Go kept/conn KiB", "RSS/conn KiB, freed"} {
		if got := find(t, rows, "200 conns", metric, kafkanetServer).Median; math.IsNaN(got) || math.IsInf(got, 0) {
			t.Errorf("kafkanet's %s: %v", metric, got)
		}
	}
}

func TestTLSIdleCounts(t *testing.T) {
	got := tlsIdleCounts([]int{200, 3000, 10000, 100000})
	if want := []int{200, tlsIdleMost}; !slices.Equal(got, want) {
		t.Errorf("tlsIdleCounts = %v, want %v", got, want)
	}
}
