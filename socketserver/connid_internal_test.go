package socketserver

import (
	"net"
	"net/netip"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Connection ids write addresses as Java's InetAddress.getHostAddress
// does, which Kafka's ServerConnectionId.generateConnectionId uses:
// Inet6Address writes all eight groups in lower-case hex without leading
// zeros and never compresses (ServerConnectionIdTest parses
// "2001:db8:0:0:0:0:0:1:9092-127.0.0.1:9093-1-2"); a scoped address gets
// its numeric scope id, as the JDK sets it from sin6_scope_id; an
// IPv4-mapped address is the IPv4 address (NET_SockaddrToInetAddress).
func TestConnectionIDAddressFormat(t *testing.T) {
	tests := []struct {
		name, addr, want string
	}{
		{"IPv4", "127.0.0.1", "127.0.0.1"},
		{"IPv4-mapped IPv6", "::ffff:10.1.2.3", "10.1.2.3"},
		{"loopback", "::1", "0:0:0:0:0:0:0:1"},
		{"unspecified", "::", "0:0:0:0:0:0:0:0"},
		{"compressed run in the middle", "2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"},
		{"leading zeros and upper case", "2001:0DB8:000A:0001:0000:0000:0000:00FF", "2001:db8:a:1:0:0:0:ff"},
		{"all groups set", "fedc:ba98:7654:3210:fedc:ba98:7654:3210", "fedc:ba98:7654:3210:fedc:ba98:7654:3210"},
		{"IPv4-compatible (not mapped) stays IPv6", "::1.2.3.4", "0:0:0:0:0:0:102:304"},
		{"numeric zone", "fe80::1%2", "fe80:0:0:0:0:0:0:1%2"},
		{"zone naming no interface", "fe80::1%nosuchif0", "fe80:0:0:0:0:0:0:1%nosuchif0"},
	}
	if ifs, err := net.Interfaces(); err == nil && len(ifs) > 0 {
		// Go names a socket's zone by its interface; Java writes its index.
		tests = append(tests, struct{ name, addr, want string }{
			"zone naming an interface", "fe80::a:1%" + ifs[0].Name, "fe80:0:0:0:0:0:a:1%" + strconv.Itoa(ifs[0].Index),
		})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendHostAddress(nil, netip.MustParseAddr(tc.addr)))
			assert.Equal(t, tc.want, got)
		})
	}

	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	id := connectionID(tcp("[::1]:9092"), tcp("[2001:db8::7]:50123"), 3, 7)
	assert.Equal(t, "0:0:0:0:0:0:0:1:9092-2001:db8:0:0:0:0:0:7:50123-3-7", id)
	id = connectionID(tcp("127.0.0.1:9092"), tcp("127.0.0.2:40000"), 0, 2147483646)
	assert.Equal(t, "127.0.0.1:9092-127.0.0.2:40000-0-2147483646", id)
}
