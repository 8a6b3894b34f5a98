package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/jobs"
)

// Fault is one kind of trouble: Inject brings it and heals it, and returns
// when it healed. Env, Sale and CreateOn, when set, shape the run around it.
type Fault struct {
	Name string
	// What says what the fault does, for the report.
	What   string
	Inject func(ctx context.Context, r *Run, rng *rand.Rand, hold time.Duration) (healed time.Time, err error)
	// Env is the environment of the instance in a slot.
	Env func(slot int) []string
	// Sale adjusts the sale the run sells.
	Sale func(*client.NewSale)
	// CreateOn is the slot whose instance creates the sale.
	CreateOn func(instances int) int
	// Variants runs the fault on a sale with variants, one per entry, its
	// stock (after Sale) split among them in these proportions ({1, 3, 8}:
	// a twelfth, a quarter and two thirds); the buyers reserve a variant
	// chosen at random and switch when theirs is sold out, and the checks
	// hold each variant to its own units (the model's, the timeline's of
	// its variant_sold_out answers, its accounting in the database).
	Variants []int

	// Gate runs the fault on a gated sale (gate.go): the Redis gate on,
	// every instance reaching Redis through a proxy of its own.
	Gate bool
	// GateIncidents are the gate incidents the fault may cause (a Redis
	// that cannot be read, a counter lost with it); any other is a
	// violation.
	GateIncidents []string
	// PauseWithin is how long after the healing the harness waits for the
	// gate job to pause the sale before it calls the gate recovered.
	PauseWithin time.Duration
	// MinLoad is the least load the fault runs with: a fault that pauses
	// the sale needs buyers after the operator resumed it.
	MinLoad time.Duration

	// Replication runs the fault on a primary and a streaming standby of
	// its own (replica.go), "sync" or "async", which the instances reach
	// through a multi-host URL; the harness replays every reservation a
	// buyer was answered 201 for once the load is over (the same key on
	// the new primary must answer the same 201, byte for byte).
	Replication string
	// MayLose: the fault may lose acknowledged writes (a failover with
	// asynchronous replication). The run reports what was lost (Result.Loss)
	// instead of failing on it, and still fails on what no loss explains:
	// more units sold than the new primary's stock, a ledger that does not
	// add up, an answer outside the contract, an operation with no definite
	// answer.
	MayLose bool
	// LongOnly: the short form (make test) leaves the fault out; the long
	// form runs it, and so does a run that names it
	// (FLASHLINE_CHAOS_FAULTS).
	LongOnly bool
}

