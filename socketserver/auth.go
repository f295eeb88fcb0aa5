package socketserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/internal/configerr"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/protocolmap"
	"github.com/kafkanet/kafkanet/security"
	"github.com/kafkanet/kafkanet/security/sasl"
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
	// (KIP-368) without re-authentication. No call returns it: it is the
	// err attribute of the line the server logs as it closes such a
	// connection, whose close reason ([HookConnClosed]) is
	// connregistry.CloseSessionExpired.
	ErrSessionExpired = errors.New("socketserver: SASL session expired")
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// Authentication is what a connection's TLS handshake and SASL exchange
// established: the input of a [PrincipalBuilder], as Kafka's
// AuthenticationContext is of its KafkaPrincipalBuilder. It is built once
// per authentication (and re-authentication), never kept: the
// connection's description, principal included, is its
// [connregistry.Info].
type Authentication struct {
	Listener         protocolmap.ListenerName
	SecurityProtocol protocolmap.SecurityProtocol
	// ClientAddr is the client's address, as connregistry.Info.ClientAddr.
	ClientAddr    netip.AddrPort
	TLS           *tls.ConnectionState // nil without TLS
	SASLMechanism string               // "" without SASL
	SASLIdentity  string               // the authenticated SASL user name
}

// PrincipalBuilder turns what a connection established into its principal,
// as Kafka's KafkaPrincipalBuilder does. The default, [DefaultPrincipal],
// is Kafka's DefaultKafkaPrincipalBuilder.
type PrincipalBuilder func(Authentication, *security.PrincipalMapper) (connregistry.Principal, error)

// DefaultPrincipal builds Kafka's default principals: User:<SASL identity>
// after SASL; User:<mapped subject DN> for a TLS client certificate (mapped
// with ssl.principal.mapping.rules); User:ANONYMOUS otherwise.
func DefaultPrincipal(a Authentication, mapper *security.PrincipalMapper) (connregistry.Principal, error) {
	switch {
	case a.SASLMechanism != "":
		return connregistry.Principal{Type: "User", Name: a.SASLIdentity}, nil
	case a.TLS != nil && len(a.TLS.PeerCertificates) > 0:
		dn := security.SubjectDN(a.TLS.PeerCertificates[0])
		if mapper == nil {
			return connregistry.Principal{Type: "User", Name: dn}, nil
		}
		name, err := mapper.Name(dn)
		if err != nil {
			return connregistry.Principal{}, fmt.Errorf("failed to map name for '%s' based on SSL principal mapping rules: %w", dn, err)
		}
		return connregistry.Principal{Type: "User", Name: name}, nil
	}
	return connregistry.Anonymous(), nil
}

// listenerSecurity is one listener's resolved security.
type listenerSecurity struct {
	tls        *listenerTLS     // nil without TLS
	mechanisms []sasl.Mechanism // enabled, in configured order
	names      []string         // their names, as SaslHandshake lists them
	mapper     *security.PrincipalMapper
	conf       security.Settings
	timeout    time.Duration // TLS handshake and SASL exchange deadline
}

