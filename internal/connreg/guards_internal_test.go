package connreg

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
)

// entryBytes is the size class of an open connection's entry: the memory
// every connection pays for being listed. It was 480 while the entry held
// a whole connregistry.Info inline, and 288 while it held the client's
// software name and version as two strings, a throttle's bookkeeping
// beside the optional part, and its connection time as a time.Time.
const entryBytes = 256

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
		{"plaintext, no connection time", connregistry.Info{ID: "z", Listener: "CLIENT"}, false},
		{"TLS, SASL and PROXY", full, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Add(r, connregistry.Conn{Info: tc.info}, nil)
			assert.Equal(t, tc.wantExt, e.ext != nil, "the description's optional part")
			assert.Nil(t, e.throttleLocked(), "a throttle's bookkeeping, never throttled")
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

// TestOpenEntriesKeepTheirSlots removes entries from a registry of 1,000
// in several orders, by Remove and Forget, and checks after each that the
// open entries are exactly those not removed, each at the slot it knows,
// and that the registry gives back the slots of a storm that has passed.
func TestOpenEntriesKeepTheirSlots(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name  string
		order func([]*Entry) []*Entry
	}{
		{"oldest first", func(es []*Entry) []*Entry { return es }},
		{"newest first", func(es []*Entry) []*Entry {
			out := slices.Clone(es)
			slices.Reverse(out)
			return out
		}},
		{"shuffled", func(es []*Entry) []*Entry {
			out := slices.Clone(es)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(-1)
			var all []*Entry
			for i := range n {
				all = append(all, Add(r, connregistry.Conn{Info: connregistry.Info{ID: fmt.Sprint(i)}}, nil))
			}
			open := map[*Entry]bool{}
			for _, e := range all {
				open[e] = true
			}
			for i, e := range tc.order(all) {
				if i%2 == 0 {
					e.Remove(time.Now(), connregistry.CloseByClient)
				} else {
					e.Forget()
				}
				e.Forget() // a second time does nothing
				delete(open, e)
				if i%97 != 0 && i != n-1 {
					continue
				}
				r.mu.RLock()
				for slot, e := range r.open {
					require.Equal(t, int32(slot), e.slot, "an entry's slot")
				}
				got := slices.Clone(r.open)
				r.mu.RUnlock()
				require.Len(t, got, len(open), "open entries after %d removals", i+1)
				for _, e := range got {
					require.True(t, open[e], "a removed entry still open")
				}
			}
			r.mu.RLock()
			assert.LessOrEqual(t, cap(r.open), 64, "slots kept after the storm")
			r.mu.RUnlock()
		})
	}
}
