package main

// This file is -baseline-broker: a prebuilt examples/broker, of another
// commit, measured beside the current one in scenarios b, g and i.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// baselineServer is the -baseline-broker binary, started exactly as the
// current examples/broker is in the same scenario.
const baselineServer serverKind = "examples/broker@baseline"

// withBaseline returns servers with baselineServer right after current,
// the server that is the current examples/broker in the scenario, when
// -baseline-broker is set; servers unchanged otherwise. Next to each
// other, the two are measured one after the other in every round, and
// the rounds' rotation changes which goes first.
func (b *bench) withBaseline(servers []serverKind, current serverKind) []serverKind {
	if b.opts.baselineBroker == "" {
		return servers
	}
	i := slices.Index(servers, current)
	return slices.Insert(slices.Clone(servers), i+1, baselineServer)
}

// baselineRatios returns pairs with the ratio of current, the current
// examples/broker of the scenario, to the baseline when -baseline-broker
// is set.
func (b *bench) baselineRatios(pairs []ratioPair, current serverKind) []ratioPair {
	if b.opts.baselineBroker == "" {
		return pairs
	}
	return append(slices.Clone(pairs), ratioPair{current, baselineServer})
}

// baselineNote says what the baseline server is, when -baseline-broker is
// set; current names the current broker's column.
func (b *bench) baselineNote(current serverKind) []string {
	if b.opts.baselineBroker == "" {
		return nil
	}
	return []string{
		fmt.Sprintf("%s is -baseline-broker %s, a prebuilt examples/broker, started exactly as %s's examples/broker (the same", baselineServer, b.opts.baselineBroker, current),
		fmt.Sprintf("properties and -broker-set values) and measured in the same rounds, next to it; %s/%s is the current broker over it.", current, baselineServer),
	}
}

// brokerBinary returns the binary and the name of the example broker that
// is server: the -baseline-broker binary for baselineServer, else the one
// the bench built, whatever server's kind.
func (b *bench) brokerBinary(server serverKind) (path, name string) {
	if server == baselineServer {
		return b.baselineBin, baselineServer
	}
	return b.brokerBin, brokerServer
}

// checkBaseline resolves the path of a baseline flag (-baseline-broker,
// -baseline-proxy: of examples/<program>) to an absolute path and checks
// that it is an executable file.
func checkBaseline(flagName, path, program string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: %s is not an executable file (build one with go build -o FILE ./examples/%s)", flagName, path, program)
	}
	return abs, nil
}
