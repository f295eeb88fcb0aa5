package quota_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// quota is a leaf: it imports the standard library alone.
func TestImportsStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	require.NoError(t, err)
	require.Equal(t, []string{"github.com/kafkanet/kafkanet/socketserver/quota"}, strings.Fields(string(out)))
}