// newListenerSecurity resolves listener l's security from lc, its
// ListenerConfig, and cfg (Credentials): its TLS configuration and an
// implementation of each SASL mechanism it enables, the host's
// (ListenerConfig.Mechanisms) or a built-in one.
func newListenerSecurity(l listener.Listener, lc ListenerConfig, cfg Config) (listenerSecurity, error) {
	conf := lc.Security
	sec := listenerSecurity{mapper: conf.PrincipalMapper, conf: conf, timeout: conf.HandshakeTimeout}
	if sec.timeout <= 0 {
		sec.timeout = security.DefaultHandshakeTimeout
	}
	if l.SecurityProtocol.UsesTLS() {
		if conf.TLS == nil {
			return sec, fmt.Errorf("socketserver: listener %s speaks %s but has no TLS configuration", l.Name, l.SecurityProtocol)
		}
		sec.tls = newListenerTLS(conf)
	}
	host := lc.Mechanisms
	if !l.SecurityProtocol.UsesSASL() {
		if len(host) > 0 {
			return sec, fmt.Errorf("socketserver: Config.PerListener gives listener %s SASL mechanisms, but it speaks %s", l.Name, l.SecurityProtocol)
		}
		return sec, nil
	}
	if len(conf.EnabledMechanisms) == 0 {
		return sec, fmt.Errorf("socketserver: listener %s speaks %s but enables no SASL mechanism", l.Name, l.SecurityProtocol)
	}
	key, value := enabledMechanismsSetting(conf)
	configError := func(rule string) error {
		return &configerr.Error{Key: key, Value: value, Err: security.ErrSASLMechanism, Rule: rule}
	}
	given := map[string]sasl.Mechanism{}
	for _, m := range host {
		if m == nil {
			return sec, fmt.Errorf("socketserver: Config.PerListener gives listener %s a nil mechanism", l.Name)
		}
		name := m.Name()
		if _, dup := given[name]; dup {
			return sec, fmt.Errorf("socketserver: Config.PerListener gives listener %s two implementations of SASL mechanism %s", l.Name, name)
		}
		if !slices.Contains(conf.EnabledMechanisms, name) {
			return sec, configError(fmt.Sprintf("Config.PerListener gives listener %s SASL mechanism %s, which %s does not enable (mechanism names are case-sensitive)", l.Name, name, key))
		}
		given[name] = m
	}
	for _, name := range conf.EnabledMechanisms {
		m, ok := given[name]
		if !ok {
			if name == oauthBearer {
				return sec, noOAuthBearer(l.Name, conf, configError)
			}
			if !slices.Contains(sasl.Builtins(), name) {
				return sec, configError(noImplementationRule(l.Name, name))
			}
			store := lc.Credentials
			if store == nil {
				store = cfg.Credentials
			}
			if store == nil {
				return sec, fmt.Errorf("socketserver: listener %s speaks %s but has no credential store (ListenerConfig.Credentials or Config.Credentials) for SASL mechanism %s", l.Name, l.SecurityProtocol, name)
			}
			var err error
			if m, err = sasl.Builtin(name, store); err != nil {
				return sec, fmt.Errorf("socketserver: listener %s: %w", l.Name, err)
			}
		}
		sec.mechanisms = append(sec.mechanisms, m)
		sec.names = append(sec.names, name)
	}
	return sec, nil
}

// oauthBearer is SASL/OAUTHBEARER's name.
const oauthBearer = "OAUTHBEARER"

// noOAuthBearer is the error of New for listener l, which enables
// OAUTHBEARER while its ListenerConfig.Mechanisms holds no mechanism of that
// name: the server builds none, so as not to link its validators (go-jose,
// an HTTP client) into every host. It says how to add one: from the
// settings the listener's properties configure, when they do; else the
// key at fault, when the properties leave OAUTHBEARER to the host.
func noOAuthBearer(l protocolmap.ListenerName, conf security.Settings, configError func(rule string) error) error {
	if err := conf.OAuthBearerNotConfigured; err != nil {
		return err
	}
	const pkg = "github.com/kafkanet/kafkanet/security/sasl/oauthbearer"
	if s := conf.OAuthBearer; s != nil {
		validator := "unsecured validator (unsigned tokens)"
		if s.JWKS != nil {
			validator = "JWKS validator (signed tokens)"
		}
		return configError(fmt.Sprintf("listener %s enables SASL mechanism %s, which its properties configure with Kafka's %s, "+
			"but its ListenerConfig.Mechanisms holds no %s mechanism, and the server builds none: "+
			"add the one its settings describe with l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security), "+
			"l being cfg.PerListener[%q] (package %s)",
			l, oauthBearer, validator, oauthBearer, string(l), pkg))
	}
	return configError(noImplementationRule(l, oauthBearer) + fmt.Sprintf(
		"; package %s implements it over a token validator of the host's (oauthbearer.New) or, from the listener's properties, "+
			"as Kafka configures it (oauthbearer.AddMechanism(l.Mechanisms, l.Security), with the settings config.Server reads)", pkg))
}

// keySASLEnabledMechanisms is the key an error about a listener's
// EnabledMechanisms names when its Settings do not say where they came
// from (the configuration layer, package config, exports it as a
// constant).
const keySASLEnabledMechanisms = "sasl.enabled.mechanisms"

