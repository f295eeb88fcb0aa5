package listener

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/kafkanet/kafkanet/protocolmap"
)

// VersionRange is the range of versions of one feature that a broker
// supports (KIP-584), written in a registration as
// {"min_version":n,"max_version":m}.
type VersionRange struct {
	Min, Max int16
}

// BrokerRegistration is the content of a ZooKeeper-mode broker's ephemeral
// znode /brokers/ids/<id>, a JSON document through which brokers and old
// clients learn where the broker can be reached.
//
// Decoding accepts versions 1 to 5. Encoding writes version 4 (Kafka
// 0.10.0 to 2.6) or 5 (Kafka 2.7 and later); version 5 adds Features.
type BrokerRegistration struct {
	// Version is the document's format version, 1 to 5.
	Version int
	// Host and Port are the legacy address for clients that know only
	// PLAINTEXT. Encode ignores them and writes the host and port of the
	// first endpoint whose protocol is PLAINTEXT, or a null host and port
	// -1 when there is none (an empty host is also written as null).
	// Decode fills them from the document: "" for a null or missing host,
	// -1 for a missing port.
	Host string
	Port int
	// JMXPort is the broker's JMX port, -1 when unknown.
	JMXPort int
	// Timestamp is the registration time. It is written as a string of
	// milliseconds since the Unix epoch, so it keeps millisecond precision;
	// Decode returns it in UTC, and the zero time when the document has
	// none.
	Timestamp time.Time
	// EndPoints are the broker's advertised endpoints, in order. Decode
	// leaves it nil when there are none.
	EndPoints []EndPoint
	// Rack is the broker's broker.rack, "" when not set. Version 3 and
	// later carry it.
	Rack string
	// Features maps feature names to the versions the broker supports.
	// Only version 5 carries it; Decode leaves it nil when there are none.
	Features map[string]VersionRange
}

// The keys of a broker registration document.
const (
	regVersion   = "version"
	regHost      = "host"
	regPort      = "port"
	regJMXPort   = "jmx_port"
	regTimestamp = "timestamp"
	regEndPoints = "endpoints"
	regRack      = "rack"
	regProtocols = "listener_security_protocol_map"
	regFeatures  = "features"
	regMin       = "min_version"
	regMax       = "max_version"
)

// registrationJSON is the document Encode writes. Host is a pointer so that
// a missing PLAINTEXT endpoint gives null; Features is a pointer so that
// version 4 leaves the key out while version 5 writes it even when empty.
type registrationJSON struct {
	Version   int                          `json:"version"`
	Host      *string                      `json:"host"`
	Port      int                          `json:"port"`
	JMXPort   int                          `json:"jmx_port"`
	Timestamp string                       `json:"timestamp"`
	EndPoints []string                     `json:"endpoints"`
	Rack      string                       `json:"rack,omitempty"`
	Protocols map[string]string            `json:"listener_security_protocol_map"`
	Features  *map[string]versionRangeJSON `json:"features,omitempty"`
}

type versionRangeJSON struct {
	Min int16 `json:"min_version"`
	Max int16 `json:"max_version"`
}

// Encode returns the registration as the JSON document a broker writes to
// its znode. r.Version must be 4 or 5; any other version gives an error
// wrapping [ErrUnsupportedVersion].
//
// Encode refuses what [DecodeBrokerRegistration] could not read back as it
// was: an endpoint whose listener name is blank or not upper case, whose
// host or port [ParseEndPoint] rejects or whose protocol is not one of the
// four (errors wrapping [ErrInvalidEndPoint]), two endpoints with one name
// ([ErrDuplicateName]), or a JMX port beyond 32 bits. Decoding what it
// writes gives r back, except that Host and Port become those Encode wrote,
// Timestamp is cut to the millisecond and put in UTC, and empty EndPoints
// and Features become nil.
func (r BrokerRegistration) Encode() ([]byte, error) {
	if r.Version != 4 && r.Version != 5 {
		return nil, &ruleError{fmt.Sprintf("cannot write version %d of broker registration; versions 4 and 5 can be written", r.Version), ErrUnsupportedVersion}
	}
	if r.JMXPort < math.MinInt32 || r.JMXPort > math.MaxInt32 {
		return nil, fieldError(regJMXPort, fmt.Errorf("%d is out of the 32-bit range", r.JMXPort))
	}
	out := registrationJSON{
		Version:   r.Version,
		Port:      -1,
		JMXPort:   r.JMXPort,
		Timestamp: strconv.FormatInt(r.Timestamp.UnixMilli(), 10),
		EndPoints: make([]string, 0, len(r.EndPoints)),
		Rack:      r.Rack,
		Protocols: make(map[string]string, len(r.EndPoints)),
	}
	protocols := make(protocolmap.Map, len(r.EndPoints))
	for _, ep := range r.EndPoints {
		if _, dup := protocols[ep.Name]; dup {
			return nil, fieldError(regEndPoints, &ruleError{fmt.Sprintf("Each listener must have a different name: %s appears twice", ep.Name), ErrDuplicateName})
		}
		if !ep.SecurityProtocol.Valid() {
			return nil, fieldError(regEndPoints, &ruleError{fmt.Sprintf("endpoint %s has no valid security protocol (%s)", ep, ep.SecurityProtocol), ErrInvalidEndPoint})
		}
		protocols[ep.Name] = ep.SecurityProtocol
		if back, err := ParseEndPoint(ep.String(), protocols); err != nil || back != ep {
			return nil, fieldError(regEndPoints, &ruleError{fmt.Sprintf("endpoint %q (name %q, host %q, port %d) would not read back as given", ep, ep.Name, ep.Host, ep.Port), ErrInvalidEndPoint})
		}
		out.EndPoints = append(out.EndPoints, ep.String())
		out.Protocols[string(ep.Name)] = ep.SecurityProtocol.String()
		if out.Host == nil && ep.SecurityProtocol == protocolmap.Plaintext {
			host := ep.Host
			out.Host, out.Port = &host, ep.Port
		}
	}
	if out.Host != nil && *out.Host == "" {
		out.Host = nil // Kafka's wildcard host is null.
	}
	if r.Version >= 5 {
		features := make(map[string]versionRangeJSON, len(r.Features))
		for name, v := range r.Features {
			features[name] = versionRangeJSON(v)
		}
		out.Features = &features
	}
	return json.Marshal(out)
}

