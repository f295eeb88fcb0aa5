package security_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/kafkanet/kafkanet/internal/testkit"
	"github.com/kafkanet/kafkanet/security"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kafkaDocRules is the example of ssl.principal.mapping.rules in Kafka's
// security documentation.
const kafkaDocRules = `RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT`

func TestPrincipalMapperName(t *testing.T) {
	// The mapper of Kafka's SslPrincipalMapperTest.
	kafkaTestRules := strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", ")
	tests := []struct {
		rules, dn, want string
	}{
		{kafkaDocRules, "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"},
		{kafkaDocRules, "CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"},
		{kafkaDocRules, "CN=kafka-server1, OU=KAFKA", "kafka"},
		{kafkaDocRules, "CN=kafka1.example.com,OU=KAFKA", "kafka1.example.com"},
		{kafkaDocRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		{kafkaTestRules, "CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"},
		{kafkaTestRules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"},
		{kafkaTestRules, "cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"},
		{kafkaTestRules, "cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"},
		{kafkaTestRules, "OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"},
		// Kafka's testCommaWithWhitespace: an escaped comma inside the CN.
		{`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`, `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`, `Tkac\, Adam`},
		{"DEFAULT", "CN=x", "CN=x"},
		{"RULE:^CN=([^,]*).*$/$1/U", "CN=Bob,O=x", "BOB"},
		// The pattern must match the whole DN, not a part.
		{"RULE:CN=([^,]*)/$1/,DEFAULT", "CN=a,OU=b", "CN=a,OU=b"},
		{"RULE:CN=([^,]*)/$1/,DEFAULT", "CN=a", "a"},
		// References to groups the pattern lacks are literal text.
		{"RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$4/", "CN=a,OU=b,O=c", "a@$4"},
		{"RULE:^CN=(.*)$/$12/", "CN=x", "x2"},
		{"RULE:^CN=(.*)$/$0!/", "CN=x", "CN=x!"},
		{"RULE:^CN=(.*)$/\\$1-$1/", "CN=x", "$1-x"},
		{"RULE:^CN=(?P<cn>[^,]*)$/${cn}/U", "CN=x", "X"},
		{"RULE:^CN=(?<cn>[^,]*)$/user:${cn}/", "CN=x", "user:x"},
		{"RULE:^CN=(a)?(.*)$/[$1]$2/", "CN=b", "[]b"},
		// Escaped slashes in the pattern and the replacement.
		{`RULE:^CN=(.*)\/(.*)$/$2\/$1/`, "CN=a/b", "b/a"},
		// A pattern that does not start at the beginning is searched as
		// Java's replaceAll does: every match is replaced.
		{"RULE:[a-c]/x/", "b", "x"},
		{"RULE:([a-z])([a-z])?/$2$1/", "ab", "ba"},
		{"RULE:^(.*)$//", "anything", ""},
		// Kafka gives "xx" here: Java's replaceAll also replaces the empty
		// match at the end (see the Name documentation).
		{"RULE:.*/x/", "CN=a", "x"},
	}
	for _, tt := range tests {
		m, err := security.ParsePrincipalMappingRules(tt.rules)
		require.NoError(t, err, tt.rules)
		got, err := m.Name(tt.dn)
		require.NoError(t, err, "%s on %s", tt.rules, tt.dn)
		assert.Equal(t, tt.want, got, "%s on %s", tt.rules, tt.dn)
	}
}

func TestPrincipalMapperNoMatch(t *testing.T) {
	m, err := security.ParsePrincipalMappingRules("RULE:^CN=(.*)$/$1/L, RULE:^UID=(.*)$/$1/")
	require.NoError(t, err)
	_, err = m.Name("OU=x")
	require.ErrorIs(t, err, security.ErrNoMatchingRule)
	assert.Equal(t, "No rules apply to OU=x, rules [RULE:^CN=(.*)$/$1/L, RULE:^UID=(.*)$/$1]", err.Error())

	empty, err := security.ParsePrincipalMappingRules("")
	require.NoError(t, err)
	_, err = empty.Name("CN=x")
	assert.ErrorIs(t, err, security.ErrNoMatchingRule)

	var none *security.PrincipalMapper
	got, err := none.Name("CN=x")
	require.NoError(t, err)
	assert.Equal(t, "CN=x", got, "a nil mapper is DEFAULT")
	assert.Equal(t, "[DEFAULT]", none.String())
}

// TestPrincipalMappingRulesSplitting is Kafka's testRulesSplitting: how a
// value splits into rules, shown by the mapper's String.
func TestPrincipalMappingRulesSplitting(t *testing.T) {
	tests := []struct{ rules, want string }{
		{"", "[]"},
		{"DEFAULT", "[DEFAULT]"},
		{"RULE://", "[RULE:/]"},
		{"RULE:/.*/", "[RULE:/.*]"},
		{"RULE:/.*/L", "[RULE:/.*/L]"},
		{"RULE://,DEFAULT", "[RULE:/, DEFAULT]"},
		{"  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"},
		{"  RULE:   /     / ,  DEFAULT  ", "[RULE:   /     , DEFAULT]"},
		{"  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"},
		{"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"},
		// Empty rules are ignored.
		{",   , , ,      , , ,   ", "[]"},
		{",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"},
		{",  , RULE: /   /    ,,,   DEFAULT, ,   ", "[RULE: /   , DEFAULT]"},
		{"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,", "[RULE:   /  /U, DEFAULT]"},
		// Escape sequences.
		{`RULE:\/\\\(\)\n\t/\/\//`, `[RULE:\/\\\(\)\n\t/\/\/]`},
		{`RULE:\**\/+/*/L,RULE:\/*\**/**/`, `[RULE:\**\/+/*/L, RULE:\/*\**/**]`},
		// Rules that look like lists of rules.
		{
			"RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
			"[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
		},
		// The documentation's example keeps the commas of its patterns.
		{kafkaDocRules, "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1, RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L, DEFAULT]"},
	}
	for _, tt := range tests {
		m, err := security.ParsePrincipalMappingRules(tt.rules)
		require.NoError(t, err, tt.rules)
		assert.Equal(t, tt.want, m.String(), tt.rules)
	}
	// An escaped pattern works as Kafka's would.
	m, err := security.ParsePrincipalMappingRules(`RULE:\/\\\(\)\n\t/\/\//`)
	require.NoError(t, err)
	got, err := m.Name("/\\()\n\t")
	require.NoError(t, err)
	assert.Equal(t, "//", got)
}

func TestParsePrincipalMappingRulesValid(t *testing.T) {
	// Kafka's testValidRules.
	for _, rules := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		_, err := security.ParsePrincipalMappingRules(rules)
		assert.NoError(t, err, rules)
	}
}

