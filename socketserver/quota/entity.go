package quota

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Key names a client quota, as Kafka's quota configuration keys do.
type Key string

// The client quotas of Kafka's users and client ids.
const (
	// ProducerByteRate bounds the bytes per second a client produces
	// (Produce request bytes).
	ProducerByteRate Key = "producer_byte_rate"
	// ConsumerByteRate bounds the bytes per second a client fetches
	// (Fetch response bytes).
	ConsumerByteRate Key = "consumer_byte_rate"
	// RequestPercentage bounds the time a client's requests take to
	// handle, as a percentage of one thread's time per quota window (see
	// [ThreadPercent]): 200 is two threads' worth.
	RequestPercentage Key = "request_percentage"
)

// Keys returns the client quotas a [Manager] keeps, in a new slice.
func Keys() []Key { return []Key{ProducerByteRate, ConsumerByteRate, RequestPercentage} }

// ErrInvalid is the error of a quota or entity that Kafka refuses.
var ErrInvalid = errors.New("invalid client quota")

// Check returns an error wrapping [ErrInvalid] when Kafka refuses value
// for k: k is not one of [Keys]'s, value is not above zero, or a byte rate
// is fractional or beyond a long (Kafka's ClientQuotaControlManager).
func (k Key) Check(value float64) error {
	switch k {
	case ProducerByteRate, ConsumerByteRate:
		if value > 0 && math.Abs(math.Mod(value, 1)) > 1e-6 {
			return fmt.Errorf("%w: %s cannot be a fractional value", ErrInvalid, k)
		}
		if value > math.MaxInt64 {
			return fmt.Errorf("%w: proposed value for %s is too large for a LONG", ErrInvalid, k)
		}
	case RequestPercentage:
	default:
		return fmt.Errorf("%w: invalid configuration key %s", ErrInvalid, k)
	}
	if !(value > 0) || math.IsInf(value, 1) {
		return fmt.Errorf("%w: quota %s must be greater than 0", ErrInvalid, k)
	}
	return nil
}

// Component is the user or the client-id part of an [Entity]. The zero
// Component is absent: the entity does not name that part.
type Component struct {
	// Set says the entity has this part.
	Set bool
	// Default says the part is the default of its kind (Kafka's
	// <default>, a null name on the wire); Name is then empty.
	Default bool
	// Name is the user (a principal's name) or the client id.
	Name string
}

// Named returns the component naming name.
func Named(name string) Component { return Component{Set: true, Name: name} }

// DefaultComponent returns the default component (Kafka's <default>).
func DefaultComponent() Component { return Component{Set: true, Default: true} }

func (c Component) String() string {
	switch {
	case !c.Set:
		return ""
	case c.Default:
		return "<default>"
	}
	return strconv.Quote(c.Name)
}

// Entity is what a quota applies to: a user, a client id, or both, each
// named or the default (Kafka's /config/users/<user>/clients/<client-id>
// and its shorter forms).
type Entity struct {
	User     Component
	ClientID Component
}

// Check returns an error wrapping [ErrInvalid] for an entity Kafka
// refuses: one with neither part, a named part with an empty name, or a
// default that is not set.
func (e Entity) Check() error {
	if !e.User.Set && !e.ClientID.Set {
		return fmt.Errorf("%w: invalid empty client quota entity", ErrInvalid)
	}
	for _, p := range []struct {
		kind string
		c    Component
	}{{"user", e.User}, {"client-id", e.ClientID}} {
		switch {
		case !p.c.Set && (p.c.Default || p.c.Name != ""):
			return fmt.Errorf("%w: %s part is not set but names %s", ErrInvalid, p.kind, p.c.Name)
		case p.c.Set && p.c.Default && p.c.Name != "":
			return fmt.Errorf("%w: default %s with the name %q", ErrInvalid, p.kind, p.c.Name)
		case p.c.Set && !p.c.Default && p.c.Name == "":
			return fmt.Errorf("%w: empty %s not supported", ErrInvalid, p.kind)
		}
	}
	return nil
}

// String returns e as Kafka's configuration path, such as
// /config/users/"alice"/clients/<default>.
func (e Entity) String() string {
	s := "/config"
	if e.User.Set {
		s += "/users/" + e.User.String()
	}
	if e.ClientID.Set {
		s += "/clients/" + e.ClientID.String()
	}
	return s
}
