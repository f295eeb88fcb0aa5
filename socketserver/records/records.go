// Package records reads the record batches of a Produce request's
// partitions: each batch's length, magic and CRC-32C checked, its records
// decompressed (gzip, snappy, lz4 and zstd, with franz-go's
// kgo.DefaultDecompressor) and decoded, with their offsets and timestamps.
//
// It is a package of its own because it links kgo and its compression
// libraries: a host that imports socketserver alone pays for none of
// them.
//
//	for _, t := range req.Topics {
//		for _, p := range t.Partitions {
//			var recs []records.Record
//			var err error
//			for rec, e := range records.All(p.Records) {
//				if err = e; err != nil {
//					break
//				}
//				recs = append(recs, rec)
//			}
//			if err != nil {
//				// answer the partition with records.ErrorCode(err)
//				continue
//			}
//			store(t.Topic, p.Partition, recs) // all of the partition's, or none
//		}
//	}
//
// A batch's Raw bytes, and the keys, values and headers of an uncompressed
// batch's records, share memory with the request's frame: a host that
// keeps them keeps the frame (see socketserver.Request.Body).
// Decompressed records are new memory; kgo's default decompressor bounds
// a batch at 2 GiB decompressed, so a host that accepts producers it does
// not trust also bounds what a batch may hold by its own rule.
package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"iter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchHeaderSize is the size of a record batch without records (Kafka's
// RECORD_BATCH_OVERHEAD): FirstOffset to NumRecords.
const batchHeaderSize = 61

// crcStart is where the bytes the CRC-32C covers start: Attributes.
const crcStart = 21

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// decompressor is safe for concurrent use: kgo's keeps its decoders in
// pools.
var decompressor = kgo.DefaultDecompressor()

// Error is the error of a batch that cannot be read: Code is the error a
// Kafka broker answers the partition with (CORRUPT_MESSAGE, or
// INVALID_RECORD for a batch that is whole but not of magic 2 or does not
// hold what it says).
type Error struct {
	// Batch is the index of the batch in the partition's records.
	Batch int
	// Code is Kafka's error for the partition.
	Code *kerr.Error
	// Reason says what is wrong, without the batch's bytes.
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("records: batch %d: %s: %s", e.Batch, e.Code.Message, e.Reason)
}

// Unwrap returns Code, so that errors.Is(err, kerr.CorruptMessage) holds.
func (e *Error) Unwrap() error { return e.Code }

// ErrorCode returns the Kafka error code to answer a partition whose
// records gave err: Error's Code, or CORRUPT_MESSAGE for any other error.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code.Code
	}
	return kerr.CorruptMessage.Code
}

// Batch is one record batch, checked: its length fits, its magic is 2 and
// its CRC-32C matches.
type Batch struct {
	// Header is the batch as kmsg reads it. Header.Records holds the
	// records as they came, compressed if the batch is.
	Header kmsg.RecordBatch
	// Raw is the whole batch, to store or forward as it is.
	Raw []byte

	index int
}

// Compression returns the batch's compression codec, from its attributes:
// kgo.CodecNone, CodecGzip, CodecSnappy, CodecLz4 or CodecZstd.
func (b *Batch) Compression() kgo.CompressionCodecType {
	return kgo.CompressionCodecType(b.Header.Attributes & 0x07)
}

// Record is one record of a batch, with its offset and timestamp worked
// out from the batch's. In a Produce request a batch's FirstOffset is 0, so
// Offset is the record's place in its batch until the host assigns the
// batch its offsets.
type Record struct {
	kmsg.Record
	Offset    int64
	Timestamp time.Time
}

// Batches iterates over the record batches of records, a Produce
// partition's Records: each batch's length must fit what is left, its
// magic must be 2 (Produce v3 and later carry no other) and its CRC-32C
// must match. An empty or null records yields nothing. At the first batch
// that fails it yields a nil Batch and an [*Error], and stops.
func Batches(records []byte) iter.Seq2[*Batch, error] {
	return func(yield func(*Batch, error) bool) {
		for i := 0; len(records) > 0; i++ {
			b, err := readBatch(i, records)
			if err != nil {
				yield(nil, err)
				return
			}
			records = records[len(b.Raw):]
			if !yield(b, nil) {
				return
			}
		}
	}
}

