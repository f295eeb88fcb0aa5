package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestHAProxyConfig checks HAProxy's configuration in scenario p, relaying
// in plaintext and terminating TLS, line by line; with haproxy installed,
// HAProxy itself checks it (haproxy -c), the TLS one with a key store of
// the bench's certificate, as -proxy-tls writes it.
func TestHAProxyConfig(t *testing.T) {
	keyStore := filepath.Join(t.TempDir(), "hop-keystore.pem")
	key, chain, _, err := selfSignedCert()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyStore, []byte(key+chain), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, crt string
		bind      string // the frontend's bind line
	}{
		{"plaintext", "", "bind 127.0.0.1:9100"},
		{"TLS", keyStore, "bind 127.0.0.1:9100 ssl crt " + keyStore + " ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := haproxyConfig("127.0.0.1:9100", "127.0.0.1:9200", tc.crt)
			var lines []string
			for l := range strings.Lines(cfg) {
				lines = append(lines, strings.TrimSpace(l))
			}
			for _, want := range []string{tc.bind, "server broker0 127.0.0.1:9200", "mode tcp", "nbthread 1", "option splice-request", "option splice-response"} {
				if !slices.Contains(lines, want) {
					t.Errorf("no line %q in:\n%s", want, cfg)
				}
			}
			if n := strings.Count(cfg, "bind "); n != 1 {
				t.Errorf("%d bind lines, want 1:\n%s", n, cfg)
			}
			bin := findHAProxy("")
			if bin == "" {
				if os.Getenv("CI") != "" {
					t.Fatal("haproxy is required in CI (apt-get install haproxy)")
				}
				t.Skip("haproxy not found: the configuration is not checked by HAProxy")
			}
			file := filepath.Join(t.TempDir(), "haproxy.cfg")
			if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-c", "-f", file).CombinedOutput(); err != nil {
				t.Errorf("haproxy -c: %v\n%s\n%s", err, out, cfg)
			}
		})
	}
}

