package socketserver

import (
	"net/netip"
	"testing"
)

// firstAddress picks the address Java's InetAddress.getByName returns by
// default (java.net.preferIPv6Addresses=false), which Kafka's
// ConnectionQuotas applies a host name's override to.
func TestFirstAddress(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		addrs []netip.Addr
		want  netip.Addr
	}{
		{[]netip.Addr{a("10.0.0.1"), a("10.0.0.2")}, a("10.0.0.1")},
		{[]netip.Addr{a("2001:db8::1"), a("10.0.0.2"), a("10.0.0.3")}, a("10.0.0.2")},
		{[]netip.Addr{a("2001:db8::1"), a("2001:db8::2")}, a("2001:db8::1")},
		{[]netip.Addr{a("::ffff:10.0.0.4")}, a("10.0.0.4")},
	} {
		if got := firstAddress(tc.addrs); got != tc.want {
			t.Errorf("firstAddress(%v) = %v, want %v", tc.addrs, got, tc.want)
		}
	}
}
