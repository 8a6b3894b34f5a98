package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// The gated runs: the same cluster with the Redis gate switched on (every
// instance reaches the harness's redis-server through a toxiproxy proxy of
// its own, FLASHLINE_REDIS_URL), a sale created with "gate": "redis", and
// faults on the Redis side. A gate that loses Redis fails closed (503), and
// the gate job pauses the sale with an incident (gate_unreachable after
// three failed reads while it sells, gate_missing for a counter gone); the
// harness then plays the operator of the README's runbook: rebuild the
// counter from the database, resume. On top of the checks of every run,
// the gate's own accounting: once the load is over the counter agrees with
// the database again (drift 0, counter = the stock rows, nothing owed back
// nor in flight), and no incident other than those the fault may cause.

// GateSettleWithin bounds how long after the load the gate's counter may
// take to agree with the database: a unit handed out to a request that died
// comes back after the gate's ReturnGrace (15 s), at the gate job's next run
// (every second), through the relay.
const GateSettleWithin = 30 * time.Second

// GateFacts are the gate's side of a gated run.
type GateFacts struct {
	// On: the run's sale is gated.
	On bool
	// Movements are the units owed back to the counter (gate_outbox).
	Movements []GateMovement
	// Incidents are the gate's incidents (kind gate_*), when each committed.
	Incidents []GateIncident
	// Pauses are the spans the sale was paused by the gate job or the
	// operator, to the operator's resume (Resumed zero: never resumed).
	Pauses []Pause
	// Counter, Drift and OK are the admin view of the gate at the end.
	Counter, Drift int64
	OK             bool
	// Settled is how long after the load they took to agree with the
	// database (the stock rows' units); zero with Agreed false: they never
	// did within GateSettleWithin.
	Settled time.Duration
	Agreed  bool
	// Variants are, in a sale with variants, each variant's counter at the
	// end against its own stock rows (the gate keeps a counter per
	// variant): Agreed also needs each to agree on its own.
	Variants []GateVariantFacts
}

// GateMovement is one gate_outbox row: units owed back to the counter from
// Created (the transaction that wrote it) until the relay's transaction
// that marked it applied committed (nil: never).
type GateMovement struct {
	Reason string
	// Variant is the SKU of the variant whose counter the units go to
	// (gate_outbox.variant; "": a sale without variants).
	Variant string
	Qty     int
	Created time.Time
	Applied *time.Time
}

// GateIncident is one gate incident.
type GateIncident struct {
	Kind      string
	Committed time.Time
}

// Pause is a span the sale was paused.
type Pause struct {
	Paused, Resumed time.Time
	By              string
}

// gateRecord is what the harness did as the operator.
type gateRecord struct {
	pauses  []time.Time // the operator's own pauses (the gate job's are incidents)
	resumes []time.Time // when each resume was answered
	worst   time.Duration
}

// admin is an admin request to the instance in slot.
func (r *Run) admin(ctx context.Context, slot int, method, path string) (client.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return client.New(r.URL(slot), nil).Do(ctx, client.Request{Method: method, Path: path, Token: testserver.AdminToken})
}

// gateView reads the sale's state and its gate from some instance.
func (r *Run) gateView(ctx context.Context) (client.Sale, error) {
	var last error
	for slot := range r.Slots() {
		res, err := r.admin(ctx, slot, http.MethodGet, "/admin/sales/"+r.SaleID)
		if err == nil && res.Status == http.StatusOK {
			var s client.Sale
			if err := json.Unmarshal(res.Body, &s); err != nil {
				return s, err
			}
			return s, nil
		}
		last = fmt.Errorf("read sale on instance %d: %v %d %s", slot, err, res.Status, res.Body)
	}
	return client.Sale{}, last
}

func gateOK(s client.Sale) bool {
	return s.Gate.OK != nil && *s.Gate.OK && s.Gate.Drift != nil && *s.Gate.Drift == 0
}

