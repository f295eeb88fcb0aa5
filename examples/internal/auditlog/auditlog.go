// Package auditlog writes kafkanet's audit trail (socketserver.HookAudit)
// as JSON lines in the form of the Open Cybersecurity Schema Framework
// (OCSF) 1.0.0, the form Redpanda's audit log takes and security tools
// read: authentications as Authentication (3002), refused and throttled
// connections as Network Activity (4001), operators' closes and a host's
// own actions as API Activity (6003), and dropped events as Application
// Lifecycle (6002). What OCSF has no attribute for (the connection's
// PROXY and TLS details, an operator's filter, kafkanet's event token) is
// under "unmapped". See docs/audit-trail.md.
package auditlog

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/kafkanet/kafkanet/socketserver"
)

// SchemaVersion is the OCSF version the records follow.
const SchemaVersion = "1.0.0"

// Writer writes the events of one or more servers to one io.Writer, a line
// each. It is safe for concurrent use.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	product string
	log     *slog.Logger
	failed  bool // a write failed: logged once
}

// New returns a Writer to w; product names the program in each record's
// metadata, and a failed write is logged to log, once.
func New(w io.Writer, product string, log *slog.Logger) *Writer {
	return &Writer{w: w, product: product, log: log}
}

// Open returns the Writer a program's -audit-log flag asks for: none for
// path "" (nil, and a close that does nothing), stderr for "-", else the
// file path, appended to and created with mode 0600 if missing. The
// program calls close once its servers have shut down, when every event
// has been written.
func Open(path string, stderr io.Writer, product string, log *slog.Logger) (w *Writer, close func() error, err error) {
	switch path {
	case "":
		return nil, func() error { return nil }, nil
	case "-":
		return New(stderr, product, log), func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return New(f, product, log), f.Close, nil
}

// Hook returns the HookAudit of the server of node id (the records'
// metadata.product.uid, as Redpanda gives its node id there).
func (w *Writer) Hook(node int32) socketserver.HookAudit {
	return hook{w: w, node: strconv.Itoa(int(node))}
}

type hook struct {
	w    *Writer
	node string
}

func (h hook) OnAudit(e socketserver.AuditEvent) {
	line, err := json.Marshal(Record(e, h.w.product, h.node))
	if err != nil { // cannot happen: every field encodes
		return
	}
	line = append(line, '\n')
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if _, err := h.w.w.Write(line); err != nil && !h.w.failed {
		h.w.failed = true
		h.w.log.Error("cannot write the audit log; later failures are not logged", "err", err)
	}
}

// OCSF's classes, categories and ids as the records use them.
const (
	classAuthentication = 3002
	classNetwork        = 4001
	classLifecycle      = 6002
	classAPI            = 6003

	activityLogon  = 1
	activityRefuse = 5 // Network Activity
	activityDelete = 4 // API Activity
	activityOther  = 99

	statusSuccess = 1
	statusFailure = 2

	severityInformational = 1
	severityLow           = 2
	severityMedium        = 3

	authProtocolOAuth = 6
	authProtocolOther = 99
)

// OCSF is one record. Only the attributes the events fill are here.
type OCSF struct {
	CategoryUID    int            `json:"category_uid"`
	ClassUID       int            `json:"class_uid"`
	ActivityID     int            `json:"activity_id"`
	ActivityName   string         `json:"activity_name,omitempty"`
	TypeUID        int            `json:"type_uid"`
	Time           int64          `json:"time"` // milliseconds since the epoch
	SeverityID     int            `json:"severity_id"`
	StatusID       int            `json:"status_id,omitempty"`
	Status         string         `json:"status,omitempty"`
	StatusDetail   string         `json:"status_detail,omitempty"`
	Metadata       Metadata       `json:"metadata"`
	User           *User          `json:"user,omitempty"`
	Actor          *Actor         `json:"actor,omitempty"`
	AuthProtocol   string         `json:"auth_protocol,omitempty"`
	AuthProtocolID int            `json:"auth_protocol_id,omitempty"`
	SrcEndpoint    *Endpoint      `json:"src_endpoint,omitempty"`
	DstEndpoint    *Endpoint      `json:"dst_endpoint,omitempty"`
	Session        *Session       `json:"session,omitempty"`
	API            *API           `json:"api,omitempty"`
	Unmapped       map[string]any `json:"unmapped,omitempty"`
}

// Metadata is OCSF's metadata object.
type Metadata struct {
	Product Product `json:"product"`
	Version string  `json:"version"`
}

// Product is OCSF's product object.
type Product struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
	UID        string `json:"uid,omitempty"`
}

// User is OCSF's user object: a principal's name, its type (Kafka's
// principal type, "User") in type.
type User struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
}

// Actor is OCSF's actor object.
type Actor struct {
	User *User `json:"user,omitempty"`
}

// Endpoint is OCSF's network endpoint.
type Endpoint struct {
	IP      string `json:"ip,omitempty"`
	Port    int    `json:"port,omitempty"`
	SvcName string `json:"svc_name,omitempty"`
}

// Session is OCSF's session object: the connection's id.
type Session struct {
	UID string `json:"uid"`
}

