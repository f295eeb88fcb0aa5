package quota

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

// Config is the sampling of a [Manager]'s rates.
type Config struct {
	// Samples is quota.window.num: how many windows a rate keeps
	// (DefaultSamples when 0 or less).
	Samples int
	// Window is quota.window.size.seconds: each window's length
	// (DefaultWindow when 0 or less).
	Window time.Duration
}

func (c Config) withDefaults() Config {
	if c.Samples <= 0 {
		c.Samples = DefaultSamples
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	return c
}

// Manager keeps client quotas per [Entity] and measures each client's
// rates against them, as Kafka's ClientQuotaManager (one per [Key]) does.
// It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu     sync.Mutex
	quotas map[Entity]map[Key]float64
	// enabled counts the entities with a quota of each key: a key no
	// entity has costs nothing to record (Kafka's quotasEnabled).
	enabled map[Key]int
	rates   map[rateKey]*Rate
	swept   time.Time // when rates was last rid of expired rates
}

// rateKey names one rate: the key, and the user and client id the chosen
// quota's entity covers (Kafka's metric tags; "" where it covers all).
type rateKey struct {
	key            Key
	user, clientID string
}

// NewManager returns a manager with no quotas.
func NewManager(cfg Config) *Manager {
	return &Manager{cfg: cfg.withDefaults(), quotas: map[Entity]map[Key]float64{}, enabled: map[Key]int{}, rates: map[rateKey]*Rate{}}
}

// Config returns the manager's sampling, with defaults applied.
func (m *Manager) Config() Config { return m.cfg }

// Set sets e's quota k to value, and returns an error wrapping
// [ErrInvalid] when Kafka would refuse it (see [Key.Check] and
// [Entity.Check]). The next request measures against it; what the rates
// have recorded stays.
func (m *Manager) Set(e Entity, k Key, value float64) error {
	if err := e.Check(); err != nil {
		return err
	}
	if err := k.Check(value); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.quotas[e]
	if q == nil {
		q = map[Key]float64{}
		m.quotas[e] = q
	}
	if _, ok := q[k]; !ok {
		m.enabled[k]++
	}
	q[k] = value
	return nil
}

// Remove removes e's quota k, if it has one.
func (m *Manager) Remove(e Entity, k Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.quotas[e]
	if _, ok := q[k]; !ok {
		return
	}
	delete(q, k)
	if len(q) == 0 {
		delete(m.quotas, e)
	}
	if m.enabled[k]--; m.enabled[k] == 0 {
		// No quota of k any more: its rates start afresh if one comes
		// back, as Kafka's sensors do when quotas are re-enabled.
		for rk := range m.rates {
			if rk.key == k {
				delete(m.rates, rk)
			}
		}
	}
}

// EntityQuotas is an entity and its quotas.
type EntityQuotas struct {
	Entity Entity
	Quotas map[Key]float64
}

// Quotas returns every entity that has a quota, with a copy of its
// quotas, ordered by entity (users before client ids, defaults first).
func (m *Manager) Quotas() []EntityQuotas {
	m.mu.Lock()
	out := make([]EntityQuotas, 0, len(m.quotas))
	for e, q := range m.quotas {
		c := make(map[Key]float64, len(q))
		for k, v := range q {
			c[k] = v
		}
		out = append(out, EntityQuotas{Entity: e, Quotas: c})
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b EntityQuotas) int {
		return cmp.Or(compareComponent(a.Entity.User, b.Entity.User), compareComponent(a.Entity.ClientID, b.Entity.ClientID))
	})
	return out
}

func compareComponent(a, b Component) int {
	rank := func(c Component) int {
		switch {
		case !c.Set:
			return 2
		case c.Default:
			return 0
		}
		return 1
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a.Name, b.Name))
}

// has reports whether entity (user u, client id c) has a quota of k.
// Called with m.mu held.
func (m *Manager) has(k Key, u, c Component) bool {
	_, ok := m.quotas[Entity{User: u, ClientID: c}][k]
	return ok
}

// tags returns the user and client id whose rate a request of user and
// clientID is recorded in, as Kafka's DefaultQuotaCallback.quotaMetricTags
// walks the eight levels: the parts the most specific entity with a quota
// of k names, "" for a part it leaves out. Called with m.mu held.
func (m *Manager) tags(k Key, user, clientID string) (string, string) {
	u, c, du, dc, none := Named(user), Named(clientID), DefaultComponent(), DefaultComponent(), Component{}
	switch {
	case m.has(k, u, c), m.has(k, u, dc): // 1, 2
		return user, clientID
	case m.has(k, u, none): // 3
		return user, ""
	case m.has(k, du, c), m.has(k, du, dc): // 4, 5
		return user, clientID
	case m.has(k, du, none): // 6
		return user, ""
	}
	return "", clientID // 7, 8, or no quota
}

