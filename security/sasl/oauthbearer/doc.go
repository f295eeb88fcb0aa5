// Package oauthbearer is the server side of SASL/OAUTHBEARER (RFC 7628,
// Kafka's KIP-255): clients authenticate with an OAuth 2 bearer token, which
// a [Validator] checks. It implements Kafka's OAuthBearerSaslServer and the
// two validators a Kafka broker offers:
//
//   - [JWKSValidator], Kafka's OAuthBearerValidatorCallbackHandler
//     (KIP-768): signed JWTs checked against the keys of the identity
//     provider's JSON Web Key Set, fetched over https (or read from a file)
//     and refreshed in the background;
//   - [UnsecuredValidator], Kafka's default
//     OAuthBearerUnsecuredValidatorCallbackHandler: unsigned tokens, for
//     development only.
//
// A host with its own identity provider passes its own Validator, a
// function from a token to a principal and an expiry ([ValidatorFunc]):
//
//	m, err := oauthbearer.New(oauthbearer.ValidatorFunc(func(ctx context.Context, token string) (oauthbearer.Token, error) {
//		p, exp, err := idp.Introspect(ctx, token)
//		return oauthbearer.Token{Principal: p, Expiry: exp}, err
//	}))
//	cfg.PerListener["SASL_SSL"].Mechanisms = []sasl.Mechanism{m}
//
// The exchange: the client's first message ([ParseClientFirstMessage])
// carries the token; a valid one completes the exchange, and the token's
// expiry ends the session (KIP-368: the socket server tells the client in
// SaslAuthenticate's SessionLifetimeMs and closes a connection that does
// not re-authenticate in time). A refused token gets RFC 7628's error
// challenge, {"status":"invalid_token"}; the client answers 0x01 and the
// exchange fails with SASL_AUTHENTICATION_FAILED.
//
// Lifecycles: a Mechanism is a sasl.Service, which the socket server
// starts in its Start and closes when it stops. For a JWKSValidator, Start
// reads the key set (failing if it cannot) and starts the goroutine that
// refreshes it; Close ends that goroutine. A host that uses a validator on
// its own calls Start and Close itself.
//
// From Kafka's properties: package config reads a listener's
// OAUTHBEARER settings (config.OAuthBearer; config.Server keeps them in each ListenerConfig's
// Security.OAuthBearer), and [FromSettings] builds the mechanism Kafka
// would configure from them. A host gives every listener that enables
// OAUTHBEARER its mechanism with [AddMechanism]:
//
//	cfg, err := config.Server(props)
//	...
//	for _, l := range cfg.PerListener {
//		if l.Mechanisms, err = oauthbearer.AddMechanism(l.Mechanisms, l.Security); err != nil {
//			...
//		}
//	}
//
// Each validator has one settings type, whether read from Kafka's keys or
// built in code: security.OAuthBearerJWKS for [NewJWKSValidator] and
// security.OAuthBearerUnsecured for [NewUnsecuredValidator]. Their zero
// fields mean Kafka's defaults and negative durations turn a feature off:
//
//	v, err := oauthbearer.NewJWKSValidator(security.OAuthBearerJWKS{
//		URL:              "https://idp.example/.well-known/jwks.json",
//		ExpectedAudience: []string{"kafka"},
//	}) // refreshed hourly, 30 s of clock skew: Kafka's defaults
//
// Neither the security package nor the socket server imports this one, so
// a program that serves no OAUTHBEARER links neither go-jose (the JWKS
// validator's) nor an HTTP client; the socket server refuses to start a
// listener that enables OAUTHBEARER without a mechanism, saying how to
// add one. Package oauthbearertest issues signed and unsigned tokens for
// tests.
package oauthbearer
