package auditlog

import (
	"os"
	"testing"

	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

func TestMain(m *testing.M) { os.Exit(bindcheck.Wrap(m).Run()) }
