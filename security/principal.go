package security

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/kafkanet/kafkanet/internal/configerr"
)

// DefaultPrincipalMappingRules is Kafka's default for
// ssl.principal.mapping.rules: the principal name is the whole DN.
const DefaultPrincipalMappingRules = "DEFAULT"

// Sentinel errors of principal mapping; test for them with errors.Is.
var (
	// ErrInvalidPrincipalRule: ssl.principal.mapping.rules does not parse.
	ErrInvalidPrincipalRule = errors.New("invalid principal mapping rule")
	// ErrNoMatchingRule: no rule of a [PrincipalMapper] applies to a DN.
	ErrNoMatchingRule = errors.New("no principal mapping rule applies")
)

// javaDot is Java's '.' without DOTALL: any character but a line
// terminator.
const javaDot = `[^\n\r\x{85}\x{2028}\x{2029}]`

// javaSpace is Java's \s: ASCII white space, including the vertical tab
// that RE2's \s leaves out.
const javaSpace = `[ \t\n\x0B\f\r]`

// ruleGrammar is the grammar of one rule: DEFAULT, RULE:pattern/replacement/
// with an optional L or U, or (last) anything at all, which a rule that is
// not empty fails on for the unmatched text. In pattern and replacement a
// backslash escapes the next character, so \/ does not end them. The
// alternatives are tried in order (leftmost-first), which RE2 shares with
// Java.
const ruleGrammar = `(DEFAULT)|RULE:((?:\\` + javaDot + `|[^\\/])*)/((?:\\` + javaDot + `|[^\\/])*)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`

var (
	// ruleSplitter finds the rules of the whole value: each rule with the
	// white space around it, ended by a comma or the end of the value (or a
	// Unicode line terminator at its very end, where Java's $ also matches).
	// Group 1 is the rule.
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + ruleGrammar + `)` + javaSpace + `*(?:,` + javaSpace + `*|[\x{85}\x{2028}\x{2029}]?\z)`)
	// ruleParser reads one rule from its start. Groups: 1 DEFAULT, 2 the
	// pattern, 3 the replacement, 4 the case flag, 5 anything else.
	ruleParser = regexp.MustCompile(`\A(?:` + ruleGrammar + `)`)
)

// PrincipalMapper applies Kafka's ssl.principal.mapping.rules (KIP-371) to
// the distinguished names of client certificates. A nil *PrincipalMapper
// acts as the default rule set, DEFAULT. Build one with
// [ParsePrincipalMappingRules]; it is safe for concurrent use.
type PrincipalMapper struct {
	rules []principalRule
}

// principalRule is DEFAULT (re nil) or RULE:pattern/replacement/[LU].
type principalRule struct {
	source      string         // the pattern as written
	replacement string         // the replacement as written
	re          *regexp.Regexp // the pattern, searched as Java's replaceAll does
	full        *regexp.Regexp // the pattern anchored at both ends
	template    []replacementPart
	lower       bool
	upper       bool
}

// replacementPart is literal text, or (group >= 0) a capturing group.
type replacementPart struct {
	literal string
	group   int
}

// ParsePrincipalMappingRules parses a value of ssl.principal.mapping.rules
// with Kafka's grammar: a comma-separated list of rules, each DEFAULT or
// RULE:pattern/replacement/ optionally followed by L or U, with white space
// around rules ignored. Commas inside a rule's pattern do not split the
// list, because a rule runs to its second unescaped slash (a backslash
// escapes a slash in the pattern or the replacement). Empty entries are
// ignored, so an empty value gives a mapper with no rules, which maps
// nothing.
//
// Patterns are Go regular expressions (RE2 syntax), which accept most of
// what Kafka's Java patterns use; Java-only features (back-references,
// lookahead and lookbehind, possessive quantifiers, atomic groups, \Z) give
// an error. A few constructs read differently without an error: Java's
// class intersection [a-z&&[^b]] is a plain class in RE2, and $ (without
// the m flag) matches only at the very end, where Java's also matches
// before a final line break. Matching takes time linear in the DN, so no
// rule can make a certificate DN expensive to map. The replacement uses Java's syntax: $n and ${name} refer to
// groups, a backslash makes the next character literal, and, as in Kafka,
// a reference to a group the pattern does not have (such as $4 with three
// groups) is kept as literal text.
//
// Errors wrap [ErrInvalidPrincipalRule] and read as Kafka's: "Invalid rule:
// ...". Two are found here that Kafka meets only when a rule is applied: a
// malformed replacement (a trailing backslash, a $ not followed by a group)
// and a group reference in a pattern without groups.
func ParsePrincipalMappingRules(s string) (*PrincipalMapper, error) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' }) // Java's String.trim
	m := &PrincipalMapper{}
	for _, loc := range ruleSplitter.FindAllStringSubmatchIndex(s, -1) {
		text := s[loc[2]:loc[3]]
		g := ruleParser.FindStringSubmatchIndex(text)
		if g[1] != len(text) {
			return nil, configerr.Rule(fmt.Sprintf("Invalid rule: `%s`, unmatched substring: `%s`", text, text[g[1]:]), ErrInvalidPrincipalRule)
		}
		switch {
		case g[2] >= 0:
			m.rules = append(m.rules, principalRule{})
		case g[4] >= 0:
			r, err := newPrincipalRule(text, text[g[4]:g[5]], text[g[6]:g[7]], text[g[8]:g[9]])
			if err != nil {
				return nil, err
			}
			m.rules = append(m.rules, r)
		}
		// Otherwise the entry is empty, and ignored.
	}
	return m, nil
}