// DecodeBrokerRegistration reads a broker registration document of version
// 1 to 5, as written by any Kafka broker in ZooKeeper mode.
//
// A version 1 document has one endpoint, a PLAINTEXT listener named
// PLAINTEXT at its host and port. Later versions list their endpoints, which
// are read with [ParseEndPoint] against the document's
// listener_security_protocol_map (names normalised as
// [protocolmap.ParseListenerName] does, protocols read without regard to
// case) or, when the document has none, against [protocolmap.Default]. As
// Kafka does, rack and features are read whatever the version, and keys
// this package does not know are ignored.
//
// version and jmx_port must be present, and endpoints too from version 2
// on (host and port in version 1). A version outside 1 to 5 gives an error
// wrapping [ErrUnsupportedVersion] (Kafka reads any later version as it
// reads version 5; this package does not guess). Any other fault gives an error that names
// the field and wraps the cause, such as [ErrInvalidEndPoint],
// [ErrNoSecurityProtocol], [ErrDuplicateName] or
// [protocolmap.ErrUnknownSecurityProtocol].
func DecodeBrokerRegistration(data []byte) (BrokerRegistration, error) {
	var doc jsonObject
	if err := json.Unmarshal(data, &doc); err != nil {
		return BrokerRegistration{}, fmt.Errorf("listener: broker registration is not a JSON object: %w", err)
	}
	if doc == nil {
		return BrokerRegistration{}, errors.New("listener: broker registration is not a JSON object: null")
	}
	var r BrokerRegistration
	if err := doc.required(regVersion, &r.Version); err != nil {
		return BrokerRegistration{}, err
	}
	if r.Version < 1 || r.Version > 5 {
		return BrokerRegistration{}, &ruleError{fmt.Sprintf("Unsupported version of broker registration: version %d; versions 1 to 5 can be read", r.Version), ErrUnsupportedVersion}
	}
	var jmxPort int32
	if err := doc.required(regJMXPort, &jmxPort); err != nil {
		return BrokerRegistration{}, err
	}
	r.JMXPort = int(jmxPort)

	port := int32(-1)
	if r.Version == 1 {
		if err := doc.required(regHost, &r.Host); err != nil {
			return BrokerRegistration{}, err
		}
		if err := doc.required(regPort, &port); err != nil {
			return BrokerRegistration{}, err
		}
	} else {
		if _, err := doc.optional(regHost, &r.Host); err != nil {
			return BrokerRegistration{}, err
		}
		if _, err := doc.optional(regPort, &port); err != nil {
			return BrokerRegistration{}, err
		}
	}
	r.Port = int(port)

	var millis string
	if ok, err := doc.optional(regTimestamp, &millis); err != nil {
		return BrokerRegistration{}, err
	} else if ok {
		ms, err := strconv.ParseInt(millis, 10, 64)
		if err != nil {
			return BrokerRegistration{}, fieldError(regTimestamp, fmt.Errorf("want milliseconds since the epoch: %w", err))
		}
		r.Timestamp = time.UnixMilli(ms).UTC()
	}
	if _, err := doc.optional(regRack, &r.Rack); err != nil {
		return BrokerRegistration{}, err
	}

	var err error
	if r.Version == 1 {
		r.EndPoints, err = legacyEndPoint(r.Host, r.Port)
	} else {
		r.EndPoints, err = doc.endPoints()
	}
	if err != nil {
		return BrokerRegistration{}, err
	}
	if r.Features, err = doc.features(); err != nil {
		return BrokerRegistration{}, err
	}
	return r, nil
}

