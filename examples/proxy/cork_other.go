//go:build !linux

package main

import "net"

// cork does nothing where TCP_CORK is not available.
func cork(net.Conn, bool) {}