func newPrincipalRule(text, pattern, replacement, flag string) (principalRule, error) {
	r := principalRule{source: pattern, replacement: replacement, lower: flag == "L", upper: flag == "U"}
	var err error
	if r.re, err = regexp.Compile(pattern); err != nil {
		return r, configerr.Rule(fmt.Sprintf("Invalid rule: `%s`: the pattern is not a regular expression this package reads (RE2 syntax; "+
			"Java-only features such as back-references, lookaround, possessive quantifiers and atomic groups are not supported): %v", text, err), ErrInvalidPrincipalRule)
	}
	if r.full, err = regexp.Compile(`\A(?:` + pattern + `)\z`); err != nil {
		return r, configerr.Rule(fmt.Sprintf("Invalid rule: `%s`: the pattern cannot be anchored: %v", text, err), ErrInvalidPrincipalRule)
	}
	if r.template, err = parseReplacement(replacement, r.re); err != nil {
		return r, configerr.Rule(fmt.Sprintf("Invalid rule: `%s`: replacement %s", text, err), ErrInvalidPrincipalRule)
	}
	return r, nil
}

// parseReplacement reads a Java replacement string against re's groups.
func parseReplacement(s string, re *regexp.Regexp) ([]replacementPart, error) {
	groups := re.NumSubexp()
	var parts []replacementPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replacementPart{literal: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("ends with a backslash: the character to be escaped is missing")
			}
			_, size := utf8.DecodeRuneInString(s[i+1:])
			lit.WriteString(s[i+1 : i+1+size])
			i += 1 + size
		case c == '$':
			if i+1 == len(s) {
				return nil, errors.New("ends with $: illegal group reference, the group index is missing")
			}
			next := s[i+1]
			switch {
			case next == '{':
				end := strings.IndexByte(s[i+2:], '}')
				if end < 0 {
					return nil, errors.New("has a named group reference without its closing '}'")
				}
				name := s[i+2 : i+2+end]
				g := re.SubexpIndex(name)
				if name == "" || g < 0 {
					return nil, fmt.Errorf("refers to ${%s}, but the pattern has no group of that name", name)
				}
				flush()
				parts = append(parts, replacementPart{group: g})
				i += 3 + end
			case next >= '0' && next <= '9':
				ref := int(next - '0')
				if ref > groups && groups > 0 {
					// Kafka escapes a reference to a group the pattern
					// lacks, leaving "$" and the digits as literal text.
					lit.WriteByte('$')
					i++
					continue
				}
				if ref > groups {
					return nil, fmt.Errorf("refers to group %d, but the pattern has no groups", ref)
				}
				// Java takes as many further digits as still name a group.
				j := i + 2
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					more := ref*10 + int(s[j]-'0')
					if more > groups {
						break
					}
					ref = more
					j++
				}
				flush()
				parts = append(parts, replacementPart{group: ref})
				i = j
			default:
				return nil, fmt.Errorf("has an illegal group reference: $ must be followed by a group number or {name} (write \\$ for a literal $)")
			}
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return parts, nil
}

