//go:build !race

package socketserver_test

const raceEnabled = false
