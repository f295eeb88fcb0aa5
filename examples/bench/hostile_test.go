package main

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestHostileFrames(t *testing.T) {
	// A claim: the size of a 100,000,000-byte Produce frame and its first
	// 10 bytes.
	h := claimHeader()
	if len(h) != 4+claimSent || binary.BigEndian.Uint32(h) != claimFrameSize {
		t.Fatalf("claim header %x: want the size %d and %d bytes", h, claimFrameSize, claimSent)
	}
	if key, version := int16(binary.BigEndian.Uint16(h[4:])), int16(binary.BigEndian.Uint16(h[6:])); key != 0 || version != produceFrameVersion {
		t.Errorf("a claim of key %d version %d, want Produce v%d", key, version, produceFrameVersion)
	}
	// The slowloris request: a whole ApiVersions v0 of 270 bytes.
	f := slowlorisFrame()
	if len(f) != 270 || int(binary.BigEndian.Uint32(f)) != len(f)-4 || binary.BigEndian.Uint16(f[4:]) != 18 {
		t.Errorf("the slowloris frame is %d bytes (size field %d, key %d), want a 270-byte ApiVersions", len(f), binary.BigEndian.Uint32(f), binary.BigEndian.Uint16(f[4:]))
	}
	// A pipeline: 64 Metadata v1 frames with correlation ids 1 to 64.
	batch := pipelineBatch()
	one := metadataV1Frame()
	if len(batch) != pipelineDepth*len(one) {
		t.Fatalf("a batch of %d bytes, want %d frames of %d", len(batch), pipelineDepth, len(one))
	}
	for i := range pipelineDepth {
		frame := batch[i*len(one) : (i+1)*len(one)]
		if corr := binary.BigEndian.Uint32(frame[8:]); corr != uint32(i+1) || !bytes.Equal(frame[:8], one[:8]) {
			t.Errorf("frame %d: %x, correlation id %d", i, frame[:12], corr)
		}
	}
	// PLAIN's message: no authorization id, the user, the password.
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version = 1
	frame := saslPlainFrame("alice", "secret")
	if err := req.ReadFrom(frame[4+8+2+len(clientID):]); err != nil {
		t.Fatal(err)
	}
	if string(req.SASLAuthBytes) != "\x00alice\x00secret" {
		t.Errorf("PLAIN message %q", req.SASLAuthBytes)
	}
}

func TestHostileInfo(t *testing.T) {
	b := &bench{opts: options{hostileDuration: 5 * time.Second, hostileTimeout: 2 * time.Second,
		hostileSlowloris: 1000, hostileClaims: 10, hostileLogins: 100, hostilePipeliners: 50}}
	info := b.hostileInfo()
	if len(info.Targets) != 7 {
		t.Fatalf("%d targets, want p99 and throughput for cases 1 to 3 and p99 for case 4", len(info.Targets))
	}
	for _, tg := range info.Targets {
		if strings.HasPrefix(tg.Case, "0 ") {
			t.Errorf("a target on the case alone: %+v", tg)
		}
		if tg.Metric == p99RatioMetric && (!tg.AtMost || tg.Bound != 2 && tg.Bound != 5) || tg.Metric == produceRatioMetric && (tg.AtMost || tg.Bound != 0.5) {
			t.Errorf("target %+v", tg)
		}
	}
	// The notes say that the two parts are measured one after the other.
	if notes := strings.Join(info.Notes, " "); !strings.Contains(notes, "two consecutive windows") {
		t.Errorf("the notes do not say the windows are consecutive:\n%s", notes)
	}
	if got := b.hostileCaseName(hostileClaims); got != "2 claims: 10 × 100 MB Produce, 10 bytes sent" {
		t.Errorf("case 2 is %q", got)
	}
}

// TestHostileEndToEnd runs scenario i with 1 s windows (the Metadata
// client's, then the producer's) and a few attackers of each kind against
// examples/broker: every case, its metrics and the ratios to the case
// alone.
func TestHostileEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/broker")
	}
	// Two claims of 100 MB fit in the broker's default budget of 200 MiB,
	// so the producer is not stalled.
	o := options{scenarios: []string{"i"}, rounds: 1, hostileDuration: time.Second, hostileTimeout: 2 * time.Second,
		hostileSlowloris: 20, hostileClaims: 2, hostileLogins: 4, hostilePipeliners: 2}
	rows := runScenarios(t, o)
	b := &bench{opts: o}
	for _, k := range hostileKinds {
		c := b.hostileCaseName(k)
		p50 := find(t, rows, c, metaP50Metric, brokerServer).Median
		p99 := find(t, rows, c, metaP99Metric, brokerServer).Median
		answered := find(t, rows, c, metaRateMetric, brokerServer).Median
		mbs := find(t, rows, c, produceMBsMetric, brokerServer).Median
		peak := find(t, rows, c, peakRSSMetric, brokerServer).Median
		rss := find(t, rows, c, endRSSMetric, brokerServer).Median
		// At most one Metadata request a tick, over its own window only.
		maxAnswered := float64(time.Second/hostileTick) + 1
		if p50 <= 0 || p99 < p50 || answered <= 0 || answered > maxAnswered || mbs <= 0 || rss <= 0 || peak < rss {
			t.Errorf("%s: p50 %v ms, p99 %v ms, %v Metadata/s, %v MB/s, peak RSS %v MiB, RSS %v MiB", c, p50, p99, answered, mbs, peak, rss)
		}
		if cpu := find(t, rows, c, brokerCPUMetric, brokerServer).Median; cpu <= 0 {
			t.Errorf("%s: the broker used %v%% of a core", c, cpu)
		}
		for _, m := range []string{metaTimeoutsMetric, metaErrorsMetric, produceErrorsMetric, benchCPUMetric} {
			if v := find(t, rows, c, m, brokerServer).Median; v < 0 {
				t.Errorf("%s: %s %v", c, m, v)
			}
		}
		if k == hostileAlone {
			continue
		}
		if r := find(t, rows, c, p99RatioMetric, brokerServer).Median; r <= 0 {
			t.Errorf("%s: p99 × alone %v", c, r)
		}
		if r := find(t, rows, c, produceRatioMetric, brokerServer).Median; r <= 0 {
			t.Errorf("%s: MB/s × alone %v", c, r)
		}
	}
	for _, r := range rows {
		if r.Case == b.hostileCaseName(hostileAlone) && (r.Metric == p99RatioMetric || r.Metric == produceRatioMetric) {
			t.Errorf("a ratio for the case alone: %+v", r)
		}
	}
	for k, n := range map[hostileKind]int{hostileSlowloris: o.hostileSlowloris, hostileClaims: o.hostileClaims, hostilePipeliners: o.hostilePipeliners} {
		if open := find(t, rows, b.hostileCaseName(k), openConnsMetric, brokerServer).Median; open < 0 || open > float64(n) {
			t.Errorf("%s: %v attackers open, of %d", b.hostileCaseName(k), open, n)
		}
	}
	if v := find(t, rows, b.hostileCaseName(hostileLogins), failedLoginsMetric, brokerServer).Median; v <= 0 {
		t.Errorf("%v failed logins/s", v)
	}
	if v := find(t, rows, b.hostileCaseName(hostilePipeliners), pipelinedWriteMetric, brokerServer).Median; v <= 0 {
		t.Errorf("%v pipelined requests/s written", v)
	}
}
