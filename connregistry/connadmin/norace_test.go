//go:build !race

package connadmin_test

// raceEnabled reports a build with the race detector, which makes the
// listing several times slower.
const raceEnabled = false
