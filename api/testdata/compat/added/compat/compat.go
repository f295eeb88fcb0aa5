// Package compat is a fixture of the API compatibility check.
package compat

// Conn is a connection.
type Conn struct{ Name string }

// Hook is implemented by users.
type Hook interface {
	OnOpen(*Conn)
}

// Open opens a connection.
func Open(name string) (*Conn, error) { return &Conn{Name: name}, nil }

// Close closes c.
func (c *Conn) Close() error { return nil }

// Dial is new.
func Dial(name string) (*Conn, error) { return Open(name) }

// Addr is new.
func (c *Conn) Addr() string { return c.Name }
