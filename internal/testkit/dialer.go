package testkit

import (
	"context"
	"net"
	"sync"
)

// RecordingDialer dials TCP and remembers the local address of every
// connection, so that a test can find a client's sockets in a listing. Its
// Dial is a kgo.Dialer.
type RecordingDialer struct {
	mu    sync.Mutex
	local []string
}

// Dial dials like a net.Dialer and records the connection's local address.
func (d *RecordingDialer) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, host)
	if err == nil {
		d.mu.Lock()
		d.local = append(d.local, c.LocalAddr().String())
		d.mu.Unlock()
	}
	return c, err
}

// Addrs returns the local addresses of the connections dialed so far.
func (d *RecordingDialer) Addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.local...)
}
