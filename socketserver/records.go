package socketserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchRecords are the record batches of one partition of a Fetch
// response ([FetchResponse]), carried by reference: the server writes them
// to the socket after the bytes that precede them, without copying them
// into its response buffer, as Kafka writes a Fetch response's
// MemoryRecords and FileRecords (zero-copy fetch). Package
// socketserver/records reads the records of a Produce request. Set Batches, or File with Offset and Length, not both.
type FetchRecords struct {
	// Batches are record batches in memory, written in order with vectored
	// I/O (writev) on a plaintext listener. The host must not change them
	// until the response has been written (Request.Respond returns before
	// that; treat them as the server's until the connection's next request
	// is read, or never change them, as a log does).
	Batches [][]byte
	// File is read from Offset for Length bytes: on a plaintext listener
	// with sendfile, from the file's page cache to the socket without
	// passing through the process. The server reads at Offset explicitly
	// and never moves the file's own offset, so one *os.File may serve
	// many responses at once. A file shorter than Offset+Length when it is
	// written closes the connection, as Kafka's FileRecords does: the
	// frame's length has been sent already.
	File   *os.File
	Offset int64
	Length int64
}

// Len is the number of bytes the records take on the wire.
func (r *FetchRecords) Len() int64 {
	if r.File != nil {
		return r.Length
	}
	var n int64
	for _, b := range r.Batches {
		n += int64(len(b))
	}
	return n
}

// ErrFetchRecords is wrapped by the error of Request.Respond for a
// [FetchResponse] whose Records do not fit its partitions, and by the
// write error of a file section that could not be read whole.
var ErrFetchRecords = errors.New("socketserver: invalid response records")

// FetchResponse is a Fetch response whose partitions' record batches are
// [FetchRecords] the server writes by reference, instead of copying each
// partition's RecordBatches into the response. Respond with it as with
// any response; the bytes on the wire are exactly those kmsg would encode
// for the same response with the records in RecordBatches.
//
// Records[t][p] are the records of Topics[t].Partitions[p], whose
// RecordBatches field is then ignored; a partition without an entry (a
// shorter slice, or a zero Records) sends its RecordBatches as kmsg would.
type FetchResponse struct {
	*kmsg.FetchResponse
	Records [][]FetchRecords
}

// records returns the records of partition p of topic t, nil when it has
// none by reference.
func (f *FetchResponse) records(t, p int) *FetchRecords {
	if t >= len(f.Records) || p >= len(f.Records[t]) {
		return nil
	}
	r := &f.Records[t][p]
	if r.File == nil && r.Batches == nil {
		return nil
	}
	return r
}

// withRecords is how many partitions have records by reference: the cuts
// of the response, allocated at once.
func (f *FetchResponse) withRecords() int {
	n := 0
	for t := range f.Records {
		for p := range f.Records[t] {
			if f.records(t, p) != nil {
				n++
			}
		}
	}
	return n
}

// check reports records that cannot be written: a file section with a
// negative offset or length, or both Batches and File set.
func (f *FetchResponse) check() error {
	for t := range f.Records {
		if t >= len(f.Topics) || len(f.Records[t]) > len(f.Topics[t].Partitions) {
			return fmt.Errorf("%w: Records[%d] has no partitions to match in Topics", ErrFetchRecords, t)
		}
		for p := range f.Records[t] {
			r := &f.Records[t][p]
			switch {
			case r.File != nil && r.Batches != nil:
				return fmt.Errorf("%w: Records[%d][%d] sets both Batches and File", ErrFetchRecords, t, p)
			case r.File != nil && (r.Offset < 0 || r.Length < 0):
				return fmt.Errorf("%w: Records[%d][%d] has a negative file offset or length", ErrFetchRecords, t, p)
			case r.Len() > 1<<31-1:
				return fmt.Errorf("%w: Records[%d][%d] are larger than 2 GiB", ErrFetchRecords, t, p)
			}
		}
	}
	return nil
}

// segmented is an encoded response whose record batches stay where the
// host keeps them: buf holds every other byte, and each cut is where a
// partition's records go, in order.
type segmented struct {
	buf  []byte
	cuts []recordsCut
	size int64 // len(buf) plus the records' length
}

type recordsCut struct {
	at      int // offset in buf
	records *FetchRecords
}

