package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkanet/kafkanet/config"
	"github.com/kafkanet/kafkanet/connregistry"
	"github.com/kafkanet/kafkanet/listener"
	"github.com/kafkanet/kafkanet/socketserver"
	"github.com/kafkanet/kafkanet/socketserver/quota"
)

// Client quotas (KIP-13, KIP-124): producer_byte_rate, consumer_byte_rate
// and request_percentage per user and client id, measured with the quota
// package and answered with a throttle time (KIP-219). Kafka keeps them in
// its metadata and changes them with AlterClientQuotas; this broker starts
// from clientQuotasProperty and takes changes the same way. Every broker of
// the process measures its own clients, as each Kafka broker does, and a
// change reaches every broker.

// clientQuotasProperty lists the client quotas the broker starts with:
// entries separated by ";", each an entity in the form of Kafka's
// configuration path (users/<user>, clients/<client-id> or
// users/<user>/clients/<client-id>, where <default> is the default), a
// colon, and comma-separated key=value quotas, for example
// clients/<default>:producer_byte_rate=1048576;users/alice:consumer_byte_rate=2097152,request_percentage=200.
const clientQuotasProperty = "kafkanet.client.quotas"

// Kafka's sampling keys for client quotas.
const (
	quotaWindowNumProperty  = "quota.window.num"
	quotaWindowSizeProperty = "quota.window.size.seconds"
)

// quotaSettings are the client-quota keys: the sampling and the quotas at
// start.
type quotaSettings struct {
	cfg     quota.Config
	initial []quotaValue
}

type quotaValue struct {
	entity quota.Entity
	key    quota.Key
	value  float64
}

func readQuotaSettings(props config.Properties) (quotaSettings, error) {
	var s quotaSettings
	n, err := props.Int(quotaWindowNumProperty, quota.DefaultSamples, 1)
	if err != nil {
		return s, err
	}
	secs, err := props.Int(quotaWindowSizeProperty, int(quota.DefaultWindow/time.Second), 1)
	if err != nil {
		return s, err
	}
	s.cfg = quota.Config{Samples: n, Window: time.Duration(secs) * time.Second}
	value, _ := props.Get(clientQuotasProperty)
	bad := func(rule string) error {
		return &config.Error{Key: clientQuotasProperty, Value: value, Err: listener.ErrInvalidValue, Rule: rule}
	}
	for entry := range strings.SplitSeq(value, ";") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		path, quotas, ok := strings.Cut(entry, ":")
		if !ok {
			return s, bad(fmt.Sprintf("%q: want <entity>:<key>=<value>[,<key>=<value>]", entry))
		}
		e, err := parseQuotaEntity(strings.TrimSpace(path))
		if err != nil {
			return s, bad(err.Error())
		}
		for kv := range strings.SplitSeq(quotas, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return s, bad(fmt.Sprintf("%q: want <key>=<value>", kv))
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				err = quota.Key(strings.TrimSpace(k)).Check(f)
			}
			if err != nil {
				return s, bad(fmt.Sprintf("%s of %s: %v", strings.TrimSpace(kv), path, err))
			}
			s.initial = append(s.initial, quotaValue{entity: e, key: quota.Key(strings.TrimSpace(k)), value: f})
		}
	}
	return s, nil
}

// parseQuotaEntity parses users/<user>, clients/<client-id> or
// users/<user>/clients/<client-id>, with <default> for the default.
func parseQuotaEntity(path string) (quota.Entity, error) {
	part := func(name string) quota.Component {
		if name == "<default>" {
			return quota.DefaultComponent()
		}
		return quota.Named(name)
	}
	var e quota.Entity
	f := strings.Split(path, "/")
	switch {
	case len(f) == 2 && f[0] == "users":
		e.User = part(f[1])
	case len(f) == 2 && f[0] == "clients":
		e.ClientID = part(f[1])
	case len(f) == 4 && f[0] == "users" && f[2] == "clients":
		e.User, e.ClientID = part(f[1]), part(f[3])
	default:
		return e, fmt.Errorf("entity %q: want users/<user>, clients/<client-id> or users/<user>/clients/<client-id>", path)
	}
	return e, e.Check()
}

// newQuotaManager returns a manager with s's sampling and quotas.
func newQuotaManager(s quotaSettings) *quota.Manager {
	m := quota.NewManager(s.cfg)
	for _, q := range s.initial {
		_ = m.Set(q.entity, q.key, q.value) // checked by readQuotaSettings
	}
	return m
}

