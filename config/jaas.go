package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
)

// KeySASLJAASConfig is Kafka's sasl.jaas.config. A broker reads it only with
// a listener and mechanism prefix, as in
// listener.name.sasl_ssl.plain.sasl.jaas.config; see [JAASUsers].
const KeySASLJAASConfig = "sasl.jaas.config"

// PlainLoginModule is the class name of Kafka's PLAIN login module, whose
// user_<name>="<password>" options list the users a broker accepts.
const PlainLoginModule = "org.apache.kafka.common.security.plain.PlainLoginModule"

// ScramLoginModule is the class name of Kafka's SCRAM login module. In
// Kafka its options username and password are the broker's own
// credentials for inter-broker connections, and the users a broker accepts
// live in the cluster's metadata; kafkanet, which has no metadata log,
// reads them from its user_<name>="<password>" options (see
// [JAASUsers]).
const ScramLoginModule = "org.apache.kafka.common.security.scram.ScramLoginModule"

// hiddenValue stands for the value of a secret setting in error messages,
// as Kafka's Password type prints.
const hiddenValue = "[hidden]"

// parsePlainJAAS reads the value of a broker's PLAIN sasl.jaas.config,
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";
//
// and returns its users (name → password), from the options named
// user_<name>. The username and password options, the broker's own identity
// for inter-broker connections, are not users and are left out, as is any
// other option.
//
// The syntax is that of Kafka's JaasConfig: a login module class name, a
// control flag (required, requisite, sufficient or optional, in any case),
// options name=value, and a terminating ';'. Tokens are separated by white
// space (any character up to U+0020). A value is a bare word, which ends at
// white space, '=', ';', a quote or '/', or a string in double or single
// quotes, in which a backslash escapes the next character (\n, \t, \r, \b,
// \f, \a, \v and octal \ooo as in Java) and which ends at its closing quote
// or at the end of the line. '/' starts a comment: // and a lone / to the
// end of the line, /* to */. When an option appears twice the last one
// counts.
//
// Kafka takes exactly one login module from sasl.jaas.config; it must be
// PlainLoginModule. A user with an empty name or password is an error, as
// Kafka's PLAIN never accepts either. Errors wrap security.ErrJAASConfig; they
// never contain an option's value.
func parsePlainJAAS(value string) (users map[string]string, err error) {
	e, err := parseOneModule(value, PlainLoginModule, "the users of SASL/PLAIN are the user_<name> options of that module")
	if err != nil {
		return nil, err
	}
	return userOptions(e, "SASL/PLAIN")
}

// parseSCRAMJAAS reads the value of a broker's SCRAM-SHA-256 or
// SCRAM-SHA-512 sasl.jaas.config,
//
//	org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret" user_alice="alice-secret";
//
// and returns its users (name → password), from the options named
// user_<name>, as parsePlainJAAS reads PlainLoginModule's. This is
// kafkanet's own: a Kafka broker keeps SCRAM credentials in its metadata
// (kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]') and
// reads only username and password here, its own identity for
// inter-broker connections, which are left out, as is any other option
// (tokenauth). The syntax and errors are parsePlainJAAS's; the one module
// must be ScramLoginModule. A configuration without user options gives no
// users and no error.
func parseSCRAMJAAS(value string) (users map[string]string, err error) {
	e, err := parseOneModule(value, ScramLoginModule,
		"a broker's SCRAM users are the user_<name> options of that module (kafkanet keeps no SCRAM credentials in a metadata log)")
	if err != nil {
		return nil, err
	}
	return userOptions(e, "SASL/SCRAM")
}

// userOptions returns the users of a login module's user_<name> options.
func userOptions(e jaasEntry, mechanism string) (users map[string]string, err error) {
	users = map[string]string{}
	for _, o := range e.options {
		name, ok := strings.CutPrefix(o.key, "user_")
		if !ok {
			continue
		}
		if name == "" {
			return nil, jaasError("option user_ names no user: a user option is user_<name>=\"<password>\"")
		}
		users[name] = o.value
	}
	for name, password := range users {
		if password == "" {
			return nil, jaasError(fmt.Sprintf("user %q has an empty password, which %s never accepts", name, mechanism))
		}
	}
	return users, nil
}

// parseOneModule reads a JAAS configuration that must hold exactly one
// login module, module, as Kafka takes one from sasl.jaas.config; why
// says what the module is for, in the error for another.
func parseOneModule(value, module, why string) (jaasEntry, error) {
	entries, err := parseJAAS(value)
	if err != nil {
		return jaasEntry{}, err
	}
	switch len(entries) {
	case 0:
		return jaasEntry{}, jaasError("JAAS config property does not contain any login modules")
	case 1:
	default:
		return jaasEntry{}, jaasError(fmt.Sprintf("JAAS config property contains %d login modules, should be 1 module", len(entries)))
	}
	e := entries[0]
	if e.module != module {
		return jaasEntry{}, jaasError(fmt.Sprintf("login module %s is not %s: %s", describeToken(e.module, e.moduleQuoted), module, why))
	}
	return e, nil
}

