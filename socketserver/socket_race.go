//go:build linux && race

package socketserver

import (
	"runtime"
	"syscall"
	"unsafe"
)

// raceRead tells the race detector what a raw read of b from fd did, as
// syscall.Read does for its own: it wrote b, and it comes after every
// write to a socket made before (syscall's writes release a
// synchronization point that its reads acquire, so that a test whose
// client reads a response sees what the handler did before answering).
// The synchronization point is syscall's own, acquired with a read of
// nothing: a system call of the usual kind, but only in race builds.
func raceRead(fd uintptr, b []byte) {
	if len(b) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&b[0]), len(b))
	}
	_, _ = syscall.Read(int(fd), nil)
}

// raceWrite tells the race detector what a raw write of iov to fd will do,
// as syscall.Write does for its own: it reads the pieces, and comes after
// what the goroutine did before, for a read of the socket's peer
// (raceRead). syscall's synchronization point is released with a write of
// nothing.
func raceWrite(fd uintptr, iov []syscall.Iovec) {
	_, _ = syscall.Write(int(fd), nil)
	for _, v := range iov {
		runtime.RaceReadRange(unsafe.Pointer(v.Base), int(v.Len))
	}
}
