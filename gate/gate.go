package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashline/flashline"
)

// Options configure a Gate. Zero values take the defaults shown.
type Options struct {
	// Timeout bounds every call to Redis on a buyer's path: a slower Redis
	// fails the buyer closed. Default 250ms. The relay and the gate job
	// allow four times as long (at least a second).
	Timeout time.Duration
	// ReturnGrace is how long a unit may stay handed out without a
	// reservation or a return before the gate job returns it (the request
	// that took it died). Default 15s: past any reserve attempt.
	ReturnGrace time.Duration
	// DriftChecks is how many checks in a row, by any instance, must find
	// the same drift, or the counter of another epoch, and how many of this
	// instance's must fail to read Redis, before it is an incident (one
	// slow answer is no outage; a drift is judged only from a consistent
	// view, and the checks in a row guard against what that cannot see).
	// Default 3.
	DriftChecks int
	Logger      *slog.Logger
	Registry    prometheus.Registerer
}

// Memory is what the gate reads of what this instance knows of its sales
// without the database (package salecache's Cache, which package stack
// passes): which sales are gated, and the clock instances agree on.
type Memory interface {
	// Sale is what memory knows of saleID, read from the database when
	// missing or stale (fresh false: the read failed and only a stale
	// entry is left).
	Sale(ctx context.Context, saleID string) (s flashline.SaleFacts, fresh bool, err error)
	// Now is this instance's clock corrected by the database's.
	Now() time.Time
}

// Gate counts gated sales' units in Redis. Safe for concurrent use.
type Gate struct {
	rdb   *redis.Client // nil: no Redis configured, every gated sale fails closed
	store flashline.GateStore
	cache Memory
	opts  Options

	kick chan struct{} // asks the relay loop to run now

	givingBack sync.WaitGroup // giveBack's calls, off the request path

	mu     sync.Mutex
	drifts map[string]drift // per sale, across checks (gate job)

	asideReported sync.Map // movement id → true: set aside by the relay and reported (setAside)

	m metrics
}

type metrics struct {
	decisions *prometheus.CounterVec
	script    prometheus.Histogram
	relayed   prometheus.Counter
	owedAge   prometheus.Gauge
}

// New returns a Gate using rdb (nil: none configured) in front of store,
// reading which sales are gated from cache.
func New(rdb *redis.Client, store flashline.GateStore, cache Memory, opts Options) *Gate {
	if opts.Timeout <= 0 {
		opts.Timeout = 250 * time.Millisecond
	}
	if opts.ReturnGrace <= 0 {
		opts.ReturnGrace = 15 * time.Second
	}
	if opts.DriftChecks <= 0 {
		opts.DriftChecks = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	g := &Gate{
		rdb: rdb, store: store, cache: cache, opts: opts,
		kick:   make(chan struct{}, 1),
		drifts: map[string]drift{},
		m: metrics{
			decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "flashline_gate_decisions_total",
				Help: "Gate steps of gated sales' reservations by outcome (won, already, key_reused, sold_out, limit, paused, missing, unavailable, client_closed: the client left while Redis was asked).",
			}, []string{"outcome"}),
			script: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "flashline_gate_script_seconds",
				Help:    "Latency of the gate step's Redis script.",
				Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
			}),
			relayed: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "flashline_gate_relayed_total",
				Help: "Movements (returns, restocks) the relay applied to gate counters.",
			}),
			owedAge: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "flashline_gate_owed_age_seconds",
				Help: "Age of the oldest movement owed to a gate counter and not applied, at the gate job's last check: the relay's lag.",
			}),
		},
	}
	opts.Registry.MustRegister(g.m.decisions, g.m.script, g.m.relayed, g.m.owedAge, driftCollector{g})
	return g
}

// ErrNoRedis is the reason a gated sale fails closed on an instance started
// without --redis-url.
var ErrNoRedis = errors.New("gate: this instance has no Redis (--redis-url)")

// keys are one sale's keys, all in one hash slot ({saleID}), so that a
// script may touch them all, on a Redis cluster too.
type keys struct {
	stock     string // the counter: units the gate may still hand out
	seq       string // the last unit number handed out
	attempts  string // customer \n idempotency key → seq: a retry reuses its unit
	buyers    string // customer → units held through the gate
	unsettled string // seq → customer \n key \n quantity \n unix ms: handed out, not yet settled
	applied   string // movement ids applied to the counter
	paused    string // set while the counter is rebuilt
	epoch     string // the epoch the counter was written for (missing: 0)
	checks    string // the gate job's checks in a row (streakScript)
}

func keysOf(saleID string) keys {
	p := "flashline:gate:{" + saleID + "}:"
	return keys{
		stock: p + "stock", seq: p + "seq", attempts: p + "attempts", buyers: p + "buyers",
		unsettled: p + "unsettled", applied: p + "applied", paused: p + "paused",
		epoch: p + "epoch", checks: p + "checks",
	}
}

