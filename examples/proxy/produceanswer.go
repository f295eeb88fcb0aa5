package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// This file looks at a Produce answer of version 10 or later without
// decoding it. Such an answer may carry leader hints (KIP-951's
// NodeEndpoints, the answer's top-level tagged field 0) that name brokers
// by address, which the proxy rewrites; most answers carry none, and go
// back to the client as they came.

// produceHintsFrom and produceHintsTo are the Produce versions whose
// answers produceAnswerNamesBrokers knows: from the first with leader
// hints to the newest kmsg knows. An answer of a later version is decoded.
const (
	produceHintsFrom = 10
	produceHintsTo   = 13
)

// errProduceAnswer is an answer produceAnswerNamesBrokers cannot walk.
var errProduceAnswer = errors.New("not a Produce answer the proxy can walk")

// produceAnswerNamesBrokers reports whether body, a Produce answer of
// version v (produceHintsFrom to produceHintsTo) after its header, has the
// top-level tagged field of leader hints. It reads the answer's fields
// only to step over them; an error (a version it does not know, bytes that
// end early or run past the answer) leaves the answer to be decoded.
func produceAnswerNamesBrokers(body []byte, v int16) (bool, error) {
	if v < produceHintsFrom || v > produceHintsTo {
		return false, fmt.Errorf("%w: version %d", errProduceAnswer, v)
	}
	w := answerWalker{b: body}
	for range w.length() { // topics
		if v >= 13 {
			w.skip(16) // topic id
		} else {
			w.compactBytes() // topic name
		}
		for range w.length() { // partitions
			// Index, error code, base offset, log append time, log start
			// offset; then the record errors: batch index, message, tags.
			w.skip(4 + 2 + 8 + 8 + 8)
			for range w.length() {
				w.skip(4)
				w.compactBytes()
				w.tags()
			}
			w.compactBytes() // error message
			w.tags()         // the partition's current leader (an id, no address)
		}
		w.tags()
	}
	w.skip(4) // throttle time
	hints := w.tags()
	switch {
	case w.err != nil:
		return false, w.err
	case len(w.b) > 0:
		return false, fmt.Errorf("%w: %d bytes after it", errProduceAnswer, len(w.b))
	}
	return hints, nil
}

// answerWalker steps over the fields of a flexible answer, in order. Its
// first error sticks; after it, every step does nothing.
type answerWalker struct {
	b   []byte
	err error
}

// skip steps over n bytes.
func (w *answerWalker) skip(n int) {
	switch {
	case w.err != nil:
	case n > len(w.b):
		w.err = fmt.Errorf("%w: it ends early", errProduceAnswer)
	default:
		w.b = w.b[n:]
	}
}

// uvarint reads an unsigned varint.
func (w *answerWalker) uvarint() uint64 {
	if w.err != nil {
		return 0
	}
	x, n := binary.Uvarint(w.b)
	if n <= 0 {
		w.err = fmt.Errorf("%w: a bad varint", errProduceAnswer)
		return 0
	}
	w.b = w.b[n:]
	return x
}

// length reads the compact length of an array, string or bytes and
// returns it, 0 for null (encoded 0). No length can be more than the bytes
// left, as every element or byte takes one at least.
func (w *answerWalker) length() int {
	n := w.uvarint()
	if n > uint64(len(w.b))+1 {
		w.err = fmt.Errorf("%w: a length of %d with %d bytes left", errProduceAnswer, n-1, len(w.b))
	}
	if w.err != nil || n == 0 {
		return 0
	}
	return int(n - 1)
}

// compactBytes steps over a compact (nullable) string or bytes.
func (w *answerWalker) compactBytes() { w.skip(w.length()) }

// tags steps over a tagged-field section and reports whether it has tag 0.
func (w *answerWalker) tags() (has0 bool) {
	count := w.uvarint()
	if count > uint64(len(w.b)) {
		w.err = fmt.Errorf("%w: %d tags with %d bytes left", errProduceAnswer, count, len(w.b))
	}
	for i := uint64(0); i < count && w.err == nil; i++ {
		if w.uvarint() == 0 {
			has0 = true
		}
		size := w.uvarint()
		if size > uint64(len(w.b)) {
			w.err = fmt.Errorf("%w: a tag of %d bytes with %d left", errProduceAnswer, size, len(w.b))
			break
		}
		w.skip(int(size))
	}
	return has0 && w.err == nil
}