func readBatch(i int, records []byte) (*Batch, error) {
	fail := func(code *kerr.Error, format string, args ...any) (*Batch, error) {
		return nil, &Error{Batch: i, Code: code, Reason: fmt.Sprintf(format, args...)}
	}
	if len(records) < batchHeaderSize {
		return fail(kerr.CorruptMessage, "%d bytes are too few for a record batch", len(records))
	}
	size := 12 + int64(int32(binary.BigEndian.Uint32(records[8:12]))) // FirstOffset, Length, then Length bytes
	if size < batchHeaderSize || size > int64(len(records)) {
		return fail(kerr.CorruptMessage, "length %d does not fit the %d bytes left", size-12, len(records))
	}
	raw := records[:size:size]
	if magic := int8(raw[16]); magic != 2 {
		return fail(kerr.InvalidRecord, "magic %d: only magic 2 record batches are read", magic)
	}
	if got, want := crc32.Checksum(raw[crcStart:], castagnoli), binary.BigEndian.Uint32(raw[17:21]); got != want {
		return fail(kerr.CorruptMessage, "CRC-32C %#08x, the batch says %#08x", got, want)
	}
	b := &Batch{Raw: raw, index: i}
	if err := b.Header.ReadFrom(raw); err != nil {
		return fail(kerr.CorruptMessage, "header: %v", err)
	}
	return b, nil
}

// Records decompresses the batch's records and iterates over them, in
// order. There must be exactly as many as the batch's NumRecords says, and
// nothing after them. At the first that fails it yields a zero Record and
// an [*Error], and stops.
func (b *Batch) Records() iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		fail := func(code *kerr.Error, format string, args ...any) {
			yield(Record{}, &Error{Batch: b.index, Code: code, Reason: fmt.Sprintf(format, args...)})
		}
		codec := b.Compression()
		if codec > kgo.CodecZstd {
			fail(kerr.CorruptMessage, "unknown compression codec %d", codec)
			return
		}
		src, err := decompressor.Decompress(b.Header.Records, codec)
		if err != nil {
			fail(kerr.CorruptMessage, "decompressing %d bytes: %v", len(b.Header.Records), err)
			return
		}
		logAppendTime := b.Header.Attributes&0x08 != 0
		for n := range b.Header.NumRecords {
			length, size := binary.Varint(src)
			if size <= 0 || length < 0 || length > int64(len(src)-size) {
				fail(kerr.CorruptMessage, "record %d of %d: its length does not fit the %d bytes left", n, b.Header.NumRecords, len(src))
				return
			}
			var r Record
			if err := r.Record.ReadFrom(src[:size+int(length)]); err != nil {
				fail(kerr.CorruptMessage, "record %d of %d: %v", n, b.Header.NumRecords, err)
				return
			}
			src = src[size+int(length):]
			r.Offset = b.Header.FirstOffset + int64(r.OffsetDelta)
			ms := b.Header.FirstTimestamp + r.TimestampDelta64
			if logAppendTime {
				ms = b.Header.MaxTimestamp
			}
			r.Timestamp = time.UnixMilli(ms)
			if !yield(r, nil) {
				return
			}
		}
		if len(src) > 0 {
			fail(kerr.InvalidRecord, "%d bytes after the %d records the batch says it holds", len(src), b.Header.NumRecords)
		}
	}
}

// All iterates over every record of every batch of records, a Produce
// partition's Records: [Batches], then each batch's [Batch.Records]. At
// the first error it yields a zero Record and the error, and stops; the
// records before it were read whole, but a host storing a partition's
// records stores none of them then, as Kafka appends a partition's batches
// all or none.
func All(records []byte) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		for b, err := range Batches(records) {
			if err != nil {
				yield(Record{}, err)
				return
			}
			for r, err := range b.Records() {
				if !yield(r, err) || err != nil {
					return
				}
			}
		}
	}
}