// counter is the key of a counter: the sale's one (variant ""), or, in a
// sale with variants, the variant's own (stock:<sku>; a SKU holds no braces,
// so the key stays in the sale's hash slot).
func (k keys) counter(variant string) string {
	if variant == "" {
		return k.stock
	}
	return k.stock + ":" + variant
}

// counters are the keys of a sale's counters: its variants' in order, or
// its one counter (no variants).
func (k keys) counters(variants []string) []string {
	if len(variants) == 0 {
		return []string{k.stock}
	}
	out := make([]string, len(variants))
	for i, v := range variants {
		out[i] = k.counter(v)
	}
	return out
}

// seqBase is the first unit number of an epoch (see migration 000006).
func seqBase(epoch int64) int64 { return epoch << 40 }

// The gate step, atomic: paused, missing, the attempt's unit already handed
// out (a retry: its own, unless the unit, still in flight, was handed out
// for another quantity or variant), the per-customer limit, sold out; else a
// unit (its number) is handed out: decrement, buyer, attempt, unsettled.
// KEYS[1] is the counter the unit is taken from: the sale's one, or the
// variant's (ARGV[6], empty in a sale without variants, whose unsettled values
// then end with the time, as before variants; a variant's end with its SKU).
// The buyers (the per-customer limit) and the attempts stay the sale's.
var reserveScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[7]) == 1 then return {-4, 0} end
local left = redis.call('GET', KEYS[1])
if not left then return {-3, 0} end
local variant = ARGV[6] or ''
local seq = redis.call('HGET', KEYS[3], ARGV[2])
if seq then
  local u = redis.call('HGET', KEYS[5], seq)
  local q, v
  if u and variant ~= '' then
    q, v = string.match(u, '\n(%d+)\n%d+\n([^\n]*)$')
  elseif u then
    q, v = string.match(u, '\n(%d+)\n%d+$'), ''
  end
  if q and (tonumber(q) ~= tonumber(ARGV[3]) or v ~= variant) then return {-5, tonumber(seq)} end
  return {2, tonumber(seq)}
end
local qty = tonumber(ARGV[3])
local held = tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0')
if held + qty > tonumber(ARGV[4]) then return {-2, 0} end
if tonumber(left) < qty then return {-1, 0} end
seq = redis.call('INCR', KEYS[2])
redis.call('DECRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[4], ARGV[1], qty)
redis.call('HSET', KEYS[3], ARGV[2], seq)
local value = ARGV[2] .. '\n' .. ARGV[3] .. '\n' .. ARGV[5]
if variant ~= '' then value = value .. '\n' .. variant end
redis.call('HSET', KEYS[5], seq, value)
return {1, seq}
`)

// Forgets an attempt's unit, if it is still that one, so that the next try
// takes a new unit.
var forgetScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
`)

// Applies a movement to the counter once: 1 applied, 0 applied before, -1
// the counter is missing or being rebuilt (left owed: a rebuild settles it).
var applyScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if redis.call('SADD', KEYS[4], ARGV[1]) == 0 then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[3])
if tonumber(redis.call('HINCRBY', KEYS[2], ARGV[2], -tonumber(ARGV[3]))) <= 0 then
  redis.call('HDEL', KEYS[2], ARGV[2])
