package socketserver

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
)

// writeFetch writes a Fetch response whose records travel by reference
// ([FetchResponse]): the frame's size, correlation id, header and every
// field come from one pooled buffer, and each partition's records go to the
// socket from where the host keeps them. On a plaintext TCP connection the
// buffer's pieces and the record batches leave in one vectored write
// (writev) up to each file section, which sendfile sends from the page
// cache; on TLS (and other connections) they pass through crypto/tls, which
// must copy them to encrypt.
func (c *conn) writeFetch(correlationID int32, f *FetchResponse) (int, error) {
	c.endTurn() // the client may not be reading
	buf := c.p.srv.writeBuf()
	b := append((*buf)[:0], 0, 0, 0, 0) // the size, set below
	b = binary.BigEndian.AppendUint32(b, uint32(correlationID))
	if f.IsFlexible() {
		b = append(b, 0) // the response header's empty tag section
	}
	seg := appendFetchResponse(b, f)
	*buf = seg.buf
	defer c.p.srv.putWriteBuf(buf)
	if seg.size-4 > math.MaxInt32 {
		return 0, fmt.Errorf("%w: a response of %d bytes", ErrFetchRecords, seg.size-4)
	}
	binary.BigEndian.PutUint32(seg.buf, uint32(seg.size-4))
	c.moveWriteDeadline()
	var err error
	if tc, ok := c.rw.(*net.TCPConn); ok {
		err = c.writeSegmentsTCP(tc, seg)
	} else {
		err = writeSegmentsCopying(c.rw, seg)
	}
	if err != nil {
		c.writeFailed(err)
		return 0, err
	}
	c.wrote(int(seg.size))
	c.responseSent(f.Key(), int(seg.size))
	return int(seg.size), nil
}

// writeSegmentsTCP writes seg to a plaintext TCP connection: memory in
// vectored writes (vecWriter: one for the whole response when the socket
// takes it), file sections with sendfile.
func (c *conn) writeSegmentsTCP(tc *net.TCPConn, seg segmented) error {
	w, err := c.vecWriter(tc)
	if err != nil {
		return err
	}
	defer w.done()
	prev := 0
	for _, cut := range seg.cuts {
		if err := w.add(seg.buf[prev:cut.at]); err != nil {
			return err
		}
		prev = cut.at
		r := cut.records
		if r.File == nil {
			for _, b := range r.Batches {
				if err := w.add(b); err != nil {
					return err
				}
			}
			continue
		}
		if err := w.flush(); err != nil {
			return err
		}
		if err := sendFileSection(tc, r); err != nil {
			return err
		}
	}
	if err := w.add(seg.buf[prev:]); err != nil {
		return err
	}
	return w.flush()
}

// copyBufs are the writers that gather a response's pieces for crypto/tls
// (and connections that are not TCP), so that small pieces do not each
// become a TLS record.
var copyBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}

// writeSegmentsCopying writes seg through w, which copies: crypto/tls
// encrypts into records of its own.
func writeSegmentsCopying(w io.Writer, seg segmented) error {
	bw := copyBufs.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil)
		copyBufs.Put(bw)
	}()
	prev := 0
	for _, cut := range seg.cuts {
		if _, err := bw.Write(seg.buf[prev:cut.at]); err != nil {
			return err
		}
		prev = cut.at
		r := cut.records
		if r.File == nil {
			for _, b := range r.Batches {
				if _, err := bw.Write(b); err != nil {
					return err
				}
			}
			continue
		}
		n, err := bw.ReadFrom(io.NewSectionReader(r.File, r.Offset, r.Length))
		if err != nil {
			return err
		}
		if n < r.Length {
			return fmt.Errorf("%w: the file section at %d holds %d of its %d bytes", ErrFetchRecords, r.Offset, n, r.Length)
		}
	}
	if _, err := bw.Write(seg.buf[prev:]); err != nil {
		return err
	}
	return bw.Flush()
}
