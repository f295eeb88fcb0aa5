package socketserver

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// rawSocket is a TCP connection's socket as its connection reads it, and
// writes it in the clear, on Linux: each read and write is a raw system
// call (syscall.RawSyscall) in a callback of the socket's syscall.RawConn,
// which waits for the socket as net.Conn does (the runtime's network
// poller), under the connection's deadlines.
//
// A system call made the usual way (syscall.Syscall) tells the Go runtime
// that it may block, and the first one after every processor (P) was idle
// wakes the runtime's monitor thread (sysmon), which then wakes every 20
// to 70 µs for as long as any goroutine runs, and sleeps again when all
// are idle. A server answering one request at a time, as a consumer's
// Fetch requests come one after another, paid that at every request: on a
// 2-core machine, 3 to 4 of the 5 to 6 context switches per 1 MiB Fetch
// answered, and a quarter of the server's CPU time per MB (issue 36). A
// read or write of a non-blocking socket never blocks, so it need not tell
// the runtime: the longest is a write of what the socket's send buffer
// takes at once, as net.Conn's is. The monitor still wakes for any other
// system call, for the runtime's timers (a processor's tick, at least
// every 50 ms, is one) and for every garbage collection, so that a
// goroutine running long is preempted and the network polled when every P
// is busy, at most that late.
//
// Reads come from the connection's goroutine (or its peer watcher's: one
// at a time), writes from the one goroutine that writes its responses; rd
// and wr keep them apart. A connection takes its rawSocket from a pool
// when it serves (takeSocket) and gives it back when it parks
// (releaseSocket), so that a parked connection holds none.
type rawSocket struct {
	nc *net.TCPConn
	rc syscall.RawConn
	rd rawRead
	wr rawWrite
}

// rawRead is a read in progress.
type rawRead struct {
	buf   []byte
	n     int
	errno syscall.Errno
	f     func(fd uintptr) bool // rd.read, bound once
}

// rawWrite is a vectored write: the pieces gathered (add), then written
// (flush).
type rawWrite struct {
	iov    []syscall.Iovec // what is left to write: in inline, or in long
	inline [rawInlineIovecs]syscall.Iovec
	long   *[maxIovecs]syscall.Iovec // from longIovecs while a write gathers more than inline holds
	n      int64                     // bytes written by this flush
	errno  syscall.Errno
	f      func(fd uintptr) bool // wr.writev, bound once
}

// rawInlineIovecs is how many pieces a write gathers in its rawSocket: a
// Fetch response whose one partition has records in one slice has three
// (the response up to the records, the records, the rest), one of three
// such partitions seven.
const rawInlineIovecs = 8

// maxIovecs is the most pieces one writev takes (IOV_MAX), and the most a
// write gathers before it writes them.
const maxIovecs = 1024

// longIovecs holds the arrays of writes that gather more pieces than their
// rawSocket holds (a Fetch response of many partitions), shared as the
// response buffers are, so that no connection keeps one between
// responses.
var longIovecs = sync.Pool{New: func() any { return new([maxIovecs]syscall.Iovec) }}

var rawSockets = sync.Pool{New: func() any {
	s := &rawSocket{}
	s.rd.f = s.rd.read
	s.wr.f = s.wr.writev
	s.wr.iov = s.wr.inline[:0]
	return s
}}

// takeSocket returns what a connection whose socket is nc reads from: a
// rawSocket for a TCP connection, else nc.
func takeSocket(nc net.Conn) io.Reader {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	if s := bindSocket(tc); s != nil {
		return s
	}
	return nc
}

// bindSocket returns a rawSocket from the pool for tc, or nil if tc has
// no file descriptor (it is closed).
func bindSocket(tc *net.TCPConn) *rawSocket {
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	s := rawSockets.Get().(*rawSocket)
	s.nc, s.rc = tc, rc
	return s
}

// releaseSocket gives r back to the pool if it is a rawSocket, and returns
// nc, what the connection reads from meanwhile. No read or write of r may
// be in progress, or come after.
func releaseSocket(r io.Reader, nc net.Conn) io.Reader {
	if s, ok := r.(*rawSocket); ok {
		s.nc, s.rc = nil, nil
		rawSockets.Put(s)
	}
	return nc
}

// Read reads from the socket into b, as net.Conn's Read.
func (s *rawSocket) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	rd := &s.rd
	rd.buf, rd.n, rd.errno = b[:min(len(b), maxRW)], 0, 0
	err := s.rc.Read(rd.f)
	n, errno := rd.n, rd.errno
	rd.buf = nil
	switch {
	case err != nil:
		return 0, renameOp(err, "read")
	case errno != 0:
		return 0, s.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// rawCallCounts counts raw system calls (see rawCalls).
type rawCallCounts struct{ reads, writes atomic.Int64 }

// rawCalls, when a test sets it, counts every connection's raw reads that
// returned bytes, and raw writes, each before the bytes it writes can
// reach the peer.
var rawCalls atomic.Pointer[rawCallCounts]

// maxRW is the most one read asks for, as net.Conn's.
const maxRW = 1 << 30

// read reads once into buf; it reports false, to wait for the socket, when
// nothing has arrived.
func (rd *rawRead) read(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&rd.buf[0])), uintptr(len(rd.buf)))
		switch e {
		case 0:
			if c := rawCalls.Load(); c != nil && n > 0 {
				c.reads.Add(1)
			}
			rd.n = int(n)
			raceRead(fd, rd.buf[:n])
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		rd.errno = e
		return true
	}
}

