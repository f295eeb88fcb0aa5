package connregistry

import (
	"fmt"

	"github.com/kafkanet/kafkanet/internal/topn"
)

// SortKey orders a listing ([Registry.Top], ListClientConnections'
// SortBy): the connections that come first. Its values are the CLI's
// --sort-by tokens. Ties go to the earlier connection, then to the lower
// connection id.
type SortKey string

// The sort keys.
const (
	// SortByRequests ("requests"): the highest request rate first
	// ([Conn.RequestRate]).
	SortByRequests SortKey = "requests"
	// SortByBytesIn ("bytes-in"): the highest rate of bytes received
	// first ([Conn.BytesInRate]).
	SortByBytesIn SortKey = "bytes-in"
	// SortByBytesOut ("bytes-out"): the highest rate of bytes sent first
	// ([Conn.BytesOutRate]).
	SortByBytesOut SortKey = "bytes-out"
	// SortByIdle ("idle"): the longest idle first, by [Conn.LastActivity].
	SortByIdle SortKey = "idle"
	// SortByAge ("age"): the oldest first, by [Info.ConnectedAt].
	SortByAge SortKey = "age"
)

// Validate returns an error wrapping [ErrInvalidFilter], naming the key,
// when k is none of the sort keys.
func (k SortKey) Validate() error {
	_, err := k.order()
	return err
}

// order is the internal order k names.
func (k SortKey) order() (topn.By, error) {
	by, ok := topn.Parse(string(k))
	if !ok {
		return 0, fmt.Errorf("%w: sort key %q: expected requests, bytes-in, bytes-out, idle or age", ErrInvalidFilter, string(k))
	}
	return by, nil
}
