// Command fuzz runs every native Go fuzz target of kafkanet in turn, for
// the same time each, and prints a table of what each did:
//
//	go run ./examples/fuzz                  # every target for 10 minutes
//	go run ./examples/fuzz -fuzztime 1000x  # a smoke run, as CI does
//	go run ./examples/fuzz -run 'SASL|Frame' -fuzztime 1m
//
// Usage:
//
//	fuzz [-fuzztime 10m|1000x] [-run regexp] [-parallel n] [-list]
//
// The flags are:
//
//	-fuzztime duration|Nx
//		How long to fuzz each target: a duration such as 10m (the
//		default) or a count of executions such as 1000x.
//	-run regexp
//		Fuzz only the targets whose name matches the regular expression.
//	-parallel n
//		Fuzzing workers per target (default 0: GOMAXPROCS).
//	-list
//		List the targets, each with its package, and exit.
//
// It finds targets by reading the module's _test.go files for
// "func FuzzXxx(f *testing.F)" and runs "go test -run ^$ -fuzz ^FuzzXxx$"
// in the target's package, so a failing input is written to that package's
// testdata/fuzz as go test does. It exits 1 when any target fails. CI runs
// it for 1,000 executions a target; ten minutes a target is the bar before
// a parser change lands. A count is the safer budget on a loaded machine:
// with a duration, Go before 1.27 can report its own deadline as a
// failure (golang/go#75804), which the table marks when no failing input
// was written.
package main
