package oauthbearer

import "time"

// SetUnknownKIDRefreshGap sets the least time between two refreshes for
// unknown key ids, 10 s otherwise.
func SetUnknownKIDRefreshGap(v *JWKSValidator, d time.Duration) { v.gap = d }

// ForgetUnknownKIDRefresh lets the next unknown kid refresh at once,
// whatever the gap.
func ForgetUnknownKIDRefresh(v *JWKSValidator) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastAsked = time.Time{}
}
