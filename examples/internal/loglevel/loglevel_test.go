package loglevel

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlag(t *testing.T) {
	for _, tt := range []struct {
		arg     string
		want    slog.Level
		name    string // String after Set
		wantErr bool
	}{
		{arg: "debug", want: slog.LevelDebug, name: "debug"},
		{arg: "info", want: slog.LevelInfo, name: "info"},
		{arg: "warn", want: slog.LevelWarn, name: "warn"},
		{arg: "error", want: slog.LevelError, name: "error"},
		{arg: "DEBUG", want: slog.LevelDebug, name: "debug"},
		{arg: "trace", wantErr: true},
		{arg: "warning", wantErr: true},
		{arg: "info+2", wantErr: true},
		{arg: "", wantErr: true},
	} {
		t.Run(tt.arg, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var l Level
			fs.Var(&l, "log-level", Usage)
			err := fs.Parse([]string{"-log-level", tt.arg})
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), `invalid value "`+tt.arg+`" for flag -log-level: want debug, info, warn or error`)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, l.Level)
			assert.Equal(t, tt.name, l.String())
		})
	}
	var zero Level
	assert.Equal(t, "info", zero.String(), "the default")
}

// The request log hook is there only when the logger logs at debug level,
// and the logger logs from its level up.
func TestRequestLog(t *testing.T) {
	for _, tt := range []struct {
		level     string
		wantHook  bool
		wantInfo  bool
		wantError bool
	}{
		{"debug", true, true, true},
		{"info", false, true, true},
		{"warn", false, false, true},
		{"error", false, false, true},
	} {
		t.Run(tt.level, func(t *testing.T) {
			var l Level
			require.NoError(t, l.Set(tt.level))
			var out bytes.Buffer
			log := l.Logger(&out)
			assert.Equal(t, tt.wantHook, len(RequestLog(log)) == 1)
			log.Info("an info")
			log.Error("an error")
			assert.Equal(t, tt.wantInfo, bytes.Contains(out.Bytes(), []byte("an info")))
			assert.Equal(t, tt.wantError, bytes.Contains(out.Bytes(), []byte("an error")))
		})
	}
}
