package main

import (
	"strconv"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/socketserver"
)

// What the proxy records in its audit trail (-audit-log) of its own, with
// Server.Audit, beside what its socket server records (logins, refusals by
// the connection quotas and the PROXY rules, operators' closes,
// throttles): each event is the action's token, as the records'
// api.operation shows it.
const (
	// auditReload: a SIGHUP's reload of the configuration, applied or
	// refused (reload.go).
	auditReload = "reload-configuration"
	// auditReloadTLS: a listener's TLS settings reloaded because its
	// files changed on disk (watchTLS), applied or refused.
	auditReloadTLS = "reload-tls"
	// auditCloseUpstreamDown: the proxy closes the client connections
	// routed to an upstream broker that went away (setDown).
	auditCloseUpstreamDown = "close-connections"
)

// audit records a host action of the proxy's own: action with detail,
// refused (or failed) for err unless it is nil. It never waits; without an
// audit trail it does nothing.
func (p *proxy) audit(action, detail string, err error) {
	e := socketserver.AuditEvent{Kind: socketserver.AuditHostAction, Action: action, Detail: detail}
	if err != nil {
		e.Reason = err.Error()
	}
	p.srv.Audit(e)
}

// auditTLSReload is the TLS watcher's apply: it reloads listener name's TLS
// settings and records the reload, applied or refused.
func (p *proxy) auditTLSReload(name protocolmap.ListenerName, err error) {
	p.audit(auditReloadTLS, "listener="+string(name)+" files changed", err)
}

// auditUpstreamDown records that the proxy closes the n client
// connections routed to node of cluster ("" for the default one), at addr,
// because the broker went away.
func (p *proxy) auditUpstreamDown(cluster string, node int32, addr string, n int) {
	detail := "reason=" + string(upstreamCloseReason) + " node=" + strconv.Itoa(int(node)) + " addr=" + addr + " connections=" + strconv.Itoa(n)
	if cluster != "" {
		detail = "cluster=" + cluster + " " + detail
	}
	p.audit(auditCloseUpstreamDown, detail, nil)
}

// auditRefused records that the proxy refused the connection conn, which
// asked for a cluster no listener serves (err says which server name).
func (p *proxy) auditRefused(conn *connregistry.Info, err error) {
	e := socketserver.AuditEvent{Kind: socketserver.AuditConnectionRefused, Listener: conn.Listener, ConnID: conn.ID,
		ClientAddr: conn.ClientAddr, ProxyAddr: conn.ProxyAddr, Reason: err.Error()}
	if conn.Principal != (connregistry.Principal{}) {
		e.Principal = conn.Principal.String()
	}
	p.srv.Audit(e)
}
