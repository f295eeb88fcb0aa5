package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// state is the cluster's data, kept in memory and shared by every broker of
// the process: topics, their partitions' record batches, and the producer id
// counter. One mutex guards it all; batches never change once stored, so
// readers may keep them after unlocking.
type state struct {
	mu             sync.Mutex
	topics         map[string]*topic
	byID           map[[16]byte]*topic
	appended       chan struct{} // closed, and replaced, whenever records are appended
	lastProducerID int64
	stored         atomic.Int64 // bytes of the batches of every partition, changed under mu
}

type topic struct {
	name        string
	id          [16]byte
	replication int16
	log         logConfig // retention and the largest batch (retention.go)
	partitions  []*partition
}

// partition is one partition's log: its batches from the log start offset
// to the high watermark. Retention drops whole batches from the front.
type partition struct {
	batches       []batch
	size          int64                    // bytes of batches
	logStart      int64                    // the offset of the first record kept
	highWatermark int64                    // the offset the next record gets
	producers     map[int64]*producerState // idempotent producers (producers.go)
}

// batch is one stored record batch (magic 2), its FirstOffset rewritten to
// the offset the partition gave its first record.
type batch struct {
	base int64 // offset of the first record
	next int64 // offset after the last record
	raw  []byte
}

func newState() *state {
	return &state{topics: map[string]*topic{}, byID: map[[16]byte]*topic{}, appended: make(chan struct{})}
}

// topic returns the topic called name, or nil.
func (s *state) topic(name string) *topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topics[name]
}

// topicByID returns the topic with the given id, or nil.
func (s *state) topicByID(id [16]byte) *topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byID[id]
}

// allTopics returns every topic, sorted by name.
func (s *state) allTopics() []*topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// createTopic creates a topic with the given log configuration, or returns
// TOPIC_ALREADY_EXISTS and the existing one. With validateOnly it only
// checks.
func (s *state) createTopic(name string, partitions int32, replication int16, log logConfig, validateOnly bool) (*topic, error) {
	if err := validTopicName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[name]; ok {
		return t, kerr.TopicAlreadyExists
	}
	t := &topic{name: name, replication: replication, log: log, partitions: make([]*partition, partitions)}
	for i := range t.partitions {
		t.partitions[i] = &partition{}
	}
	if validateOnly {
		return t, nil
	}
	for {
		_, _ = rand.Read(t.id[:]) // never fails
		if _, taken := s.byID[t.id]; !taken && t.id != [16]byte{} {
			break
		}
	}
	s.topics[name] = t
	s.byID[t.id] = t
	return t, nil
}

// deleteTopic forgets t and its records, and wakes every fetch waiting for
// data, so that one waiting on t answers UNKNOWN_TOPIC_OR_PARTITION now.
// It returns UNKNOWN_TOPIC_ID when t is no longer there.
func (s *state) deleteTopic(t *topic) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topics[t.name] != t {
		return kerr.UnknownTopicID
	}
	delete(s.topics, t.name)
	delete(s.byID, t.id)
	for _, part := range t.partitions {
		s.stored.Add(-part.size)
	}
	close(s.appended)
	s.appended = make(chan struct{})
	return nil
}

// validTopicName applies Kafka's topic name rules.
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return kerr.InvalidTopicException
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return kerr.InvalidTopicException
		}
	}
	return nil
}

// append stores a produce request's record batches in partition p of t and
// returns the offset of the first record and the log start offset after
// retention.bytes has been applied, or UNKNOWN_TOPIC_OR_PARTITION if t has
// been deleted. The batches must come from
// splitBatches. An idempotent producer's batches are checked first
// (producers.go): a retried batch is not stored again, and its first
// offset is returned as it was; a batch out of sequence is refused with
// the request's other batches. It wakes every fetch waiting for data.
func (s *state) append(t *topic, p int32, batches []batch) (base, logStart int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topics[t.name] != t { // deleted since the request looked it up
		return 0, -1, kerr.UnknownTopicOrPartition
	}
	part := t.partitions[p]
	before := part.size
	var fresh []batch
	for i, b := range batches {
		at, duplicate, err := part.checkProducer(b.raw)
		if err != nil {
			return 0, part.logStart, err
		}
		if duplicate {
			if i == 0 {
				base = at
			}
			continue
		}
		fresh = append(fresh, b)
	}
	if len(fresh) == 0 {
		return base, part.logStart, nil
	}
	if len(fresh) == len(batches) {
		base = part.highWatermark
	}
	for _, b := range fresh {
		count := b.next - b.base
		b.base = part.highWatermark
		b.next = b.base + count
		binary.BigEndian.PutUint64(b.raw[0:8], uint64(b.base)) // FirstOffset
		part.batches = append(part.batches, b)
		part.size += int64(len(b.raw))
		part.highWatermark = b.next
		part.noteProducer(b.raw, b.base)
	}
	part.enforceSize(t.log.retentionBytes)
	s.stored.Add(part.size - before)
	close(s.appended)
	s.appended = make(chan struct{})
	return base, part.logStart, nil
}

// expire applies time retention (retention.ms) to every partition, as
// Kafka's log manager does every log.retention.check.interval.ms.
func (s *state) expire(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.topics {
		for _, part := range t.partitions {
			before := part.size
			part.enforceTime(t.log.retentionMs, now)
			s.stored.Add(part.size - before)
		}
	}
}