// enabledMechanismsSetting returns the key a listener's
// sasl.enabled.mechanisms came from and their value, for error messages;
// New reads no property.
func enabledMechanismsSetting(conf security.Settings) (key, value string) {
	key = conf.EnabledMechanismsKey
	if key == "" {
		key = keySASLEnabledMechanisms
	}
	return key, strings.Join(conf.EnabledMechanisms, ",")
}

// noImplementationRule explains that listener l enables a mechanism that
// nothing implements.
func noImplementationRule(l protocolmap.ListenerName, name string) string {
	rule := fmt.Sprintf("listener %s enables SASL mechanism %s, which is neither built in (%s) nor given in the listener's ListenerConfig.Mechanisms",
		l, name, strings.Join(sasl.Builtins(), ", "))
	for _, b := range sasl.Builtins() {
		if strings.EqualFold(b, name) {
			return rule + "; mechanism names are case-sensitive, as in Kafka: " + b + ", not " + name
		}
	}
	if name == "GSSAPI" {
		rule += "; GSSAPI (Kerberos) is Kafka's default when sasl.enabled.mechanisms is not set"
	}
	return rule
}

// reauth returns connections.max.reauth.ms for mechanism (KIP-368); zero
// means it is not set.
func (s *listenerSecurity) reauth(mechanism string) time.Duration {
	if mechanism == "" {
		return 0
	}
	return s.conf.ReauthMaxFor(mechanism)
}

func (s *listenerSecurity) mechanism(name string) sasl.Mechanism {
	if i := slices.Index(s.names, name); i >= 0 {
		return s.mechanisms[i]
	}
	return nil
}

// handshake runs the connection's TLS handshake and SASL authentication, as
// its listener requires, under the listener's handshake deadline (from
// when the connection began, its PROXY header included), and sets the
// connection's principal. It returns an error when the connection must
// close.
func (c *conn) handshake(deadline time.Time) (err error) {
	ls := c.p.ls
	sec := ls.sec
	if sec.tls == nil && len(sec.mechanisms) == 0 {
		return nil
	}
	defer func() { c.authDone(err, false) }()
	_ = c.nc.SetWriteDeadline(deadline)
	c.moveReadDeadline(deadline)
	if c.draining() { // Shutdown's wake, if it came before the move, is undone by it
		return errDraining
	}
	if sec.tls != nil {
		tc := tls.Server(prefixedConn{c.nc, c.socket()}, sec.tls.config()) // TLS reads what a parked goroutine read first
		ctx, cancel := context.WithDeadline(&c.ctx, deadline)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			// A client that sent nothing and left is a probe (peerLeft);
			// one that began a handshake is not.
			c.pre.heard = c.pre.got
			return fmt.Errorf("%w: %w", ErrHandshake, err) // not delayed: Kafka delays SASL failures only
		}
		if rest, ok := c.pre.r.(*restReader); ok { // what came with a PROXY header, which the handshake's first read took
			if len(rest.rest) > 0 {
				return fmt.Errorf("%w: %d bytes that came with the PROXY header are still unread", ErrHandshake, len(rest.rest))
			}
			c.pre.r = takeSocket(c.nc)
		}
		state := tc.ConnectionState()
		c.rw = tc
		c.br.Reset(tc) // nothing is read before the TLS handshake (a PROXY header's leftovers went to restReader)

		c.entry.SetTLS(state.Version, state.CipherSuite, state.ServerName)
	}
	var mechanism, identity string // "" without SASL
	if len(sec.mechanisms) > 0 {
		mech, version, err := c.saslHandshake()
		if err != nil {
			return err
		}
		c.entry.SetSASLMechanism(mech.Name()) // for the hooks, should the exchange fail
		if identity, err = c.saslExchange(mech, version, deadline, false); err != nil {
			return err
		}
		mechanism = mech.Name()
	}
	p, err := c.p.srv.cfg.PrincipalBuilder(c.authentication(mechanism, identity), sec.mapper)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrAuthentication, err)
	}
	c.entry.SetPrincipal(p)
	c.entry.SetState(connregistry.StateReady)
	if c.draining() { // Shutdown's drain also sets the read deadline
		return errDraining
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	c.clearReadDeadline()
	c.writeDeadline = 0 // cleared with the handshake's: writeFrame sets it again
	return nil
}

