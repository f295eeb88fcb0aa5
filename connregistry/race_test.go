//go:build race

package connregistry_test

// raceEnabled reports a build with the race detector, whose allocations
// the allocation tests would count.
const raceEnabled = true
