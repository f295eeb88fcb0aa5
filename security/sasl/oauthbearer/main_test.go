package oauthbearer_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/kafkanet/kafkanet/internal/bindcheck"
)

// No test leaves a goroutine behind: a JWKS refresher ends with the last
// Close of its validator.
func TestMain(m *testing.M) { goleak.VerifyTestMain(bindcheck.Wrap(m)) }