// Faults are every fault the harness injects, in the order it runs them.
// skew is the clock skew of the clock-skew fault.
func Faults(skew time.Duration) []Fault {
	return []Fault{
		{Name: "kill-batch", What: "SIGKILL an instance while its reservations are in a batch (its link to PostgreSQL slowed by 150 ms so batches are long), start it again; three times the stock, so that buying goes on", Inject: killMid(Reserve),
			Sale: func(s *client.NewSale) { s.InitialStock *= 3 }},
		{Name: "kill-confirm", What: "SIGKILL an instance while confirms are in flight on it (150 ms link), start it again", Inject: killMid(Confirm)},
		{Name: "kill-sweep", What: "SIGKILL the instance running the expiry sweep job (every link slowed by 150 ms so the sweep is long), start it again", Inject: killSweep},
		{Name: "pg-restart-fast", What: "pg_ctl stop -m fast, 1 s down, start", Inject: pgRestart("fast")},
		{Name: "pg-restart-immediate", What: "pg_ctl stop -m immediate (a crash, WAL recovery), 1 s down, start", Inject: pgRestart("immediate")},
		{Name: "conn-exhaust", What: "every free connection slot taken and the instances' sessions terminated (pg_terminate_backend), held, released", Inject: exhaust},
		{Name: "latency", What: "toxiproxy latency 80 ms ± 60 ms both ways on every instance's link", Inject: onAll("latency", `{"latency":80,"jitter":60}`, "upstream", "downstream")},
		{Name: "stall", What: "toxiproxy timeout (a black hole, data dropped) both ways on one instance's link, then removed", Inject: stall},
		{Name: "bandwidth", What: "toxiproxy bandwidth 16 KB/s from PostgreSQL on every instance's link", Inject: onAll("bandwidth", `{"rate":16}`, "downstream")},
		{Name: "reset", What: "toxiproxy reset_peer: every connection that sends is reset (TCP RST) on every instance's link", Inject: onAll("reset_peer", `{"timeout":0}`, "upstream")},
		{
			Name: "clock-skew",
			What: fmt.Sprintf("instances' clocks at 0, +%s and -%s (FLASHLINE_TEST_CLOCK_SKEW); the sale, created on the fast one, opens 3 s after it is created", skew, skew),
			Env: func(slot int) []string {
				return []string{"FLASHLINE_TEST_CLOCK_SKEW=" + []time.Duration{0, skew, -skew}[slot%3].String()}
			},
			Sale: func(s *client.NewSale) {
				at := time.Now().Add(3 * time.Second).Truncate(time.Second)
				s.OpensAt = &at
			},
			CreateOn: func(n int) int { return min(1, n-1) },
			Inject: func(ctx context.Context, r *Run, rng *rand.Rand, hold time.Duration) (time.Time, error) {
				return time.Now(), nil // the skew is there all along
			},
		},
		// The failover runs (replica.go): a primary and a streaming
		// standby of their own.
		{Name: "failover", What: "primary with a synchronous standby: mid-reserve, the primary stopped (pg_ctl stop -m immediate) and the standby promoted 1 s later; the instances find it through their multi-host URL (target_session_attrs=read-write); ten times the stock, so that the sale never sells out and every checkout is a write the failover could lose",
			Replication: "sync", Inject: failover(time.Second, 0),
			Sale: func(s *client.NewSale) { s.InitialStock *= 10 }},
		{Name: "failover-async", What: "as failover, with asynchronous replication: what the primary acknowledged and had not yet sent to the standby is lost, and reported (not failed on)",
			Replication: "async", MayLose: true, LongOnly: true, Inject: failover(time.Second, 0),
			Sale: func(s *client.NewSale) { s.InitialStock *= 10 }},
		{Name: "failover-lag", What: "as failover, the standby's replication link cut (its proxy closed) for the last second before the crash, a standby cut off or behind: the commits of that second wait for it and are never acknowledged",
			Replication: "sync", LongOnly: true, Inject: failover(time.Second, time.Second),
			Sale: func(s *client.NewSale) { s.InitialStock *= 10 }},
		{Name: "failover-async-lag", What: "as failover-lag, with asynchronous replication: what the primary acknowledged in the last second before the crash never reached the standby, and is lost (reported, not failed on)",
			Replication: "async", MayLose: true, LongOnly: true, Inject: failover(time.Second, time.Second),
			Sale: func(s *client.NewSale) { s.InitialStock *= 10 }},
		// The gated runs (gate.go): the Redis gate on, faults on its side.
		{Name: "gate-kill-batch", What: "gated sale: SIGKILL an instance while its reservations are at the database after the gate step (its link to PostgreSQL slowed by 150 ms), start it again; the units it had taken from the counter come back through the gate job after the return grace",
			Gate: true, Inject: killMid(Reserve), PauseWithin: 3 * time.Second,
			Sale: func(s *client.NewSale) { s.InitialStock *= 3 }},
		{Name: "redis-latency", What: "gated sale: toxiproxy latency 80 ms ± 60 ms both ways on every instance's link to Redis (the buyer's bound is 250 ms)",
			Gate: true, Inject: onRedis("latency", `{"latency":80,"jitter":60}`, "upstream", "downstream"), PauseWithin: 3 * time.Second},
		{Name: "redis-stall", What: "gated sale: toxiproxy timeout (a black hole) both ways on every instance's link to Redis for at least 8 s (the gate job reads Redis about every 2 s when each read waits out its 1 s bound), then removed; its third failed read pauses the sale (gate_unreachable), which the operator rebuilds and resumes",
			Gate: true, Inject: atLeast(8*time.Second, onRedis("timeout", `{"timeout":0}`, "upstream", "downstream")),
			GateIncidents: []string{"gate_unreachable"}, PauseWithin: 4 * time.Second, MinLoad: 12 * time.Second},
		{Name: "redis-reset", What: "gated sale: toxiproxy reset_peer (TCP RST) on every instance's link to Redis; held long enough (the long form's 5 s), the gate job pauses the sale (gate_unreachable), which the operator rebuilds and resumes",
			Gate: true, Inject: onRedis("reset_peer", `{"timeout":0}`, "upstream"),
			GateIncidents: []string{"gate_unreachable"}, PauseWithin: 4 * time.Second},
		{Name: "redis-kill", What: "gated sale: SIGKILL redis-server, 5 s down, started again empty; the gate job pauses the sale (gate_unreachable, or gate_missing), the operator rebuilds the counter from the database and resumes",
			Gate: true, Inject: redisKill(5 * time.Second),
			GateIncidents: []string{"gate_unreachable", "gate_missing"}, PauseWithin: 15 * time.Second, MinLoad: 12 * time.Second},
		// On a sale with variants (issue 49). Last, so that the short
		// form's round-robin leaves every other fault on its shard.
		{Name: "kill-batch-variants", What: "as kill-batch, on a sale of three variants (three times the stock split 1:3:8, so that the smallest sells out early and the largest keeps buying going): buyers choose a variant at random and switch when theirs is sold out; each variant's units checked on their own",
			Inject: killMid(Reserve), Variants: []int{1, 3, 8},
			Sale: func(s *client.NewSale) { s.InitialStock *= 3 }},
		// The gate on a sale with variants: a counter per variant. In the
		// long form only (or named), so that make test's time is unchanged.
		{Name: "gate-kill-batch-variants", What: "as gate-kill-batch, on a sale of three variants split 1:3:8 (a counter per variant): the units the killed instance had taken from each variant's counter come back to that counter through the gate job after the return grace; each variant's variant_sold_out checked against its own units less those its counter may have been without, and each counter against its variant's stock rows after the load",
			Gate: true, Inject: killMid(Reserve), PauseWithin: 3 * time.Second, Variants: []int{1, 3, 8}, LongOnly: true,
			Sale: func(s *client.NewSale) { s.InitialStock *= 3 }},
		{Name: "redis-kill-variants", What: "as redis-kill, on a sale of three variants split 1:3:8: every variant's counter is lost with Redis, and the operator's rebuild writes each from the database",
			Gate: true, Inject: redisKill(5 * time.Second), Variants: []int{1, 3, 8}, LongOnly: true,
			GateIncidents: []string{"gate_unreachable", "gate_missing"}, PauseWithin: 15 * time.Second, MinLoad: 12 * time.Second,
			Sale: func(s *client.NewSale) { s.InitialStock *= 3 }},
	}
}

