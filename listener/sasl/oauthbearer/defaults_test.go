package oauthbearer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kafkanet/kafkanet/listener/internal/oauthsettings"
	"github.com/kafkanet/kafkanet/listener/sasl/oauthbearer"
)

// The package's defaults are the ones the listener package resolves
// Kafka's keys with (internal/oauthsettings), spelled out here for the
// documentation.
func TestDefaultsAgreeWithTheSettings(t *testing.T) {
	assert.Equal(t, oauthsettings.JWKSRefresh, oauthbearer.DefaultJWKSRefresh)
	assert.Equal(t, oauthsettings.JWKSRetryBackoff, oauthbearer.DefaultJWKSRetryBackoff)
	assert.Equal(t, oauthsettings.JWKSRetryBackoffMax, oauthbearer.DefaultJWKSRetryBackoffMax)
	assert.Equal(t, oauthsettings.ClockSkew, oauthbearer.DefaultClockSkew)
	assert.Equal(t, oauthsettings.ScopeClaimName, oauthbearer.DefaultScopeClaimName)
	assert.Equal(t, oauthsettings.SubClaimName, oauthbearer.DefaultSubClaimName)
}