// TestProxyArgs checks the example proxy's arguments in scenario p: one
// listener, PLAINTEXT or SSL with the PEM key store, the brokers' ports
// ephemeral.
func TestProxyArgs(t *testing.T) {
	for _, tc := range []struct {
		name, keyStore string
		want           []string
	}{
		{"plaintext", "", []string{"-upstream", "127.0.0.1:9092", "-set", "listeners=PLAIN://127.0.0.1:9100",
			"-set", "listener.security.protocol.map=PLAIN:PLAINTEXT", "-set", "proxy.broker.port.base=0"}},
		{"TLS", "ks.pem", []string{"-upstream", "127.0.0.1:9092", "-set", "listeners=TLS://127.0.0.1:9100",
			"-set", "listener.security.protocol.map=TLS:SSL", "-set", "proxy.broker.port.base=0",
			"-set", "ssl.keystore.type=PEM", "-set", "ssl.keystore.location=ks.pem"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := proxyArgs("127.0.0.1:9092", "127.0.0.1:9100", tc.keyStore); !slices.Equal(got, tc.want) {
				t.Errorf("proxyArgs = %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestHopBrokerListeners checks the broker's listeners in scenario p: one
// relay listener per mode, each advertising its HAProxy's address, all
// PLAINTEXT.
func TestHopBrokerListeners(t *testing.T) {
	for _, tc := range []struct {
		name  string
		modes []hopMode
		want  []string
	}{
		{"plaintext", hopModes[:1], []string{
			"listeners=PLAINTEXT://127.0.0.1:1,RELAY://127.0.0.1:2",
			"advertised.listeners=PLAINTEXT://127.0.0.1:1,RELAY://127.0.0.1:3",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,RELAY:PLAINTEXT",
			"inter.broker.listener.name=PLAINTEXT",
		}},
		{"and TLS", hopModes, []string{
			"listeners=PLAINTEXT://127.0.0.1:1,RELAY://127.0.0.1:2,RELAY_TLS://127.0.0.1:4",
			"advertised.listeners=PLAINTEXT://127.0.0.1:1,RELAY://127.0.0.1:3,RELAY_TLS://127.0.0.1:5",
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,RELAY:PLAINTEXT,RELAY_TLS:PLAINTEXT",
			"inter.broker.listener.name=PLAINTEXT",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hopBrokerListeners("127.0.0.1:1", tc.modes, []string{"127.0.0.1:2", "127.0.0.1:4"}[:len(tc.modes)],
				[]string{"127.0.0.1:3", "127.0.0.1:5"}[:len(tc.modes)])
			if !slices.Equal(got, tc.want) {
				t.Errorf("hopBrokerListeners = %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestHopRatios checks scenario p's ratio rows: for each ratio case whose
// two hops were measured, the hop's figures over the other's, under the
// hop's column; the proxy's as shipped bounded by the targets, the pinned
// proxy's, the baseline's and the TLS ones not; and the table's columns
// and lines in order.
func TestHopRatios(t *testing.T) {
	figs := func(names ...serverKind) map[serverKind]*hopFigures {
		all := map[serverKind]*hopFigures{
			directServer:        {produceRate: 200, consumeRate: 600},
			haproxyServer:       {cpuReq: 60, addedP50: 90, cpuProduced: 0.4, cpuConsumed: 0.7, produceRate: 150, consumeRate: 270},
			proxyServer:         {cpuReq: 90, addedP50: 90, cpuProduced: 1.2, cpuConsumed: 0.7, produceRate: 150, consumeRate: 300},
			proxyPinnedServer:   {cpuReq: 66, addedP50: 90, cpuProduced: 0.8, cpuConsumed: 0.7, produceRate: 150, consumeRate: 300},
			proxyBaselineServer: {cpuReq: 120, addedP50: 90, cpuProduced: 1.2, cpuConsumed: 0.7, produceRate: 150, consumeRate: 300},
			haproxyTLSServer:    {cpuReq: 80, addedP50: 0, cpuProduced: 2, cpuConsumed: 2, produceRate: 100, consumeRate: 120},
			proxyTLSServer:      {cpuReq: 160, addedP50: 250, cpuProduced: 4, cpuConsumed: 3, produceRate: 110, consumeRate: 96},
		}
		out := map[serverKind]*hopFigures{}
		for _, n := range names {
			out[n] = all[n]
		}
		return out
	}
	allMetrics := []string{targetCPUPerReq, targetAddedP50, targetCPUProduced, targetCPUConsumed, targetProduceRate, targetConsumeRate}
	everything := options{proxyProcs: 1, baselineProxy: "old-proxy", proxyTLS: true}
	for _, tc := range []struct {
		name string
		fig  map[serverKind]*hopFigures
		opts options
		// want: the rows' case, metric and server, and for each case the
		// first value (CPU per request)
		cases   map[string][]string
		servers map[string]serverKind
		first   map[string]float64
	}{
		{"plaintext", figs(directServer, haproxyServer, proxyServer), options{},
			map[string][]string{targetsCase: allMetrics}, map[string]serverKind{targetsCase: proxyServer}, map[string]float64{targetsCase: 1.5}},
		{"pinned, baseline and TLS", figs(directServer, haproxyServer, proxyServer, proxyPinnedServer, proxyBaselineServer, haproxyTLSServer, proxyTLSServer), everything,
			// HAProxy added no latency with TLS here: no ratio to it.
			map[string][]string{targetsCase: allMetrics, pinnedRatioCase: allMetrics, baselineRatioCase: allMetrics,
				tlsRatioCase: slices.Delete(slices.Clone(allMetrics), 1, 2)},
			map[string]serverKind{targetsCase: proxyServer, pinnedRatioCase: proxyPinnedServer, baselineRatioCase: proxyBaselineServer, tlsRatioCase: proxyTLSServer},
			map[string]float64{targetsCase: 1.5, pinnedRatioCase: 1.1, baselineRatioCase: 2, tlsRatioCase: 2}},
		{"without HAProxy", figs(directServer, proxyServer, proxyPinnedServer, proxyBaselineServer, proxyTLSServer), everything, map[string][]string{}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hopRatioSamples(tc.fig, (&bench{opts: tc.opts}).hopRatios())
			cases := map[string][]string{}
			for _, s := range got {
				cases[s.Case] = append(cases[s.Case], s.Metric)
				if s.Server != tc.servers[s.Case] {
					t.Errorf("%s / %s under %s, want %s", s.Case, s.Metric, s.Server, tc.servers[s.Case])
				}
				if s.Metric == targetCPUPerReq && s.Value != tc.first[s.Case] {
					t.Errorf("%s / %s = %v, want %v", s.Case, s.Metric, s.Value, tc.first[s.Case])
				}
			}
			if len(cases) != len(tc.cases) {
				t.Errorf("cases %q, want %q", cases, tc.cases)
			}
			for c, want := range tc.cases {
				if !slices.Equal(cases[c], want) {
					t.Errorf("%s: metrics %q, want %q", c, cases[c], want)
				}
			}
		})
	}

	// In the table, as a round of runProxy makes it (its hops rotated, the
	// ratio rows last, then sortHopSamples): the hops' columns in order,
	// the ratio columns, the metrics of a case in hopMetrics' order, the
	// other ratio cases' lines after the targets' and without a verdict.
	b := &bench{opts: options{proxyMB: 50, proxyProcs: 1, baselineProxy: "old-proxy", proxyTLS: true}, haproxyBin: "haproxy"}
	var s []sample
	for _, name := range []serverKind{proxyTLSServer, proxyBaselineServer, directServer, haproxyTLSServer, proxyServer, proxyPinnedServer, haproxyServer} {
		s = append(s, sample{Case: "Metadata, conns=1", Metric: "p50 µs", Server: name, Value: 100},
			sample{Case: "Metadata, conns=1", Metric: "req/s", Server: name, Value: 1000})
	}
	s = append(s, hopRatioSamples(figs(directServer, haproxyServer, proxyServer, proxyPinnedServer, proxyBaselineServer, haproxyTLSServer, proxyTLSServer), b.hopRatios())...)
	sortHopSamples(s)
	for i := range s {
		s[i].Scenario, s[i].Round = "p", 1
	}
	var buf bytes.Buffer
	if err := writeTables(&buf, &results{Rounds: 1, Samples: s, Scenarios: []scenarioInfo{b.proxyInfo()}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	var lines [][]string // the table's lines, by field
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "case" || len(lines) > 0) {
			lines = append(lines, f)
		}
	}
	wantHead := []string{"case", "metric", "direct", "haproxy", "examples/proxy", "examples/proxy@pinned", "examples/proxy@baseline", "haproxy+tls", "examples/proxy+tls",
		"examples/proxy/haproxy", "examples/proxy/direct", "haproxy/direct", "examples/proxy+tls/haproxy+tls", "examples/proxy/examples/proxy@baseline", "target"}
	if len(lines) != 1+2+6+6+6+5 || !slices.Equal(lines[0], wantHead) {
		t.Fatalf("want the columns %q and 26 lines (the TLS ratios without added p50):\n%s", wantHead, out)
	}
	if lines[1][2] != "req/s" || lines[2][0] != "p50" {
		t.Errorf("the Metadata lines are not req/s then p50 µs:\n%s", out)
	}
	for i, want := range map[int]string{3: targetsCase, 9: pinnedRatioCase, 15: baselineRatioCase, 21: tlsRatioCase} {
		if got := strings.Join(lines[i][:3], " "); got != want {
			t.Errorf("line %d starts with %q, want %q:\n%s", i, got, want, out)
		}
	}
	for _, l := range lines[3:9] {
		if last := l[len(l)-1]; last != "met" && last != "MISSED" {
			t.Errorf("a targets' line without a verdict: %q", l)
		}
	}
	for _, l := range lines[9:] {
		if last := l[len(l)-1]; last == "met" || last == "MISSED" {
			t.Errorf("a line of another ratio case with a verdict: %q", l)
		}
	}
}

// examples/proxy runs as shipped, without the Go runtime's variables of
// the bench's environment; examples/proxy@pinned gets GOMAXPROCS=-proxy-procs
// in their place.
func TestProxyEnv(t *testing.T) {
	env := []string{"GOMAXPROCS=8", "PATH=/bin", "GODEBUG=gctrace=1", "GOGC=50", "GOMEMLIMIT=1GiB", "HOME=/root"}
	for _, tt := range []struct {
		name  serverKind
		procs int
		want  []string
	}{
		{proxyServer, 1, []string{"PATH=/bin", "HOME=/root"}},
		{proxyBaselineServer, 1, []string{"PATH=/bin", "HOME=/root"}},
		{proxyTLSServer, 1, []string{"PATH=/bin", "HOME=/root"}},
		{proxyPinnedServer, 1, []string{"PATH=/bin", "HOME=/root", "GOMAXPROCS=1"}},
		{proxyPinnedServer, 3, []string{"PATH=/bin", "HOME=/root", "GOMAXPROCS=3"}},
	} {
		b := &bench{opts: options{proxyProcs: tt.procs}, env: env}
		if got := b.proxyEnv(tt.name); !slices.Equal(got, tt.want) {
			t.Errorf("%s, -proxy-procs %d: %q, want %q", tt.name, tt.procs, got, tt.want)
		}
	}
}
