package chaos

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline/internal/client"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

// Config is one run.
type Config struct {
	Fault Fault
	Seed  uint64
	// Instances is how many serve processes run (3).
	Instances int
	// Customers buy Stock units with holds of TTL.
	Customers int
	Stock     int
	TTL       time.Duration
	// Load is how long buyers start new checkouts; the fault is injected
	// Rounds times, the first at FaultAt, then every Every.
	Load    time.Duration
	FaultAt time.Duration
	Rounds  int
	Every   time.Duration
	// Hold is how long a fault that lasts (a toxic, the slots taken) lasts.
	Hold time.Duration
	// OutDir receives a failing run's history and its visualisation.
	OutDir string
	Logf   func(format string, args ...any)
}

// Result is what one run found, for the README's table.
type Result struct {
	Fault      string
	Seed       uint64
	Ops        int            // logical operations of the clients
	Attempts   int            // HTTP requests they took
	Answers    map[string]int // attempts by answer
	Outcomes   map[string]int // logical operations by definite answer
	Verdict    string         // "ok" or what was violated
	Violations []string
	// WorstWait is the longest a client waited for a definite answer
	// (first attempt to last); Ready the longest any instance took to
	// answer /readyz 200 again after a fault was healed.
	WorstWait time.Duration
	Ready     time.Duration
	// GateRecovery (gated runs) is the longest a fault kept the sale from
	// selling with its gate OK, from the fault's healing (the operator's
	// rebuild and resume included); GateSettled how long after the load the
	// counter took to agree with the database again (drift 0, counter =
	// the stock rows).
	GateRecovery time.Duration
	GateSettled  time.Duration
	// Failovers (the failover runs) are each failover, with how long the
	// service took to come back from it; Loss what the new primaries lacked
	// of what the clients had been told.
	Failovers []Failover
	Loss      Loss
	// Losses are the checks that failed because acknowledged writes were
	// lost, in a run whose fault may lose them (Fault.MayLose): reported,
	// not violations.
	Losses []string
	Notes  []string
	Files  []string
	Took   time.Duration
}

// Run is one fault's run: a database of its own on the cluster, its
// instances, a proxy per instance, the load and the fault.
type Run struct {
	t       testing.TB
	cfg     Config
	cluster *Cluster
	rng     *rand.Rand

	DirectURL string
	DB        *pgxpool.Pool
	Proxies   []*toxiproxy.Proxy // per slot, in front of PostgreSQL (node 0 of a pair)
	// PeerProxies are per slot, in front of node 1 of the pair (the
	// failover runs).
	PeerProxies []*toxiproxy.Proxy
	// RedisProxies are per slot, in front of the gate's Redis (gated runs).
	RedisProxies []*toxiproxy.Proxy
	// SaleID is the run's sale, once created.
	SaleID string

	// pair is the primary and standby of the failover runs; database is
	// the run's database name.
	pair           *Pair
	pairFailedOver bool // the pair has no standby until it is rebuilt
	database       string

	mu        sync.Mutex
	failovers []Failover
	servers   []*testserver.Server
	urls      []string
	env       [][]string
	flight    [][]atomic.Int64 // per slot, per kind

	History *History
	notes   []string
	ready   time.Duration
	// gate: the operator's pauses and resumes of a gated sale, and the
	// longest a fault kept it from selling with its gate OK.
	gate               gateRecord
	loadStart, loadEnd time.Time
}

var kinds = []Kind{Reserve, Confirm, Cancel, ReadReservation}

func kindIndex(k Kind) int {
	for i, x := range kinds {
		if x == k {
			return i
		}
	}
	return 0
}

// URL implements Targets.
func (r *Run) URL(slot int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.urls[slot]
}

// Slots implements Targets.
func (r *Run) Slots() int { return len(r.Proxies) }

func (r *Run) inFlight(slot int, k Kind) *atomic.Int64 { return &r.flight[slot][kindIndex(k)] }

// Server is the process in slot now.
func (r *Run) Server(slot int) *testserver.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.servers[slot]
}

// Note records what the fault did, for the report.
func (r *Run) Note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, s)
	r.mu.Unlock()
	r.cfg.Logf("chaos %s: %s", r.cfg.Fault.Name, s)
}

// serveFlags are the instances' flags: the default connection budget
// (three instances fit the small cluster), faster jobs.
var serveFlags = []string{
	"--sweep-interval", "1s", "--invariant-interval", "1s", "--shutdown-timeout", "5s",
}