// saslHandshake reads the start of Kafka's server-side SASL exchange: an
// optional ApiVersions request (answered), then SaslHandshake. It returns
// the mechanism chosen and the SaslHandshake version: from v1 the tokens
// come in SaslAuthenticate requests, with v0 as raw size-prefixed frames.
// Frames are limited to sasl.server.max.receive.size. Any other request,
// and a frame that is not a request, closes the connection without a
// response after the failed-authentication delay. Each request is
// reported (HookRequestDone).
func (c *conn) saslHandshake() (sasl.Mechanism, int16, error) {
	apis := c.p.ls.apis
	// The first byte first: a client that leaves before it is a probe
	// (peerLeft), one that leaves later, within a frame, is not.
	if _, err := c.br.Peek(1); err != nil {
		return nil, 0, c.refuse(err)
	}
	c.pre.heard = true
	sawAPIVersions := false
	for {
		frame, _, _, err := c.nextFrame(int32(c.p.srv.cfg.SASLMaxReceiveSize), nil, nil)
		if err != nil {
			return nil, 0, c.refuse(err)
		}
		received := time.Now()
		h, api, req, _, _, err := c.decode(frame, len(frame), received, false)
		if err != nil {
			return nil, 0, c.refuse(err)
		}
		q := logged{h: h, size: len(frame), received: received, auth: true}
		if api.Raw { // left undecoded: not a request of the exchange
			return nil, 0, c.refuseOwn(&q, fmt.Errorf("%w: Unexpected Kafka request of type %s during SASL handshake.", ErrIllegalSASLState, apiName(h.key)))
		}
		switch body := req.(type) {
		case nil: // a too-new ApiVersions request
			if err := c.answerOwn(&q, apis.apiVersionsResponse(nil, true), false); err != nil {
				return nil, 0, err
			}
		case *kmsg.ApiVersionsRequest:
			if sawAPIVersions {
				return nil, 0, c.refuseOwn(&q, fmt.Errorf("%w: a second ApiVersions request", ErrIllegalSASLState))
			}
			resp := apis.apiVersionsResponse(body, false)
			if resp.ErrorCode == 0 {
				sawAPIVersions = true
				c.noteClientSoftware(body)
			}
			if err := c.answerOwn(&q, resp, false); err != nil {
				return nil, 0, err
			}
		case *kmsg.SASLHandshakeRequest:
			mech, err := c.answerSASLHandshake(&q, body)
			return mech, h.version, err
		default:
			return nil, 0, c.refuseOwn(&q, fmt.Errorf("%w: Unexpected Kafka request of type %s during SASL handshake.", ErrIllegalSASLState, apiName(h.key)))
		}
	}
}

// answerSASLHandshake answers q, a SaslHandshake, with the enabled
// mechanisms and returns the one the client chose. A mechanism the listener
// does not enable (compared case-sensitively) gets
// UNSUPPORTED_SASL_MECHANISM after the failed-authentication delay, and an
// error to close the connection.
func (c *conn) answerSASLHandshake(q *logged, req *kmsg.SASLHandshakeRequest) (sasl.Mechanism, error) {
	sec := c.p.ls.sec
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SetVersion(q.h.version)
	resp.SupportedMechanisms = sec.names
	mech := sec.mechanism(req.Mechanism)
	if mech == nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.failAuthentication()
		_ = c.answerOwn(q, resp, true)
		return nil, fmt.Errorf("%w: Unsupported SASL mechanism %s", ErrAuthentication, req.Mechanism)
	}
	return mech, c.answerOwn(q, resp, false)
}