// atLeast runs inject with a hold of at least min.
func atLeast(least time.Duration, inject func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error)) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, rng *rand.Rand, hold time.Duration) (time.Time, error) {
		return inject(ctx, r, rng, max(hold, least))
	}
}

// killMid kills a random instance once requests of kind are in flight on
// it, and starts it again.
func killMid(kind Kind) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, rng *rand.Rand, _ time.Duration) (time.Time, error) {
		victim := rng.IntN(r.Slots())
		p := r.Proxies[victim]
		if err := Toxic(p, "slow", "latency", "downstream", `{"latency":150}`); err != nil {
			return time.Now(), err
		}
		// Requests answered from memory (sold out) are in flight for a
		// millisecond; one that reached the database stays in flight for
		// several of the link's 150 ms round trips.
		deadline := time.Now().Add(8 * time.Second)
		n := r.inFlight(victim, kind)
		since, caught := time.Time{}, false
		for !caught && time.Now().Before(deadline) && ctx.Err() == nil {
			switch {
			case n.Load() == 0:
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			case time.Since(since) > 200*time.Millisecond:
				caught = true
				continue
			}
			sleep(ctx, 2*time.Millisecond)
		}
		sleep(ctx, time.Duration(rng.IntN(100))*time.Millisecond)
		inFlight := n.Load()
		r.Server(victim).Kill()
		if caught {
			r.Note("SIGKILL instance %d with %d %s requests in flight (at the database for 200 ms or more)", victim, inFlight, kind)
		} else {
			r.Note("SIGKILL instance %d: no %s request caught in flight within 8 s", victim, kind)
		}
		ClearToxics(p)
		sleep(ctx, 500*time.Millisecond)
		r.Start(victim)
		return time.Now(), nil
	}
}

