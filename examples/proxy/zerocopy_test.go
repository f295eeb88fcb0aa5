package main

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Fetch answer passes through the proxy without being decoded or copied
// into a buffer of the proxy's: upstream's socket to the client's, with
// splice on Linux (both sides plaintext). The test counts the bytes the
// process allocates (runtime.MemStats.TotalAlloc: the proxy's, the fake
// upstream's, which writes an answer it encoded once, and the client's,
// which reads into nothing) over many answers of 1 MiB: an answer read
// into memory would cost at least its own size.
func TestFetchAnswerIsNotCopied(t *testing.T) {
	const (
		records = 1 << 20
		fetches = 64
	)
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "big"
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.HighWatermark, rp.LastStableOffset = 1, 1
	rp.RecordBatches = make([]byte, records) // bytes, not batches: nobody on the way reads them
	_, _ = rand.Read(rp.RecordBatches)
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	fake := startFakeUpstream(t)
	fake.serveFetch(resp)
	p := startProxy(t, fake.addr(), nil, plaintextProxy...)
	c := dialRaw(t, p.addr(t, "PLAIN"))

	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes, req.SessionEpoch = 12, -1, 500, 1, 50<<20, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "big"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 2 * records
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	frame := formatter.AppendRequest(nil, req, 0)

	// The first answer, whole: the fake's bytes, the client's
	// correlation id.
	corr := c.send(t, req)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(30*time.Second)))
	got, err := readFrame(c, 64<<20)
	require.NoError(t, err)
	resp.SetVersion(req.Version)
	require.Equal(t, responseFrame(resp, corr), got, "the answer is not upstream's, byte for byte")

	var size [8]byte
	fetch := func(corr int32) int64 {
		binary.BigEndian.PutUint32(frame[8:], uint32(corr))
		_, err := c.Write(frame)
		require.NoError(t, err)
		_, err = io.ReadFull(c, size[:])
		require.NoError(t, err)
		require.Equal(t, corr, int32(binary.BigEndian.Uint32(size[4:])), "correlation id")
		n := int64(binary.BigEndian.Uint32(size[:])) - 4
		m, err := io.CopyN(io.Discard, c, n)
		require.NoError(t, err)
		return 8 + m
	}
	for i := range 4 { // warm up: buffers and pools of every party
		fetch(corr + 1 + int32(i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var moved int64
	for i := range fetches {
		moved += fetch(corr + 10 + int32(i))
	}
	runtime.ReadMemStats(&after)
	perMiB := float64(after.TotalAlloc-before.TotalAlloc) / (float64(moved) / (1 << 20))
	t.Logf("%d answers of %d bytes: %.0f bytes allocated per MiB forwarded", fetches, moved/fetches, perMiB)
	require.Less(t, perMiB, float64(16<<10), "the answers were copied into memory on their way")
}