// saslExchange runs mech's steps until they complete or fail. With
// handshake v0 the tokens are raw size-prefixed frames both ways; from v1
// they travel in SaslAuthenticate requests and responses. A failure is
// answered, where the protocol can carry it, with SASL_AUTHENTICATION_FAILED
// and the mechanism's message, after the failed-authentication delay; a
// failure that carries a challenge sends it first and fails on the
// client's next message. A re-authentication (reauth) must keep the
// principal. On success it returns the authorization id, and the
// connection's mechanism and session expiry are set.
func (c *conn) saslExchange(mech sasl.Mechanism, handshakeVersion int16, deadline time.Time, reauth bool) (string, error) {
	server := mech.NewServer(sasl.Attempt{
		Listener: c.p.ls.cfg.Name, ClientAddr: c.info().ClientAddr, TLS: c.tlsState(), Reauthentication: reauth,
	})
	if cl, ok := server.(io.Closer); ok {
		defer cl.Close()
	}
	ctx, cancel := context.WithDeadline(&c.ctx, deadline)
	defer cancel()
	var told *sasl.Error // a failure whose challenge the client has been sent
	for {
		frame, _, _, err := c.nextFrame(int32(c.p.srv.cfg.SASLMaxReceiveSize), nil, nil)
		if err != nil {
			return "", c.refuse(err)
		}
		var (
			q     logged // the SaslAuthenticate request (handshake v1+): a v0 token has no header, and is not logged
			token = frame
		)
		if handshakeVersion > 0 {
			var req *kmsg.SASLAuthenticateRequest
			if req, err = c.saslAuthenticateRequest(&q, frame); err != nil {
				return "", err
			}
			token = req.SASLAuthBytes
		}
		var challenge []byte
		if told != nil {
			err = told // whatever the client answered, the exchange has failed
		} else {
			challenge, err = server.Step(ctx, token)
		}
		complete := err == nil && server.Complete()
		if complete && reauth {
			err = c.checkPrincipalUnchanged(mech.Name(), server.AuthorizationID())
		}
		var se *sasl.Error
		if err != nil && told == nil && errors.As(err, &se) && se.Challenge != nil {
			told, challenge, err, complete = se, se.Challenge, nil, false
			// The exchange has failed: the client's next message is a
			// formality (OAUTHBEARER's KIP-255 error challenge), and a
			// client that leaves instead (kafka-python) was refused all
			// the same, not closed of its own accord.
			c.setReason(connregistry.CloseAuthenticationFailed)
		}
		if err != nil {
			c.failAuthentication()
			if handshakeVersion > 0 {
				resp := kmsg.NewPtrSASLAuthenticateResponse()
				resp.SetVersion(q.h.version)
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := sasl.GenericMessage(mech.Name(), reauth) // Kafka's for a SaslException
				if errors.As(err, &se) {
					msg = se.ClientMessage(reauth)
				}
				resp.ErrorMessage = &msg
				_ = c.answerOwn(&q, resp, true)
			} // v0 cannot carry an error: the client sees the close
			return "", fmt.Errorf("%w: mechanism %s: %w", ErrAuthentication, mech.Name(), err)
		}
		var lifetime time.Duration
		if complete {
			lifetime = c.authenticated(mech.Name(), server.Negotiated())
		}
		if handshakeVersion == 0 {
			if challenge != nil { // Kafka sends nothing for a null challenge
				err = c.writeToken(challenge)
			}
		} else {
			resp := kmsg.NewPtrSASLAuthenticateResponse()
			resp.SetVersion(q.h.version)
			resp.SASLAuthBytes = challenge
			if resp.SASLAuthBytes == nil {
				resp.SASLAuthBytes = []byte{}
			}
			resp.SessionLifetimeMillis = lifetime.Milliseconds()
			err = c.answerOwn(&q, resp, false)
		}
		if err != nil {
			return "", err
		}
		if complete {
			return server.AuthorizationID(), nil
		}
	}
}

// saslAuthenticateRequest decodes a frame of the SASL exchange, which must
// be a SaslAuthenticate request, and sets q to it for the request log. Any
// other request gets its own error response with ILLEGAL_SASL_STATE after
// the failed-authentication delay, as Kafka's SaslServerAuthenticator
// answers it, is logged, and returns an error to close the connection.
func (c *conn) saslAuthenticateRequest(q *logged, frame []byte) (*kmsg.SASLAuthenticateRequest, error) {
	received := time.Now()
	h, rest, err := parseHeaderPrefix(frame)
	if err != nil {
		return nil, c.refuse(err)
	}
	*q = logged{h: h, size: len(frame), received: received, auth: true}
	if h.key != saslAuthenticateKey {
		msg := "Unexpected Kafka request of type " + apiName(h.key) + " during SASL authentication."
		resp := illegalSASLStateResponse(h, rest, msg)
		if resp == nil {
			return nil, c.refuseOwn(q, fmt.Errorf("%w: %s", ErrIllegalSASLState, msg))
		}
		c.failAuthentication()
		_ = c.answerOwn(q, resp, true)
		return nil, fmt.Errorf("%w: %s", ErrIllegalSASLState, msg)
	}
	_, _, body, _, _, err := c.decode(frame, len(frame), received, false)
	if err != nil {
		return nil, c.refuse(err)
	}
	return body.(*kmsg.SASLAuthenticateRequest), nil
}