// sinceLoad is how long after the load's start t was.
func (r *Run) sinceLoad(t time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return t.Sub(r.loadStart)
}

// Start starts (or starts again) the instance in slot, through its proxy
// (its two, to the nodes of a pair, in one multi-host URL).
func (r *Run) Start(slot int) {
	r.t.Helper()
	url := viaProxy(r.DirectURL, r.Proxies[slot].Listen)
	if r.pair != nil {
		url = MultiHostURL([]string{r.Proxies[slot].Listen, r.PeerProxies[slot].Listen}, r.database)
	}
	s := testserver.StartEnv(r.t, url, r.env[slot], serveFlags...)
	r.mu.Lock()
	r.servers[slot], r.urls[slot] = s, s.URL
	r.mu.Unlock()
}

// WaitReady waits until every instance answers /readyz 200, keeps the
// longest wait since healed for the report, and returns this one.
func (r *Run) WaitReady(ctx context.Context, healed time.Time) time.Duration {
	probed := false
	for slot := range r.Slots() {
		for ctx.Err() == nil {
			res, err := client.New(r.URL(slot), nil).Readyz(ctx)
			if err == nil && res.Status == http.StatusOK {
				break
			}
			if !probed && time.Since(healed) > SlowRecovery {
				probed = true
				r.probe(ctx)
			}
			sleep(ctx, 50*time.Millisecond)
		}
	}
	d := time.Since(healed)
	r.mu.Lock()
	r.ready = max(r.ready, d)
	r.mu.Unlock()
	return d
}

