package oauthbearer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// claimSet is a JWT's claims, numbers kept as json.Number.
type claimSet map[string]any

// decodeClaims reads a JWT payload: one JSON object.
func decodeClaims(payload []byte) (claimSet, error) {
	d := json.NewDecoder(bytes.NewReader(payload))
	d.UseNumber()
	var c claimSet
	if err := d.Decode(&c); err != nil || c == nil {
		return nil, invalid("the claims are not a JSON object")
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("the claims are followed by more data")
	}
	return c, nil
}

// The NumericDate range kept: year 1 to 9999. Beyond it a time is clamped.
const (
	minNumericDate = -62135596800.0
	maxNumericDate = 253402300799.0
)

// number returns the numeric claim name: ok is false when it is absent (or
// null); an error when it is not a number.
func (c claimSet) number(name string) (f float64, ok bool, err error) {
	raw, present := c[name]
	if !present || raw == nil {
		return 0, false, nil
	}
	n, isNum := raw.(json.Number)
	if !isNum {
		return 0, false, invalid("the %s claim is not a number", name)
	}
	f, err = strconv.ParseFloat(string(n), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // a huge number is ±Inf: clamped below
		return 0, false, invalid("the %s claim is not a number", name)
	}
	return min(max(f, minNumericDate), maxNumericDate), true, nil
}

// seconds returns a NumericDate claim in whole seconds, as jose4j reads
// it (fractions dropped); it must not be negative.
func (c claimSet) seconds(name string) (time.Time, bool, error) {
	f, ok, err := c.number(name)
	if !ok || err != nil {
		return time.Time{}, ok, err
	}
	if f < 0 {
		return time.Time{}, false, invalid("the %s claim is negative", name)
	}
	return time.Unix(int64(f), 0), true, nil
}

// millis returns a NumericDate claim to the millisecond, rounded, as
// Kafka's unsecured validator reads it.
func (c claimSet) millis(name string) (t time.Time, secs float64, ok bool, err error) {
	f, ok, err := c.number(name)
	if !ok || err != nil {
		return time.Time{}, 0, ok, err
	}
	return time.UnixMilli(int64(math.Round(f * 1000))), f, true, nil
}

// nonBlankString returns the string claim name, trimmed; it must be
// present and not blank.
func (c claimSet) nonBlankString(name string) (string, error) {
	raw, present := c[name]
	if !present || raw == nil {
		return "", invalid("the token has no %s claim", name)
	}
	s, ok := raw.(string)
	if !ok {
		return "", invalid("the %s claim is not a string", name)
	}
	if s = strings.TrimSpace(s); s == "" {
		return "", invalid("the %s claim is blank", name)
	}
	return s, nil
}