// jsonObject is a JSON object whose members are decoded one at a time, so
// that an error can name the member at fault. Keys match exactly.
type jsonObject map[string]json.RawMessage

// optional decodes member key into dst and reports whether it was there; a
// missing or null member leaves dst alone.
func (o jsonObject) optional(key string, dst any) (bool, error) {
	raw, ok := o[key]
	if !ok || bytes.Equal(raw, []byte("null")) {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, fieldError(key, err)
	}
	return true, nil
}

// required is optional for a member that must be present and not null.
func (o jsonObject) required(key string, dst any) error {
	ok, err := o.optional(key, dst)
	if err == nil && !ok {
		err = fieldError(key, errors.New("missing or null"))
	}
	return err
}

func fieldError(key string, err error) error {
	return fmt.Errorf("listener: broker registration field %q: %w", key, err)
}

// legacyEndPoint returns the single endpoint of a version 1 registration.
func legacyEndPoint(host string, port int) ([]EndPoint, error) {
	entry := protocolmap.Plaintext.String() + "://" + net.JoinHostPort(host, strconv.Itoa(port))
	if port < 0 || port > math.MaxUint16 {
		return nil, fieldError(regPort, &ruleError{fmt.Sprintf("Unable to parse %s to a broker endpoint: port %d is out of range; a port must be between 0 and 65535", entry, port), ErrInvalidEndPoint})
	}
	ep, err := ParseEndPoint(entry, protocolmap.Default())
	if err == nil && ep.Host != host {
		err = &ruleError{fmt.Sprintf("Unable to parse %s to a broker endpoint: host %q is not a host name or address", entry, host), ErrInvalidEndPoint}
	}
	if err != nil {
		return nil, fieldError(regHost, err)
	}
	return []EndPoint{ep}, nil
}

// endPoints reads the endpoints of a version 2 or later registration.
func (o jsonObject) endPoints() ([]EndPoint, error) {
	protocols := protocolmap.Default()
	var names map[string]string
	if ok, err := o.optional(regProtocols, &names); err != nil {
		return nil, err
	} else if ok {
		protocols = make(protocolmap.Map, len(names))
		for k, v := range names {
			name, err := protocolmap.ParseListenerName(k)
			if err != nil {
				return nil, fieldError(regProtocols, err)
			}
			p, err := protocolmap.ParseSecurityProtocol(v)
			if err != nil {
				return nil, fieldError(regProtocols, fmt.Errorf("listener %s: %w", name, err))
			}
			if _, dup := protocols[name]; dup {
				return nil, fieldError(regProtocols, fmt.Errorf("%w: listener %s appears more than once (names are compared without regard to case)", protocolmap.ErrDuplicateKey, name))
			}
			protocols[name] = p
		}
	}
	var entries []string
	if err := o.required(regEndPoints, &entries); err != nil {
		return nil, err
	}
	var eps []EndPoint
	seen := make(map[protocolmap.ListenerName]bool, len(entries))
	for _, entry := range entries {
		ep, err := ParseEndPoint(entry, protocols)
		if err != nil {
			return nil, fieldError(regEndPoints, err)
		}
		if seen[ep.Name] {
			return nil, fieldError(regEndPoints, &ruleError{fmt.Sprintf("Each listener must have a different name: %s appears twice", ep.Name), ErrDuplicateName})
		}
		seen[ep.Name] = true
		eps = append(eps, ep)
	}
	return eps, nil
}

// features reads the features member, leaving nil when there are none.
func (o jsonObject) features() (map[string]VersionRange, error) {
	var raw map[string]jsonObject
	if _, err := o.optional(regFeatures, &raw); err != nil {
		return nil, err
	}
	var out map[string]VersionRange
	for name, member := range raw {
		var v VersionRange
		for _, bound := range []struct {
			key string
			dst *int16
		}{{regMin, &v.Min}, {regMax, &v.Max}} {
			val, ok := member[bound.key]
			if !ok || bytes.Equal(val, []byte("null")) {
				return nil, fieldError(regFeatures, fmt.Errorf("feature %q: %s missing or null", name, bound.key))
			}
			if err := json.Unmarshal(val, bound.dst); err != nil {
				return nil, fieldError(regFeatures, fmt.Errorf("feature %q: %s: %w", name, bound.key, err))
			}
		}
		if out == nil {
			out = make(map[string]VersionRange, len(raw))
		}
		out[name] = v
	}
	return out, nil
}
