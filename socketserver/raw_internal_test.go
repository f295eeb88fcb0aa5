package socketserver

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzProduceAcks: produceAcks never panics, finds acks within the body,
// and finds what kmsg decodes whenever kmsg decodes the body.
func FuzzProduceAcks(f *testing.F) {
	for _, v := range []int16{2, 3, 8, 9, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks = v, 0
		f.Add(v, req.AppendTo(nil))
		txn := "txn"
		req.TransactionID, req.Acks = &txn, -1
		f.Add(v, req.AppendTo(nil))
	}
	f.Add(int16(9), []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(int16(3), []byte{0x80, 0x00})
	f.Add(int16(3), []byte("\xb80000000\xb8000")) // a negative length other than -1 is null too
	f.Fuzz(func(t *testing.T, version int16, body []byte) {
		acks, n, ok := produceAcks(version, body)
		if ok {
			if n < 2 || n > len(body) || int16(binary.BigEndian.Uint16(body[n-2:])) != acks {
				t.Fatalf("acks %d at %d of %d bytes", acks, n, len(body))
			}
		}
		if version < 0 || version > kmsg.NewPtrProduceRequest().MaxVersion() {
			return
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		if req.ReadFrom(body) == nil && (!ok || acks != req.Acks) {
			t.Fatalf("v%d: kmsg reads acks %d, produceAcks %d (ok %v)", version, req.Acks, acks, ok)
		}
	})
}

// FuzzRawHeadLen: rawHeadLen never panics, and a head it measures is
// enough alone: decode parses a streamed frame's head without the rest.
func FuzzRawHeadLen(f *testing.F) {
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0, 1, 'c', 0}, int16(9))
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 1, 0, 3, 'a', 'b', 'c', 9}, int16(9))
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 4, 't', 'x', 'n', 0, 0, 1, 2}, int16(9))
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0xff, 0xff, 0, 1, 2}, int16(9))
	f.Add([]byte{0, 7, 0, 0, 0, 0, 0, 5, 0, 0, 0, 42}, int16(3))
	f.Fuzz(func(t *testing.T, b []byte, flexible int16) {
		n, ok := rawHeadLen(b, flexible)
		if !ok {
			return
		}
		if n < 8 || n > len(b) {
			t.Fatalf("a head of %d bytes of %d", n, len(b))
		}
		if m, ok := rawHeadLen(b[:n], flexible); !ok || m != n {
			t.Fatalf("the head of %d bytes alone measures %d (ok %v)", n, m, ok)
		}
	})
}