end
if ARGV[4] ~= '0' then redis.call('HDEL', KEYS[3], ARGV[4]) end
return 1
`)

// A consistent view of the counters: whether they are being rebuilt, the
// units handed out and not settled, the epoch (false: 0, counters set when
// their sale was created), which of the movements ARGV the counters applied
// already (1 or 0 each: a relay applies a movement here before its
// transaction marks it applied in the database), and each counter's value
// (false: missing), KEYS[5] on: the sale's one, or its variants'.
var stateScript = redis.NewScript(`
local applied = {}
for i = 1, #ARGV do applied[i] = redis.call('SISMEMBER', KEYS[4], ARGV[i]) end
local counters = {}
for i = 5, #KEYS do counters[i - 4] = redis.call('GET', KEYS[i]) end
return {redis.call('EXISTS', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('GET', KEYS[3]), applied, counters}
`)

// Writes rebuilt counters for epoch ARGV[1], unless a later rebuild wrote
// them already (then {0, that epoch}): two rebuilds of a sale that overlap
// may reach Redis in either order, and only the later epoch, the
// database's, may stand. KEYS: seq, attempts, buyers, unsettled, applied,
// paused, epoch, checks, then the counters (the sale's one, or its
// variants'). ARGV: epoch, first unit number, then a value per counter, the
// number of buyers n, then n customer/units pairs, then customer \n key /
// unit pairs (the attempts). All keys at once: the gate step and the relay
// see the old counters or the new ones; the gate job's checks in a row start
// afresh.
var rebuildScript = redis.NewScript(`
local epoch = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[7]) or '0')
if cur > epoch then return {0, cur} end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[8])
for c = 9, #KEYS do redis.call('SET', KEYS[c], ARGV[c - 6]) end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[7], ARGV[1])
local i = #KEYS - 8 + 3
local n = tonumber(ARGV[i])
i = i + 1
for _ = 1, n do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
redis.call('DEL', KEYS[6])
return {1, epoch}
`)

// call runs a script within bound: the gate's Timeout on a buyer's path,
// the longer background bound in the relay and the gate job (a Redis that
// is briefly slow must not pause a sale).
func (g *Gate) call(ctx context.Context, bound time.Duration, s *redis.Script, keys []string, args ...any) (any, error) {
	if g.rdb == nil {
		return nil, ErrNoRedis
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	res, err := s.Run(ctx, g.rdb, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("gate: redis: %w", err)
	}
	return res, nil
}

// background is the bound of the calls made off a buyer's path.
func (g *Gate) background() time.Duration { return max(time.Second, 4*g.opts.Timeout) }

// state is one gated sale's counters as Redis holds them.
type state struct {
	counter int64 // the sale's one counter, or the sum of its variants'
	// counters are, in a sale with variants, each variant's counter (by
	// SKU).
	counters map[string]int64
	missing  bool // a counter is missing
	// missingVariants are, in a sale with variants, those whose counter
	// is missing.
	missingVariants []string
	paused          bool
	epoch           int64 // the epoch the counters were written for
	unsettled       map[int64]unsettled
	applied         map[string]bool // of the movements asked about, those applied
}

type unsettled struct {
	customer, key string
	quantity      int
	at            time.Time
	variant       string // the variant whose counter it came from ("": none)
}

// state reads the sale's counters (its variants', in a sale with variants),
// and which of the movements owed (by the database's last read) the
// counters have applied already.
func (g *Gate) state(ctx context.Context, saleID string, owed []flashline.GateMovement, variants []string) (state, error) {
	k := keysOf(saleID)
	ids := make([]any, len(owed))
	for i, m := range owed {
		ids[i] = m.ID
	}
	res, err := g.call(ctx, g.background(), stateScript,
		append([]string{k.paused, k.unsettled, k.epoch, k.applied}, k.counters(variants)...), ids...)
	if err != nil {
		return state{}, err
	}
	parts := res.([]any)
	st := state{paused: parts[0].(int64) == 1, unsettled: map[int64]unsettled{}, applied: map[string]bool{}}
	for i, c := range parts[4].([]any) {
		s, ok := c.(string)
		if !ok {
			st.missing = true
			if len(variants) > 0 {
				st.missingVariants = append(st.missingVariants, variants[i])
			}
			continue
		}
		n, _ := strconv.ParseInt(s, 10, 64)
		st.counter += n
		if len(variants) > 0 {
			if st.counters == nil {
				st.counters = map[string]int64{}
			}
			st.counters[variants[i]] = n
		}
	}
	if s, ok := parts[2].(string); ok {
		st.epoch, _ = strconv.ParseInt(s, 10, 64)
	}
	kv := parts[1].([]any)
	for i := 0; i+1 < len(kv); i += 2 {
		seq, _ := strconv.ParseInt(kv[i].(string), 10, 64)
		st.unsettled[seq] = parseUnsettled(kv[i+1].(string))
	}
	for i, a := range parts[3].([]any) {
		if a.(int64) == 1 {
			st.applied[owed[i].ID] = true
		}
	}
	return st, nil
}

// parseUnsettled reads "customer \n key \n quantity \n unix ms", followed in
// a sale with variants by "\n variant" (ids, keys and SKUs hold no control
// characters).
func parseUnsettled(v string) unsettled {
	var u unsettled
	fields := strings.SplitN(v, "\n", 5)
	if len(fields) >= 4 {
		u.customer, u.key = fields[0], fields[1]
		u.quantity, _ = strconv.Atoi(fields[2])
		ms, _ := strconv.ParseInt(fields[3], 10, 64)
		u.at = time.UnixMilli(ms)
	}
	if len(fields) == 5 {
		u.variant = fields[4]
	}
	return u
}

// attemptField names an attempt: the customer and the idempotency key.
func attemptField(customerID, key string) string { return customerID + "\n" + key }

// gated reports whether the cache says saleID is gated (reading it when it
// does not know the sale). A sale the cache cannot read is treated as gated:
// it fails closed rather than bypass a gate it might have. A client that
// left while the sale was read gets its cancellation (flashline.ClientGone),
// not a failure to close on: the cache says which.
func (g *Gate) gated(ctx context.Context, saleID string) (flashline.SaleFacts, bool, error) {
	s, _, err := g.cache.Sale(ctx, saleID)
	if errors.Is(err, flashline.ErrNotFound) {
		return s, false, nil
	}
	if err != nil {
		return s, true, err
	}
	return s, s.Gate == flashline.GateRedis, nil
}