// killSweep kills the instance running a sweep job.
func killSweep(ctx context.Context, r *Run, rng *rand.Rand, _ time.Duration) (time.Time, error) {
	for _, p := range r.Proxies {
		if err := Toxic(p, "slow", "latency", "downstream", `{"latency":150}`); err != nil {
			return time.Now(), err
		}
	}
	defer func() {
		for _, p := range r.Proxies {
			ClearToxics(p)
		}
	}()
	victim, how := -1, ""
	deadline := time.Now().Add(8 * time.Second)
	for victim < 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		var by string
		err := r.DB.QueryRow(ctx, `SELECT attempted_by[array_length(attempted_by, 1)] FROM river_job
			WHERE kind = 'flashline_sweep' AND state = 'running' ORDER BY id DESC LIMIT 1`).Scan(&by)
		if err == nil {
			victim, how = r.slotOfPid(jobs.ClientIDPid(by)), "running a sweep job"
		}
		sleep(ctx, 5*time.Millisecond)
	}
	if victim < 0 {
		var leader string
		if err := r.DB.QueryRow(ctx, `SELECT leader_id FROM river_leader LIMIT 1`).Scan(&leader); err == nil {
			victim, how = r.slotOfPid(jobs.ClientIDPid(leader)), "River's leader (no sweep caught running)"
		}
	}
	if victim < 0 {
		victim, how = rng.IntN(r.Slots()), "chosen at random (neither a sweep nor the leader found)"
	}
	r.Server(victim).Kill()
	r.Note("SIGKILL instance %d, %s", victim, how)
	for _, p := range r.Proxies {
		ClearToxics(p)
	}
	sleep(ctx, 500*time.Millisecond)
	r.Start(victim)
	return time.Now(), nil
}

func (r *Run) slotOfPid(pid int) int {
	for slot := range r.Slots() {
		if s := r.Server(slot); s != nil && s.Pid() == pid && !s.Exited() {
			return slot
		}
	}
	return -1
}

func pgRestart(mode string) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, _ *rand.Rand, _ time.Duration) (time.Time, error) {
		start := time.Now()
		err := r.cluster.Restart(ctx, mode, time.Second)
		r.Note("PostgreSQL stopped (-m %s) and started again: down %.1fs", mode, time.Since(start).Seconds())
		return time.Now(), err
	}
}

