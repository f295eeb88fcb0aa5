// Command fuzz runs every native Go fuzz target of kafkanet in turn, for
// the same time each, and prints a table of what each did; CI runs it for
// two seconds a target, and a ten-minute run per target is the bar before
// a parser change lands. See main.go for its flags.
package main