// Name maps a distinguished name (as [SubjectDN] writes it) to a principal
// name. The rules are tried in order; the first that applies gives the
// name. DEFAULT applies to every DN and gives it unchanged. A RULE applies
// when its pattern matches the whole DN; the name is then the DN with every
// match of the pattern replaced by the replacement (as Java's replaceAll
// does: for a pattern that matches the whole DN, that is the replacement
// alone), lower-cased with /L or upper-cased with /U (Unicode simple case
// mapping, where Java uses full case mapping in the English locale).
//
// One corner differs from Kafka: where a pattern can also match the empty
// string right after a match (an unanchored .* or (.*)$), Java's
// replaceAll replaces that empty match too, so Kafka maps "CN=a" with
// RULE:.*/x/ to "xx"; here it gives "x". Anchor such a pattern with ^.
//
// When no rule applies the error wraps [ErrNoMatchingRule] and reads as
// Kafka's: "No rules apply to <dn>, rules [...]".
func (m *PrincipalMapper) Name(dn string) (string, error) {
	if m == nil {
		return dn, nil
	}
	for _, r := range m.rules {
		if name, ok := r.apply(dn); ok {
			return name, nil
		}
	}
	return "", configerr.Rule(fmt.Sprintf("No rules apply to %s, rules %s", dn, m), ErrNoMatchingRule)
}

func (r principalRule) apply(dn string) (string, bool) {
	if r.re == nil {
		return dn, true
	}
	if !r.full.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, loc := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:loc[0]])
		for _, p := range r.template {
			if p.group < 0 {
				b.WriteString(p.literal)
			} else if start := loc[2*p.group]; start >= 0 {
				b.WriteString(dn[start:loc[2*p.group+1]])
			}
		}
		last = loc[1]
	}
	b.WriteString(dn[last:])
	name := b.String()
	switch {
	case r.lower:
		name = strings.ToLower(name)
	case r.upper:
		name = strings.ToUpper(name)
	}
	return name, true
}

// String lists the rules as Kafka prints them, for example
// "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT]". A nil mapper prints
// as "[DEFAULT]".
func (m *PrincipalMapper) String() string {
	if m == nil {
		return "[" + DefaultPrincipalMappingRules + "]"
	}
	s := make([]string, len(m.rules))
	for i, r := range m.rules {
		if r.re == nil {
			s[i] = DefaultPrincipalMappingRules
			continue
		}
		s[i] = "RULE:" + r.source + "/" + r.replacement
		if r.lower {
			s[i] += "/L"
		} else if r.upper {
			s[i] += "/U"
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// rfc2253Keywords are the attribute types Java names in RFC 2253 output;
// any other type is written as its dotted OID with a hexadecimal value.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// rawATV and rawRDNSET read a Name keeping each value's ASN.1 encoding,
// which decides how the value is written.
type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

type rawRDNSET []rawATV

// SubjectDN returns the distinguished name of cert's subject as Java's
// X500Principal.getName() writes it (RFC 2253), which is the string Kafka
// applies ssl.principal.mapping.rules to:
//
//   - relative distinguished names in reverse order of the certificate's
//     encoding, so the most specific comes first
//     (CN=...,OU=...,O=...,L=...,ST=...,C=...), separated by commas without
//     spaces, and the values of a multi-valued one joined with '+';
//   - the attribute types CN, C, L, ST, O, OU, STREET, DC and UID by name,
//     any other (such as emailAddress or serialNumber) as its dotted OID;
//   - values of a string type (UTF8String, PrintableString, IA5String,
//     TeletexString, BMPString, GeneralString) as text, with , = + < > # ;
//     " and \ escaped by a backslash, NUL written \00, and leading and
//     trailing spaces escaped; other values, and every value of a type
//     written as an OID, as '#' and the hexadecimal DER encoding.
//
// As in Java, the bytes of a string value are read as UTF-8 whatever its
// type.
func SubjectDN(cert *x509.Certificate) string {
	var rdns []rawRDNSET
	rest, err := asn1.Unmarshal(cert.RawSubject, &rdns)
	if err != nil || len(rest) > 0 {
		return cert.Subject.String()
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeATV(&b, atv)
		}
	}
	return b.String()
}

func writeATV(b *strings.Builder, atv rawATV) {
	oid := atv.Type.String()
	keyword, named := rfc2253Keywords[oid]
	if !named {
		keyword = oid
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	if !named || !isDERString(atv.Value) {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	var esc []rune
	for _, c := range string(atv.Value.Bytes) {
		switch {
		case strings.ContainsRune(",=+<>#;\"\\", c):
			esc = append(esc, '\\', c)
		case c == 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, c)
		}
	}
	lead := 0
	for lead < len(esc) && (esc[lead] == ' ' || esc[lead] == '\r') {
		lead++
	}
	trail := len(esc) - 1
	for trail >= 0 && (esc[trail] == ' ' || esc[trail] == '\r') {
		trail--
	}
	for i, c := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
}

// isDERString reports whether Java writes a value of this type as text.
func isDERString(v asn1.RawValue) bool {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagGeneralString, asn1.TagBMPString, asn1.TagUTF8String:
		return true
	}
	return false
}
