package main

// This file turns the samples of every round into the report: per
// scenario, case, metric and server the median with the min and max over
// rounds, and ratios to echo and to kfake, as tables or JSON.

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// sample is one value of one metric, measured in one round against one
// server. Scenario, Server and Round are filled in by the round loop.
type sample struct {
	Scenario string
	Case     string // "conns=8", "10000 conns", ...
	Metric   string // name and unit: "req/s", "p99 µs", ...
	Server   serverKind
	Round    int
	Value    float64
}

// scenarioInfo describes a scenario in the report.
type scenarioInfo struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Notes say exactly what was measured and how.
	Notes []string `json:"notes"`
	// Ratios are the ratio columns of the scenario's table, where both
	// servers were measured; nil: defaultRatios.
	Ratios []ratioPair `json:"-"`
	// Targets are bounds on the medians of some of the scenario's rows:
	// the table gets a column that says whether each is met, the JSON rows
	// fields.
	Targets []target `json:"-"`
	// Paired are ratios taken round by round: in each round, one
	// server's value over another's of the same case and metric, a
	// sample of its own (metric "req/s × echo"), so that the median is
	// that of the rounds' ratios, not a ratio of medians.
	Paired []pairedRatio `json:"-"`
}

// pairedRatio is a per-round ratio: num's Metric over den's in each round
// and case where both were measured, as the metric Metric+" × "+den of
// num's rows.
type pairedRatio struct {
	num, den serverKind
	Metric   string
}

// name is the metric of the ratio's samples: "p99 µs" over echo is
// "p99 × echo", "req/s" over echo "req/s × echo".
func (p pairedRatio) name() string {
	return strings.TrimSuffix(p.Metric, " µs") + " × " + p.den
}

// pairedSamples returns, for each pairedRatio of sc and each round and
// case of samples (sc's) where both servers have a non-zero value of the
// metric, a sample of num's value over den's, in the order of num's
// samples.
func pairedSamples(sc scenarioInfo, samples []sample) []sample {
	type key struct {
		c, metric string
		server    serverKind
		round     int
	}
	values := map[key]float64{}
	for _, s := range samples {
		values[key{s.Case, s.Metric, s.Server, s.Round}] = s.Value
	}
	var out []sample
	for _, p := range sc.Paired {
		for _, s := range samples {
			if s.Server != p.num || s.Metric != p.Metric || s.Scenario != sc.ID {
				continue
			}
			d, ok := values[key{s.Case, s.Metric, p.den, s.Round}]
			if !ok || d == 0 {
				continue
			}
			out = append(out, sample{Scenario: sc.ID, Case: s.Case, Metric: p.name(), Server: p.num, Round: s.Round, Value: s.Value / d})
		}
	}
	return out
}

// target is a bound on the median of one case's metric, whatever the
// server.
type target struct {
	Case, Metric string
	AtMost       bool // the median must be at most Bound; else at least
	Bound        float64
}

// String is the bound: "≤ 2", "≥ 0.5".
func (t target) String() string {
	if t.AtMost {
		return "≤ " + formatNumber(t.Bound)
	}
	return "≥ " + formatNumber(t.Bound)
}

// met says whether v is within the bound.
func (t target) met(v float64) bool {
	if t.AtMost {
		return v <= t.Bound
	}
	return v >= t.Bound
}

// applyTargets fills in the Target and TargetMet of the rows that a
// scenario's target bounds.
func applyTargets(rows []row, scenarios []scenarioInfo) {
	for i := range rows {
		r := &rows[i]
		if r.Server == echoControlServer { // a control: judged by no target
			continue
		}
		for _, sc := range scenarios {
			if sc.ID != r.Scenario {
				continue
			}
			for _, t := range sc.Targets {
				if t.Case == r.Case && t.Metric == r.Metric {
					met := t.met(r.Median)
					r.Target, r.TargetMet = t.String(), &met
				}
			}
		}
	}
}

// ratioPair is a ratio column: num's median over den's.
type ratioPair struct{ num, den serverKind }

// defaultRatios are the ratio columns of a scenario that names none.
var defaultRatios = []ratioPair{{kafkanetServer, echoServer}, {kafkanetServer, kfakeServer}, {kfakeServer, echoServer}}

// results are everything a run measured.
type results struct {
	Rounds    int
	Quick     bool
	Scenarios []scenarioInfo
	Samples   []sample
	Failures  []string // runs that failed, with their error
}

