// Package bindcheck keeps the test suite off addresses it does not own:
// wrapped around a test binary's run, it watches the sockets the binary
// and its child processes listen on, and fails the run when one is bound
// to an address other than loopback or to a port that was not picked from
// the kernel's ephemeral range (port 0, or a port reserved from it). A
// suite that binds Kafka's default :9092, or a wildcard address, fails
// beside a running Kafka; this check makes it fail everywhere.
package bindcheck
