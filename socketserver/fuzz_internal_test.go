package socketserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzReadFrame: readFrame never panics, never returns more than the limit,
// and returns exactly the announced bytes, read whole or a byte at a time.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3}, int32(100))
	f.Add([]byte{0, 0, 0, 3, 1, 2}, int32(100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, int32(100))
	f.Add([]byte{0, 0, 0, 4, 1, 2, 3, 4}, int32(4))
	f.Add([]byte{0, 0, 0, 5, 1, 2, 3, 4, 5}, int32(4))
	f.Add([]byte{0, 1, 0, 0, 9}, int32(1<<20))
	f.Add([]byte{}, int32(1))
	f.Fuzz(func(t *testing.T, data []byte, limit int32) {
		if limit < 1 {
			limit = -limit
		}
		if limit < 1 {
			limit = 1
		}
		for _, byteAtATime := range []bool{false, true} {
			var r io.Reader = bytes.NewReader(data)
			if byteAtATime {
				r = iotest.OneByteReader(r)
			}
			var sb [4]byte
			frame, err := readFrame(r, &sb, limit)
			if len(data) < 4 {
				if err == nil {
					t.Fatalf("a frame from %d bytes", len(data))
				}
				continue
			}
			size := int32(binary.BigEndian.Uint32(data))
			switch {
			case size < 0 || size > limit:
				if !errors.Is(err, ErrFrameSize) {
					t.Fatalf("size %d, limit %d: err %v, want ErrFrameSize", size, limit, err)
				}
			case int(size) > len(data)-4:
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("size %d with %d bytes: err %v, want io.ErrUnexpectedEOF", size, len(data)-4, err)
				}
			default:
				if err != nil {
					t.Fatalf("size %d with %d bytes: %v", size, len(data)-4, err)
				}
				if !bytes.Equal(frame, data[4:4+size]) {
					t.Fatalf("frame %x, want %x", frame, data[4:4+size])
				}
			}
		}
	})
}

// FuzzParseHeaderPrefix: parseHeaderPrefix never panics and a header it
// accepts re-encodes to the bytes it consumed.
func FuzzParseHeaderPrefix(f *testing.F) {
	f.Add([]byte{0, 3, 0, 9, 0, 0, 0, 1, 0, 4, 't', 'e', 's', 't', 0})
	f.Add([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 1, 2})
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 5, 0, 0, 0, 42})
	f.Add([]byte{0, 7, 0, 1, 0, 0, 0, 5, 0, 0})
	f.Add([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'a'})
	f.Add([]byte{0, 3, 0})
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, rest, err := parseHeaderPrefix(frame)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v does not wrap ErrMalformedHeader", err)
			}
			return
		}
		b := binary.BigEndian.AppendUint16(nil, uint16(h.key))
		b = binary.BigEndian.AppendUint16(b, uint16(h.version))
		b = binary.BigEndian.AppendUint32(b, uint32(h.correlationID))
		switch {
		case h.key == 7 && h.version == 0:
			if !h.nullClientID || h.clientID != "" {
				t.Fatal("ControlledShutdown v0 with a client id")
			}
		case h.nullClientID:
			if h.clientID != "" {
				t.Fatalf("a null client id reads as %q", h.clientID)
			}
			b = append(b, 0xff, 0xff)
		default:
			b = binary.BigEndian.AppendUint16(b, uint16(len(h.clientID)))
			b = append(b, h.clientID...)
		}
		b = append(b, rest...)
		if !bytes.Equal(b, frame) {
			t.Fatalf("re-encoded %x, parsed from %x", b, frame)
		}
	})
}

// FuzzSkipTags: skipTags never panics, returns a suffix of its input, and
// on a tag section built from the input (tags of the given sizes, then
// trailing bytes) returns exactly the trailing bytes.
func FuzzSkipTags(f *testing.F) {
	f.Add([]byte{0}, []byte{}, []byte{})
	f.Add([]byte{0, 1, 2, 3}, []byte{3}, []byte{1, 2})
	f.Add([]byte{1, 0, 3, 'a', 'b', 'c', 9}, []byte{0, 200}, []byte{0})
	f.Add([]byte{2, 5, 0, 0xac, 0x02, 2, 0xff, 0xff}, []byte{1, 2, 3}, []byte{})
	f.Add([]byte{2}, []byte{}, []byte{7})
	f.Add([]byte{1, 0, 100, 1}, []byte{128}, []byte{0x80})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, raw, tagSizes, trailing []byte) {
		rest, err := skipTags(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("error %v does not wrap ErrMalformedHeader", err)
			}
		} else if len(rest) >= len(raw) || !bytes.Equal(rest, raw[len(raw)-len(rest):]) {
			t.Fatalf("rest %x is not a proper suffix of %x", rest, raw)
		}

		if len(tagSizes) > 64 {
			tagSizes = tagSizes[:64]
		}
		section := binary.AppendUvarint(nil, uint64(len(tagSizes)))
		for i, size := range tagSizes {
			section = binary.AppendUvarint(section, uint64(i)*37)
			section = binary.AppendUvarint(section, uint64(size)*3)
			section = append(section, bytes.Repeat([]byte{0xaa}, int(size)*3)...)
		}
		in := append(section, trailing...)
		rest, err = skipTags(in)
		if err != nil {
			t.Fatalf("well-formed section %x: %v", section, err)
		}
		if !bytes.Equal(rest, trailing) {
			t.Fatalf("rest %x, want %x", rest, trailing)
		}
		// Any truncation of the section is refused.
		if len(section) > 1 {
			cut := len(raw) % len(section)
			if cut == 0 {
				cut = 1
			}
			if _, err := skipTags(section[:cut]); err == nil && cut < len(section) {
				// A shorter prefix can only be well formed if it ends on a
				// tag boundary with a smaller count, which the count forbids.
				t.Fatalf("truncated section %x accepted", section[:cut])
			}
		}
	})
}
