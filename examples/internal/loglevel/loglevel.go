// Package loglevel is the -log-level flag of the example programs
// (examples/broker, examples/proxy) and the request log it turns on: at
// debug, every request is logged, as Kafka's kafka.request.logger logs
// every completed request at DEBUG.
package loglevel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/kafkanet/kafkanet/socketserver"
)

// Usage is the flag's help text.
const Usage = "log at `level` and above: debug, info, warn or error (default info). At debug every\n" +
	"request is logged, with its principal, client id, API, version, sizes and latency\n" +
	"(as Kafka's kafka.request.logger at DEBUG)"

// Level is a -log-level value: debug, info, warn or error. Its zero value
// is info.
type Level struct{ slog.Level }

// The levels, by their flag names.
var names = []struct {
	name  string
	level slog.Level
}{{"debug", slog.LevelDebug}, {"info", slog.LevelInfo}, {"warn", slog.LevelWarn}, {"error", slog.LevelError}}

// Set implements flag.Value: the names are those of names, in any case.
func (l *Level) Set(s string) error {
	for _, n := range names {
		if strings.EqualFold(s, n.name) {
			l.Level = n.level
			return nil
		}
	}
	return fmt.Errorf("want debug, info, warn or error")
}

// String implements flag.Value.
func (l *Level) String() string {
	for _, n := range names {
		if l.Level == n.level {
			return n.name
		}
	}
	return l.Level.String()
}

// Logger returns a logger that writes text records of l's level and
// above to w.
func (l *Level) Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l.Level}))
}

// RequestLog returns the request log hook for a socket server that logs
// to log: socketserver.SlogRequestLog, which logs every request at debug
// level, when log logs at debug level, and none otherwise, so that a
// server logging at info level takes no time for a request log.
func RequestLog(log *slog.Logger) []socketserver.Hook {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	return []socketserver.Hook{socketserver.SlogRequestLog(log)}
}
