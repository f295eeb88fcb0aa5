//go:build !linux

package main

import "syscall"

// cork does nothing where TCP_CORK is not available.
func cork(syscall.RawConn, bool) {}
