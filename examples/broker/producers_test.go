package main

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

// idempotentBatch returns a record batch of n records from producer id at
// epoch, its first sequence number first.
func idempotentBatch(t *testing.T, id int64, epoch int16, first int32, n int) []batch {
	t.Helper()
	values := make([]string, n)
	for i := range values {
		values[i] = "v"
	}
	raw := recordBatch(values...)
	binary.BigEndian.PutUint64(raw[43:51], uint64(id))
	binary.BigEndian.PutUint16(raw[51:53], uint16(epoch))
	binary.BigEndian.PutUint32(raw[53:57], uint32(first))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], castagnoli))
	batches, err := splitBatches(raw)
	require.NoError(t, err)
	return batches
}

// An idempotent producer's batches are checked as Kafka's
// ProducerStateManager checks them (ProducerAppendInfo.checkSequence): a
// retried batch is answered with its first offset and not stored again, a
// batch that skips a sequence number is refused with
// OUT_OF_ORDER_SEQUENCE_NUMBER (so a client with several requests in
// flight resends in order instead of landing out of order), an old epoch
// is refused, and a new epoch starts at 0.
func TestIdempotentProducerSequences(t *testing.T) {
	s := newState()
	tp, err := s.createTopic("t", 1, 1, logConfig{retentionBytes: -1, retentionMs: -1, maxMessageBytes: 1 << 20}, false)
	require.NoError(t, err)
	appendAt := func(b []batch) (int64, error) {
		base, _, err := s.append(tp, 0, b)
		return base, err
	}

	base, err := appendAt(idempotentBatch(t, 7, 0, 0, 3)) // sequences 0-2
	require.NoError(t, err)
	assert.Zero(t, base)
	base, err = appendAt(idempotentBatch(t, 7, 0, 3, 2)) // 3-4
	require.NoError(t, err)
	assert.EqualValues(t, 3, base)

	base, err = appendAt(idempotentBatch(t, 7, 0, 0, 3)) // a retry of 0-2
	require.NoError(t, err)
	assert.Zero(t, base, "a duplicate is answered with its first offset")
	assert.EqualValues(t, 5, s.highWatermark(tp, 0), "and not stored again")

	_, err = appendAt(idempotentBatch(t, 7, 0, 9, 1)) // 5-8 are missing
	assert.ErrorIs(t, err, kerr.OutOfOrderSequenceNumber)
	_, err = appendAt(idempotentBatch(t, 7, 0, 4, 1)) // overlaps, not a known batch
	assert.ErrorIs(t, err, kerr.OutOfOrderSequenceNumber)
	assert.EqualValues(t, 5, s.highWatermark(tp, 0))

	base, err = appendAt(idempotentBatch(t, 7, 0, 5, 1))
	require.NoError(t, err)
	assert.EqualValues(t, 5, base)

	_, err = appendAt(idempotentBatch(t, 7, 1, 3, 1)) // a new epoch must start at 0
	assert.ErrorIs(t, err, kerr.OutOfOrderSequenceNumber)
	_, err = appendAt(idempotentBatch(t, 7, 1, 0, 1))
	require.NoError(t, err)
	_, err = appendAt(idempotentBatch(t, 7, 0, 6, 1)) // the old epoch is fenced
	assert.ErrorIs(t, err, kerr.InvalidProducerEpoch)

	_, err = appendAt(idempotentBatch(t, 8, 0, 42, 1)) // a producer the partition does not know
	require.NoError(t, err)
	_, err = appendAt(idempotentBatch(t, -1, -1, -1, 2)) // not idempotent: never checked
	require.NoError(t, err)
	_, err = appendAt(idempotentBatch(t, -1, -1, -1, 2))
	require.NoError(t, err)
}

func TestSequenceWraps(t *testing.T) {
	assert.EqualValues(t, 5, incSeq(2, 3))
	assert.EqualValues(t, 0, incSeq(1<<31-1, 1))
	assert.EqualValues(t, 2, incSeq(1<<31-2, 4))
}
