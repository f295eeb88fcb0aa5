package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// wiretap is a kgo Dialer that decodes every frame a client exchanges with
// the proxy: the requests' keys and versions by correlation id, and each
// response whole, at its request's version, handed to check. It sees
// plaintext only: the proxy's listener must not speak TLS.
type wiretap struct {
	check func(key int16, resp kmsg.Response) error

	mu       sync.Mutex
	byKey    map[int16]int // responses decoded, by API
	failures []string
}

func (w *wiretap) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: c, w: w, pending: map[int32][2]int16{}}, nil
}

func (w *wiretap) fail(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failures) < 20 {
		w.failures = append(w.failures, fmt.Sprintf(format, args...))
	}
}

// seen returns the responses decoded, by API name.
func (w *wiretap) seen() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, n := range w.byKey {
		out[kmsg.NameForKey(k)] = n
	}
	return out
}

type tapConn struct {
	net.Conn
	w       *wiretap
	mu      sync.Mutex
	pending map[int32][2]int16 // correlation id -> key, version
	out, in []byte             // bytes of frames not yet whole
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	for len(c.out) >= 4 {
		size := int(binary.BigEndian.Uint32(c.out))
		if len(c.out) < 4+size {
			break
		}
		frame := c.out[4 : 4+size]
		if size >= 8 {
			key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
			c.pending[int32(binary.BigEndian.Uint32(frame[4:]))] = [2]int16{key, version}
		}
		c.out = c.out[4+size:]
	}
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *tapConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.in = append(c.in, b[:n]...)
	for len(c.in) >= 4 {
		size := int(binary.BigEndian.Uint32(c.in))
		if len(c.in) < 4+size {
			break
		}
		c.decode(c.in[4 : 4+size])
		c.in = c.in[4+size:]
	}
	return n, err
}

// decode decodes one response frame and checks it.
func (c *tapConn) decode(frame []byte) {
	if len(frame) < 4 {
		c.w.fail("a response frame of %d bytes", len(frame))
		return
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	kv, ok := c.pending[corr]
	if !ok {
		c.w.fail("a response with correlation id %d, which no request had", corr)
		return
	}
	delete(c.pending, corr)
	resp := kmsg.ResponseForKey(kv[0])
	if resp == nil {
		return // a key kmsg does not know (the proxy's own admin APIs)
	}
	resp.SetVersion(kv[1])
	body := frame[4:]
	if resp.IsFlexible() && kv[0] != int16(kmsg.ApiVersions) {
		n, err := skipTags(body)
		if err != nil {
			c.w.fail("%s v%d: header: %v", kmsg.NameForKey(kv[0]), kv[1], err)
			return
		}
		body = body[n:]
	}
	err := resp.ReadFrom(body)
	if err != nil && kv[0] == int16(kmsg.ApiVersions) {
		// A version newer than the server answers is refused in the v0
		// layout, which clients read on failure (KIP-511).
		resp.SetVersion(0)
		err = resp.ReadFrom(body)
	}
	if err != nil {
		c.w.fail("%s v%d does not decode: %v", kmsg.NameForKey(kv[0]), kv[1], err)
		return
	}
	c.w.mu.Lock()
	if c.w.byKey == nil {
		c.w.byKey = map[int16]int{}
	}
	c.w.byKey[kv[0]]++
	c.w.mu.Unlock()
	if err := c.w.check(kv[0], resp); err != nil {
		c.w.fail("%s v%d: %v", kmsg.NameForKey(kv[0]), kv[1], err)
	}
}

// addresses walks v and returns every Host and Port pair of its structs,
// as host:port, and every string anywhere in it.
func addresses(v reflect.Value) (pairs, strs []string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return addresses(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil, nil // bytes: records
		}
		for i := range v.Len() {
			p, s := addresses(v.Index(i))
			pairs, strs = append(pairs, p...), append(strs, s...)
		}
	case reflect.String:
		return nil, []string{v.String()}
	case reflect.Struct:
		host, port := v.FieldByName("Host"), v.FieldByName("Port")
		if host.IsValid() && port.IsValid() && host.Kind() == reflect.String && port.CanInt() {
			pairs = append(pairs, net.JoinHostPort(host.String(), strconv.Itoa(int(port.Int()))))
		} else if host.IsValid() && port.IsValid() && port.CanUint() {
			pairs = append(pairs, net.JoinHostPort(host.String(), strconv.Itoa(int(port.Uint()))))
		}
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			p, s := addresses(v.Field(i))
			pairs, strs = append(pairs, p...), append(strs, s...)
		}
	}
	return pairs, strs
}

// noUpstreamAddress returns a check that fails a response holding any of
// the upstream addresses, as a Host and Port pair or within any string,
// or a Host and Port pair that is not one of the proxy's (ports, and the
// advertised host).
func noUpstreamAddress(upstream []string, proxyPorts func() map[string]bool, proxyHost string) func(int16, kmsg.Response) error {
	return func(key int16, resp kmsg.Response) error {
		pairs, strs := addresses(reflect.ValueOf(resp))
		for _, pair := range pairs {
			host, port, _ := net.SplitHostPort(pair)
			if key == int16(kmsg.FindCoordinator) && (host == "" || port == "-1") {
				continue // an error, without an address
			}
			if host != proxyHost || !proxyPorts()[port] {
				return fmt.Errorf("the address %s is not the proxy's", pair)
			}
		}
		for _, s := range strs {
			for _, u := range upstream {
				if strings.Contains(s, u) {
					return fmt.Errorf("the string %q holds the upstream address %s", s, u)
				}
			}
		}
		return nil
	}
}
