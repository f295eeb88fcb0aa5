package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBaselineServers checks that -baseline-broker adds baselineServer to
// the scenarios that measure examples/broker (b unless -produce-discard, g
// and i), right after the current broker so that the two are measured one
// after the other in each round, with the ratio of the current broker to
// it and a note naming the binary; and to no other scenario, nor without
// the flag.
func TestBaselineServers(t *testing.T) {
	o, err := parseOptions([]string{"-baseline-broker", "old/broker"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{opts: o}
	current := map[string]serverKind{"b": kafkanetServer, "c": brokerServer, "g": kafkanetServer, "i": brokerServer}
	for _, id := range allScenarios {
		sc := b.scenario(id)
		i := slices.Index(sc.servers, baselineServer)
		cur, measured := current[id]
		if !measured {
			if i >= 0 {
				t.Errorf("(%s): the baseline among %q", id, sc.servers)
			}
			continue
		}
		if i < 1 || sc.servers[i-1] != cur || slices.Index(sc.servers[i+1:], baselineServer) >= 0 {
			t.Errorf("(%s): servers %q, want %s once, right after %s", id, sc.servers, baselineServer, cur)
		}
		if !slices.Contains(sc.info.Ratios, ratioPair{cur, baselineServer}) {
			t.Errorf("(%s): ratios %v lack %s/%s", id, sc.info.Ratios, cur, baselineServer)
		}
		if notes := strings.Join(sc.info.Notes, " "); !strings.Contains(notes, "-baseline-broker old/broker") {
			t.Errorf("(%s): the notes do not name the baseline:\n%s", id, notes)
		}
	}
	// b keeps kafkanet/kfake among its ratios.
	if r := b.scenario("b").info.Ratios; !slices.Contains(r, ratioPair{kafkanetServer, kfakeServer}) {
		t.Errorf("(b): ratios %v lack kafkanet/kfake", r)
	}
	// With -produce-discard, b's kafkanet is the minimal host: no baseline.
	b.opts.produceDiscard = true
	if s := b.scenario("b").servers; slices.Contains(s, baselineServer) {
		t.Errorf("(b) with -produce-discard: servers %q", s)
	}
	if o, err = parseOptions(nil, io.Discard); err != nil {
		t.Fatal(err)
	}
	b = &bench{opts: o}
	for _, id := range allScenarios {
		if sc := b.scenario(id); slices.Contains(sc.servers, baselineServer) || slices.ContainsFunc(sc.info.Ratios, func(p ratioPair) bool { return p.den == baselineServer }) {
			t.Errorf("(%s) without -baseline-broker: servers %q, ratios %v", id, sc.servers, sc.info.Ratios)
		}
	}
	// The baseline is started from its own binary, under its own name.
	b = &bench{brokerBin: "current", baselineBin: "old"}
	for server, want := range map[serverKind][2]string{baselineServer: {"old", baselineServer}, kafkanetServer: {"current", brokerServer}, brokerServer: {"current", brokerServer}} {
		if bin, name := b.brokerBinary(server); bin != want[0] || name != want[1] {
			t.Errorf("brokerBinary(%s) = %s, %s; want %s, %s", server, bin, name, want[0], want[1])
		}
	}
}

func TestCheckBaseline(t *testing.T) {
	dir := t.TempDir()
	exe, plain := filepath.Join(dir, "broker"), filepath.Join(dir, "notes")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := checkBaseline("-baseline-broker", exe, "broker"); err != nil || got != exe {
		t.Errorf("checkBaseline(an executable) = %q, %v", got, err)
	}
	for _, bad := range []string{plain, dir, filepath.Join(dir, "missing")} {
		_, err := checkBaseline("-baseline-proxy", bad, "proxy")
		if err == nil {
			t.Errorf("checkBaseline(%s) succeeded", bad)
		} else if !strings.HasPrefix(err.Error(), "-baseline-proxy: ") {
			t.Errorf("checkBaseline(%s): %q does not name its flag", bad, err)
		}
	}
}

// TestBaselineEndToEnd runs scenario b briefly with the example broker,
// built here, as the baseline: both brokers and kfake produce, and the
// current broker's rows have a ratio to the baseline's.
func TestBaselineEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	baseline, err := buildExample(ctx, t.TempDir(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	rows := runScenarios(t, options{scenarios: []string{"b"}, rounds: 1, records: 2000, recordSize: 100, baselineBroker: baseline})
	for _, server := range []serverKind{kafkanetServer, baselineServer, kfakeServer} {
		if got := find(t, rows, "produce", "MB/s", server).Median; got <= 0 {
			t.Errorf("%s: %v MB/s", server, got)
		}
	}
	for _, m := range []string{"MB/s", "server CPU ms/MB"} {
		if r := find(t, rows, "produce", m, kafkanetServer).Ratios[baselineServer]; r <= 0 {
			t.Errorf("%s: kafkanet's ratio to the baseline is %v", m, r)
		}
	}
}
