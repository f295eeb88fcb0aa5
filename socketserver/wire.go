package socketserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// Framing and header errors. A connection that sends any of them is closed
// without a response, as Kafka closes it.
var (
	// ErrFrameSize: a frame announced a negative size or one above
	// socket.request.max.bytes.
	ErrFrameSize = errors.New("socketserver: invalid frame size")
	// ErrMalformedHeader: a request header could not be parsed.
	ErrMalformedHeader = errors.New("socketserver: malformed request header")
	// ErrUnknownAPI: a request names an API key the listener does not enable.
	ErrUnknownAPI = errors.New("socketserver: API not enabled on listener")
	// ErrUnsupportedVersion: a request uses a version of its API that the
	// listener does not enable.
	ErrUnsupportedVersion = errors.New("socketserver: API version not enabled on listener")
	// ErrMalformedBody: a request body could not be decoded.
	ErrMalformedBody = errors.New("socketserver: malformed request body")
)

// initialFrameAlloc is the most a frame's buffer starts with: what a
// peer's claim costs before its bytes arrive. A frame of up to
// frameSnap×initialFrameAlloc starts at min(size, initialFrameAlloc) and
// then takes its whole size; a larger one starts smaller and grows as its
// bytes arrive (nextFrameCap).
const initialFrameAlloc = 4 << 10

// A large frame's buffer grows along a ladder counted down from its size:
// size/frameSnap, a frameGrowth-th of that, and so on. It starts at the
// largest step of at most initialFrameAlloc, climbs one step each time it
// is full, and takes the whole size from the top step. So it never holds
// more than frameSnap times what has arrived (past initialFrameAlloc),
// and the bytes it copies as it grows are under a twentieth of the frame,
// whatever its size: 42 KiB for a frame of 1 MiB and a little more (1 MiB
// records), 341 KiB for one of 8 MiB.
const (
	frameSnap   = 32
	frameGrowth = 4
)

// firstFrameCap is the capacity a frame of size bytes starts with.
func firstFrameCap(size int) int {
	if size <= frameSnap*initialFrameAlloc {
		return min(size, initialFrameAlloc)
	}
	c := ceilDiv(size, frameSnap)
	for c > initialFrameAlloc {
		c = ceilDiv(c, frameGrowth)
	}
	return c
}

// nextFrameCap is the capacity the buffer of a frame of size bytes grows
// to when it is full with have bytes: the next step of its ladder, or the
// whole frame from the top step.
func nextFrameCap(have, size int) int {
	if have*frameSnap >= size {
		return size
	}
	c := ceilDiv(size, frameSnap)
	for n := ceilDiv(c, frameGrowth); n > have; n = ceilDiv(c, frameGrowth) {
		c = n
	}
	return c
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// readFrame reads one size-prefixed frame from r: a 4-byte big-endian size,
// then that many bytes, into a fresh slice. sizeBuf is scratch space for
// the size.
func readFrame(r io.Reader, sizeBuf *[4]byte, maxSize int32) ([]byte, error) {
	size, err := readSize(r, sizeBuf, maxSize)
	if err != nil {
		return nil, err
	}
	return readBody(r, size, nil, nil)
}

// readSize reads a frame's 4-byte big-endian size into sizeBuf and checks
// it against maxSize.
func readSize(r io.Reader, sizeBuf *[4]byte, maxSize int32) (int32, error) {
	if _, err := io.ReadFull(r, sizeBuf[:]); err != nil {
		return 0, err
	}
	size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
	if size < 0 || size > maxSize {
		return 0, fmt.Errorf("%w: %d (limit %d)", ErrFrameSize, size, maxSize)
	}
	return size, nil
}

// readBody reads a frame body of size bytes: into small when it fits,
// otherwise into a fresh slice that starts small (firstFrameCap) and grows
// (nextFrameCap) as the bytes arrive. Decoded requests keep pointers
// into the body, so it is never reused. m, when not nil, takes memory for
// the buffer before it is allocated or grows, and bounds how long each
// read may wait for the peer (see frameMemory; nil: no pool); an error
// from it ends the read.
func readBody(r io.Reader, size int32, small []byte, m *frameMemory) ([]byte, error) {
	if int(size) <= cap(small) {
		frame := small[:size]
		if err := m.take(0, int(size), int(size)); err != nil {
			return nil, err
		}
		m.reading(int(size))
		_, err := io.ReadFull(r, frame)
		return frame, m.done(noEOF(err))
	}
	first := firstFrameCap(int(size))
	if err := m.take(0, first, int(size)); err != nil {
		return nil, err
	}
	frame := make([]byte, 0, first)
	for len(frame) < int(size) {
		if len(frame) == cap(frame) {
			next := nextFrameCap(len(frame), int(size))
			if err := m.take(len(frame), next, int(size)); err != nil {
				return nil, m.done(err)
			}
			grown := make([]byte, len(frame), next)
			copy(grown, frame)
			frame = grown
		}
		m.reading(int(size) - len(frame))
		n, err := r.Read(frame[len(frame):cap(frame)])
		frame = frame[:len(frame)+n]
		if err != nil && len(frame) < int(size) {
			return nil, m.done(noEOF(err))
		}
	}
	return frame, m.done(nil)
}

// noEOF turns io.EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// header is a parsed request header (v1 or v2).
type header struct {
	key           int16
	version       int16
	correlationID int32
	// clientID shares the frame's memory (frames are never written after
	// they are read); nullClientID is set for a null client id.
	clientID     string
	nullClientID bool
	// tagsAt is, for a raw request of a flexible version, where the
	// header's tagged fields begin in the frame (decode); 0 otherwise.
	tagsAt int32
}

// parseHeaderPrefix reads the fixed part of a request header and the
// nullable client id, returning the rest of the frame. ControlledShutdown v0
// (key 7) is the one request whose header has no client id.
func parseHeaderPrefix(frame []byte) (header, []byte, error) {
	var h header
	if len(frame) < 8 {
		return h, nil, fmt.Errorf("%w: %d bytes", ErrMalformedHeader, len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.correlationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]
	if h.key == 7 && h.version == 0 {
		h.nullClientID = true
		return h, rest, nil
	}
	if len(rest) < 2 {
		return h, nil, fmt.Errorf("%w: no client id", ErrMalformedHeader)
	}
	n := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case n == -1:
		h.nullClientID = true
	case n < 0 || int(n) > len(rest):
		return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformedHeader, n)
	case n > 0:
		h.clientID = unsafe.String(&rest[0], n)
		rest = rest[n:]
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section (KIP-482), returning what follows.
func skipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad tag count", ErrMalformedHeader)
	}
	b = b[n:]
	for range count {
		_, n = binary.Uvarint(b) // tag number
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrMalformedHeader)
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, fmt.Errorf("%w: bad tag size", ErrMalformedHeader)
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// appendResponse appends a response frame: size, correlation id, the
// response header's empty tag section when the response is flexible (never
// for ApiVersions, whose response header is always v0), then the body.
func appendResponse(dst []byte, correlationID int32, resp interface {
	Key() int16
	IsFlexible() bool
	AppendTo([]byte) []byte
}) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
