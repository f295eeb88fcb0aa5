// Package topn selects the first n of many connections in a listing's
// order, with a heap bounded to n: what a listing of the busiest
// connections needs (internal/connreg over a registry's entries,
// connadmin over the brokers' answers), in O(m log n) time and n keys of
// memory for m connections, where sorting copies of all of them takes m
// copies.
package topn

import (
	"cmp"
	"strings"
)

// By is an order: the connections that come first in it.
type By int8

// The orders, each named by its sort key (Parse).
const (
	ByRequests By = iota + 1 // the highest request rate first
	ByBytesIn                // the highest rate of bytes in first
	ByBytesOut               // the highest rate of bytes out first
	ByIdle                   // the longest idle first: the oldest last activity
	ByAge                    // the oldest first: the earliest connection time
)

// Parse returns the order a sort key names: requests, bytes-in,
// bytes-out, idle or age.
func Parse(key string) (By, bool) {
	switch key {
	case "requests":
		return ByRequests, true
	case "bytes-in":
		return ByBytesIn, true
	case "bytes-out":
		return ByBytesOut, true
	case "idle":
		return ByIdle, true
	case "age":
		return ByAge, true
	}
	return 0, false
}

// Key is what a connection is ranked by. LastActivity and ConnectedAt are
// in one unit, whichever the caller has (nanoseconds or milliseconds).
type Key struct {
	RequestRate, BytesInRate, BytesOutRate float64
	LastActivity, ConnectedAt              int64
	ID                                     string
}

// Compare returns a negative number when a comes before b in by's order,
// a positive one when after. Ties go to the earlier connection, then to
// the lower id, as a listing orders connections, so that the order is
// total and the same on every call.
func Compare(by By, a, b *Key) int {
	var c int
	switch by {
	case ByRequests:
		c = cmp.Compare(b.RequestRate, a.RequestRate)
	case ByBytesIn:
		c = cmp.Compare(b.BytesInRate, a.BytesInRate)
	case ByBytesOut:
		c = cmp.Compare(b.BytesOutRate, a.BytesOutRate)
	case ByIdle:
		c = cmp.Compare(a.LastActivity, b.LastActivity)
	}
	if c != 0 {
		return c
	}
	if c = cmp.Compare(a.ConnectedAt, b.ConnectedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Heap keeps the keys of the first n connections offered, in by's order.
// Its root is the last of those it keeps, the one a better key pushes
// out. The caller keeps the connections themselves, in the slot Offer
// gives each.
type Heap struct {
	by    By
	n     int
	items []item
}

// item is a key kept, and the slot where the caller keeps its connection.
type item struct {
	key  Key
	slot int
}

// New returns a heap keeping the first n (at least 1) connections in by's
// order. It allocates room for n keys once, on the first Offer.
func New(by By, n int) *Heap { return &Heap{by: by, n: max(n, 1)} }

// Offer offers a connection's key k and returns the slot, from 0 to n-1,
// where the caller is to keep the connection (in place of the one the
// slot held, which no longer makes the first n), or -1 when it does not
// make the first n.
func (h *Heap) Offer(k *Key) int {
	if h.items == nil {
		h.items = make([]item, 0, h.n)
	}
	if len(h.items) < h.n {
		slot := len(h.items)
		h.items = append(h.items, item{*k, slot})
		h.up(slot)
		return slot
	}
	if Compare(h.by, k, &h.items[0].key) >= 0 {
		return -1
	}
	h.items[0].key = *k
	slot := h.items[0].slot
	h.down(0, len(h.items))
	return slot
}

// Order puts the connections kept in order, first first, in the caller's
// slots 0 to n-1 (n the number kept, which it returns): it calls swap(i,
// j) to swap the connections in slots i and j. It sorts the heap in place
// (a heapsort) and moves each connection once, along the cycles of the
// permutation, allocating nothing: offer nothing after.
func (h *Heap) Order(swap func(i, j int)) int {
	for end := len(h.items) - 1; end > 0; end-- {
		h.swap(0, end) // the last of what remains goes to its place
		h.down(0, end)
	}
	// items[i].slot is where the i-th connection is; -1 once it is in place.
	for i := range h.items {
		j := i
		for h.items[j].slot >= 0 && h.items[j].slot != i {
			next := h.items[j].slot
			swap(j, next) // the connection slot j wants is in place
			h.items[j].slot, j = -1, next
		}
		h.items[j].slot = -1
	}
	return len(h.items)
}

func (h *Heap) swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }

// after reports whether items[i] comes after items[j]: the root is the key
// that comes last.
func (h *Heap) after(i, j int) bool { return Compare(h.by, &h.items[i].key, &h.items[j].key) > 0 }

func (h *Heap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.after(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts keys[i] down among the first n keys.
func (h *Heap) down(i, n int) {
	for {
		last, l := i, 2*i+1
		if l < n && h.after(l, last) {
			last = l
		}
		if r := l + 1; r < n && h.after(r, last) {
			last = r
		}
		if last == i {
			return
		}
		h.swap(i, last)
		i = last
	}
}
