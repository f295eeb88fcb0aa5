package socketserver

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pires/go-proxyproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/connregistry"
)

// chunkReader gives its bytes a few at a time, as a slow or fragmenting
// sender does: the sizes of its reads cycle through sizes (zero sizes
// skipped).
type chunkReader struct {
	b     []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := len(r.b)
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)])%64 + 1
		r.i++
	}
	n = min(n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// v2Header formats a PROXY v2 header from src to dst with tlvs.
func v2Header(t testing.TB, command proxyproto.ProtocolVersionAndCommand, src, dst string, tlvs ...proxyproto.TLV) []byte {
	t.Helper()
	s, d := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), net.TCPAddrFromAddrPort(netip.MustParseAddrPort(dst))
	h := proxyproto.HeaderProxyFromAddrs(2, s, d)
	h.Command = command
	require.NoError(t, h.SetTLVs(tlvs))
	b, err := h.Format()
	require.NoError(t, err)
	return b
}

// withCRC32C returns a v2 header like v2Header's, its fields followed by a
// PP2_TYPE_CRC32C field holding the header's checksum, computed here as
// the PROXY protocol's specification says: CRC32C (Castagnoli) of the
// whole header with the field's value zeroed, stored big-endian.
func withCRC32C(t testing.TB, command proxyproto.ProtocolVersionAndCommand, src, dst string, tlvs ...proxyproto.TLV) []byte {
	t.Helper()
	b := v2Header(t, command, src, dst, append(slices.Clone(tlvs), proxyproto.TLV{Type: proxyproto.PP2_TYPE_CRC32C, Value: make([]byte, 4)})...)
	binary.BigEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// readHeader runs readProxyHeader over b, delivered in chunks of sizes,
// through a connection's read buffer, and returns its result and what the
// buffer still gives after it.
func readHeader(b, sizes []byte) (proxyHeader, []byte, error) {
	br := bufio.NewReaderSize(&chunkReader{b: b, sizes: sizes}, readBufSize)
	h, err := readProxyHeader(br)
	if err != nil {
		return h, nil, err
	}
	rest, rerr := io.ReadAll(br)
	if rerr != nil {
		return h, nil, rerr
	}
	return h, rest, nil
}

// The header reader takes v1 and v2 headers, whole or in pieces, and
// leaves every byte after the header to the next reader, whether the
// header fits the read buffer or not.
func TestReadProxyHeader(t *testing.T) {
	after := []byte("\x00\x00\x00\x0aKAFKA-REQUEST-BYTES")
	big := bytes.Repeat([]byte{'x'}, 3000)
	crc := withCRC32C(t, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092",
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("kafka.example.com")})
	crcBig := withCRC32C(t, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092", proxyproto.TLV{Type: proxyproto.PP2_TYPE_UNIQUE_ID, Value: big})
	cases := []struct {
		name   string
		header []byte
		want   proxyHeader
	}{
		{"v1 TCP4", []byte("PROXY TCP4 192.0.2.10 10.0.0.1 50123 9092\r\n"),
			proxyHeader{version: 1, source: netip.MustParseAddrPort("192.0.2.10:50123")}},
		{"v1 TCP6", []byte("PROXY TCP6 2001:db8::7 2001:db8::1 40000 9092\r\n"),
			proxyHeader{version: 1, source: netip.MustParseAddrPort("[2001:db8::7]:40000")}},
		{"v1 UNKNOWN", []byte("PROXY UNKNOWN\r\n"), proxyHeader{version: 1, local: true, own: true}},
		{"v1 longest", []byte("PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
			proxyHeader{version: 1, local: true, own: true}},
		{"v2 TCP4", v2Header(t, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092"),
			proxyHeader{version: 2, source: netip.MustParseAddrPort("192.0.2.10:50123")}},
		{"v2 TCP6, v4-mapped", v2Header(t, proxyproto.PROXY, "[::ffff:192.0.2.10]:1", "[2001:db8::1]:9092"),
			proxyHeader{version: 2, source: netip.MustParseAddrPort("192.0.2.10:1")}},
		{"v2 LOCAL", v2Header(t, proxyproto.LOCAL, "192.0.2.10:50123", "10.0.0.1:9092"), proxyHeader{version: 2, local: true, own: true}},
		{"v2 TLVs", v2Header(t, proxyproto.PROXY, "[2001:db8::7]:40000", "[2001:db8::1]:9092",
			proxyproto.TLV{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("kafka.example.com")},
			proxyproto.TLV{Type: proxyproto.PP2_TYPE_NOOP, Value: make([]byte, 5)},
			proxyproto.TLV{Type: 0xEA, Value: []byte("\x01vpce-0abc")},
			proxyproto.TLV{Type: 0xE5, Value: []byte{}}),
			proxyHeader{version: 2, source: netip.MustParseAddrPort("[2001:db8::7]:40000"), tlvs: []connregistry.ProxyTLV{
				{Type: 0x02, Value: []byte("kafka.example.com")}, {Type: 0xEA, Value: []byte("\x01vpce-0abc")}, {Type: 0xE5, Value: []byte{}},
			}}},
		{"v2 CRC32C", crc, proxyHeader{version: 2, source: netip.MustParseAddrPort("192.0.2.10:50123"), tlvs: []connregistry.ProxyTLV{
			{Type: 0x02, Value: []byte("kafka.example.com")}, {Type: 0x03, Value: crc[len(crc)-4:]},
		}}},
		{"v2 CRC32C larger than the read buffer", crcBig, proxyHeader{version: 2, source: netip.MustParseAddrPort("192.0.2.10:50123"), tlvs: []connregistry.ProxyTLV{
			{Type: 0x05, Value: big}, {Type: 0x03, Value: crcBig[len(crcBig)-4:]},
		}}},
		{"v2 larger than the read buffer", v2Header(t, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092",
			proxyproto.TLV{Type: proxyproto.PP2_TYPE_UNIQUE_ID, Value: big}),
			proxyHeader{version: 2, source: netip.MustParseAddrPort("192.0.2.10:50123"), tlvs: []connregistry.ProxyTLV{{Type: 0x05, Value: big}}}},
	}
	for _, tc := range cases {
		for _, sizes := range [][]byte{nil, {0}, {6, 1, 200}} {
			t.Run(tc.name, func(t *testing.T) {
				h, rest, err := readHeader(append(bytes.Clone(tc.header), after...), sizes)
				require.NoError(t, err)
				want := tc.want
				want.size = len(tc.header)
				assert.Equal(t, want, h)
				assert.Equal(t, after, rest, "the bytes after the header")
			})
		}
	}
}

// What is not a valid header is refused with ErrProxyHeader; a peer that
// sends nothing is not refused but gone.
func TestReadProxyHeaderRefuses(t *testing.T) {
	tooLong := v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092")
	binary.BigEndian.PutUint16(tooLong[14:], 4097)
	udp := v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092")
	udp[13] = byte(proxyproto.UDPv4)
	manyTLVs := make([]proxyproto.TLV, maxProxyTLVs+1)
	for i := range manyTLVs {
		manyTLVs[i] = proxyproto.TLV{Type: 0xE1}
	}
	noops := make([]proxyproto.TLV, 100) // padding does not count
	for i := range noops {
		noops[i] = proxyproto.TLV{Type: proxyproto.PP2_TYPE_NOOP}
	}
	badCRC := withCRC32C(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092")
	badCRC[len(badCRC)-1] ^= 1
	badCRCBody := withCRC32C(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092")
	badCRCBody[17] ^= 1 // the client's address, covered by the checksum
	shortCRC := v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092", proxyproto.TLV{Type: proxyproto.PP2_TYPE_CRC32C, Value: []byte{1, 2, 3}})
	bigBadCRC := withCRC32C(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092", proxyproto.TLV{Type: proxyproto.PP2_TYPE_UNIQUE_ID, Value: make([]byte, 3000)})
	bigBadCRC[100] ^= 1
	truncatedTLV := v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092", proxyproto.TLV{Type: 0xE1, Value: []byte("abc")})
	binary.BigEndian.PutUint16(truncatedTLV[14:], binary.BigEndian.Uint16(truncatedTLV[14:])-1)
	truncatedTLV = truncatedTLV[:len(truncatedTLV)-1]

	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"a Kafka frame", []byte("\x00\x00\x00\x0a\x00\x12\x00\x03"), "does not begin with one"},
		{"a TLS hello", []byte("\x16\x03\x01\x02\x00\x01"), "does not begin with one"},
		{"not PROXY", []byte("PRAXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"), "does not begin with one"},
		{"v1 without CR", []byte("PROXY TCP4 192.0.2.1 10.0.0.1 1 2\n"), `must end with \r\n`},
		{"v1 over 107 bytes", []byte("PROXY TCP4 " + strings.Repeat("1", 120) + "\r\n"), "107 bytes"},
		{"v1 bad address", []byte("PROXY TCP4 192.0.2.300 10.0.0.1 1 2\r\n"), "address"},
		{"v1 TCP4 with an IPv6 address", []byte("PROXY TCP4 2001:db8::1 10.0.0.1 1 2\r\n"), "address"},
		{"v1 cut short", []byte("PROXY TCP4 192.0.2.1 10.0"), "incomplete"},
		{"v2 cut short", v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092")[:20], "incomplete"},
		{"v2 signature cut short", []byte("\r\n\r\n\x00\r\n"), "incomplete"},
		{"v2 bad signature", []byte("\r\n\r\n\x00\r\nQUIZ\n\x21\x11\x00\x0c"), "does not begin with one"},
		{"v2 length over 4 KiB", tooLong, "invalid length"},
		{"v2 version 3", append([]byte("\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x0c"), make([]byte, 12)...), "unsupported"},
		{"v2 datagram", udp, "datagram"},
		{"v2 too many TLVs", v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092", manyTLVs...), "more than 32"},
		{"v2 truncated TLV", truncatedTLV, "truncated TLV"},
		{"v2 CRC32C field wrong", badCRC, "CRC32C field says"},
		{"v2 CRC32C over a changed address", badCRCBody, "CRC32C field says"},
		{"v2 CRC32C larger than the read buffer, wrong", bigBadCRC, "CRC32C field says"},
		{"v2 CRC32C of 3 bytes", shortCRC, "CRC32C field of 3 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readHeader(tc.in, nil)
			require.ErrorIs(t, err, ErrProxyHeader)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	h, _, err := readHeader(v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092", noops...), nil)
	require.NoError(t, err, "NOOP padding is not counted")
	assert.Empty(t, h.tlvs)

	_, _, err = readHeader(nil, nil)
	require.ErrorIs(t, err, errProxyNothing)
	assert.NotErrorIs(t, err, ErrProxyHeader)
}

// A v2 header's claimed length costs what arrived, not what was claimed:
// a peer that announces 4 KiB and sends 300 bytes makes the reader hold
// about 600 (the slice doubles as bytes arrive).
func TestReadProxyHeaderMemoryFollowsTheBytes(t *testing.T) {
	h := v2Header(t, proxyproto.PROXY, "192.0.2.10:1", "10.0.0.1:9092", proxyproto.TLV{Type: 0xE1, Value: make([]byte, 4000)})
	sent := h[:300]
	const runs = 200 // an average, so that what other goroutines allocate meanwhile hardly counts
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		br := bufio.NewReaderSize(bytes.NewReader(sent), readBufSize)
		if _, err := readProxyHeader(br); !errors.Is(err, ErrProxyHeader) {
			t.Fatalf("got %v, want ErrProxyHeader", err)
		}
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("%d bytes allocated a run, the read buffer's %d included", perRun, readBufSize)
	assert.Less(t, perRun, uint64(2048), "allocated for a 4 KiB claim of which 300 bytes came")
}

// readProxyV2 never reads past the header it was told the length of: what
// follows stays in the read buffer.
func TestReadProxyV2StopsAtTheHeader(t *testing.T) {
	for _, n := range []int{257, 512, 513, 1000, 4112} {
		in := append(bytes.Repeat([]byte{'h'}, n), "after"...)
		br := bufio.NewReaderSize(&chunkReader{b: in, sizes: []byte{100, 3, 250}}, readBufSize)
		got, err := readProxyV2(br, n)
		require.NoError(t, err)
		assert.Equal(t, in[:n], got)
		rest, err := io.ReadAll(br)
		require.NoError(t, err)
		assert.Equal(t, "after", string(rest))
	}
}

// FuzzProxyHeader feeds the PROXY header reader arbitrary bytes, in
// arbitrary pieces. It must not panic; what it accepts the parser accepts
// as the same header when given the bytes whole (the reader adds only
// buffering and bounds); it reads exactly the header's bytes, leaving the
// rest to the next reader; a header is never longer than the protocol
// allows; and it keeps at most maxProxyTLVs fields, holding no more than
// the header's bytes.
func FuzzProxyHeader(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.10 10.0.0.1 50123 9092\r\n\x00\x00\x00\x01"), []byte{})
	f.Add([]byte("PROXY TCP6 2001:db8::7 2001:db8::1 40000 9092\r\nrest"), []byte{3})
	f.Add([]byte("PROXY UNKNOWN\r\n"), []byte{1})
	f.Add(v2Header(f, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092"), []byte{})
	f.Add(v2Header(f, proxyproto.LOCAL, "192.0.2.10:50123", "10.0.0.1:9092"), []byte{7})
	f.Add(append(v2Header(f, proxyproto.PROXY, "[2001:db8::7]:40000", "[2001:db8::1]:9092",
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("kafka.example.com")},
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_NOOP, Value: make([]byte, 3)},
		proxyproto.TLV{Type: 0xEA, Value: []byte("\x01vpce-0abc")}), "\x16\x03\x01"...), []byte{2, 9})
	f.Add(v2Header(f, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092",
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_SSL, Value: make([]byte, 600)}), []byte{200, 1})
	f.Add([]byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\xff\xff"), []byte{})
	f.Add(withCRC32C(f, proxyproto.PROXY, "192.0.2.10:50123", "10.0.0.1:9092",
		proxyproto.TLV{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte("kafka.example.com")}), []byte{5, 30})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		h, rest, err := readHeader(data, sizes)
		if err != nil {
			if !errors.Is(err, ErrProxyHeader) && !errors.Is(err, errProxyNothing) {
				t.Fatalf("an error that is neither a refusal nor nothing sent: %v", err)
			}
			return
		}
		if h.size <= 0 || h.size > len(data) {
			t.Fatalf("header of %d bytes from %d", h.size, len(data))
		}
		if !bytes.Equal(rest, data[h.size:]) {
			t.Fatalf("the bytes after the %d-byte header changed: %q, want %q", h.size, rest, data[h.size:])
		}
		switch h.version {
		case 1:
			if h.size > proxyV1MaxLen || len(h.tlvs) > 0 {
				t.Fatalf("v1 header of %d bytes, %d fields", h.size, len(h.tlvs))
			}
		case 2:
			if h.size > proxyV2Prefix+int(proxyproto.MaxV2HeaderSize) {
				t.Fatalf("v2 header of %d bytes", h.size)
			}
		default:
			t.Fatalf("version %d", h.version)
		}
		if !h.local && !h.source.IsValid() {
			t.Fatal("no client address and not local")
		}
		if h.source.Addr().Is4In6() {
			t.Fatalf("a mapped client address: %s", h.source)
		}
		held := 0
		for _, tlv := range h.tlvs {
			held += 3 + len(tlv.Value)
			if tlv.Type == uint8(proxyproto.PP2_TYPE_NOOP) {
				t.Fatal("a NOOP field kept")
			}
		}
		if len(h.tlvs) > maxProxyTLVs || held > h.size {
			t.Fatalf("%d fields of %d bytes from a %d-byte header", len(h.tlvs), held, h.size)
		}
		// The parser, given the same bytes whole, reads the same header.
		ph, err := proxyproto.Read(bufio.NewReaderSize(bytes.NewReader(data[:h.size]), 8192))
		if err != nil {
			t.Fatalf("the parser refuses what the reader accepted: %v", err)
		}
		if local := ph.Command.IsLocal() || ph.TransportProtocol == proxyproto.UnixStream; ph.Version != h.version || local != h.local {
			t.Fatalf("the parser read version %d, local %v; the reader %d, %v", ph.Version, local, h.version, h.local)
		}
		if own := ph.Command.IsLocal(); own != h.own {
			t.Fatalf("the parser read a LOCAL command %v; the reader took the balancer's own connection %v", own, h.own)
		}
		if !h.local {
			src, _, ok := ph.TCPAddrs()
			if !ok || netip.AddrPortFrom(src.AddrPort().Addr().Unmap(), src.AddrPort().Port()) != h.source {
				t.Fatalf("the parser read source %v; the reader %s", ph.SourceAddr, h.source)
			}
		}
		// A CRC32C field accepted holds the header's checksum, its fields
		// found here from the front, after the address block.
		if h.version == 2 {
			if err := crc32cFromFront(data[:h.size]); err != nil {
				t.Fatalf("the reader accepted a header whose %v", err)
			}
		}
	})
}

// crc32cFromFront checks the CRC32C fields of v2 header b, walking its
// fields from the end of its address block (12, 36 or 216 bytes after the
// 16-byte prefix for IPv4, IPv6 and Unix addresses).
func crc32cFromFront(b []byte) error {
	at := 16 + map[byte]int{1: 12, 2: 36, 3: 216}[b[13]>>4]
	for at+3 <= len(b) {
		typ, n := b[at], int(binary.BigEndian.Uint16(b[at+1:]))
		at += 3
		if at+n > len(b) {
			return fmt.Errorf("field at %d runs past the header", at-3)
		}
		if typ == byte(proxyproto.PP2_TYPE_CRC32C) {
			if n != 4 {
				return fmt.Errorf("CRC32C field has %d bytes", n)
			}
			zeroed := bytes.Clone(b)
			clear(zeroed[at : at+4])
			if got, want := crc32.Checksum(zeroed, crc32.MakeTable(crc32.Castagnoli)), binary.BigEndian.Uint32(b[at:]); got != want {
				return fmt.Errorf("CRC32C field says %#08x, its checksum is %#08x", want, got)
			}
		}
		at += n
	}
	return nil
}