// row is one metric of one case for one server, over the rounds.
type row struct {
	Scenario string    `json:"scenario"`
	Case     string    `json:"case"`
	Metric   string    `json:"metric"`
	Server   string    `json:"server"`
	Median   float64   `json:"median"`
	Min      float64   `json:"min"`
	Max      float64   `json:"max"`
	Values   []float64 `json:"values"` // by round
	// RatioToEcho and RatioToKfake are Median over echo's and kfake's
	// medians of the same case and metric; absent when there is none.
	RatioToEcho  *float64 `json:"ratio_to_echo,omitempty"`
	RatioToKfake *float64 `json:"ratio_to_kfake,omitempty"`
	// Ratios are Median over the median of every other server measured in
	// the same case and metric (echo and kfake included), by server.
	Ratios map[serverKind]float64 `json:"ratios,omitempty"`
	// Target is the scenario's bound on Median ("≤ 2"), if it sets one,
	// and TargetMet whether the median is within it.
	Target    string `json:"target,omitempty"`
	TargetMet *bool  `json:"target_met,omitempty"`
}

// median returns the median of values (the mean of the middle two for an
// even count); 0 for none.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// rowKey identifies a row.
type rowKey struct{ scenario, c, metric, server string }

// aggregate groups the samples into rows, in the order their keys first
// appear, and fills in the ratios.
func aggregate(samples []sample) []row {
	var order []rowKey
	values := map[rowKey][]float64{}
	for _, s := range samples {
		k := rowKey{s.Scenario, s.Case, s.Metric, s.Server}
		if _, ok := values[k]; !ok {
			order = append(order, k)
		}
		values[k] = append(values[k], s.Value)
	}
	rows := make([]row, 0, len(order))
	medians := map[rowKey]float64{}
	for _, k := range order {
		v := values[k]
		r := row{Scenario: k.scenario, Case: k.c, Metric: k.metric, Server: k.server,
			Median: median(v), Min: slices.Min(v), Max: slices.Max(v), Values: v}
		medians[k] = r.Median
		rows = append(rows, r)
	}
	for i := range rows {
		r := &rows[i]
		r.RatioToEcho = ratio(r.Median, medians, rowKey{r.Scenario, r.Case, r.Metric, echoServer})
		r.RatioToKfake = ratio(r.Median, medians, rowKey{r.Scenario, r.Case, r.Metric, kfakeServer})
		for _, o := range rows {
			if o.Scenario != r.Scenario || o.Case != r.Case || o.Metric != r.Metric || o.Server == r.Server {
				continue
			}
			if v := ratio(r.Median, medians, rowKey{o.Scenario, o.Case, o.Metric, o.Server}); v != nil {
				if r.Ratios == nil {
					r.Ratios = map[serverKind]float64{}
				}
				r.Ratios[o.Server] = *v
			}
		}
	}
	return rows
}

// ratio returns v over the median under k, or nil when there is none or it
// is zero.
func ratio(v float64, medians map[rowKey]float64, k rowKey) *float64 {
	d, ok := medians[k]
	if !ok || d == 0 {
		return nil
	}
	r := v / d
	return &r
}

// jsonReport is the -json output.
type jsonReport struct {
	Rounds    int            `json:"rounds"`
	Quick     bool           `json:"quick"`
	Scenarios []scenarioInfo `json:"scenarios"`
	Rows      []row          `json:"rows"`
	Failures  []string       `json:"failures"`
}

