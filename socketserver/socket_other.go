//go:build !linux

package socketserver

import (
	"io"
	"net"
)

// takeSocket returns what a connection whose socket is nc reads from: nc
// itself where the raw socket of Linux is not available.
func takeSocket(nc net.Conn) io.Reader { return nc }

// releaseSocket returns nc, what the connection reads from meanwhile.
func releaseSocket(_ io.Reader, nc net.Conn) io.Reader { return nc }

// vecWriter gathers a response's pieces for vectored writes (writev) to a
// plaintext TCP connection, with net.Buffers.
type vecWriter struct {
	tc   *net.TCPConn
	bufs *net.Buffers
}

// vecWriter returns the writer of c's responses, whose socket is tc. The
// caller ends it with done.
func (c *conn) vecWriter(tc *net.TCPConn) (vecWriter, error) {
	return vecWriter{tc: tc, bufs: new(net.Buffers)}, nil
}

// add gathers b.
func (w vecWriter) add(b []byte) error {
	if len(b) > 0 {
		*w.bufs = append(*w.bufs, b)
	}
	return nil
}

// flush writes what was gathered.
func (w vecWriter) flush() error {
	_, err := w.bufs.WriteTo(w.tc)
	*w.bufs = (*w.bufs)[:0]
	return err
}

// done ends the response's writes.
func (w vecWriter) done() { *w.bufs = nil }

// writeSocket writes b to c's socket, whole: c writes in the clear.
func (c *conn) writeSocket(b []byte) (int, error) { return c.nc.Write(b) }
