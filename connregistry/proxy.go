package connregistry

import "encoding/binary"

// ProxyTLV is one type-length-value field of a PROXY protocol v2 header
// (HAProxy's specification, section 2.2): Type, and Value as sent (its
// length is len(Value)). See [Info.ProxyTLVs].
type ProxyTLV struct {
	Type  uint8
	Value []byte
}

// Types of PROXY protocol v2 TLV fields that the helpers of [Info] read,
// and those a load balancer commonly sends. The specification registers
// more; any type reaches [Info.ProxyTLVs].
const (
	ProxyTLVALPN      uint8 = 0x01 // the application protocol the client negotiated with the balancer
	ProxyTLVAuthority uint8 = 0x02 // the host name the client asked for (TLS SNI, or the authority it connected to), UTF-8
	ProxyTLVUniqueID  uint8 = 0x05 // an opaque id the balancer gives the connection
	ProxyTLVSSL       uint8 = 0x20 // the client's TLS connection to the balancer: flags, verification, and sub-TLVs (version, CN, cipher...)
	ProxyTLVGCP       uint8 = 0xE0 // Google Cloud Private Service Connect: the connection id, 8 bytes big-endian
	ProxyTLVAWS       uint8 = 0xEA // AWS PrivateLink: subtype 0x01 and the VPC endpoint id
	ProxyTLVAzure     uint8 = 0xEE // Azure Private Link: subtype 0x01 and the link id, 4 bytes little-endian
)

// ProxyTLV returns the value of the first field of type typ in the
// connection's PROXY protocol v2 header, and whether there is one.
func (i Info) ProxyTLV(typ uint8) ([]byte, bool) {
	for _, t := range i.ProxyTLVs {
		if t.Type == typ {
			return t.Value, true
		}
	}
	return nil, false
}

// ProxyAuthority returns the host name the client asked the load balancer
// for (the AUTHORITY field, 0x02: the TLS server name of a balancer that
// terminates TLS, for instance), or "" when the header had none.
func (i Info) ProxyAuthority() string {
	v, _ := i.ProxyTLV(ProxyTLVAuthority)
	return string(v)
}

// ProxyAWSVPCEndpointID returns the id of the AWS VPC endpoint the client
// came through (field 0xEA, subtype 0x01, which AWS's Network Load Balancer
// sends for PrivateLink connections), or "" when the header had none.
func (i Info) ProxyAWSVPCEndpointID() string {
	for _, t := range i.ProxyTLVs {
		if t.Type == ProxyTLVAWS && len(t.Value) > 1 && t.Value[0] == 0x01 {
			return string(t.Value[1:])
		}
	}
	return ""
}

// ProxyAzureLinkID returns the LinkID of the Azure Private Endpoint the
// client came through (field 0xEE, subtype 0x01, a 32-bit little-endian
// number), and whether the header had one.
func (i Info) ProxyAzureLinkID() (uint32, bool) {
	for _, t := range i.ProxyTLVs {
		if t.Type == ProxyTLVAzure && len(t.Value) == 5 && t.Value[0] == 0x01 {
			return binary.LittleEndian.Uint32(t.Value[1:]), true
		}
	}
	return 0, false
}

// ProxyGCPConnectionID returns the id of the Google Cloud Private Service
// Connect connection the client came through (field 0xE0, a 64-bit
// big-endian number), and whether the header had one.
func (i Info) ProxyGCPConnectionID() (uint64, bool) {
	for _, t := range i.ProxyTLVs {
		if t.Type == ProxyTLVGCP && len(t.Value) == 8 {
			return binary.BigEndian.Uint64(t.Value), true
		}
	}
	return 0, false
}