// writeJSON writes the report as one JSON document.
func writeJSON(w io.Writer, res *results) error {
	rows := aggregate(res.Samples)
	applyTargets(rows, res.Scenarios)
	rep := jsonReport{Rounds: res.Rounds, Quick: res.Quick, Scenarios: res.Scenarios,
		Rows: rows, Failures: res.Failures}
	if rep.Failures == nil {
		rep.Failures = []string{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// serverOrder is the column order of the tables.
var serverOrder = []serverKind{kafkanetServer, kafkanetInlineServer, kfakeServer, echoServer, echoControlServer, bareServer, ceilingWritevServer, ceilingSendfileServer, fetchFloorServer, floorServer, directServer, haproxyServer, proxyServer, proxyPinnedServer, proxyBaselineServer, haproxyTLSServer, proxyTLSServer, brokerServer, baselineServer}

// writeTables writes one table per scenario: a line per case and metric,
// a column per server with "median (min–max)", the scenario's ratios (by
// default kafkanet to echo and to kfake, and kfake to echo) where both
// were measured, and, for a scenario with targets, whether each bounded
// median meets its target.
func writeTables(w io.Writer, res *results) error {
	rows := aggregate(res.Samples)
	applyTargets(rows, res.Scenarios)
	fmt.Fprintf(w, "kafkanet bench: %d round(s); each cell is the median (min–max) over rounds\n", res.Rounds)
	for _, sc := range res.Scenarios {
		fmt.Fprintf(w, "\n(%s) %s\n", sc.ID, sc.Title)
		for _, n := range sc.Notes {
			fmt.Fprintf(w, "    %s\n", n)
		}
		var mine []row
		for _, r := range rows {
			if r.Scenario == sc.ID {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			fmt.Fprintln(w, "    (no results)")
			continue
		}
		ratios := sc.Ratios
		if ratios == nil {
			ratios = defaultRatios
		}
		if err := writeTable(w, mine, ratios, len(sc.Targets) > 0); err != nil {
			return err
		}
		writeRounds(w, mine, sc.Paired)
	}
	if len(res.Failures) > 0 {
		fmt.Fprintln(w, "\nFailures:")
		for _, f := range res.Failures {
			fmt.Fprintf(w, "    %s\n", f)
		}
	}
	return nil
}

// writeTable writes the rows of one scenario, with the ratio columns of
// pairs whose servers both have rows, and with targets a column of the
// rows' verdicts (one per server measured, in the servers' order).
func writeTable(w io.Writer, rows []row, pairs []ratioPair, targets bool) error {
	var servers []serverKind
	for _, s := range serverOrder {
		if slices.ContainsFunc(rows, func(r row) bool { return r.Server == s }) {
			servers = append(servers, s)
		}
	}
	var ratios []ratioPair
	for _, rc := range pairs {
		if slices.Contains(servers, rc.num) && slices.Contains(servers, rc.den) {
			ratios = append(ratios, rc)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"case", "metric"}
	head = append(head, servers...)
	for _, rc := range ratios {
		head = append(head, rc.num+"/"+rc.den)
	}
	if targets {
		head = append(head, "target")
	}
	fmt.Fprintln(tw, "    "+strings.Join(head, "\t"))
	byKey := map[rowKey]row{}
	type line struct{ c, metric string }
	var lines []line
	for _, r := range rows {
		byKey[rowKey{r.Scenario, r.Case, r.Metric, r.Server}] = r
		if l := (line{r.Case, r.Metric}); !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	scenario := rows[0].Scenario
	prevCase := ""
	for _, l := range lines {
		c := l.c
		if c == prevCase {
			c = ""
		}
		prevCase = l.c
		cells := []string{c, l.metric}
		for _, s := range servers {
			r, ok := byKey[rowKey{scenario, l.c, l.metric, s}]
			if !ok {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, formatCell(r))
		}
		for _, rc := range ratios {
			num, ok1 := byKey[rowKey{scenario, l.c, l.metric, rc.num}]
			den, ok2 := byKey[rowKey{scenario, l.c, l.metric, rc.den}]
			if !ok1 || !ok2 || den.Median == 0 {
				cells = append(cells, "-")
				continue
			}
			cells = append(cells, fmt.Sprintf("%.2f", num.Median/den.Median))
		}
		if targets {
			var verdicts []string
			for _, s := range servers {
				if r, ok := byKey[rowKey{scenario, l.c, l.metric, s}]; ok && r.TargetMet != nil {
					verdicts = append(verdicts, targetVerdict(r))
				}
			}
			cells = append(cells, strings.Join(verdicts, ", "))
		}
		fmt.Fprintln(tw, "    "+strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// writeRounds writes, under a table, each round's value of the rows of
// its per-round ratios: "conns=64, req/s × echo, kafkanet, by round: 0.93
// 0.97 0.95".
func writeRounds(w io.Writer, rows []row, paired []pairedRatio) {
	for _, r := range rows {
		if !slices.ContainsFunc(paired, func(p pairedRatio) bool { return p.num == r.Server && p.name() == r.Metric }) {
			continue
		}
		vals := make([]string, len(r.Values))
		for i, v := range r.Values {
			vals[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "    %s, %s, %s, by round: %s\n", r.Case, r.Metric, r.Server, strings.Join(vals, " "))
	}
}

// targetVerdict is a row's target and whether its median meets it: "≤ 2:
// met", "≥ 0.5: MISSED".
func targetVerdict(r row) string {
	if *r.TargetMet {
		return r.Target + ": met"
	}
	return r.Target + ": MISSED"
}

// formatCell formats a row as "median (min–max)", or the median alone when
// all rounds agree.
func formatCell(r row) string {
	if r.Min == r.Max {
		return formatNumber(r.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", formatNumber(r.Median), formatNumber(r.Min), formatNumber(r.Max))
}

// formatNumber formats v with three significant digits below 100 and as a
// whole number with thousands separators from 100 on.
func formatNumber(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'f', -1, 64)
	case math.Abs(v) >= 100:
		return groupThousands(int64(math.Round(v)))
	case v == 0:
		return "0"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// groupThousands formats n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