// logStart returns partition p's log start offset.
func (s *state) logStart(t *topic, p int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.partitions[p].logStart
}

// readBatches appends to out partition p's batches from offset on, up to
// about maxBytes (at least one batch if maxBytes > 0, as Kafka does, so
// that a large batch never stalls a consumer), and returns them with their
// size, the high watermark and the log start offset. The batches are the
// stored ones, not copies: they never change once stored, so a response
// may carry them by reference. An offset before the log start or beyond
// the high watermark is OFFSET_OUT_OF_RANGE.
func (s *state) readBatches(t *topic, p int32, offset int64, maxBytes int, out [][]byte) (_ [][]byte, size int, hw, logStart int64, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	part := t.partitions[p]
	if offset < part.logStart || offset > part.highWatermark {
		return out, 0, part.highWatermark, part.logStart, kerr.OffsetOutOfRange
	}
	i := sort.Search(len(part.batches), func(i int) bool { return part.batches[i].next > offset })
	for ; i < len(part.batches) && maxBytes > 0; i++ {
		raw := part.batches[i].raw
		if size > 0 && size+len(raw) > maxBytes {
			break
		}
		out = append(out, raw)
		size += len(raw)
	}
	return out, size, part.highWatermark, part.logStart, nil
}

// read is readBatches with the batches joined into out.
func (s *state) read(t *topic, p int32, offset int64, maxBytes int, out []byte) (_ []byte, hw, logStart int64, _ error) {
	batches, _, hw, logStart, err := s.readBatches(t, p, offset, maxBytes, nil)
	for _, b := range batches {
		out = append(out, b...)
	}
	return out, hw, logStart, err
}

// offsetForTimestamp returns the first offset of the first batch of
// partition p holding a record with a timestamp at or after ts, or -1 when
// there is none. Kafka answers with the record's own offset; finding it
// would mean decoding (and decompressing) records, so the example answers
// with an offset at most a batch earlier.
func (s *state) offsetForTimestamp(t *topic, p int32, ts int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range t.partitions[p].batches {
		if maxTimestamp(b.raw) >= ts {
			return b.base
		}
	}
	return -1
}

// highWatermark returns partition p's high watermark.
func (s *state) highWatermark(t *topic, p int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.partitions[p].highWatermark
}

// wakeup returns a channel that is closed when records are next appended.
func (s *state) wakeup() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appended
}

// nextProducerID hands out producer ids in increasing order.
func (s *state) nextProducerID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastProducerID++
	return s.lastProducerID
}

// errCorrupt is CORRUPT_MESSAGE with the reason.
func errCorrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", kerr.CorruptMessage, fmt.Sprintf(format, args...))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// detachSmall copies out of their request's frame, of frameSize bytes,
// the batches that are less than half of it, and leaves the others as
// slices of it. A batch kept as a slice holds its whole frame in memory
// until retention drops it; a frame that carries batches for several
// partitions (a producer writes to all the partitions it has records for
// at once) would be held until the last of them expires, at the pace of
// the slowest partition, and the memory held would outgrow the retention
// without bound. A batch kept as a slice is at least half its frame, so
// the broker holds at most twice the bytes its retention counts; a
// producer writing to one partition, or mostly to one, is stored without
// a copy.
func detachSmall(batches []batch, frameSize int) {
	for i, b := range batches {
		if 2*len(b.raw) < frameSize {
			batches[i].raw = bytes.Clone(b.raw)
		}
	}
}

// batchHeaderSize is the size of a record batch (magic 2) before its
// records.
const batchHeaderSize = 61

// splitBatches splits the records of a produce request into record
// batches, checking each one's framing, magic byte and CRC, and counting its
// records. The batches are slices of the request's frame, not copies: the
// socket server never reuses a frame once it has handed its request over
// (socketserver.Request), so the broker may store them as they arrived
// (and rewrite their FirstOffset in place); detachSmall copies those that
// would hold too much of a frame.
func splitBatches(records []byte) ([]batch, error) {
	if len(records) == 0 {
		return nil, errCorrupt("no record batch")
	}
	var out []batch
	for len(records) > 0 {
		if len(records) < batchHeaderSize {
			return nil, errCorrupt("%d bytes are too few for a record batch", len(records))
		}
		size := 12 + int64(int32(binary.BigEndian.Uint32(records[8:12]))) // FirstOffset, Length, then Length bytes
		if size < batchHeaderSize || size > int64(len(records)) {
			return nil, errCorrupt("record batch length %d does not fit the %d bytes left", size-12, len(records))
		}
		raw := records[:size]
		records = records[size:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			return nil, errCorrupt("record batch: %v", err)
		}
		switch {
		case rb.Magic != 2:
			return nil, fmt.Errorf("%w: record batch magic %d; only magic 2 is stored", kerr.UnsupportedForMessageFormat, rb.Magic)
		case uint32(rb.CRC) != crc32.Checksum(raw[21:], castagnoli):
			return nil, errCorrupt("record batch CRC mismatch")
		case rb.NumRecords <= 0:
			return nil, errCorrupt("record batch with %d records", rb.NumRecords)
		}
		// Offsets count from 0 until append places the batch.
		out = append(out, batch{base: 0, next: int64(rb.NumRecords), raw: raw[:len(raw):len(raw)]})
	}
	return out, nil
}

// errorCode returns the Kafka error code of err: its kerr code, or
// UNKNOWN_SERVER_ERROR.
func errorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}