// quotaClient is who a request counts against: the principal's name and
// the client id.
func quotaClient(r *socketserver.Request) (user, clientID string) {
	if r.ClientID != nil {
		clientID = *r.ClientID
	}
	return r.Conn.Principal.Name, clientID
}

// requestThrottle returns the throttle of r's client's request_percentage
// quota for the time its earlier requests took (recordRequestTime records
// each once its handler returns, as Kafka records a request's network
// thread time to throttle the next).
func (b *broker) requestThrottle(r *socketserver.Request) time.Duration {
	user, clientID := quotaClient(r)
	return b.quotas.Record(quota.RequestPercentage, user, clientID, 0, time.Now())
}

// recordRequestTime counts d, the time r's handler took, against r's
// client's request_percentage quota.
func (b *broker) recordRequestTime(r *socketserver.Request, d time.Duration) {
	user, clientID := quotaClient(r)
	b.quotas.Record(quota.RequestPercentage, user, clientID, quota.ThreadPercent(d), time.Now())
}

// produceThrottle records a Produce of size bytes against its client's
// producer_byte_rate and returns the longer of that quota's and
// request_percentage's throttle times, as Kafka's handleProduceRequest.
func (b *broker) produceThrottle(r *socketserver.Request, size int) time.Duration {
	user, clientID := quotaClient(r)
	d := b.quotas.Record(quota.ProducerByteRate, user, clientID, float64(size), time.Now())
	return max(d, b.requestThrottle(r))
}

// fetchMaxBytes lowers req's MaxBytes to what the client's
// consumer_byte_rate quota lets through in one go (Kafka's
// getMaxValueInQuotaWindow), so that one Fetch cannot overrun it.
func (b *broker) fetchMaxBytes(r *socketserver.Request, req *kmsg.FetchRequest) {
	user, clientID := quotaClient(r)
	if limit := b.quotas.MaxValueInQuotaWindow(quota.ConsumerByteRate, user, clientID); limit < float64(req.MaxBytes) {
		req.MaxBytes = int32(max(limit, 1))
		req.MinBytes = min(req.MinBytes, req.MaxBytes)
	}
}

// respondFetch answers a Fetch with resp, which holds size bytes of
// records, or, when its client is over its consumer_byte_rate or
// request_percentage quota, with an empty response and the throttle time;
// the records of a throttled answer do not count (Kafka's
// unrecordQuotaSensor). The answer stays a socketserver.FetchResponse,
// whose records the server writes from the log without a copy.
func (b *broker) respondFetch(r *socketserver.Request, resp *socketserver.FetchResponse, size int) {
	user, clientID := quotaClient(r)
	now := time.Now()
	d := b.quotas.Record(quota.ConsumerByteRate, user, clientID, float64(size), now)
	d = max(d, b.requestThrottle(r))
	if d > 0 {
		b.quotas.Unrecord(quota.ConsumerByteRate, user, clientID, float64(size), now)
		empty := kmsg.NewPtrFetchResponse()
		empty.ErrorCode, empty.SessionID = resp.ErrorCode, resp.SessionID
		resp = &socketserver.FetchResponse{FetchResponse: empty}
	}
	b.respondThrottled(r, resp, d)
}

// throttle throttles r's client for d, if positive: the server sets the
// response's throttle_time_ms and mutes the connection for d once it is
// answered (KIP-219), so that a client that ignores the throttle time
// (librdkafka's Produce) is held too.
func (b *broker) throttle(r *socketserver.Request, d time.Duration) {
	if d <= 0 {
		return
	}
	if err := r.Throttle(d); err != nil { // answered already: a bug here
		b.c.log.Error("cannot throttle", "conn_id", r.Conn.ID, "api_key", r.APIKey, "err", err)
	}
}

// respondThrottled answers r with resp, throttled for d.
func (b *broker) respondThrottled(r *socketserver.Request, resp kmsg.Response, d time.Duration) {
	b.throttle(r, d)
	b.respond(r, resp)
}

// clientQuotaAPIs are DescribeClientQuotas and AlterClientQuotas, served
// on the data plane through the request queue.
func clientQuotaAPIs() []socketserver.API {
	return []socketserver.API{
		socketserver.KmsgAPI(kmsg.DescribeClientQuotas, 0, 1),
		socketserver.KmsgAPI(kmsg.AlterClientQuotas, 0, 1),
	}
}