func TestParsePrincipalMappingRulesInvalid(t *testing.T) {
	tests := []struct{ rules, msg string }{
		// Kafka's testInvalidRules.
		{"default", "Invalid rule: `default`, unmatched substring: `default`"},
		{"DEFAUL", "Invalid rule: `DEFAUL`, unmatched substring: `DEFAUL`"},
		{"DEFAULT/L", "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"},
		{"DEFAULT/U", "unmatched substring: `/U`"},
		{"RULE:CN=(.*?),OU=ServiceUsers.*/$1", "Invalid rule: `RULE:CN=(.*?)`"},
		{"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "Invalid rule: `rule:^CN=(.*?)`"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "unmatched substring: `/U`"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "Invalid rule"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "Invalid rule"},
		{"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU", "Invalid rule"},
		{"DEFAULT,RULE:x/y/Z", "unmatched substring: `Z`"},
		// Java features RE2 lacks.
		{`RULE:^CN=(\w+)\1$/$1/`, "back-references"},
		{`RULE:^(?=CN).*$/x/`, "RE2 syntax"},
		{`RULE:^(?<!O)CN=(.*)$/$1/`, "RE2 syntax"},
		{`RULE:^CN=a*+$/x/`, "possessive"},
		{`RULE:^CN=(?>a)$/x/`, "atomic groups"},
		{`RULE:^CN=(.*$/x/`, "not a regular expression"},
		// Replacements Java cannot apply.
		{`RULE:^CN=.*$/$1/`, "no groups"},
		{`RULE:^CN=(.*)$/$x/`, "illegal group reference"},
		{`RULE:^CN=(.*)$/a$/`, "ends with $"},
		{`RULE:^CN=(.*)$/${nope}/`, "${nope}"},
		{`RULE:^CN=(.*)$/${cn/`, "closing"},
	}
	for _, tt := range tests {
		_, err := security.ParsePrincipalMappingRules(tt.rules)
		require.Error(t, err, tt.rules)
		assert.ErrorIs(t, err, security.ErrInvalidPrincipalRule, tt.rules)
		assert.Contains(t, err.Error(), tt.msg, tt.rules)
	}
}

// rawName encodes a subject DN from RDNs of (OID, raw value) pairs, in the
// given order (no DER sorting of multi-valued RDNs).
func rawName(t *testing.T, rdns ...[]any) []byte {
	t.Helper()
	var seq []byte
	for _, rdn := range rdns {
		var set []byte
		for i := 0; i < len(rdn); i += 2 {
			atv, err := asn1.Marshal(struct {
				Type  asn1.ObjectIdentifier
				Value asn1.RawValue
			}{rdn[i].(asn1.ObjectIdentifier), rdn[i+1].(asn1.RawValue)})
			require.NoError(t, err)
			set = append(set, atv...)
		}
		enc, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSet, IsCompound: true, Bytes: set})
		require.NoError(t, err)
		seq = append(seq, enc...)
	}
	out, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: seq})
	require.NoError(t, err)
	return out
}

func derString(tag int, s string) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(s)}
}

func certWithSubject(t *testing.T, rawSubject []byte, name pkix.Name) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: name, RawSubject: rawSubject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert
}

