// Package propset is a reading of an example program's configuration:
// its properties, and the listeners config.Listeners read from them. The
// listener Set holds typed values only; the program's own settings, the
// security settings and the JAAS users are read from the properties
// beside it.
package propset

import (
	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/listener"
)

// Set is the listeners read from Props, and Props.
type Set struct {
	*listener.Set
	Props config.Properties
}

// Read reads the listeners of props.
func Read(props config.Properties) (*Set, error) {
	set, err := config.Listeners(props)
	if err != nil {
		return nil, err
	}
	return &Set{set, props}, nil
}

// Properties returns the properties the Set was read from.
func (s *Set) Properties() config.Properties { return s.Props }
