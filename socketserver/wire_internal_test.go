package socketserver

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A frame's buffer starts at most initialFrameAlloc, never holds more than
// frameSnap times what has arrived past that, ends at the frame's size,
// and copies under a twentieth of a large frame as it grows.
func TestFrameCapLadder(t *testing.T) {
	for _, tc := range []struct {
		size   int
		copied int // what growing copies, exactly
	}{
		{0, 0},
		{100, 0},
		{initialFrameAlloc, 0},
		{initialFrameAlloc + 1, initialFrameAlloc},
		{64 << 10, initialFrameAlloc},
		{frameSnap * initialFrameAlloc, initialFrameAlloc},
		{1<<20 + 100, 2049 + 8193 + 32772}, // 1 MiB records: 2 KiB, 8 KiB, 32 KiB, then the frame
		{8<<20 + 100, 1025 + 4097 + 16385 + 65537 + 262148},
		{math.MaxInt32, 4096 + 16384 + 65536 + 262144 + 1<<20 + 4<<20 + 16<<20 + 64<<20},
	} {
		c := firstFrameCap(tc.size)
		assert.LessOrEqual(t, c, initialFrameAlloc, "size %d: first", tc.size)
		copied := 0
		for c < tc.size {
			next := nextFrameCap(c, tc.size)
			if !assert.Greater(t, next, c, "size %d: grows", tc.size) {
				break
			}
			assert.LessOrEqual(t, next, frameSnap*c, "size %d: at most frameSnap times what arrived", tc.size)
			copied += c
			c = next
		}
		assert.Equal(t, tc.size, c, "size %d: ends at the size", tc.size)
		assert.Equal(t, tc.copied, copied, "size %d: copied", tc.size)
		if tc.size > frameSnap*initialFrameAlloc {
			assert.Less(t, copied, tc.size/20, "size %d: copies under a twentieth", tc.size)
		}
	}
}