// limit returns the quota of the rate with tags user and clientID, as
// Kafka's DefaultQuotaCallback.quotaLimit looks it up, and false when none
// applies. Called with m.mu held.
func (m *Manager) limit(k Key, user, clientID string) (float64, bool) {
	var entities []Entity
	u, c, du, dc, none := Named(user), Named(clientID), DefaultComponent(), DefaultComponent(), Component{}
	switch {
	case user != "" && clientID != "":
		entities = []Entity{{u, c}, {u, dc}, {du, c}, {du, dc}}
	case user != "":
		entities = []Entity{{u, none}, {du, none}}
	case clientID != "":
		entities = []Entity{{none, c}, {none, dc}}
	}
	for _, e := range entities {
		if v, ok := m.quotas[e][k]; ok {
			return v, true
		}
	}
	return 0, false
}

// Limit returns the quota k that applies to a request of user (the
// principal's name) with clientID, and false when none does.
func (m *Manager) Limit(k Key, user, clientID string) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, c := m.tags(k, user, clientID)
	return m.limit(k, u, c)
}

// Record adds value to the rate of quota k that a request of user with
// clientID counts against, at now, and returns how long to throttle the
// client: zero within its quota, else the time that brings the rate back
// to it (Kafka's recordAndGetThrottleTimeMs). Byte rates are not capped
// (beyond [MaxThrottle]); request_percentage is capped at one window, as
// Kafka's ClientRequestQuotaManager does. When no entity has a quota of k
// nothing is recorded and the throttle is zero.
func (m *Manager) Record(k Key, user, clientID string, value float64, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.enabled[k] == 0 {
		return 0
	}
	m.sweep(now)
	rk := rateKey{key: k}
	rk.user, rk.clientID = m.tags(k, user, clientID)
	r := m.rates[rk]
	if r == nil {
		r = NewRate(m.cfg.Samples, m.cfg.Window)
		m.rates[rk] = r
	}
	r.Record(value, now)
	bound, ok := m.limit(k, rk.user, rk.clientID)
	if !ok {
		return 0
	}
	observed := r.Measure(now)
	if observed <= bound { // Kafka's Quota.acceptable
		return 0
	}
	if k == RequestPercentage {
		return BoundedThrottleTime(observed, bound, r.WindowSize(now), m.cfg.Window)
	}
	return ThrottleTime(observed, bound, r.WindowSize(now))
}

// Unrecord takes value back from the rate Record added it to, as Kafka
// does for a Fetch it throttles: the throttled response carries no
// records, so their bytes must not count.
func (m *Manager) Unrecord(k Key, user, clientID string, value float64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rk := rateKey{key: k}
	rk.user, rk.clientID = m.tags(k, user, clientID)
	if r := m.rates[rk]; r != nil {
		r.Record(-value, now)
	}
}

// MaxValueInQuotaWindow returns the most a single request of user with
// clientID may record without being throttled for certain, the quota
// times samples-1 windows (Kafka's getMaxValueInQuotaWindow, which bounds
// a Fetch response's size), and math.MaxFloat64 when no quota applies.
func (m *Manager) MaxValueInQuotaWindow(k Key, user, clientID string) float64 {
	bound, ok := m.Limit(k, user, clientID)
	if !ok {
		return math.MaxFloat64
	}
	return bound * float64(m.cfg.Samples-1) * m.cfg.Window.Seconds()
}

// sweep drops the rates that have expired, at most once per
// samples*window. Called with m.mu held.
func (m *Manager) sweep(now time.Time) {
	span := time.Duration(m.cfg.Samples) * m.cfg.Window
	if now.Sub(m.swept) < span {
		return
	}
	m.swept = now
	for rk, r := range m.rates {
		if r.Expired(now) {
			delete(m.rates, rk)
		}
	}
}

// ThreadPercent converts the time spent on a request to the units of
// the request_percentage quota: percent of one thread for a second, so
// that 10 ms is 1 (Kafka's ClientRequestQuotaManager.nanosToPercentage).
func ThreadPercent(d time.Duration) float64 {
	return float64(d.Nanoseconds()) * 100 / float64(time.Second)
}