// API is OCSF's api object.
type API struct {
	Operation string `json:"operation"`
}

// Record returns e as an OCSF record of product, on node.
func Record(e socketserver.AuditEvent, product, node string) OCSF {
	r := OCSF{
		Time:       e.Time.UnixMilli(),
		SeverityID: severityInformational,
		Metadata:   Metadata{Product: Product{Name: product, VendorName: "kafkanet", UID: node}, Version: SchemaVersion},
		Unmapped:   map[string]any{"kafkanet_event": e.Kind.String()},
	}
	if e.ClientAddr.IsValid() {
		r.SrcEndpoint = endpoint(e.ClientAddr)
	}
	if e.Listener != "" {
		r.DstEndpoint = &Endpoint{SvcName: string(e.Listener)}
	}
	if e.ConnID != "" {
		r.Session = &Session{UID: e.ConnID}
	}
	if e.ProxyAddr.IsValid() {
		r.Unmapped["proxy_address"] = e.ProxyAddr.String()
	}
	if e.TLSSubject != "" {
		r.Unmapped["tls_subject"] = e.TLSSubject
	}
	if e.Principal != "" {
		r.Unmapped["principal"] = e.Principal
	}
	status := func(failed bool) {
		r.StatusID, r.Status = statusSuccess, "Success"
		if failed {
			r.StatusID, r.Status, r.SeverityID = statusFailure, "Failure", severityLow
		}
		r.StatusDetail = e.Reason
	}
	switch e.Kind {
	case socketserver.AuditAuthenticated, socketserver.AuditAuthenticationFailed,
		socketserver.AuditReauthenticated, socketserver.AuditReauthenticationFailed:
		r.CategoryUID, r.ClassUID = 3, classAuthentication
		r.ActivityID, r.ActivityName = activityLogon, "Logon"
		if e.Kind == socketserver.AuditReauthenticated || e.Kind == socketserver.AuditReauthenticationFailed {
			r.ActivityID, r.ActivityName = activityOther, "Reauthenticate"
		}
		status(e.Kind == socketserver.AuditAuthenticationFailed || e.Kind == socketserver.AuditReauthenticationFailed)
		r.User = principalUser(e.Principal)
		if e.User != "" { // the name a failure tried
			r.User = &User{Name: e.User}
		}
		switch {
		case e.Mechanism == "OAUTHBEARER":
			r.AuthProtocol, r.AuthProtocolID = "SASL/OAUTHBEARER", authProtocolOAuth
		case e.Mechanism != "":
			r.AuthProtocol, r.AuthProtocolID = "SASL/"+e.Mechanism, authProtocolOther
		default:
			r.AuthProtocol, r.AuthProtocolID = "TLS", authProtocolOther
		}
	case socketserver.AuditConnectionRefused:
		r.CategoryUID, r.ClassUID = 4, classNetwork
		r.ActivityID, r.ActivityName = activityRefuse, "Refuse"
		status(true)
		if e.Throttle > 0 {
			r.Unmapped["held_ms"] = e.Throttle.Milliseconds()
		}
	case socketserver.AuditThrottled:
		r.CategoryUID, r.ClassUID = 4, classNetwork
		r.ActivityID, r.ActivityName = activityOther, "Throttle"
		r.Actor = &Actor{User: principalUser(e.Principal)}
		r.Unmapped["throttle_ms"] = e.Throttle.Milliseconds()
	case socketserver.AuditConnectionsClosed:
		r.CategoryUID, r.ClassUID = 6, classAPI
		r.ActivityID, r.ActivityName = activityDelete, "Delete"
		status(e.Reason != "")
		r.Actor = &Actor{User: principalUser(e.Principal)}
		r.API = &API{Operation: "CloseClientConnections"}
		r.Unmapped["filter"] = e.Filter
		r.Unmapped["closed"] = e.Count
	case socketserver.AuditEventsDropped:
		r.CategoryUID, r.ClassUID = 6, classLifecycle
		r.ActivityID, r.ActivityName = activityOther, "Audit events dropped"
		r.SeverityID = severityMedium
		r.Unmapped["dropped"] = e.Count
	default: // a host's action, or a kind this package does not know
		r.CategoryUID, r.ClassUID = 6, classAPI
		r.ActivityID, r.ActivityName = activityOther, e.Action
		status(e.Reason != "")
		r.Actor = &Actor{User: principalUser(e.Principal)}
		r.API = &API{Operation: e.Action}
		if e.Detail != "" {
			r.Unmapped["detail"] = e.Detail
		}
	}
	r.TypeUID = r.ClassUID*100 + r.ActivityID
	return r
}

// principalUser is OCSF's user of a principal Type:Name; nil for none.
func principalUser(p string) *User {
	if p == "" {
		return nil
	}
	typ, name, ok := strings.Cut(p, ":")
	if !ok {
		return &User{Name: p}
	}
	return &User{Name: name, Type: typ}
}

func endpoint(a netip.AddrPort) *Endpoint {
	return &Endpoint{IP: a.Addr().Unmap().String(), Port: int(a.Port())}
}