// recoverGate plays the operator once a fault on a gated sale has healed:
// if the gate job paused the sale (it is given Fault.PauseWithin to do so:
// it runs every second and pauses on its third failed read), the counter is
// rebuilt from the database and the sale resumed, as the README's runbook
// says. It returns when the sale sells with its gate OK, and keeps how long
// after the healing that came, for the report.
func (r *Run) recoverGate(ctx context.Context, healed time.Time) {
	deadline := healed.Add(r.cfg.Fault.PauseWithin)
	var okAt time.Time
	for ctx.Err() == nil {
		s, err := r.gateView(ctx)
		switch {
		case err != nil:
		case s.State == "paused":
			okAt = time.Time{}
			r.Note("the sale is paused (%s) %s after healing: rebuild the gate's counter, resume",
				s.PauseReason, time.Since(healed).Round(time.Millisecond))
			r.rebuildResume(ctx)
			continue
		case s.Gate.Counter != nil && *s.Gate.Counter < 0:
			okAt = time.Time{}
			if time.Since(healed) > 20*time.Second {
				// The counter is gone and nothing paused the sale: the
				// operator does.
				r.Note("the gate's counter is missing and the sale not paused %s after healing: the operator pauses it", time.Since(healed).Round(time.Millisecond))
				r.mu.Lock()
				r.gate.pauses = append(r.gate.pauses, time.Now())
				r.mu.Unlock()
				_, _ = r.admin(ctx, 0, http.MethodPost, "/admin/sales/"+r.SaleID+"/pause")
				continue
			}
		case gateOK(s):
			if okAt.IsZero() {
				okAt = time.Now()
			}
			if time.Now().After(deadline) {
				r.mu.Lock()
				r.gate.worst = max(r.gate.worst, okAt.Sub(healed))
				r.mu.Unlock()
				return
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// rebuildResume is the operator's recovery of a paused gated sale:
// POST /admin/sales/{id}/gate/rebuild (flashline gate rebuild), then
// /resume, each tried again until it is answered 200 (a resume is answered
// 503 while units move under every read of the gate's status, or Redis
// cannot be read; a rebuild 409 rebuild_in_progress while an earlier try,
// whose answer did not arrive, still runs).
func (r *Run) rebuildResume(ctx context.Context) {
	for _, step := range []string{"gate/rebuild", "resume"} {
		for try := 0; ctx.Err() == nil; try++ {
			res, err := r.admin(ctx, try%r.Slots(), http.MethodPost, "/admin/sales/"+r.SaleID+"/"+step)
			if err == nil && res.Status == http.StatusOK {
				if step == "resume" {
					r.mu.Lock()
					r.gate.resumes = append(r.gate.resumes, time.Now())
					r.mu.Unlock()
				} else {
					r.Note("rebuilt: %s", res.Body)
				}
				break
			}
			if try == 20 {
				r.Note("%s refused 20 times, last: %v %d %s", step, err, res.Status, res.Body)
			}
			sleep(ctx, 200*time.Millisecond)
		}
	}
}

// settleGate waits, once the load is over and no hold is pending, until
// the gate's counter agrees with the database: the admin view says OK with
// drift 0 and the counter equals the units in the stock rows (nothing owed
// back, nothing in flight); in a sale with variants, each variant's counter
// too, with drift 0 and its own stock rows' units.
func (r *Run) settleGate(ctx context.Context, since time.Time) GateFacts {
	var g GateFacts
	deadline := time.Now().Add(GateSettleWithin)
	for ctx.Err() == nil {
		s, err := r.gateView(ctx)
		var stock int64
		if err == nil {
			err = r.DB.QueryRow(ctx, `SELECT coalesce(sum(quantity), 0) FROM stock WHERE sale_id = $1`, r.SaleID).Scan(&stock)
		}
		var variants []GateVariantFacts
		if err == nil {
			variants, err = r.variantCounters(ctx, s)
		}
		if err == nil && s.Gate.Counter != nil && s.Gate.Drift != nil && s.Gate.OK != nil {
			g.Counter, g.Drift, g.OK, g.Variants = *s.Gate.Counter, *s.Gate.Drift, *s.Gate.OK, variants
			if g.OK && g.Drift == 0 && g.Counter == stock && variantsAgree(variants) {
				g.Agreed, g.Settled = true, time.Since(since)
				return g
			}
		}
		if time.Now().After(deadline) {
			r.Note("the gate's counter did not agree with the database within %s: counter %d, drift %d, ok %v, stock %d%s (%v)",
				GateSettleWithin, g.Counter, g.Drift, g.OK, stock, formatVariantCounters(g.Variants), err)
			return g
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return g
}

// readGateFacts reads the gate's incidents, and the pauses from them and
// from the operator's record.
func readGateFacts(ctx context.Context, r *Run, g *GateFacts) error {
	rows, err := r.DB.Query(ctx, `SELECT kind, pg_xact_commit_timestamp(xmin) FROM incidents
		WHERE sale_id = $1 AND kind LIKE 'gate\_%' ORDER BY incident_id`, r.SaleID)
	if err != nil {
		return fmt.Errorf("read gate incidents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var inc GateIncident
		var at *time.Time
		if err := rows.Scan(&inc.Kind, &at); err != nil {
			return err
		}
		if at != nil {
			inc.Committed = *at
		}
		g.Incidents = append(g.Incidents, inc)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	mrows, err := r.DB.Query(ctx, `SELECT reason, coalesce(variant, ''), quantity, created_at,
		CASE WHEN applied_at IS NULL THEN NULL ELSE pg_xact_commit_timestamp(xmin) END
		FROM gate_outbox WHERE sale_id = $1`, r.SaleID)
	if err != nil {
		return fmt.Errorf("read gate_outbox: %w", err)
	}
	defer mrows.Close()
	for mrows.Next() {
		var m GateMovement
		if err := mrows.Scan(&m.Reason, &m.Variant, &m.Qty, &m.Created, &m.Applied); err != nil {
			return err
		}
		g.Movements = append(g.Movements, m)
	}
	if err := mrows.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var starts []Pause
	for _, inc := range g.Incidents {
		if inc.Kind != "gate_drift" { // the only one that does not pause
			starts = append(starts, Pause{Paused: inc.Committed, By: inc.Kind})
		}
	}
	for _, at := range r.gate.pauses {
		starts = append(starts, Pause{Paused: at, By: "operator"})
	}
	slices.SortFunc(starts, func(a, b Pause) int { return a.Paused.Compare(b.Paused) })
	for _, p := range starts {
		if n := len(g.Pauses); n > 0 && g.Pauses[n-1].Resumed.IsZero() {
			continue // paused already
		}
		if n := len(g.Pauses); n > 0 && p.Paused.Before(g.Pauses[n-1].Resumed) {
			continue
		}
		for _, at := range r.gate.resumes {
			if at.After(p.Paused) {
				p.Resumed = at
				break
			}
		}
		g.Pauses = append(g.Pauses, p)
	}
	return nil
}

// paused reports whether [from, to] meets a span the sale was paused, its
// end stretched by the sale caches' staleness (an instance may say
// sale_not_open from memory until it hears of the resume).
func (g GateFacts) paused(from, to time.Time) bool {
	for _, p := range g.Pauses {
		end := p.Resumed.Add(SoldOutStaleness)
		if p.Resumed.IsZero() {
			end = to
		}
		if !to.Before(p.Paused) && !from.After(end) {
			return true
		}
	}
	return false
}

// A gated sale's sold_out is decided by the gate's counter, which runs
// ahead of the stock rows: a unit leaves the counter when the gate step hands
// it out, and the stock rows when the reservation commits; a unit no
// reservation took (refused, or its request died) comes back to the counter
// only when the relay applies its return, the gate job writing that return
// ReturnGrace after the unit was handed out; a restocked unit is in the
// stock rows at once, in the counter once relayed. So a sold_out from the
// gate is legal when, at some moment between SoldOutStaleness before the
// request and its answer, the units available less those the counter may
// have been without were short. heldBack windows are those spans.

// ReturnGrace is the gate's (gate.Options.ReturnGrace, default 15 s).
const ReturnGrace = 15 * time.Second

type heldBack struct {
	from, to time.Time
	qty      int
}

// gateHeldBack lists the spans in which units the stock rows count as
// available may have been missing from the counter: each gated hold from
// its reserve's first attempt to its commit, each return from ReturnGrace
// (and the gate job's second) before it was written to when it was
// relayed, each restock from when it was written to when it was relayed.
func gateHeldBack(f Facts, ops []*Op) []heldBack {
	var out []heldBack
	called := map[string]time.Time{}
	for _, op := range ops {
		if op.Kind == Reserve && op.Outcome == OutCreated {
			called[op.ResID] = op.Call
		}
	}
	for _, row := range f.Rows {
		from, ok := called[row.ID]
		if !ok {
			from = row.CreatedAt.Add(-SoldOutStaleness)
		}
		for _, l := range f.Ledger[row.ID] {
			if l.Reason == "reserve" && l.Committed != nil {
				out = append(out, heldBack{from, *l.Committed, row.Qty})
			}
		}
	}
	never := time.Now().Add(24 * time.Hour)
	for _, m := range f.Gate.Movements {
		from, to := m.Created, never
		if m.Reason == "return" {
			from = from.Add(-ReturnGrace - 2*time.Second)
		}
		if m.Applied != nil {
			to = *m.Applied
		}
		out = append(out, heldBack{from, to, m.Qty})
	}
	return out
}

// gateShortIn reports whether, at some moment in [from, to], the units
// available less those held back were short of qty.
func (tl *Timeline) gateShortIn(from, to time.Time, held []heldBack, qty int) bool {
	moments := []time.Time{from}
	for _, at := range tl.at {
		if at.After(from) && !at.After(to) {
			moments = append(moments, at)
		}
	}
	for _, h := range held {
		if h.from.After(from) && !h.from.After(to) {
			moments = append(moments, h.from)
		}
	}
	for _, m := range moments {
		available := 0
		if i := sort.Search(len(tl.at), func(i int) bool { return tl.at[i].After(m) }) - 1; i >= 0 {
			available = tl.states[i].Available
		}
		for _, h := range held {
			if !m.Before(h.from) && m.Before(h.to) {
				available -= h.qty
			}
		}
		if available < qty {
			return true
		}
	}
	return false
}

// checkGate is the gate's own accounting: the counter agrees with the
// database after the load, and the only incidents are those the fault may
// cause (a Redis that cannot be read, a counter lost with it), never a
// counter above or below what the database accounts for.
func checkGate(f Fault, facts Facts) []string {
	var bad []string
	g := facts.Gate
	if !g.Agreed {
		bad = append(bad, fmt.Sprintf("the gate's counter did not agree with the database within %s of the load's end: counter %d, drift %d, ok %v, stock %d%s",
			GateSettleWithin, g.Counter, g.Drift, g.OK, facts.Stock, formatVariantCounters(g.Variants)))
	}
	for _, inc := range g.Incidents {
		if !slices.Contains(f.GateIncidents, inc.Kind) {
			bad = append(bad, fmt.Sprintf("gate incident %s at %s (this fault may cause only %v)", inc.Kind, inc.Committed.Format("15:04:05.000"), f.GateIncidents))
		}
	}
	for _, p := range g.Pauses {
		if p.Resumed.IsZero() {
			bad = append(bad, fmt.Sprintf("the sale was paused (%s) at %s and never resumed", p.By, p.Paused.Format("15:04:05.000")))
		}
	}
	return bad
}

// gateDecisions sums, over the instances running now, what their gate
// steps and sale caches decided (flashline_gate_decisions_total,
// flashline_fast_rejections_total): which layer answered the refusals. A
// restarted instance counts from its start.
func (r *Run) gateDecisions(ctx context.Context) string {
	sums := map[string]float64{}
	for slot := range r.Slots() {
		res, err := client.New(r.URL(slot), nil).Metrics(ctx, testserver.AdminToken)
		if err != nil || res.Status != http.StatusOK {
			continue
		}
		for line := range strings.Lines(string(res.Body)) {
			for prefix, label := range map[string]string{
				`flashline_gate_decisions_total{outcome="`:  "gate ",
				`flashline_fast_rejections_total{outcome="`: "sale cache ",
			} {
				rest, ok := strings.CutPrefix(line, prefix)
				if !ok {
					continue
				}
				outcome, value, ok := strings.Cut(rest, `"} `)
				if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); ok && err == nil && v > 0 {
					sums[label+outcome] += v
				}
			}
		}
	}
	counts := make(map[string]int, len(sums))
	for k, v := range sums {
		counts[k] = int(v)
	}
	return FormatCounts(counts)
}

// The Redis faults.

// onRedis puts a toxic on every instance's link to Redis, in each stream,
// for hold.
func onRedis(typ, attributes string, streams ...string) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, _ *rand.Rand, hold time.Duration) (time.Time, error) {
		for _, p := range r.RedisProxies {
			for _, s := range streams {
				if err := Toxic(p, typ+"-"+s, typ, s, attributes); err != nil {
					return time.Now(), err
				}
			}
		}
		r.Note("%s %s on every Redis link for %s", typ, attributes, hold)
		sleep(ctx, hold)
		for _, p := range r.RedisProxies {
			ClearToxics(p)
		}
		return time.Now(), nil
	}
}

// redisKill kills the gate's redis-server (SIGKILL: what it held is gone),
// leaves it down for down, long enough for the gate job's three failed
// reads, and starts it again, empty.
func redisKill(down time.Duration) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, _ *rand.Rand, _ time.Duration) (time.Time, error) {
		rs := r.cluster.Redis()
		rs.Kill()
		r.Note("SIGKILL redis-server, down for %s", down)
		sleep(ctx, down)
		rs.Restart()
		r.Note("redis-server started again, empty")
		return time.Now(), nil
	}
}
