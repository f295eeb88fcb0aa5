package main

import "syscall"

// cork holds back (on) or flushes (off) the partial segments of the TCP
// connection rc controls (TCP_CORK), so that a streamed request's size,
// header and first bytes, written apart, leave with its body in full
// segments rather than as small ones the broker wakes up for. Errors are
// ignored: corking only saves segments. A nil rc (TLS) is left alone.
func cork(rc syscall.RawConn, on bool) {
	if rc == nil {
		return
	}
	v := 0
	if on {
		v = 1
	}
	_ = rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v) })
}
