package main

import (
	"os"
	"syscall"
)

// reexec executes the proxy again, in place (the same process), with the
// same arguments and the environment env. It returns only on failure.
func reexec(env []string) error {
	return syscall.Exec("/proc/self/exe", os.Args, env)
}
