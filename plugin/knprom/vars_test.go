package knprom_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kafkanet/kafkanet/internal/apicheck"
)

// The plugin exports no variable but errors, as the library's baseline
// test requires of the library (package api): a user cannot change what
// every other user of the plugin sees. The plugin is a module of its own,
// outside the baseline, so it checks itself.
func TestNoMutableExportedVariable(t *testing.T) {
	vars, err := apicheck.MutableVars(".")
	require.NoError(t, err)
	assert.Empty(t, vars, "exported variables: make each a constant, a function or an option")
}
