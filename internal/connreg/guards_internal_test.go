package connreg

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// entryBytes is the size class of an open connection's entry: the memory
// every connection pays for being listed. It was 480 while the entry held
// a whole connregistry.Info inline.
const entryBytes = 288

// TestGuardEntrySize holds an entry to its size class, and checks that a
// plaintext connection's entry makes none of the parts that only some
// connections need, while a TLS, SASL or PROXY connection's keeps every
// field of its description.
func TestGuardEntrySize(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Entry{}), uintptr(entryBytes), "an entry's bytes: over its size class")

	r := New(-1)
	at := time.Unix(1_800_000_000, 0)
	plain := connregistry.Info{ID: "p", Listener: "CLIENT", SecurityProtocol: protocolmap.Plaintext,
		Principal: connregistry.Anonymous(), ClientAddr: netip.MustParseAddrPort("127.0.0.1:5"), ConnectedAt: at}
	full := plain
	full.ID, full.SecurityProtocol = "f", protocolmap.SASLSSL
	full.TLSVersion, full.CipherSuite, full.ServerName = 0x0304, 0x1301, "broker-1"
	full.ProxyAddr = netip.MustParseAddrPort("10.0.0.1:9")
	full.ProxyTLVs = []connregistry.ProxyTLV{{Type: 2, Value: []byte("broker-1")}}
	full.SASLMechanism, full.AuthenticatedAt, full.SessionExpiry = "PLAIN", at.Add(time.Second), at.Add(time.Hour)
	full.ClientSoftwareName, full.ClientSoftwareVersion = "kgo", "1.0"

	for _, tc := range []struct {
		name    string
		info    connregistry.Info
		wantExt bool
	}{
		{"plaintext", plain, false},
		{"TLS, SASL and PROXY", full, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Add(r, connregistry.Conn{Info: tc.info}, nil)
			assert.Equal(t, tc.wantExt, e.ext != nil, "the description's optional part")
			assert.Nil(t, e.throttle, "a throttle's bookkeeping, never throttled")
			assert.Equal(t, tc.info, e.Info(), "the description, whole")
			want := tc.info
			want.ClientSoftwareName, want.ClientSoftwareVersion = "librdkafka", "2.6.1"
			want.Principal = connregistry.Principal{Type: "User", Name: "alice"}
			e.SetClientSoftware([]byte(want.ClientSoftwareName), []byte(want.ClientSoftwareVersion))
			e.SetPrincipal(want.Principal)
			assert.Equal(t, tc.wantExt, e.ext != nil, "the optional part, after setters that need none")
			assert.Equal(t, want, e.Info(), "the description after the setters")
			if tc.wantExt {
				want.TLSVersion, want.CipherSuite, want.ServerName = 0x0303, 0xc02f, "broker-2"
				want.SASLMechanism, want.AuthenticatedAt, want.SessionExpiry = "SCRAM-SHA-512", at.Add(time.Minute), time.Time{}
				e.SetTLS(want.TLSVersion, want.CipherSuite, want.ServerName)
				e.SetAuthenticated(want.SASLMechanism, want.AuthenticatedAt, want.SessionExpiry)
				assert.Equal(t, want, e.Info(), "the description after the TLS and SASL setters")
			}
			e.Forget()
		})
	}
}
