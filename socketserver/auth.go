package socketserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
)

// Authentication errors. Each closes the connection.
var (
	// ErrHandshake: the TLS handshake failed or timed out.
	ErrHandshake = errors.New("socketserver: TLS handshake failed")
	// ErrAuthentication: SASL authentication failed (the client was told,
	// after connection.failed.authentication.delay.ms, where the protocol
	// allows it).
	ErrAuthentication = errors.New("socketserver: SASL authentication failed")
	// ErrIllegalSASLState: a request arrived that the SASL exchange does not
	// allow at that point.
	ErrIllegalSASLState = errors.New("socketserver: unexpected request during SASL authentication")
	// ErrSessionExpired: a request arrived after the SASL session expired
	// (KIP-368) without re-authentication.
	ErrSessionExpired = errors.New("socketserver: SASL session expired")
)

// Kafka error codes of the SASL exchange.
const (
	errUnsupportedSASLMechanism int16 = 33
	errIllegalSASLState         int16 = 34
	errSASLAuthenticationFailed int16 = 58
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// AuthInfo is what a connection's transport and authentication established,
// the input of a [PrincipalBuilder].
type AuthInfo struct {
	Listener      string
	TLS           *tls.ConnectionState // nil without TLS
	SASLMechanism string               // "" without SASL
	SASLIdentity  string               // the authenticated SASL user name
}

// PrincipalBuilder turns what a connection established into its principal,
// as Kafka's KafkaPrincipalBuilder does. The default, [DefaultPrincipal],
// is Kafka's DefaultKafkaPrincipalBuilder.
type PrincipalBuilder func(AuthInfo, *listener.PrincipalMapper) (Principal, error)

// DefaultPrincipal builds Kafka's default principals: User:<SASL identity>
// after SASL; User:<mapped subject DN> for a TLS client certificate (mapped
// with ssl.principal.mapping.rules); User:ANONYMOUS otherwise.
func DefaultPrincipal(info AuthInfo, mapper *listener.PrincipalMapper) (Principal, error) {
	switch {
	case info.SASLMechanism != "":
		return Principal{Type: "User", Name: info.SASLIdentity}, nil
	case info.TLS != nil && len(info.TLS.PeerCertificates) > 0:
		dn := listener.SubjectDN(info.TLS.PeerCertificates[0])
		if mapper == nil {
			return Principal{Type: "User", Name: dn}, nil
		}
		name, err := mapper.Name(dn)
		if err != nil {
			return Principal{}, fmt.Errorf("failed to map name for '%s' based on SSL principal mapping rules: %w", dn, err)
		}
		return Principal{Type: "User", Name: name}, nil
	}
	return Anonymous, nil
}

// listenerSecurity is one listener's resolved security.
type listenerSecurity struct {
	tls        *tls.Config
	mechanisms []listener.SASLMechanism // enabled, in configured order
	mapper     *listener.PrincipalMapper
	conf       listener.Security
	timeout    time.Duration // TLS handshake and SASL exchange deadline
}

// newListenerSecurity resolves listener l's security from cfg.
func newListenerSecurity(l listener.Listener, cfg Config) (listenerSecurity, error) {
	conf := cfg.Security[l.Name]
	sec := listenerSecurity{mapper: conf.PrincipalMapper, conf: conf, timeout: conf.HandshakeTimeout}
	if sec.timeout <= 0 {
		sec.timeout = listener.DefaultHandshakeTimeout
	}
	if l.SecurityProtocol.UsesTLS() {
		if conf.TLS == nil {
			return sec, fmt.Errorf("socketserver: listener %s speaks %s but has no TLS configuration", l.Name, l.SecurityProtocol)
		}
		sec.tls = conf.TLS.Clone()
		if sec.tls.MinVersion < tls.VersionTLS12 {
			sec.tls.MinVersion = tls.VersionTLS12
		}
	}
	if l.SecurityProtocol.UsesSASL() {
		if len(conf.SASLMechanisms) == 0 {
			return sec, fmt.Errorf("socketserver: listener %s speaks %s but enables no SASL mechanism", l.Name, l.SecurityProtocol)
		}
		store := cfg.ListenerCredentials[l.Name]
		if store == nil {
			store = cfg.Credentials
		}
		if store == nil {
			return sec, fmt.Errorf("socketserver: listener %s speaks %s but has no credential store (Config.Credentials)", l.Name, l.SecurityProtocol)
		}
		for _, name := range conf.SASLMechanisms {
			m, err := listener.NewSASLMechanism(name, store)
			if err != nil {
				return sec, fmt.Errorf("socketserver: listener %s: %w", l.Name, err)
			}
			sec.mechanisms = append(sec.mechanisms, m)
		}
	}
	return sec, nil
}

// reauth returns connections.max.reauth.ms for mechanism (KIP-368); zero
// means sessions do not expire.
func (s *listenerSecurity) reauth(mechanism string) time.Duration {
	if mechanism == "" {
		return 0
	}
	return s.conf.ReauthMaxFor(mechanism)
}

func (s *listenerSecurity) mechanism(name string) listener.SASLMechanism {
	for _, m := range s.mechanisms {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

func (s *listenerSecurity) mechanismNames() []string {
	names := make([]string, len(s.mechanisms))
	for i, m := range s.mechanisms {
		names[i] = m.Name()
	}
	return names
}

// handshake runs the connection's TLS handshake and SASL authentication, as
// its listener requires, under the listener's handshake deadline, and sets
// the connection's principal. It returns an error when the connection must
// close.
func (c *conn) handshake() (err error) {
	ls := c.p.ls
	sec := ls.sec
	if sec.tls == nil && len(sec.mechanisms) == 0 {
		return nil
	}
	defer func() { c.authDone(err, false) }()
	deadline := time.Now().Add(sec.timeout)
	_ = c.nc.SetDeadline(deadline)
	var info AuthInfo
	if sec.tls != nil {
		tc := tls.Server(prefixedConn{c.nc, &c.pre}, sec.tls) // TLS reads what a parked goroutine read first
		ctx, cancel := context.WithDeadline(c.ctx, deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrHandshake, err)
		}
		state := tc.ConnectionState()
		info.TLS = &state
		c.rw = tc
		c.br.Reset(tc) // nothing is read before the TLS handshake

		c.info.TLSVersion, c.info.CipherSuite = state.Version, state.CipherSuite
		c.entry.Update(func(rc *connregistry.Conn) {
			rc.TLSVersion, rc.CipherSuite = tls.VersionName(state.Version), tls.CipherSuiteName(state.CipherSuite)
		})
	}
	if len(sec.mechanisms) > 0 {
		mech, version, err := c.saslHandshake()
		if err != nil {
			return err
		}
		c.info.SASLMechanism = mech.Name() // for the hooks, should the exchange fail
		identity, err := c.saslExchange(mech, version, "")
		if err != nil {
			return err
		}
		info.SASLMechanism, info.SASLIdentity = mech.Name(), identity
	}
	info.Listener = string(ls.cfg.Name)
	p, err := c.p.srv.cfg.PrincipalBuilder(info, sec.mapper)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	c.info.Principal = p
	c.entry.Update(func(rc *connregistry.Conn) {
		rc.Principal, rc.State = p, connregistry.Ready
	})
	if c.draining() { // Shutdown's drain also sets the read deadline
		return errDraining
	}
	_ = c.nc.SetDeadline(time.Time{})
	c.writeDeadline = 0 // cleared with the handshake's: writeFrame sets it again
	return nil
}

// saslHandshake reads the start of Kafka's server-side SASL exchange: an
// optional ApiVersions request (answered), then SaslHandshake. It returns
// the mechanism chosen and the SaslHandshake version: from v1 the tokens
// come in SaslAuthenticate requests, with v0 as raw size-prefixed frames.
// Any other request closes the connection without a response. Frames are
// limited to sasl.server.max.receive.size.
func (c *conn) saslHandshake() (listener.SASLMechanism, int16, error) {
	apis := c.p.ls.apis
	sawAPIVersions := false
	for {
		frame, _, _, err := c.nextFrame(c.p.srv.cfg.SASLMaxReceiveSize, false)
		if err != nil {
			return nil, 0, err
		}
		h, req, _, err := c.decode(frame, time.Now(), false)
		if err != nil {
			return nil, 0, err
		}
		switch body := req.(type) {
		case nil: // a too-new ApiVersions request
			if err := c.write(h.correlationID, apis.apiVersionsResponse(nil, true)); err != nil {
				return nil, 0, err
			}
		case *kmsg.ApiVersionsRequest:
			if sawAPIVersions {
				return nil, 0, fmt.Errorf("%w: a second ApiVersions request", ErrIllegalSASLState)
			}
			resp := apis.apiVersionsResponse(body, false)
			if resp.ErrorCode == 0 {
				sawAPIVersions = true
				c.noteClientSoftware(body)
			}
			if err := c.write(h.correlationID, resp); err != nil {
				return nil, 0, err
			}
		case *kmsg.SASLHandshakeRequest:
			mech, err := c.answerSASLHandshake(h, body, "")
			return mech, h.version, err
		default:
			return nil, 0, fmt.Errorf("%w: unexpected Kafka request of type %s during SASL handshake", ErrIllegalSASLState, kmsg.NameForKey(h.key))
		}
	}
}

// answerSASLHandshake answers a SaslHandshake with the enabled mechanisms.
// An unknown mechanism, or during re-authentication (current set) another
// mechanism than the current one, gets UNSUPPORTED_SASL_MECHANISM after the
// failed-authentication delay, and an error to close the connection.
func (c *conn) answerSASLHandshake(h header, req *kmsg.SASLHandshakeRequest, current string) (listener.SASLMechanism, error) {
	sec := c.p.ls.sec
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(h.version)
	resp.SupportedMechanisms = sec.mechanismNames()
	mech := sec.mechanism(req.Mechanism)
	var err error
	switch {
	case mech == nil:
		err = fmt.Errorf("%w: unsupported SASL mechanism %q", ErrAuthentication, req.Mechanism)
	case current != "" && req.Mechanism != current:
		err = fmt.Errorf("%w: SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", ErrAuthentication, req.Mechanism, current)
	case current != "" && h.version < 1:
		err = fmt.Errorf("%w: re-authentication needs SaslHandshake v1 or later", ErrAuthentication)
	}
	if err != nil {
		resp.ErrorCode = errUnsupportedSASLMechanism
		c.failAuthentication()
		_ = c.write(h.correlationID, resp)
		return nil, err
	}
	return mech, c.write(h.correlationID, resp)
}

// saslExchange runs mech's steps until it succeeds or fails, and returns
// the authenticated identity. With handshake v0 the tokens are raw
// size-prefixed frames both ways; from v1 they travel in SaslAuthenticate
// requests and responses. A failure is answered, where the protocol can
// carry it, with SASL_AUTHENTICATION_FAILED and the mechanism's message,
// after the failed-authentication delay. During re-authentication (current
// set) the identity must not change.
func (c *conn) saslExchange(mech listener.SASLMechanism, handshakeVersion int16, current string) (string, error) {
	session := mech.NewSession()
	for {
		frame, _, _, err := c.nextFrame(c.p.srv.cfg.SASLMaxReceiveSize, false)
		if err != nil {
			return "", err
		}
		if handshakeVersion == 0 {
			// Re-authentication needs v1 (answerSASLHandshake), so current is "".
			reply, done, err := session.Step(frame)
			if err != nil {
				c.failAuthentication() // no way to tell the client: it sees the close
				return "", fmt.Errorf("%w: mechanism %s: %w", ErrAuthentication, mech.Name(), err)
			}
			if err := c.writeRaw(reply); err != nil {
				return "", err
			}
			if done {
				c.authenticated(mech.Name(), session.Identity())
				return session.Identity(), nil
			}
			continue
		}
		h, req, _, err := c.decode(frame, time.Now(), false)
		if err != nil {
			return "", err
		}
		authReq, ok := req.(*kmsg.SASLAuthenticateRequest)
		if !ok {
			return "", fmt.Errorf("%w: unexpected Kafka request of type %s during SASL authentication", ErrIllegalSASLState, kmsg.NameForKey(h.key))
		}
		reply, done, err := session.Step(authReq.SASLAuthBytes)
		if err == nil && done && current != "" && session.Identity() != current {
			// Kafka's text: type and name joined by a dot, not KafkaPrincipal's colon.
			err = fmt.Errorf("Cannot change principals during re-authentication from User.%s: User.%s", current, session.Identity())
		}
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.SetVersion(h.version)
		if err != nil {
			c.failAuthentication()
			resp.ErrorCode = errSASLAuthenticationFailed
			msg := err.Error()
			var se *listener.SASLError
			if errors.As(err, &se) {
				msg = se.ClientMessage(current != "")
			}
			resp.ErrorMessage = &msg
			_ = c.write(h.correlationID, resp)
			return "", fmt.Errorf("%w: mechanism %s: %w", ErrAuthentication, mech.Name(), err)
		}
		resp.SASLAuthBytes = reply
		if resp.SASLAuthBytes == nil {
			resp.SASLAuthBytes = []byte{}
		}
		if done {
			c.authenticated(mech.Name(), session.Identity())
			if reauth := c.p.ls.sec.reauth(mech.Name()); reauth > 0 {
				resp.SessionLifetimeMillis = reauth.Milliseconds()
			}
		}
		if err := c.write(h.correlationID, resp); err != nil {
			return "", err
		}
		if done {
			return session.Identity(), nil
		}
	}
}

// authenticated records a successful (re-)authentication: mechanism, time
// and, with connections.max.reauth.ms, when the session expires.
func (c *conn) authenticated(mechanism, identity string) {
	now := time.Now()
	c.saslIdentity = identity
	c.info.SASLMechanism = mechanism
	c.info.AuthenticatedAt = now
	c.info.SessionExpiry = time.Time{}
	if reauth := c.p.ls.sec.reauth(mechanism); reauth > 0 {
		c.info.SessionExpiry = now.Add(reauth)
	}
	c.entry.Update(func(rc *connregistry.Conn) {
		rc.SASLMechanism, rc.AuthenticatedAt, rc.SessionExpiry = mechanism, now, c.info.SessionExpiry
	})
}

// failAuthentication waits connection.failed.authentication.delay.ms before
// a failed authentication's response and close (KIP-306), so that a client
// retrying bad credentials cannot hammer the server; Close cuts it short.
func (c *conn) failAuthentication() {
	c.setReason(connregistry.AuthenticationFailed)
	d := c.p.srv.cfg.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	}
}

// answerSASLAfterAuthentication answers SaslHandshake and SaslAuthenticate
// outside the authentication phase. A SaslHandshake on a SASL connection of
// a listener with connections.max.reauth.ms starts re-authentication
// (KIP-368); otherwise both get ILLEGAL_SASL_STATE and the connection stays
// open, as Kafka answers them. An error means the connection must close.
func (c *conn) answerSASLAfterAuthentication(h header, req kmsg.Request) error {
	sec := c.p.ls.sec
	if hs, ok := req.(*kmsg.SASLHandshakeRequest); ok && sec.reauth(c.info.SASLMechanism) > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(sec.timeout))
		mech, err := c.answerSASLHandshake(h, hs, c.info.SASLMechanism)
		if err == nil {
			_, err = c.saslExchange(mech, h.version, c.saslIdentity)
		}
		c.authDone(err, true)
		if err != nil {
			return err
		}
		if c.draining() {
			return errDraining
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		return nil
	}
	var resp kmsg.Response
	switch req.(type) {
	case *kmsg.SASLHandshakeRequest:
		r := kmsg.NewPtrSASLHandshakeResponse()
		r.ErrorCode = errIllegalSASLState
		r.SupportedMechanisms = sec.mechanismNames()
		resp = r
	default:
		r := kmsg.NewPtrSASLAuthenticateResponse()
		r.ErrorCode = errIllegalSASLState
		msg := "SaslAuthenticate request received after successful authentication"
		r.ErrorMessage = &msg
		resp = r
	}
	resp.SetVersion(h.version)
	return c.write(h.correlationID, resp)
}