func jaasError(msg string) error { return configerr.Rule(msg, security.ErrJAASConfig) }

// plainNameRE is the shape of a token that may be echoed in an error: a
// class name, control flag or option name. Anything else might be a
// misplaced secret.
var plainNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.$-]{0,200}$`)

func describeToken(tok string, quoted bool) string {
	if !quoted && plainNameRE.MatchString(tok) {
		return "'" + tok + "'"
	}
	return "(a token not shown)"
}

// jaasEntry is one login module of a JAAS configuration.
type jaasEntry struct {
	module       string
	moduleQuoted bool
	flag         string
	options      []jaasOption // in order; later ones win
}

type jaasOption struct{ key, value string }

// parseJAAS follows Kafka's JaasConfig constructor: entries until the end.
func parseJAAS(s string) ([]jaasEntry, error) {
	t := &jaasTokenizer{src: []rune(s), peek: needChar}
	var entries []jaasEntry
	for t.next() != ttEOF {
		e, err := parseJAASEntry(t)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, jaasError("Login module not specified in JAAS config")
	}
	return entries, nil
}

func parseJAASEntry(t *jaasTokenizer) (jaasEntry, error) {
	e := jaasEntry{module: t.sval, moduleQuoted: t.ttype != ttWord}
	moduleSet := t.hasSval
	if t.next() == ttEOF {
		return e, jaasError("Login module control flag not specified in JAAS config")
	}
	if !t.hasSval {
		return e, jaasError("Login module control flag is not available in the JAAS config")
	}
	switch strings.ToUpper(t.sval) {
	case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
		e.flag = strings.ToLower(t.sval)
	default:
		return e, jaasError(fmt.Sprintf("Invalid login module control flag %s in JAAS config", describeToken(t.sval, t.ttype != ttWord)))
	}
	for t.next() != ttEOF && t.ttype != ';' {
		key, keyQuoted, keySet := t.sval, t.ttype != ttWord, t.hasSval
		if t.next() != '=' || t.next() == ttEOF || !t.hasSval {
			return e, jaasError(fmt.Sprintf("Value not specified for key %s in JAAS config", describeToken(key, keyQuoted || !keySet)))
		}
		if keySet { // Java stores a null name too; it can name no user
			e.options = append(e.options, jaasOption{key, t.sval})
		}
	}
	if t.ttype != ';' {
		return e, jaasError("JAAS config entry not terminated by semi-colon")
	}
	if !moduleSet || e.module == "" {
		return e, jaasError("Login module name not specified in JAAS config")
	}
	return e, nil
}

// Token types of jaasTokenizer besides a quote character or an ordinary
// character, which are their own types, as in Java's StreamTokenizer.
const (
	ttEOF  = -1
	ttWord = -3

	needChar = -4 // no character is waiting
)

// jaasTokenizer is Java's StreamTokenizer with the syntax Kafka's JaasConfig
// sets: characters up to ' ' are white space; '/' is a comment character,
// with // and /* */ comments too; double and single quotes quote; ';' and
// '=' (and the C1 controls U+0081 to U+009F, which resetSyntax leaves
// ordinary) are tokens of their own; every other character is part of a
// word.
type jaasTokenizer struct {
	src     []rune
	pos     int
	peek    int // a character read ahead, or needChar
	ttype   int
	sval    string
	hasSval bool // Java's sval != null
}

const (
	ctWhite = iota
	ctWord
	ctQuote
	ctComment
	ctOrdinary
)

func jaasCharType(c int) int {
	switch {
	case c < 0:
		return ctWhite
	case c <= ' ':
		return ctWhite
	case c == '"' || c == '\'':
		return ctQuote
	case c == '/':
		return ctComment
	case c == ';' || c == '=':
		return ctOrdinary
	case c <= 128, c >= 160:
		return ctWord
	}
	return ctOrdinary // 129 to 159
}

func (t *jaasTokenizer) read() int {
	if t.pos >= len(t.src) {
		return -1
	}
	c := t.src[t.pos]
	t.pos++
	return int(c)
}

// skipLine reads up to a line end, which it leaves waiting.
func (t *jaasTokenizer) skipLine() {
	c := t.read()
	for c != '\n' && c != '\r' && c >= 0 {
		c = t.read()
	}
	t.peek = c
}

func (t *jaasTokenizer) next() int {
	t.sval, t.hasSval = "", false
	for {
		c := t.peek
		t.peek = needChar
		if c == needChar {
			c = t.read()
		}
		if c < 0 {
			t.ttype = ttEOF
			return t.ttype
		}
		for jaasCharType(c) == ctWhite {
			c = t.read()
			if c < 0 {
				t.ttype = ttEOF
				return t.ttype
			}
		}
		switch jaasCharType(c) {
		case ctWord:
			var b strings.Builder
			for jaasCharType(c) == ctWord && c >= 0 {
				b.WriteRune(rune(c))
				c = t.read()
			}
			t.peek = c
			t.ttype, t.sval, t.hasSval = ttWord, b.String(), true
			return t.ttype
		case ctQuote:
			t.ttype = c
			t.sval, t.hasSval = t.quoted(c), true
			return t.ttype
		case ctComment:
			c = t.read()
			switch c {
			case '*':
				prev := 0
				for {
					c = t.read()
					if c == '/' && prev == '*' {
						break
					}
					if c < 0 {
						t.ttype = ttEOF
						return t.ttype
					}
					prev = c
				}
			case '/':
				t.skipLine()
			default:
				// A lone '/' comments out the rest of the line, counted
				// from after the character already read, even when that
				// character ends the line: Java's quirk, kept.
				t.skipLine()
			}
			continue
		default:
			t.ttype = c
			return t.ttype
		}
	}
}

// quoted reads a quoted string whose opening quote q was read.
func (t *jaasTokenizer) quoted(q int) string {
	var b strings.Builder
	d := t.read()
	for d >= 0 && d != q && d != '\n' && d != '\r' {
		var c int
		if d == '\\' {
			c = t.read()
			first := c
			if c >= '0' && c <= '7' {
				c -= '0'
				c2 := t.read()
				if c2 >= '0' && c2 <= '7' {
					c = c<<3 + (c2 - '0')
					c2 = t.read()
					if c2 >= '0' && c2 <= '7' && first <= '3' {
						c = c<<3 + (c2 - '0')
						d = t.read()
					} else {
						d = c2
					}
				} else {
					d = c2
				}
			} else {
				switch c {
				case 'a':
					c = 0x7
				case 'b':
					c = '\b'
				case 'f':
					c = 0xC
				case 'n':
					c = '\n'
				case 'r':
					c = '\r'
				case 't':
					c = '\t'
				case 'v':
					c = 0xB
				case -1:
					c = 0xFFFF // Java stores (char) -1
				}
				d = t.read()
			}
		} else {
			c = d
			d = t.read()
		}
		b.WriteRune(rune(c))
	}
	if d != q {
		t.peek = d
	}
	return b.String()
}

// scramUsers returns the users of a listener's SCRAM mechanism
// (SCRAM-SHA-256 or SCRAM-SHA-512), read with parseSCRAMJAAS from
// the listener's mechanism-prefixed sasl.jaas.config, such as
// listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config; keySet reports
// whether the key is set. A key set without user options gives no users
// (the broker's own username and password are no users), which
// [JAASUsers] warns about. Errors are *config.Error
// values wrapping security.ErrJAASConfig, with the value shown as [hidden].
func scramUsers(props Properties, name protocolmap.ListenerName, mechanism string) (users map[string]string, keySet bool, err error) {
	key := MechanismKey(name, mechanism, KeySASLJAASConfig)
	v, ok := props.Get(key)
	if !ok {
		return nil, false, nil
	}
	users, err = parseSCRAMJAAS(v)
	if err != nil {
		return nil, true, &Error{Key: key, Value: hiddenValue, Rule: err.Error(), Err: security.ErrJAASConfig}
	}
	return users, true, nil
}

// plainUsers returns the SASL/PLAIN users (name → password) of a listener,
// read with parsePlainJAAS from the listener's PLAIN sasl.jaas.config, such as
// listener.name.sasl_ssl.plain.sasl.jaas.config. Like Kafka, it reads no
// other key: a sasl.jaas.config without the mechanism prefix (with or
// without the listener prefix) does not apply to a broker. If one is set,
// ignored is its key (the listener-prefixed form when both are set), so
// that the caller can warn as Kafka does ("Server config sasl.jaas.config
// should be prefixed with SASL mechanism name, ignoring config"); it is
// reported whether or not err is nil.
//
// When the key is not set the error names it; Kafka would fall back to a
// static JAAS file, which this package does not read. Errors are
// *config.Error values wrapping security.ErrJAASConfig, with the
// value shown as [hidden].
func plainUsers(props Properties, name protocolmap.ListenerName) (users map[string]string, ignored string, err error) {
	if _, from, ok := props.ListenerValue(name, KeySASLJAASConfig); ok {
		ignored = from
	}
	key := MechanismKey(name, "PLAIN", KeySASLJAASConfig)
	v, ok := props.Get(key)
	if !ok {
		rule := fmt.Sprintf("SASL/PLAIN on listener %s needs its users in %s (%s required user_<name>=\"<password>\" ...;)", name, key, PlainLoginModule)
		if ignored != "" {
			rule += fmt.Sprintf("; %s is set but a broker ignores it without the listener and mechanism prefix", ignored)
		}
		return nil, ignored, &Error{Key: key, Rule: rule, Err: security.ErrJAASConfig}
	}
	users, err = parsePlainJAAS(v)
	if err != nil {
		return nil, ignored, &Error{Key: key, Value: hiddenValue, Rule: err.Error(), Err: security.ErrJAASConfig}
	}
	return users, ignored, nil
}
