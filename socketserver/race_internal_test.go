//go:build race

package socketserver

// raceBuild reports whether the race detector is on, for the internal guards.
const raceBuild = true