// Execute runs one fault and checks what the clients saw.
func Execute(t testing.TB, cluster *Cluster, cfg Config) Result {
	t.Helper()
	started := time.Now()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	cfg.Load = max(cfg.Load, cfg.Fault.MinLoad)
	ctx := context.Background()
	r := &Run{t: t, cfg: cfg, cluster: cluster, rng: rand.New(rand.NewPCG(cfg.Seed, 0xfa017)), History: &History{}}
	name := "chaos_" + strings.ReplaceAll(cfg.Fault.Name, "-", "_")
	r.database = name
	var err error
	upstreams := []string{cluster.Addr()}
	if cfg.Fault.Replication != "" {
		r.pair = cluster.StartPair(t, cfg.Fault.Replication == "sync", nil)
		r.DirectURL, err = r.pair.Database(ctx, name)
		upstreams = r.pair.Addrs()
	} else {
		r.DirectURL, err = cluster.Database(ctx, name)
	}
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	if r.DB, err = pgxpool.New(ctx, r.DirectURL); err != nil {
		t.Fatalf("chaos: %v", err)
	}
	defer r.DB.Close()
	n := cfg.Instances
	r.servers, r.urls, r.env = make([]*testserver.Server, n), make([]string, n), make([][]string, n)
	r.flight = make([][]atomic.Int64, n)
	for slot := range n {
		r.flight[slot] = make([]atomic.Int64, len(kinds))
		p, err := cluster.Proxy(fmt.Sprintf("%s-%d-postgres", name, slot), upstreams[0])
		if err != nil {
			t.Fatalf("chaos: %v", err)
		}
		// The proxies stop after the instances (cleanups run last
		// registered first, and every instance, one started again
		// included, registers its stop after these): stopped before
		// them, as a deferred Stop did, every instance logged "connect:
		// connection refused" on its proxy's port while it drained, which
		// read as PostgreSQL (or Redis) refusing connections in the log
		// of a run that had failed for another reason.
		t.Cleanup(p.Stop)
		r.Proxies = append(r.Proxies, p)
		if r.pair != nil {
			pp, err := cluster.Proxy(fmt.Sprintf("%s-%d-postgres-peer", name, slot), upstreams[1])
			if err != nil {
				t.Fatalf("chaos: %v", err)
			}
			t.Cleanup(pp.Stop)
			r.PeerProxies = append(r.PeerProxies, pp)
		}
		if cfg.Fault.Env != nil {
			r.env[slot] = cfg.Fault.Env(slot)
		}
		if cfg.Fault.Gate {
			rp, err := cluster.Proxy(fmt.Sprintf("%s-%d-redis", name, slot), cluster.RedisAddr())
			if err != nil {
				t.Fatalf("chaos: %v", err)
			}
			t.Cleanup(rp.Stop)
			r.RedisProxies = append(r.RedisProxies, rp)
			r.env[slot] = append(r.env[slot], "FLASHLINE_REDIS_URL=redis://"+rp.Listen+"/0")
		}
	}
	for slot := range n {
		r.Start(slot)
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 10 * time.Second}}
	defer hc.CloseIdleConnections()
	// Its buyers confirm their own holds (the model's confirm): a sale
	// confirmed by payment events would answer them payment_required.
	sale := client.NewSale{SKU: "chaos-" + cfg.Fault.Name, InitialStock: cfg.Stock, PerCustomerLimit: 2, ReservationTTLSeconds: int(cfg.TTL / time.Second),
		Confirmation: "customer"}
	if cfg.Fault.Gate {
		sale.Gate = "redis"
	}
	if cfg.Fault.Sale != nil {
		cfg.Fault.Sale(&sale)
	}
	skus := splitVariants(&sale, cfg.Fault.Variants)
	createAt := 0
	if cfg.Fault.CreateOn != nil {
		createAt = cfg.Fault.CreateOn(n)
	}
	created, err := createSale(ctx, client.New(r.URL(createAt), hc), sale)
	if err != nil || created.Status != http.StatusCreated {
		t.Fatalf("chaos: create sale on instance %d: %v %d %s\n--- its log ---\n%s", createAt, err, created.Status, created.Body, r.Server(createAt).Logs())
	}
	for i, v := range created.Value.Variants {
		if i >= len(sale.Variants) || v.SKU != sale.Variants[i].SKU || v.InitialStock != sale.Variants[i].Stock {
			t.Fatalf("chaos: the sale was created with variants %+v, not %+v", created.Value.Variants, sale.Variants)
		}
	}
	if len(created.Value.Variants) != len(sale.Variants) {
		t.Fatalf("chaos: the sale was created with variants %+v, not %+v", created.Value.Variants, sale.Variants)
	}
	r.SaleID = created.Value.SaleID
	opensAt := time.Time{}
	if sale.OpensAt != nil {
		opensAt = *sale.OpensAt
	}

	customers := make([]string, cfg.Customers)
	tokens := make([]string, cfg.Customers)
	for i := range customers {
		customers[i] = fmt.Sprintf("%s-%03d", strings.ReplaceAll(cfg.Fault.Name, "-", ""), i)
		tokens[i] = testserver.Token(t, customers[i])
	}
	loadStart := time.Now()
	r.mu.Lock()
	r.loadStart = loadStart
	r.mu.Unlock()
	w := &Workload{
		SaleID: created.Value.SaleID, Customers: customers, Tokens: tokens, Targets: r, History: r.History,
		HTTP: hc, Seed: cfg.Seed, LoadUntil: loadStart.Add(cfg.Load),
		Deadline:       loadStart.Add(cfg.Load + cfg.TTL + 60*time.Second),
		AttemptTimeout: 6 * time.Second, MaxCheckouts: 4, Variants: skus,
	}
	faultCtx, stopFaults := context.WithCancel(ctx)
	var faults sync.WaitGroup
	faults.Go(func() {
		for round := range max(cfg.Rounds, 1) {
			at := loadStart.Add(cfg.FaultAt + time.Duration(round)*cfg.Every)
			if at.After(w.LoadUntil) {
				return
			}
			sleep(faultCtx, time.Until(at))
			if faultCtx.Err() != nil {
				return
			}
			healed, err := cfg.Fault.Inject(faultCtx, r, r.rng, cfg.Hold)
			if err != nil {
				r.Note("round %d: %v", round+1, err)
			}
			ready := r.WaitReady(faultCtx, healed)
			r.mu.Lock()
			if n := len(r.failovers); n > 0 && r.failovers[n-1].Ready == 0 {
				r.failovers[n-1].Ready = ready
			}
			r.mu.Unlock()
			if cfg.Fault.Gate {
				// Not cut short by the load's end: a sale left paused
				// would fail the run.
				r.recoverGate(ctx, healed)
			}
		}
	})
	w.Run(ctx)
	r.loadEnd = time.Now()
	stopFaults()
	faults.Wait()
	// Bounded: a service that never recovers fails the run rather than
	// hanging it.
	readyCtx, cancelReady := context.WithTimeout(ctx, 2*time.Minute)
	r.WaitReady(readyCtx, time.Now())
	notReady := readyCtx.Err() != nil
	cancelReady()
	if notReady {
		t.Fatalf("chaos: an instance did not answer /readyz 200 within 2 minutes of the load's end")
	}
	if r.pair != nil {
		// What a buyer was told 201 for, asked again with the same key on
		// whichever node is the primary now.
		w.ReplayCreated(ctx)
	}

	res := Result{Fault: cfg.Fault.Name, Seed: cfg.Seed}
	if cfg.Fault.Gate {
		r.Note("decided by: %s", r.gateDecisions(ctx))
	}
	facts, err := r.quiesce(ctx, w.SaleID)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	ops := r.History.Ops()
	check := Check
	if cfg.Fault.MayLose {
		check = CheckLossy
	}
	v := check(ctx, sale.InitialStock, opensAt, customers, ops, facts)
	if cfg.Fault.Gate {
		v.Violations = append(v.Violations, checkGate(cfg.Fault, facts)...)
	}
	res.Verdict, res.Violations, res.Losses = "ok", v.Violations, v.Losses
	if len(v.Violations) > 0 {
		res.Verdict = fmt.Sprintf("%d violations", len(v.Violations))
	}
	if v.Porcupine != "Ok" {
		res.Notes = append(res.Notes, "porcupine: "+v.Porcupine)
	}
	if len(facts.Variants) > 0 {
		res.Notes = append(res.Notes, "variants: "+variantsSold(facts))
	}
	if facts.Gate.On {
		incidents := map[string]int{}
		for _, inc := range facts.Gate.Incidents {
			incidents[inc.Kind]++
		}
		res.Notes = append(res.Notes, "gate incidents: "+cmp.Or(FormatCounts(incidents), "none"))
	}
	if len(facts.Gate.Variants) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the gate's counters after the load (agreed %v)%s; units owed back: %s",
			facts.Gate.Agreed, formatVariantCounters(facts.Gate.Variants), owedBack(facts.Gate.Movements)))
	}
	if v.ReadsLeftOut > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d reads of the sale made during an operation longer than %s checked against the database's timeline only, not by porcupine", v.ReadsLeftOut, LongOperation))
	}
	res.Answers = AnswerCounts(ops)
	res.Outcomes = map[string]int{}
	for _, op := range ops {
		if op.Kind == ReadSale || op.Kind == ReadVariants {
			continue
		}
		res.Ops++
		res.Attempts += len(op.Attempts)
		res.Outcomes[string(op.Kind)+" "+op.Outcome]++
		if len(op.Attempts) > 1 {
			res.WorstWait = max(res.WorstWait, op.Return.Sub(op.Call))
		}
	}
	r.mu.Lock()
	res.Ready, res.Notes = r.ready, append(res.Notes, r.notes...)
	res.GateRecovery, res.GateSettled = r.gate.worst, facts.Gate.Settled
	res.Failovers = append([]Failover(nil), r.failovers...)
	r.mu.Unlock()
	if r.pair != nil {
		for i := range res.Failovers {
			fo := &res.Failovers[i]
			fo.FirstCreated, fo.FirstWrite = firstAnswerAfter(ops, fo.Promoted, answeredCreated), firstAnswerAfter(ops, fo.Promoted, answeredWrite)
		}
		res.Loss = Losses(sale.InitialStock, ops, facts)
	}
	if len(v.Violations) > 0 || len(v.Losses) > 0 || v.Porcupine != "Ok" {
		res.Files = r.write(cfg, v, Recorded{Initial: sale.InitialStock, OpensAt: opensAt, Customers: customers, Ops: ops, Facts: facts})
	}
	for slot := range n {
		logs := r.Server(slot).Logs()
		if strings.Contains(logs, "level=ERROR") {
			res.Notes = append(res.Notes, fmt.Sprintf("instance %d logged errors", slot))
		}
		if len(res.Files) > 0 {
			path := filepath.Join(cfg.OutDir, fmt.Sprintf("%s-seed%d-instance%d.log", cfg.Fault.Name, cfg.Seed, slot))
			if err := os.WriteFile(path, []byte(logs), 0o644); err == nil {
				res.Files = append(res.Files, path)
			}
		}
	}
	if r.pair != nil && len(res.Files) > 0 {
		for node := range 2 {
			path := filepath.Join(cfg.OutDir, fmt.Sprintf("%s-seed%d-node%d-postgres.log", cfg.Fault.Name, cfg.Seed, node))
			if err := os.WriteFile(path, r.pair.Log(node), 0o644); err == nil {
				res.Files = append(res.Files, path)
			}
		}
	}
	res.Took = time.Since(started)
	return res
}