// exhaust takes every free connection slot, terminates the instances'
// sessions so that they must reconnect, holds the slots, then lets go.
func exhaust(ctx context.Context, r *Run, _ *rand.Rand, hold time.Duration) (time.Time, error) {
	var conns []*pgx.Conn
	defer func() {
		for _, c := range conns {
			c.Close(context.Background())
		}
	}()
	for len(conns) < 2*MaxConnections {
		c, err := pgx.Connect(ctx, r.DirectURL)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.TooManyConnections {
				break
			}
			return time.Now(), err
		}
		conns = append(conns, c)
	}
	if len(conns) == 0 {
		return time.Now(), errors.New("no connection taken")
	}
	var terminated int
	if err := conns[0].QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'flashline-%'`).Scan(&terminated); err != nil {
		return time.Now(), err
	}
	r.Note("took %d connection slots (all there were), terminated %d sessions of the instances, held %s", len(conns), terminated, hold)
	sleep(ctx, hold)
	return time.Now(), nil
}

// onAll puts a toxic on every instance's link, in each stream, for hold.
func onAll(typ, attributes string, streams ...string) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, _ *rand.Rand, hold time.Duration) (time.Time, error) {
		for _, p := range r.Proxies {
			for _, s := range streams {
				if err := Toxic(p, typ+"-"+s, typ, s, attributes); err != nil {
					return time.Now(), err
				}
			}
		}
		r.Note("%s %s on every link for %s", typ, attributes, hold)
		sleep(ctx, hold)
		for _, p := range r.Proxies {
			ClearToxics(p)
		}
		return time.Now(), nil
	}
}

// stall black-holes one instance's link for hold.
func stall(ctx context.Context, r *Run, rng *rand.Rand, hold time.Duration) (time.Time, error) {
	victim := rng.IntN(r.Slots())
	p := r.Proxies[victim]
	for _, s := range []string{"upstream", "downstream"} {
		if err := Toxic(p, "stall-"+s, "timeout", s, `{"timeout":0}`); err != nil {
			return time.Now(), err
		}
	}
	r.Note("instance %d's link black-holed for %s", victim, hold)
	sleep(ctx, hold)
	ClearToxics(p)
	return time.Now(), nil
}

// failover crashes the primary once reservations are at the database (up to
// 2 s of waiting for one), promotes the standby after, and returns at the
// promotion; with cut, the standby's replication link is cut that long
// before the crash. A pair that failed over before is first given
// its standby again (Rebuild: the old primary copied from the new one).
func failover(after, cut time.Duration) func(context.Context, *Run, *rand.Rand, time.Duration) (time.Time, error) {
	return func(ctx context.Context, r *Run, _ *rand.Rand, _ time.Duration) (time.Time, error) {
		if r.pairFailedOver {
			// Not cut short by the load's end: a copy half made is
			// of no use to anyone.
			start := time.Now()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			err := r.pair.Rebuild(rctx)
			cancel()
			if err != nil {
				return time.Now(), err
			}
			r.pairFailedOver = false
			r.Note("%.1fs in: node %d made a standby of node %d again (pg_basebackup) in %.1fs", r.sinceLoad(start).Seconds(), 1-r.pair.Primary(), r.pair.Primary(), time.Since(start).Seconds())
		}
		if ctx.Err() != nil {
			return time.Now(), nil
		}
		deadline := time.Now().Add(2 * time.Second)
		inFlight := func() (n int64) {
			for slot := range r.Slots() {
				n += r.inFlight(slot, Reserve).Load()
			}
			return n
		}
		for inFlight() == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			sleep(ctx, time.Millisecond)
		}
		link := r.pair.ReplicationLink()
		if cut > 0 {
			// The proxy closed, its connections with it: the standby is
			// cut off and cannot connect again. (A black hole, the
			// timeout toxic, held the crash up by a minute: the
			// standby's reconnection reached the primary as a
			// connection that never sends its startup packet, and a
			// shutting-down postmaster waits authentication_timeout
			// for such a child.)
			link.Stop()
			r.Note("%.1fs in: the standby's replication link cut %s before the crash", r.sinceLoad(time.Now()).Seconds(), cut)
			sleep(ctx, cut)
		}
		n := inFlight()
		old := r.pair.Primary()
		stopped, promoted, err := r.pair.Failover(ctx, after)
		if cut > 0 {
			if err := link.Start(); err != nil {
				return time.Now(), fmt.Errorf("chaos: opening the replication link again: %w", err)
			}
		}
		if err != nil {
			return time.Now(), err
		}
		r.pairFailedOver = true
		r.mu.Lock()
		r.failovers = append(r.failovers, Failover{Stopped: stopped, Promoted: promoted})
		r.mu.Unlock()
		r.Note("%.1fs in: node %d (the primary) stopped -m immediate with %d reservations in flight; node %d promoted %.2fs later", r.sinceLoad(stopped).Seconds(), old, n, 1-old, promoted.Sub(stopped).Seconds())
		return promoted, nil
	}
}