func TestSubjectDN(t *testing.T) {
	f := testkit.TLSTestFixture(t)
	assert.Equal(t, `CN=alice,OU=ServiceUsers,O=Acme\, Inc.,L=Fulton,ST=MD,C=US`, security.SubjectDN(f.Client.Cert))

	// A subject built by Go from a pkix.Name, with the attribute types
	// Java names and two it writes as OIDs.
	name := pkix.Name{
		CommonName: "svc", SerialNumber: "123", StreetAddress: []string{"1 Main St"},
		OrganizationalUnit: []string{"a", "b"},
		ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}, Value: "example"},
			{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, Value: "u1"},
		},
	}
	got := security.SubjectDN(certWithSubject(t, nil, name))
	// Go writes STREET, one RDN of both OUs, CN, serialNumber, then the
	// extra names; Java reverses the order.
	assert.Equal(t, "UID=u1,DC=example,2.5.4.5=#1303313233,CN=svc,OU=a+OU=b,STREET=1 Main St", got)

	oid := func(ids ...int) asn1.ObjectIdentifier { return ids }
	cn, o, c := oid(2, 5, 4, 3), oid(2, 5, 4, 10), oid(2, 5, 4, 6)
	email, uid := oid(1, 2, 840, 113549, 1, 9, 1), oid(0, 9, 2342, 19200300, 100, 1, 1)
	tests := []struct {
		name string
		rdns [][]any
		want string
	}{
		{"special characters", [][]any{{cn, derString(asn1.TagUTF8String, `a,b=c+d<e>f#g;h"i\j`)}}, `CN=a\,b\=c\+d\<e\>f\#g\;h\"i\\j`},
		{"leading and trailing spaces", [][]any{{cn, derString(asn1.TagUTF8String, "  x y ")}}, `CN=\ \ x y\ `},
		{"only spaces", [][]any{{cn, derString(asn1.TagUTF8String, "  ")}}, `CN=\ \ `},
		{"leading hash", [][]any{{cn, derString(asn1.TagUTF8String, "#x")}}, `CN=\#x`},
		{"NUL", [][]any{{cn, derString(asn1.TagUTF8String, "a\x00b")}}, `CN=a\00b`},
		{"non-ASCII as is", [][]any{{cn, derString(asn1.TagUTF8String, "Zoë_1@x")}}, `CN=Zoë_1@x`},
		{"IA5String", [][]any{{cn, derString(asn1.TagIA5String, "ia5")}}, `CN=ia5`},
		{"T61String", [][]any{{cn, derString(asn1.TagT61String, "t61")}}, `CN=t61`},
		{"BMPString bytes read as UTF-8, as Java does", [][]any{{cn, derString(asn1.TagBMPString, "\x00A")}}, `CN=\00A`},
		{"NumericString as hex", [][]any{{cn, derString(asn1.TagNumericString, "12")}}, `CN=#12023132`},
		{"email as OID and hex", [][]any{{c, derString(asn1.TagPrintableString, "US")}, {email, derString(asn1.TagIA5String, "a@b.c")}}, `1.2.840.113549.1.9.1=#16056140622e63,C=US`},
		{"multi-valued RDN in encoded order", [][]any{{o, derString(asn1.TagPrintableString, "Org")}, {uid, derString(asn1.TagUTF8String, "u"), cn, derString(asn1.TagUTF8String, "c")}}, `UID=u+CN=c,O=Org`},
		{"empty value", [][]any{{cn, derString(asn1.TagUTF8String, "")}}, `CN=`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, security.SubjectDN(certWithSubject(t, rawName(t, tt.rdns...), pkix.Name{})))
		})
	}
	assert.Equal(t, "", security.SubjectDN(certWithSubject(t, rawName(t), pkix.Name{})))
}

// FuzzParsePrincipalMappingRules checks that parsing never panics and that
// a parsed mapper maps any DN without panicking, and that String does not
// panic either.
func FuzzParsePrincipalMappingRules(f *testing.F) {
	for _, s := range []string{
		kafkaDocRules, "", "DEFAULT", "RULE://", `RULE:\/\\\(\)\n\t/\/\//`, "RULE:(a*)*/$1$2${x}/U",
		"RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
		"RULE:^(.*)$/$99999999999999999999/", "RULE:(x)/$0$01$1\\$/L\u2028", "\u0085,DEFAULT",
	} {
		f.Add(s, "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	}
	f.Fuzz(func(t *testing.T, rules, dn string) {
		m, err := security.ParsePrincipalMappingRules(rules)
		if err != nil {
			if m != nil {
				t.Fatalf("a mapper and an error: %v", err)
			}
			return
		}
		_ = m.String()
		if _, err := m.Name(dn); err != nil && !errors.Is(err, security.ErrNoMatchingRule) {
			t.Fatalf("a DN no rule maps fails with %v, not ErrNoMatchingRule", err)
		}
	})
}