// Write writes b whole, as net.Conn's Write: on an error (a deadline) it
// returns how much of b was written before it.
func (s *rawSocket) Write(b []byte) (int, error) {
	if err := s.add(b); err != nil {
		return 0, err // nothing was gathered before b
	}
	n, err := s.flush("write")
	return int(n), err
}

// add gathers b for the next flush, writing what was gathered first if
// the gathering is full (maxIovecs).
func (s *rawSocket) add(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	wr := &s.wr
	switch {
	case len(wr.iov) < cap(wr.iov):
	case wr.long == nil:
		wr.long = longIovecs.Get().(*[maxIovecs]syscall.Iovec)
		wr.iov = wr.long[:copy(wr.long[:], wr.iov)]
		clear(wr.inline[:])
	default: // maxIovecs
		if _, err := s.flush("writev"); err != nil {
			return err
		}
	}
	v := syscall.Iovec{Base: &b[0]}
	v.SetLen(len(b))
	wr.iov = append(wr.iov, v)
	return nil
}

// flush writes what was gathered, whole, and returns how many bytes it
// wrote: all of them, or those before an error, which names the
// operation op, as net.Conn's.
func (s *rawSocket) flush(op string) (int64, error) {
	wr := &s.wr
	wr.n, wr.errno = 0, 0
	var err error
	if len(wr.iov) > 0 {
		err = s.rc.Write(wr.f) // calls wr.f until it has written iov whole, or failed
	}
	n, errno := wr.n, wr.errno
	wr.reset()
	switch {
	case err != nil:
		return n, renameOp(err, op)
	case errno != 0:
		return n, s.opError(op, errno)
	}
	return n, nil
}

// reset drops what is left to write, keeping none of the pieces (the
// host's memory), and gives a long array back.
func (wr *rawWrite) reset() {
	clear(wr.iov) // consume cleared what was written
	wr.iov = wr.inline[:0]
	if wr.long != nil {
		longIovecs.Put(wr.long)
		wr.long = nil
	}
}

// writev writes what is left of iov, as much as the socket takes; it
// reports false, to wait for the socket, when the socket takes no more.
func (wr *rawWrite) writev(fd uintptr) bool {
	for len(wr.iov) > 0 {
		iov := wr.iov[:min(len(wr.iov), maxIovecs)]
		raceWrite(fd, iov)
		if c := rawCalls.Load(); c != nil {
			c.writes.Add(1)
		}
		var n uintptr
		var e syscall.Errno
		if len(iov) == 1 { // one piece (most responses): write, which spares the kernel reading the vector
			n, _, e = syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(iov[0].Base)), uintptr(iov[0].Len))
		} else {
			n, _, e = syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		}
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			wr.errno = e
			return true
		}
		wr.n += int64(n)
		wr.consume(uint64(n))
	}
	return true
}

// consume drops the first n bytes of iov.
func (wr *rawWrite) consume(n uint64) {
	for n > 0 {
		v := &wr.iov[0]
		if l := uint64(v.Len); n < l {
			v.Base = (*byte)(unsafe.Add(unsafe.Pointer(v.Base), n))
			v.SetLen(int(l - n))
			return
		}
		n -= uint64(v.Len)
		*v = syscall.Iovec{}
		wr.iov = wr.iov[1:]
	}
}

// opError is the error of a failed system call, as net.Conn returns it.
func (s *rawSocket) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.nc.LocalAddr(), Addr: s.nc.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// renameOp names the operation of syscall.RawConn's error as net.Conn
// would ("read", not "raw-read"), so that what is logged is the same.
func renameOp(err error, op string) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
	}
	return err
}

// vecWriter gathers a response's pieces for vectored writes (writev) to a
// plaintext TCP connection: with the connection's rawSocket.
type vecWriter struct {
	s    *rawSocket
	temp bool // s was taken for this response alone
}

// vecWriter returns the writer of c's responses, whose socket is tc. The
// caller ends it with done.
func (c *conn) vecWriter(tc *net.TCPConn) (vecWriter, error) {
	if s := c.sock(); s != nil {
		return vecWriter{s: s}, nil
	}
	s := bindSocket(tc) // the connection holds none (see takeSocket's callers)
	if s == nil {
		return vecWriter{}, net.ErrClosed
	}
	return vecWriter{s: s, temp: true}, nil
}

// add gathers b.
func (w vecWriter) add(b []byte) error { return w.s.add(b) }

// flush writes what was gathered.
func (w vecWriter) flush() error {
	_, err := w.s.flush("writev")
	return err
}

// done ends the response's writes: what was gathered and not flushed is
// dropped.
func (w vecWriter) done() {
	w.s.wr.reset()
	if w.temp {
		releaseSocket(w.s, nil)
	}
}

// sock returns c's rawSocket, when it writes to its socket in the clear
// and holds one.
func (c *conn) sock() *rawSocket {
	if !c.plain() {
		return nil
	}
	s, _ := c.pre.r.(*rawSocket)
	return s
}

// writeSocket writes b to c's socket, whole: c writes in the clear.
func (c *conn) writeSocket(b []byte) (int, error) {
	if s := c.sock(); s != nil {
		return s.Write(b)
	}
	return c.nc.Write(b)
}
