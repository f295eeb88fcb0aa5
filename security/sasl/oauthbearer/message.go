package oauthbearer

import (
	"errors"
	"strings"
)

// ErrMalformedMessage is wrapped by the errors of [ParseClientFirstMessage].
var ErrMalformedMessage = errors.New("Invalid OAUTHBEARER client first message") // Kafka's text

// ClientFirstMessage is the message an OAUTHBEARER client opens with (RFC
// 7628 section 3.1), as Kafka's OAuthBearerClientInitialResponse reads it.
type ClientFirstMessage struct {
	// AuthorizationID is the GS2 header's authzid (a=...), or "". As in
	// Kafka, =2C and =3D are kept as sent, not decoded.
	AuthorizationID string
	// Token is the bearer token of the auth key.
	Token string
	// Extensions are the other key=value pairs (KIP-342), such as
	// Confluent's logicalCluster; nil when there are none.
	Extensions map[string]string
}

// Separator is the byte between the parts of an OAUTHBEARER message; a
// client answers an error challenge with it alone (RFC 7628 section 3.2.3).
const Separator = 0x01

// ParseClientFirstMessage reads an OAUTHBEARER client's first message with
// Kafka's grammar:
//
//	n,[a=<authzid>],\x01<key>=<value>\x01...\x01
//
// The GS2 header has the flag n (no channel binding; y and p are refused)
// and an optional authzid of ASCII characters other than NUL, ',' and '=',
// with '=' only in =2C and =3D. Keys are ASCII letters; values are printable
// ASCII, space, tab, CR or LF; a key given twice keeps its last value. The
// auth key is required and holds a scheme ("Bearer", in any case), one or
// more spaces and the token: characters of -_~+/.A-Za-z0-9 followed by any
// number of '='. The other keys are the extensions.
//
// Errors wrap [ErrMalformedMessage] and never contain the message's bytes.
// The parser allocates only the strings it returns.
func ParseClientFirstMessage(b []byte) (ClientFirstMessage, error) {
	var m ClientFirstMessage
	rest, ok := cutPrefix(b, "n,")
	if !ok {
		return m, malformed("")
	}
	if after, ok := cutPrefix(rest, "a="); ok {
		end := 0
		for end < len(after) && after[end] != ',' {
			end++
		}
		if end == 0 || end == len(after) || !validSASLName(after[:end]) {
			return m, malformed("")
		}
		m.AuthorizationID = string(after[:end])
		rest = after[end:]
	}
	if rest, ok = cutPrefix(rest, ",\x01"); !ok {
		return m, malformed("")
	}
	var auth []byte
	haveAuth := false
	for {
		if len(rest) == 0 {
			return m, malformed("") // the closing separator is missing
		}
		if rest[0] == Separator {
			if len(rest) != 1 {
				return m, malformed("")
			}
			break
		}
		k := 0
		for k < len(rest) && isLetter(rest[k]) {
			k++
		}
		if k == 0 || k == len(rest) || rest[k] != '=' {
			return m, malformed("")
		}
		key := rest[:k]
		v := k + 1
		end := v
		for end < len(rest) && isValueByte(rest[end]) {
			end++
		}
		if end == v || end == len(rest) || rest[end] != Separator {
			return m, malformed("")
		}
		value := rest[v:end]
		rest = rest[end+1:]
		if string(key) == "auth" {
			auth, haveAuth = value, true
			continue
		}
		if m.Extensions == nil {
			m.Extensions = map[string]string{}
		}
		m.Extensions[string(key)] = string(value)
	}
	if !haveAuth {
		return ClientFirstMessage{}, malformed("'auth' not specified")
	}
	scheme := 0
	for scheme < len(auth) && isWordByte(auth[scheme]) {
		scheme++
	}
	spaces := scheme
	for spaces < len(auth) && auth[spaces] == ' ' {
		spaces++
	}
	token := spaces
	for token < len(auth) && isTokenByte(auth[token]) {
		token++
	}
	pad := token
	for pad < len(auth) && auth[pad] == '=' {
		pad++
	}
	if scheme == 0 || spaces == scheme || token == spaces || pad != len(auth) {
		return ClientFirstMessage{}, malformed("invalid 'auth' format")
	}
	if !strings.EqualFold(string(auth[:scheme]), "bearer") {
		return ClientFirstMessage{}, malformed("the 'auth' scheme is not Bearer")
	}
	m.Token = string(auth[spaces:])
	return m, nil
}

// AppendClientFirstMessage appends m in the form ParseClientFirstMessage
// reads, with the scheme Bearer and the extensions in the order of keys,
// as Kafka's and franz-go's clients write it.
func AppendClientFirstMessage(dst []byte, m ClientFirstMessage) []byte {
	dst = append(dst, "n,"...)
	if m.AuthorizationID != "" {
		dst = append(dst, "a="...)
		dst = append(dst, m.AuthorizationID...)
	}
	dst = append(dst, ",\x01auth=Bearer "...)
	dst = append(dst, m.Token...)
	dst = append(dst, Separator)
	for _, k := range sortedKeys(m.Extensions) {
		dst = append(dst, k...)
		dst = append(dst, '=')
		dst = append(dst, m.Extensions[k]...)
		dst = append(dst, Separator)
	}
	return append(dst, Separator)
}

func malformed(detail string) error {
	if detail == "" {
		return ErrMalformedMessage
	}
	return &messageError{detail}
}

type messageError struct{ detail string }

func (e *messageError) Error() string { return ErrMalformedMessage.Error() + ": " + e.detail }
func (e *messageError) Unwrap() error { return ErrMalformedMessage }

func cutPrefix(b []byte, prefix string) (rest []byte, ok bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// validSASLName reports whether b is a saslname of RFC 5801 as Kafka's
// pattern has it: ASCII from 0x01, no ',' and '=' only in =2C and =3D.
func validSASLName(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == 0 || c >= 0x80 || c == ',':
			return false
		case c == '=':
			if i+2 >= len(b) || b[i+1] != '3' && b[i+1] != '2' {
				return false
			}
			if b[i+1] == '2' && b[i+2] != 'C' || b[i+1] == '3' && b[i+2] != 'D' {
				return false
			}
			i += 2
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isValueByte: printable ASCII, space, tab, CR or LF (Kafka's
// [\x21-\x7E \t\r\n]).
func isValueByte(c byte) bool {
	return 0x21 <= c && c <= 0x7e || c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// isWordByte is Java's \w: ASCII letters, digits and '_'.
func isWordByte(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' || c == '_' }

// isTokenByte: RFC 6750's b64token characters, '=' aside.
func isTokenByte(c byte) bool {
	return isLetter(c) || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' || c == '+' || c == '/' || c == '.'
}