// appendFetchResponse encodes f's body after dst (which holds the frame's
// size, correlation id and header so far) as kmsg's FetchResponse.AppendTo
// does, field for field, except that each partition with Records gets its
// length prefix here and a cut where its bytes go.
func appendFetchResponse(dst []byte, f *FetchResponse) segmented {
	v := f.FetchResponse
	version := v.Version
	flexible := version >= 12
	s := segmented{cuts: make([]recordsCut, 0, f.withRecords())}
	if version >= 1 {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.ThrottleMillis))
	}
	if version >= 7 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(v.ErrorCode))
		dst = binary.BigEndian.AppendUint32(dst, uint32(v.SessionID))
	}
	dst = appendArrayLen(dst, len(v.Topics), flexible)
	for ti := range v.Topics {
		t := &v.Topics[ti]
		if version <= 12 {
			dst = appendString(dst, t.Topic, flexible)
		}
		if version >= 13 {
			dst = append(dst, t.TopicID[:]...)
		}
		dst = appendArrayLen(dst, len(t.Partitions), flexible)
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			dst = binary.BigEndian.AppendUint32(dst, uint32(p.Partition))
			dst = binary.BigEndian.AppendUint16(dst, uint16(p.ErrorCode))
			dst = binary.BigEndian.AppendUint64(dst, uint64(p.HighWatermark))
			if version >= 4 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.LastStableOffset))
			}
			if version >= 5 {
				dst = binary.BigEndian.AppendUint64(dst, uint64(p.LogStartOffset))
			}
			if version >= 4 {
				dst = appendNullableArrayLen(dst, len(p.AbortedTransactions), p.AbortedTransactions == nil, flexible)
				for i := range p.AbortedTransactions {
					a := &p.AbortedTransactions[i]
					dst = binary.BigEndian.AppendUint64(dst, uint64(a.ProducerID))
					dst = binary.BigEndian.AppendUint64(dst, uint64(a.FirstOffset))
					if flexible {
						dst = appendTagsWithCount(dst, &a.UnknownTags)
					}
				}
			}
			if version >= 11 {
				dst = binary.BigEndian.AppendUint32(dst, uint32(p.PreferredReadReplica))
			}
			if r := f.records(ti, pi); r != nil {
				n := r.Len()
				if flexible {
					dst = binary.AppendUvarint(dst, uint64(n)+1)
				} else {
					dst = binary.BigEndian.AppendUint32(dst, uint32(n))
				}
				s.cuts = append(s.cuts, recordsCut{at: len(dst), records: r})
				s.size += n
			} else {
				dst = appendNullableBytes(dst, p.RecordBatches, flexible)
			}
			if flexible {
				dst = appendPartitionTags(dst, p)
			}
		}
		if flexible {
			dst = appendTagsWithCount(dst, &t.UnknownTags)
		}
	}
	if flexible {
		known := 0
		if len(v.Brokers) > 0 {
			known = 1
		}
		dst = binary.AppendUvarint(dst, uint64(known+v.UnknownTags.Len()))
		if known == 1 {
			var inner []byte
			inner = appendArrayLen(inner, len(v.Brokers), true)
			for i := range v.Brokers {
				b := &v.Brokers[i]
				inner = binary.BigEndian.AppendUint32(inner, uint32(b.NodeID))
				inner = appendString(inner, b.Host, true)
				inner = binary.BigEndian.AppendUint32(inner, uint32(b.Port))
				inner = appendNullableString(inner, b.Rack, true)
				inner = appendTagsWithCount(inner, &b.UnknownTags)
			}
			dst = appendTag(dst, 0, inner)
		}
		dst = appendTagsEach(dst, &v.UnknownTags)
	}
	s.buf = dst
	s.size += int64(len(dst))
	return s
}

// appendPartitionTags appends a flexible Fetch partition's tag section:
// DivergingEpoch (0), CurrentLeader (1) and SnapshotId (2) when they are
// not their defaults, then unknown tags, as kmsg orders them.
func appendPartitionTags(dst []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	var tags [3][]byte
	known := 0
	if d := &p.DivergingEpoch; d.Epoch != -1 || d.EndOffset != -1 || d.UnknownTags.Len() > 0 {
		b := binary.BigEndian.AppendUint32(nil, uint32(d.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(d.EndOffset))
		tags[0] = appendTagsWithCount(b, &d.UnknownTags)
		known++
	}
	if l := &p.CurrentLeader; l.LeaderID != -1 || l.LeaderEpoch != -1 || l.UnknownTags.Len() > 0 {
		b := binary.BigEndian.AppendUint32(nil, uint32(l.LeaderID))
		b = binary.BigEndian.AppendUint32(b, uint32(l.LeaderEpoch))
		tags[1] = appendTagsWithCount(b, &l.UnknownTags)
		known++
	}
	if sn := &p.SnapshotID; sn.EndOffset != -1 || sn.Epoch != -1 || sn.UnknownTags.Len() > 0 {
		b := binary.BigEndian.AppendUint64(nil, uint64(sn.EndOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(sn.Epoch))
		tags[2] = appendTagsWithCount(b, &sn.UnknownTags)
		known++
	}
	dst = binary.AppendUvarint(dst, uint64(known+p.UnknownTags.Len()))
	for key, val := range tags {
		if val != nil {
			dst = appendTag(dst, uint32(key), val)
		}
	}
	return appendTagsEach(dst, &p.UnknownTags)
}

func appendTag(dst []byte, key uint32, val []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(key))
	dst = binary.AppendUvarint(dst, uint64(len(val)))
	return append(dst, val...)
}

// appendTagsWithCount appends a tag section of unknown tags alone.
func appendTagsWithCount(dst []byte, t *kmsg.Tags) []byte {
	dst = binary.AppendUvarint(dst, uint64(t.Len()))
	return appendTagsEach(dst, t)
}

func appendTagsEach(dst []byte, t *kmsg.Tags) []byte {
	t.Each(func(key uint32, val []byte) { dst = appendTag(dst, key, val) })
	return dst
}

func appendArrayLen(dst []byte, n int, flexible bool) []byte {
	if flexible {
		return binary.AppendUvarint(dst, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(n))
}

func appendNullableArrayLen(dst []byte, n int, isNil, flexible bool) []byte {
	switch {
	case isNil && flexible:
		return append(dst, 0)
	case isNil:
		return binary.BigEndian.AppendUint32(dst, 0xffffffff)
	}
	return appendArrayLen(dst, n, flexible)
}

func appendString(dst []byte, s string, flexible bool) []byte {
	if flexible {
		dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	}
	return append(dst, s...)
}

func appendNullableString(dst []byte, s *string, flexible bool) []byte {
	switch {
	case s == nil && flexible:
		return append(dst, 0)
	case s == nil:
		return binary.BigEndian.AppendUint16(dst, 0xffff)
	}
	return appendString(dst, *s, flexible)
}

func appendNullableBytes(dst, b []byte, flexible bool) []byte {
	switch {
	case b == nil && flexible:
		return append(dst, 0)
	case b == nil:
		return binary.BigEndian.AppendUint32(dst, 0xffffffff)
	case flexible:
		dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	default:
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	}
	return append(dst, b...)
}
