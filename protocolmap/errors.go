package protocolmap

import (
	"errors"
)

// Sentinel errors wrapped by config.Error; test for them with errors.Is.
var (
	// ErrUnknownSecurityProtocol: a value is not one of PLAINTEXT, SSL,
	// SASL_PLAINTEXT or SASL_SSL.
	ErrUnknownSecurityProtocol = errors.New("unknown security protocol")
	// ErrBlankListenerName: a listener name is empty or only white space.
	ErrBlankListenerName = errors.New("blank listener name")
	// ErrMissingColon: a map entry has no colon between key and value.
	ErrMissingColon = errors.New("map entry without colon")
	// ErrBlankKey: a map entry has nothing before its colon.
	ErrBlankKey = errors.New("blank map key")
	// ErrDuplicateKey: a map key appears more than once (compared without
	// regard to case).
	ErrDuplicateKey = errors.New("duplicate map key")
)
