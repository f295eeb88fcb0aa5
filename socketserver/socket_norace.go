//go:build linux && !race

package socketserver

import "syscall"

// raceRead and raceWrite tell the race detector what raw reads and writes
// do (see socket_race.go); without it, nothing.
func raceRead(uintptr, []byte) {}

func raceWrite(uintptr, []syscall.Iovec) {}
