//go:build !race

package connreg_test

// raceEnabled reports a build with the race detector, whose allocations
// the allocation tests would count.
const raceEnabled = false
