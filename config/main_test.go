package config_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }
