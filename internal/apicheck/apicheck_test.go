package apicheck_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/apicheck"
	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

func TestMain(m *testing.M) { os.Exit(bindcheck.Wrap(m).Run()) }

func TestMutableVars(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	write("a.go", `package p

import ("errors"; "fmt")

var ErrA = errors.New("a")
var ErrB = fmt.Errorf("b: %w", ErrA)
var ErrC error
var _ fmt.Stringer = nil
var private = []int{1}
var Buckets = []float64{1, 2}
var (
	Names, Other = []string{"x"}, 1
)
`)
	write("a_test.go", "package p\n\nvar TestOnly = 1\n")
	got, err := apicheck.MutableVars(dir)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Contains(t, got[0], "var Buckets")
	assert.Contains(t, got[1], "var Names")
	assert.Contains(t, got[2], "var Other")
}
