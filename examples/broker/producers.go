package main

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Idempotent producers, as Kafka's ProducerStateManager checks them: each
// partition remembers, per producer id, the epoch, the last sequence
// number appended and the last few batches, so that a retried batch is
// answered with its first offsets instead of being stored twice, and a
// batch that would land out of order (its predecessor was lost, and a
// client with several requests in flight sent it anyway) is refused with
// OUT_OF_ORDER_SEQUENCE_NUMBER, which makes the client resend in order.

// producerBatches is how many of a producer's last batches a partition
// remembers for duplicates: Kafka's five, as many as a client may have in
// flight.
const producerBatches = 5

// producerState is one producer's state in one partition.
type producerState struct {
	epoch   int16
	lastSeq int32
	recent  [producerBatches]appendedBatch // a ring
	next    int                            // recent's next slot
}

// appendedBatch is a batch a producer appended: its sequence numbers and
// where it went.
type appendedBatch struct {
	firstSeq, lastSeq int32
	base              int64
	valid             bool
}

// The producer fields of a record batch (magic 2) header.
func batchProducerID(raw []byte) int64 { return int64(binary.BigEndian.Uint64(raw[43:51])) }
func batchEpoch(raw []byte) int16      { return int16(binary.BigEndian.Uint16(raw[51:53])) }
func batchFirstSeq(raw []byte) int32   { return int32(binary.BigEndian.Uint32(raw[53:57])) }
func batchLastSeq(raw []byte) int32 {
	return incSeq(batchFirstSeq(raw), int32(binary.BigEndian.Uint32(raw[23:27]))) // + LastOffsetDelta
}

// incSeq adds n to a sequence number, wrapping from MaxInt32 to 0 as
// Kafka's DefaultRecordBatch.incrementSequence does.
func incSeq(seq, n int32) int32 {
	if seq > 1<<31-1-n {
		return n - (1<<31 - 1 - seq) - 1
	}
	return seq + n
}

// checkProducer checks a batch of an idempotent producer against the
// partition's state. It reports a duplicate (the base offset it was
// appended at) or an error; a batch without a producer id is not checked.
// A producer the partition has no state for may start at any sequence
// (Kafka, which may have expired the state, does the same for a known
// producer id; the example keeps no producer ids across restarts).
func (part *partition) checkProducer(raw []byte) (duplicateAt int64, duplicate bool, err error) {
	id := batchProducerID(raw)
	if id < 0 {
		return 0, false, nil
	}
	ps := part.producers[id]
	if ps == nil {
		return 0, false, nil
	}
	epoch, first, last := batchEpoch(raw), batchFirstSeq(raw), batchLastSeq(raw)
	switch {
	case epoch < ps.epoch:
		return 0, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", kerr.InvalidProducerEpoch, id, epoch, ps.epoch)
	case epoch > ps.epoch:
		if first != 0 {
			return 0, false, fmt.Errorf("%w: producer %d's new epoch %d starts at sequence %d, not 0", kerr.OutOfOrderSequenceNumber, id, epoch, first)
		}
		return 0, false, nil
	}
	for _, b := range ps.recent {
		if b.valid && b.firstSeq == first && b.lastSeq == last {
			return b.base, true, nil
		}
	}
	if want := incSeq(ps.lastSeq, 1); first != want {
		return 0, false, fmt.Errorf("%w: producer %d sent sequence %d where %d was next", kerr.OutOfOrderSequenceNumber, id, first, want)
	}
	return 0, false, nil
}

// noteProducer records an appended batch in its producer's state.
func (part *partition) noteProducer(raw []byte, base int64) {
	id := batchProducerID(raw)
	if id < 0 {
		return
	}
	if part.producers == nil {
		part.producers = map[int64]*producerState{}
	}
	ps := part.producers[id]
	epoch := batchEpoch(raw)
	if ps == nil || epoch != ps.epoch {
		ps = &producerState{epoch: epoch}
		part.producers[id] = ps
	}
	ps.lastSeq = batchLastSeq(raw)
	ps.recent[ps.next] = appendedBatch{firstSeq: batchFirstSeq(raw), lastSeq: ps.lastSeq, base: base, valid: true}
	ps.next = (ps.next + 1) % producerBatches
}
