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

// initialFrameAlloc is the most a frame buffer starts with. Larger frames
// grow the buffer as their bytes arrive, so a peer that announces a huge
// frame and sends little costs only what it sent.
const initialFrameAlloc = 64 << 10

// readFrame reads one size-prefixed frame from r: a 4-byte big-endian size,
// then that many bytes, into a fresh slice. sizeBuf is scratch space for
// the size.
func readFrame(r io.Reader, sizeBuf *[4]byte, maxSize int32) ([]byte, error) {
	size, err := readSize(r, sizeBuf, maxSize)
	if err != nil {
		return nil, err
	}
	return readBody(r, size, nil)
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
// otherwise into a fresh slice. Decoded requests keep pointers into the
// body, so it is never reused. A slice for a large body starts at
// initialFrameAlloc and grows as the bytes arrive, so a peer that announces
// a huge frame and sends little costs only what it sent.
func readBody(r io.Reader, size int32, small []byte) ([]byte, error) {
	if int(size) <= cap(small) {
		frame := small[:size]
		_, err := io.ReadFull(r, frame)
		return frame, noEOF(err)
	}
	if size <= initialFrameAlloc {
		frame := make([]byte, size)
		_, err := io.ReadFull(r, frame)
		return frame, noEOF(err)
	}
	frame := make([]byte, 0, initialFrameAlloc)
	for len(frame) < int(size) {
		if len(frame) == cap(frame) {
			// Double, never past the announced size.
			grown := make([]byte, len(frame), min(2*cap(frame), int(size)))
			copy(grown, frame)
			frame = grown
		}
		n, err := r.Read(frame[len(frame):cap(frame)])
		frame = frame[:len(frame)+n]
		if err != nil && len(frame) < int(size) {
			return nil, noEOF(err)
		}
	}
	return frame, nil
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