// Kafka's entity types of client quotas.
const (
	entityUser     = "user"
	entityClientID = "client-id"
	entityIP       = "ip"
)

// quotaAuthorized reports whether r's principal may perform op on the
// CLUSTER, as Kafka asks of DescribeClientQuotas (DESCRIBE_CONFIGS) and
// AlterClientQuotas (ALTER_CONFIGS): a super user when super.users is set,
// anyone when it is not (Kafka without an authorizer), as for the broker's
// other admin APIs.
func (b *broker) quotaAuthorized(r *socketserver.Request, op kmsg.ACLOperation) bool {
	authorize := b.c.settings.authorizer()
	return authorize == nil || authorize(r.Context(), r.Conn.Principal,
		connregistry.Action{Operation: op, ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: connregistry.ClusterResourceName})
}

// describeClientQuotas answers DescribeClientQuotas as Kafka's
// ClientQuotasImage.describe: each filter component names an entity type
// once, matching a name (exact), the default, or any (specified); strict
// asks for entities with no other part.
func (b *broker) describeClientQuotas(r *socketserver.Request, req *kmsg.DescribeClientQuotasRequest) *kmsg.DescribeClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(err *kerr.Error, msg string) *kmsg.DescribeClientQuotasResponse {
		resp.ErrorCode, resp.ErrorMessage, resp.Entries = err.Code, kmsg.StringPtr(msg), nil
		return resp
	}
	if !b.quotaAuthorized(r, kmsg.ACLOperationDescribeConfigs) {
		return fail(kerr.ClusterAuthorizationFailed, "Cluster authorization failed: "+r.Conn.Principal.String()+" may not DESCRIBE_CONFIGS the CLUSTER")
	}
	type match struct {
		any     bool // specified: any name or the default
		want    quota.Component
		matched bool
	}
	filter := map[string]*match{}
	for _, c := range req.Components {
		switch {
		case c.EntityType == "":
			return fail(kerr.InvalidRequest, "Invalid empty entity type.")
		case filter[c.EntityType] != nil:
			return fail(kerr.InvalidRequest, "Entity type "+c.EntityType+" cannot appear more than once in the filter.")
		case c.EntityType != entityUser && c.EntityType != entityClientID && c.EntityType != entityIP:
			return fail(kerr.UnsupportedVersion, "Unsupported entity type "+c.EntityType)
		}
		m := &match{}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			m.want = quota.Named(*c.Match)
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			m.want = quota.DefaultComponent()
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return fail(kerr.InvalidRequest, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			m.any = true
		default:
			return fail(kerr.InvalidRequest, fmt.Sprintf("Unknown match type %d", c.MatchType))
		}
		filter[c.EntityType] = m
	}
	if filter[entityIP] != nil && (filter[entityUser] != nil || filter[entityClientID] != nil) {
		return fail(kerr.InvalidRequest, "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	matches := func(e quota.Entity) bool {
		parts := map[string]quota.Component{}
		if e.User.Set {
			parts[entityUser] = e.User
		}
		if e.ClientID.Set {
			parts[entityClientID] = e.ClientID
		}
		if req.Strict && len(parts) != len(filter) {
			return false
		}
		for typ, m := range filter {
			c, ok := parts[typ]
			if !ok || !m.any && c != m.want {
				return false
			}
		}
		return true
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, eq := range b.quotas.Quotas() {
		if !matches(eq.Entity) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range []struct {
			typ string
			c   quota.Component
		}{{entityUser, eq.Entity.User}, {entityClientID, eq.Entity.ClientID}} {
			if p.c.Set {
				ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
				ee.Type, ee.Name = p.typ, componentName(p.c)
				entry.Entity = append(entry.Entity, ee)
			}
		}
		for _, k := range sortedKeys(eq.Quotas) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = string(k), eq.Quotas[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp
}

func sortedKeys(m map[quota.Key]float64) []quota.Key {
	keys := make([]quota.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// componentName is c's name on the wire: null for the default.
func componentName(c quota.Component) *string {
	if c.Default {
		return nil
	}
	return kmsg.StringPtr(c.Name)
}

// errQuota is the error of an alteration Kafka refuses (INVALID_REQUEST).
var errQuota = kerr.InvalidRequest

// alterClientQuotas answers AlterClientQuotas as Kafka's
// ClientQuotaControlManager: each entry's entity and operations are
// checked, and either all of an entry's changes apply or none; a null
// value removes a quota (Remove). ValidateOnly checks without applying.
// A change reaches every broker of the process.
func (b *broker) alterClientQuotas(r *socketserver.Request, req *kmsg.AlterClientQuotasRequest) *kmsg.AlterClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	authorized := b.quotaAuthorized(r, kmsg.ACLOperationAlterConfigs)
	b.c.quotaMu.Lock()
	defer b.c.quotaMu.Unlock()
	for _, entry := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, ee := range entry.Entity {
			e := kmsg.NewAlterClientQuotasResponseEntryEntity()
			e.Type, e.Name = ee.Type, ee.Name
			re.Entity = append(re.Entity, e)
		}
		err := fmt.Errorf("Cluster authorization failed: %s may not ALTER_CONFIGS the CLUSTER", r.Conn.Principal)
		var e quota.Entity
		if authorized {
			e, err = alterEntity(entry.Entity)
		}
		if err == nil {
			err = checkOps(entry.Ops)
		}
		if !req.ValidateOnly {
			b.auditQuotaChange(r, entry, err)
		}
		if err == nil && !req.ValidateOnly {
			for _, broker := range b.c.brokers {
				for _, op := range entry.Ops {
					if op.Remove {
						broker.quotas.Remove(e, quota.Key(op.Key))
					} else {
						_ = broker.quotas.Set(e, quota.Key(op.Key), op.Value) // checked
					}
				}
			}
			b.c.log.Info("client quotas altered", "entity", e.String(), "ops", opsString(entry.Ops), "principal", r.Conn.Principal.String())
		}
		if err != nil {
			code := errQuota.Code
			if !authorized {
				code = kerr.ClusterAuthorizationFailed.Code
			}
			re.ErrorCode, re.ErrorMessage = code, kmsg.StringPtr(err.Error())
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp
}

// auditQuotaChange records an AlterClientQuotas entry in the audit trail
// (-audit-log): who changed which entity's quotas how, or was refused
// (err).
func (b *broker) auditQuotaChange(r *socketserver.Request, entry kmsg.AlterClientQuotasRequestEntry, err error) {
	var parts []string
	for _, p := range entry.Entity {
		name := "<default>"
		if p.Name != nil {
			name = *p.Name
		}
		parts = append(parts, p.Type+"="+name)
	}
	e := socketserver.AuditEvent{
		Kind: socketserver.AuditHostAction, Action: "alter-client-quotas", Detail: strings.Join(parts, ",") + " " + opsString(entry.Ops),
		Listener: r.Conn.Listener, ConnID: r.Conn.ID, ClientAddr: r.Conn.ClientAddr, ProxyAddr: r.Conn.ProxyAddr, Principal: r.Conn.Principal.String(),
	}
	if err != nil {
		e.Reason = err.Error()
	}
	b.srv.Audit(e)
}

// alterEntity reads an AlterClientQuotas entity: user and client-id parts,
// each once, a null name for the default.
func alterEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (quota.Entity, error) {
	var e quota.Entity
	for _, p := range parts {
		c := quota.DefaultComponent()
		if p.Name != nil {
			c = quota.Named(*p.Name)
		}
		var dst *quota.Component
		switch p.Type {
		case entityUser:
			dst = &e.User
		case entityClientID:
			dst = &e.ClientID
		case entityIP:
			return e, errors.New("ip quotas are not kept here: this broker takes kafkanet.ip.connection.creation.rate and its overrides from its configuration")
		default:
			return e, errors.New("Unhandled client quota entity type: " + p.Type)
		}
		if dst.Set {
			return e, errors.New("Invalid client quota entity, duplicate entity entry " + p.Type)
		}
		*dst = c
	}
	return e, e.Check()
}

// checkOps checks an entry's operations: each key once, a value Kafka
// accepts for each that is set.
func checkOps(ops []kmsg.AlterClientQuotasRequestEntryOp) error {
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return errors.New("Duplicate quota key " + op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			if !slices.Contains(quota.Keys(), quota.Key(op.Key)) {
				return errors.New("Invalid configuration key " + op.Key)
			}
			continue
		}
		if err := quota.Key(op.Key).Check(op.Value); err != nil {
			return err
		}
	}
	return nil
}

func opsString(ops []kmsg.AlterClientQuotasRequestEntryOp) string {
	var s []string
	for _, op := range ops {
		if op.Remove {
			s = append(s, op.Key+"=(removed)")
		} else {
			s = append(s, op.Key+"="+strconv.FormatFloat(op.Value, 'g', -1, 64))
		}
	}
	return strings.Join(s, ",")
}
