package socketserver

import (
	"errors"
	"fmt"
	"net"
	"syscall"
)

// sendFileSection sends r's file section to tc with sendfile(2), from the
// page cache to the socket, reading at r.Offset explicitly so that the
// file's own offset never moves (one *os.File may serve many responses at
// once). It waits for the socket as a write does, under its deadline.
func sendFileSection(tc *net.TCPConn, r *FetchRecords) error {
	if r.Length == 0 {
		return nil
	}
	sock, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	file, err := r.File.SyscallConn()
	if err != nil {
		return err
	}
	off, left := r.Offset, r.Length
	var sendErr error
	ctlErr := file.Control(func(ffd uintptr) {
		err := sock.Write(func(sfd uintptr) bool {
			for left > 0 {
				n, err := syscall.Sendfile(int(sfd), int(ffd), &off, int(min(left, 1<<30)))
				if n > 0 {
					left -= int64(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until the socket can take more
				case errors.Is(err, syscall.EINTR):
					continue
				case err != nil:
					sendErr = err
					return true
				case n == 0:
					sendErr = fmt.Errorf("%w: the file section at %d ends %d bytes early", ErrFetchRecords, r.Offset, left)
					return true
				}
			}
			return true
		})
		if sendErr == nil {
			sendErr = err
		}
	})
	if ctlErr != nil {
		return ctlErr
	}
	return sendErr
}
