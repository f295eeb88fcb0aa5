package protocolmap

import "strconv"

// Plane says which request plane a listener feeds: the data plane, which
// serves clients and replication, or the control plane of KIP-291, which
// serves only controller requests so that they are not queued behind data.
type Plane int8

// The planes.
const (
	DataPlane Plane = iota
	ControlPlane
)

// String returns "data" or "control".
func (p Plane) String() string {
	switch p {
	case DataPlane:
		return "data"
	case ControlPlane:
		return "control"
	}
	return "Plane(" + strconv.Itoa(int(p)) + ")"
}
