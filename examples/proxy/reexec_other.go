//go:build !linux

package main

import "errors"

// reexec is not done but on Linux: sysmon is left as the runtime runs it.
func reexec([]string) error { return errors.ErrUnsupported }
