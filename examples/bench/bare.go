package main

// The floor of scenario (c): a goroutine per connection and nothing else,
// so that what an idle connection costs it is the least a Go server that
// waits in Read pays on this machine.

import (
	"context"
	"encoding/binary"
	"io"
	"net"
)

// bareServer is scenario c's floor: a goroutine per connection, no
// buffered reader or writer, each frame's size and header read into an
// array on the goroutine's stack and answered with the echo server's
// fixed ApiVersions answer.
const bareServer serverKind = "bare"

// serveBare runs the floor until ctx ends.
func serveBare(ctx context.Context, spec childSpec) error {
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		return err
	}
	return acceptEach(ctx, ln, bareConn)
}

// bareConn answers the frames of one connection until it closes or sends
// a frame shorter than a request header's first 8 bytes or longer than
// maxEchoFrame.
func bareConn(c net.Conn) {
	defer c.Close()
	var head [12]byte // size, key, version, correlation id
	var resp [echoResponseSize]byte
	binary.BigEndian.PutUint32(resp[:], echoResponseSize-4)
	for {
		if _, err := io.ReadFull(c, head[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(head[:])
		if n < 8 || n > maxEchoFrame {
			return
		}
		copy(resp[4:8], head[8:12])
		if _, err := discardN(c, int64(n-8), head[:]); err != nil { // the rest, through head
			return
		}
		if _, err := c.Write(resp[:]); err != nil {
			return
		}
	}
}

// discardN reads and drops n bytes of r through buf.
func discardN(r io.Reader, n int64, buf []byte) (int64, error) {
	var done int64
	for done < n {
		m, err := r.Read(buf[:min(int64(len(buf)), n-done)])
		done += int64(m)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}