// illegalSASLStateResponse decodes a request that came when only
// SaslAuthenticate may (rest is what follows its header's client id) with
// kmsg's schemas, as Kafka parses it with its own whatever the listener
// serves, and returns its error response with ILLEGAL_SASL_STATE; nil if
// the request does not decode or Kafka sends no response.
func illegalSASLStateResponse(h header, rest []byte, msg string) kmsg.Response {
	req := kmsg.RequestForKey(h.key)
	if req == nil || h.version < 0 || h.version > req.MaxVersion() {
		return nil
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil
		}
	}
	if req.ReadFrom(rest) != nil {
		return nil
	}
	return errorResponse(req, kerr.IllegalSaslState, msg)
}

// checkPrincipalUnchanged builds the principal of a re-authentication and
// fails it, as Kafka's SaslServerAuthenticator does, if it is not the
// connection's principal.
func (c *conn) checkPrincipalUnchanged(mechanism, identity string) error {
	p, err := c.p.srv.cfg.PrincipalBuilder(c.authentication(mechanism, identity), c.p.ls.sec.mapper)
	if err != nil {
		return err
	}
	if old := c.info().Principal; p != old {
		// Kafka's text: type and name joined by a dot, not KafkaPrincipal's colon.
		return &sasl.Error{Mechanism: mechanism, SendReason: true, Reason: fmt.Sprintf(
			"Cannot change principals during re-authentication from %s.%s: %s.%s", old.Type, old.Name, p.Type, p.Name)}
	}
	return nil
}

// authentication is what the connection established, for its
// PrincipalBuilder: mechanism and identity are "" without SASL.
func (c *conn) authentication(mechanism, identity string) Authentication {
	info := c.info()
	return Authentication{
		Listener: c.p.ls.cfg.Name, SecurityProtocol: info.SecurityProtocol, ClientAddr: info.ClientAddr,
		TLS: c.tlsState(), SASLMechanism: mechanism, SASLIdentity: identity,
	}
}

// tlsState returns the connection's TLS state, or nil without TLS.
func (c *conn) tlsState() *tls.ConnectionState {
	if tc, ok := c.rw.(*tls.Conn); ok {
		state := tc.ConnectionState()
		return &state
	}
	return nil
}

// authenticated records a successful (re-)authentication: mechanism, time
// and when the session expires. It returns the session's
// lifetime for SaslAuthenticate's SessionLifetimeMs.
func (c *conn) authenticated(mechanism string, negotiated sasl.Negotiated) time.Duration {
	now := time.Now()
	lifetime, expires := sessionLifetime(now, negotiated.CredentialExpiry, c.p.ls.sec.reauth(mechanism))
	var expiry time.Time
	if expires {
		expiry = now.Add(lifetime)
	}
	c.entry.SetAuthenticated(mechanism, now, expiry)
	return lifetime
}

// sessionLifetime is how long a session that authenticated at now lasts,
// as Kafka's SaslServerAuthenticator computes it from the credential's
// expiry (zero if none) and connections.max.reauth.ms (reauthMax, unset
// when not above zero): the earlier of the two, never negative, in whole
// milliseconds. expires is false when neither is set: the session lasts
// as long as the connection.
func sessionLifetime(now, credentialExpiry time.Time, reauthMax time.Duration) (lifetime time.Duration, expires bool) {
	switch {
	case credentialExpiry.IsZero() && reauthMax <= 0:
		return 0, false
	case credentialExpiry.IsZero():
		lifetime = reauthMax
	case reauthMax <= 0:
		lifetime = credentialExpiry.Sub(now)
	default:
		lifetime = min(credentialExpiry.Sub(now), reauthMax)
	}
	return max(lifetime, 0).Truncate(time.Millisecond), true
}

