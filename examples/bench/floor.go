package main

// The floor of consuming (scenario g), a child: no Kafka protocol at all,
// only the log's bytes written to a socket, so that what it costs is the
// least any server pays to send them on this machine.

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
)

// floorSendKey is the API key of the request that makes the floor write
// its whole log and close the connection. Any other frame gets the echo
// server's fixed ApiVersions answer, which is what the bench's readiness
// check needs.
const floorSendKey = -1

// floorChunk is how many bytes of batches the floor writes at once: kgo's
// default fetch limit per partition, so that it makes as many writes as a
// server answering kgo's Fetch requests.
const floorChunk = 1 << 20

// serveFloor runs the floor until ctx ends: it builds the same log as the
// ceilings, in memory the kernel filled, and writes it with writev in
// chunks of about floorChunk bytes (at least a batch each) to whoever asks.
func serveFloor(ctx context.Context, spec childSpec) error {
	log, churn, err := childLog(spec, true)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(churn)
	ln, err := net.Listen("tcp", spec.Addr)
	if err != nil {
		return err
	}
	return acceptEach(ctx, ln, func(c net.Conn) { floorConn(c, log.batches) })
}

// floorConn answers frames with the echo answer until a frame of key
// floorSendKey asks for the log, which it then writes before closing.
func floorConn(c net.Conn, batches [][]byte) {
	defer c.Close()
	br := bufio.NewReader(c)
	resp := newEchoResponse()
	for {
		key, correlationID, err := readEchoFrame(br)
		if err != nil {
			return
		}
		if key == floorSendKey {
			writeFloor(c, batches)
			return
		}
		binary.BigEndian.PutUint32(resp[4:8], correlationID)
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// writeFloor writes batches to c, a chunk of floorChunks at a time.
func writeFloor(c net.Conn, batches [][]byte) {
	for _, chunk := range floorChunks(batches) {
		bufs := net.Buffers(chunk)
		if _, err := bufs.WriteTo(c); err != nil {
			return
		}
	}
}

// floorChunks splits batches, in order, into chunks of at most floorChunk
// bytes, or of one batch when it alone is more.
func floorChunks(batches [][]byte) [][][]byte {
	var chunks [][][]byte
	for len(batches) > 0 {
		n, size := 0, 0
		for n < len(batches) && (n == 0 || size+len(batches[n]) <= floorChunk) {
			size += len(batches[n])
			n++
		}
		chunks = append(chunks, batches[:n:n])
		batches = batches[n:]
	}
	return chunks
}

// readFloor asks the floor at c for its log and reads it to the end,
// returning how many bytes came.
func readFloor(ctx context.Context, d *dialer, addr string) (int64, error) {
	conn, err := d.dial(ctx, addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var req [12]byte
	binary.BigEndian.PutUint32(req[:], 8)
	binary.BigEndian.PutUint16(req[4:], 0xffff) // floorSendKey, -1
	if _, err := conn.Write(req[:]); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	return io.CopyBuffer(io.Discard, struct{ io.Reader }{conn}, buf)
}
