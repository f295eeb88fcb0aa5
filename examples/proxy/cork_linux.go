package main

import (
	"net"
	"syscall"
)

// cork holds back (on) or flushes (off) the partial segments of c, a TCP
// connection (TCP_CORK), so that a streamed request's size, header and
// first bytes, written apart, leave with its body in full segments rather
// than as small ones the broker wakes up for. Errors are ignored: corking
// only saves segments.
func cork(c net.Conn, on bool) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	v := 0
	if on {
		v = 1
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v) })
}
