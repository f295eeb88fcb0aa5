//go:build !linux

package socketserver

import (
	"fmt"
	"io"
	"net"
)

// sendFileSection copies r's file section to tc where sendfile with an
// explicit offset is not available.
func sendFileSection(tc *net.TCPConn, r *FetchRecords) error {
	n, err := io.Copy(tc, io.NewSectionReader(r.File, r.Offset, r.Length))
	if err == nil && n < r.Length {
		err = fmt.Errorf("%w: the file section at %d holds %d of its %d bytes", ErrFetchRecords, r.Offset, n, r.Length)
	}
	return err
}