// refuse ends authentication with err: a failure of the client's, anything
// but the connection closing or a deadline passing, waits the
// failed-authentication delay (KIP-306) first. It returns err.
func (c *conn) refuse(err error) error {
	if !isClosedOrEOF(err) && !errors.Is(err, errDraining) {
		c.failAuthentication()
	}
	return err
}

// failAuthentication waits connection.failed.authentication.delay.ms before
// a failed authentication's response and close (KIP-306), so that a client
// retrying bad credentials cannot hammer the server; Close, Shutdown and
// the listener's removal cut it short.
func (c *conn) failAuthentication() {
	c.setReason(connregistry.CloseAuthenticationFailed)
	d := c.p.srv.cfg.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	case <-c.p.srv.drainStarted:
	case <-c.p.ls.drainStarted:
	}
}

// minReauthInterval is the shortest time between two re-authentications
// of a connection: Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS.
const minReauthInterval = time.Second

// mayReauthenticate reports whether a SaslHandshake received at now starts
// a re-authentication (KIP-368), as Kafka's
// KafkaChannel.maybeBeginServerReauthentication decides: only when the
// session expires, and not within a second of the last re-authentication's
// start. Otherwise the SaslHandshake is an ordinary request.
func (c *conn) mayReauthenticate(now time.Time) bool {
	if c.info().SessionExpiry.IsZero() {
		return false
	}
	return c.reauthStarted == 0 || now.Sub(c.p.srv.epoch)-time.Duration(c.reauthStarted) >= minReauthInterval
}

// answerSASLAfterAuthentication answers SaslHandshake and SaslAuthenticate
// received after authentication. A SaslHandshake that may start
// re-authentication (mayReauthenticate) does; otherwise both get
// ILLEGAL_SASL_STATE (SaslHandshake with no mechanisms) and the connection
// stays open, as Kafka's KafkaApis answers them. Each request is reported
// (HookRequestDone), those of a re-authentication as they are answered.
// An error means the connection must close.
func (c *conn) answerSASLAfterAuthentication(q *logged, req kmsg.Request) error {
	if hs, ok := req.(*kmsg.SASLHandshakeRequest); ok && c.mayReauthenticate(q.received) {
		c.reauthStarted = max(1, int64(q.received.Sub(c.p.srv.epoch))) // 0 is "never"
		deadline := time.Now().Add(c.p.ls.sec.timeout)
		c.moveReadDeadline(deadline)
		err := c.reauthenticate(q, hs, deadline)
		c.authDone(err, true)
		if err != nil {
			return err
		}
		if c.draining() {
			return errDraining
		}
		c.clearReadDeadline()
		return nil
	}
	var resp kmsg.Response
	switch req.(type) {
	case *kmsg.SASLHandshakeRequest:
		r := kmsg.NewPtrSASLHandshakeResponse()
		r.ErrorCode = kerr.IllegalSaslState.Code
		resp = r
	default:
		r := kmsg.NewPtrSASLAuthenticateResponse()
		r.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate request received after successful authentication"
		r.ErrorMessage = &msg
		resp = r
	}
	resp.SetVersion(q.h.version)
	return c.answerOwn(q, resp, false)
}

// reauthenticate runs a KIP-368 re-authentication that req began, as
// Kafka's SaslServerAuthenticator does: a mechanism the listener does not
// enable is refused as in a first authentication; another enabled
// mechanism than the connection's gets a successful SaslHandshake
// response, and the client's next message, whatever it is, fails the
// re-authentication with a delayed close and no response.
func (c *conn) reauthenticate(q *logged, req *kmsg.SASLHandshakeRequest, deadline time.Time) error {
	mech, err := c.answerSASLHandshake(q, req)
	if err != nil {
		return err
	}
	if current := c.info().SASLMechanism; mech.Name() != current {
		if _, _, _, err := c.nextFrame(int32(c.p.srv.cfg.SASLMaxReceiveSize), nil, nil); err != nil && isClosedOrEOF(err) {
			return err
		}
		c.failAuthentication()
		return fmt.Errorf("%w: SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'",
			ErrAuthentication, mech.Name(), current)
	}
	_, err = c.saslExchange(mech, q.h.version, deadline, true)
	return err
}
