package main

// This file builds Kafka record batches (magic 2, uncompressed) for the
// ceiling servers' logs and the memory scenario's requests.

import (
	"encoding/binary"
	"hash/crc32"
)

// batchHeaderSize is the size of a record batch's header, before its
// records: base offset (8), batch length (4), partition leader epoch (4),
// magic (1), CRC (4), attributes (2), last offset delta (4), base and max
// timestamps (8+8), producer id (8), producer epoch (2), base sequence (4)
// and record count (4).
const batchHeaderSize = 61

// crcOffset is where a batch's CRC-32C starts; it covers everything after
// it.
const crcOffset = 17

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends a record without key or headers, with the given
// offset delta and value, its timestamp that of its batch.
func appendRecord(dst []byte, offsetDelta int, value []byte) []byte {
	dst = binary.AppendVarint(dst, int64(recordBodySize(offsetDelta, len(value))))
	dst = append(dst, 0)                               // attributes
	dst = binary.AppendVarint(dst, 0)                  // timestamp delta
	dst = binary.AppendVarint(dst, int64(offsetDelta)) // offset delta
	dst = binary.AppendVarint(dst, -1)                 // null key
	dst = binary.AppendVarint(dst, int64(len(value)))  // value length
	dst = append(dst, value...)
	return binary.AppendVarint(dst, 0) // no headers
}

// recordBodySize is the size of appendRecord's record after its length.
func recordBodySize(offsetDelta, valueLen int) int {
	return 1 + varintLen(0) + varintLen(offsetDelta) + varintLen(-1) + varintLen(valueLen) + valueLen + varintLen(0)
}

// recordSize is the size of appendRecord's record, its length included.
func recordSize(offsetDelta, valueLen int) int {
	n := recordBodySize(offsetDelta, valueLen)
	return varintLen(n) + n
}

func varintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], int64(n))
}

// appendBatch appends a record batch at baseOffset holding values, stamped
// timestampMs, from no producer (id -1), with its length and CRC-32C set.
func appendBatch(dst []byte, baseOffset int64, timestampMs int64, values [][]byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint64(dst, uint64(baseOffset))
	dst = binary.BigEndian.AppendUint32(dst, 0)                     // batch length, set below
	dst = binary.BigEndian.AppendUint32(dst, 0)                     // partition leader epoch
	dst = append(dst, 2)                                            // magic
	dst = binary.BigEndian.AppendUint32(dst, 0)                     // CRC, set below
	dst = binary.BigEndian.AppendUint16(dst, 0)                     // attributes: no compression
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(values)-1)) // last offset delta
	dst = binary.BigEndian.AppendUint64(dst, uint64(timestampMs))
	dst = binary.BigEndian.AppendUint64(dst, uint64(timestampMs))
	dst = binary.BigEndian.AppendUint64(dst, ^uint64(0)) // producer id -1
	dst = binary.BigEndian.AppendUint16(dst, 0xffff)     // producer epoch -1
	dst = binary.BigEndian.AppendUint32(dst, 0xffffffff) // base sequence -1
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(values)))
	for i, v := range values {
		dst = appendRecord(dst, i, v)
	}
	batch := dst[start:]
	binary.BigEndian.PutUint32(batch[8:], uint32(len(batch)-12))
	binary.BigEndian.PutUint32(batch[crcOffset:], crc32.Checksum(batch[crcOffset+4:], castagnoli))
	return dst
}

// batchRecords returns how many records of valueLen bytes fill a batch of
// at most maxBytes (at least one): what a producer with a batch limit of
// maxBytes sends when records come faster than it can send them.
func batchRecords(valueLen, maxBytes int) int {
	n, size := 0, batchHeaderSize
	for {
		next := size + recordSize(n, valueLen)
		if next > maxBytes && n > 0 {
			return n
		}
		size, n = next, n+1
	}
}
