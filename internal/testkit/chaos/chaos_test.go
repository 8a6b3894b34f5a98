package chaos_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashline/flashline/internal/testkit/chaos"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// TestChaos is the fault harness (internal/testkit/chaos): three `flashline serve`
// processes on a PostgreSQL cluster of its own, each behind a toxiproxy
// proxy, a load of retrying buyers, one fault at a time, and every history
// checked (porcupine against a model of the sale, plus the accounting and
// the clocks against the database). The gate-* and redis-* faults run a
// gated sale, the Redis gate on a redis-server of the harness's own behind
// toxiproxy as well (internal/testkit/chaos/gate.go), and check the gate's own
// accounting too. The failover-* faults run on a primary and a streaming
// standby of their own (internal/testkit/chaos/replica.go) that the instances reach
// through a multi-host URL; the asynchronous ones report what they lost
// rather than failing on it, and run in the long form only (or when named).
// kill-batch-variants runs on a sale of three variants
// (internal/testkit/chaos/variants.go), each held to its own units;
// gate-kill-batch-variants and redis-kill-variants run a gated one (a
// counter per variant), in the long form only or when named.
// Any violation fails the test, and the history is written to chaos-out/
// (porcupine's visualisation and the operations as text).
//
// In `make test` it runs its short form: every fault once, a few seconds of
// load each, seed 1, the faults dealt round-robin to two shards that run at
// once, each on a PostgreSQL cluster of its own (a fault on one cluster never
// touches the other shard's history). `make chaos` runs the long form (FLASHLINE_CHAOS=full):
// about two minutes of load per fault with the fault injected every 20 s,
// on a random seed unless SEED is given; the seed is printed, and
// `make chaos SEED=n` replays the same schedule. FLASHLINE_CHAOS_FAULTS
// (comma-separated names) runs some faults only.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster and flashline serve processes: not in -short")
	}
	full := os.Getenv("FLASHLINE_CHAOS") == "full"
	seed := uint64(1)
	if full {
		seed = rand.Uint64() % 1_000_000
	}
	if s := os.Getenv("FLASHLINE_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("FLASHLINE_CHAOS_SEED: %v", err)
		}
		seed = n
	}
	var only []string
	if s := os.Getenv("FLASHLINE_CHAOS_FAULTS"); s != "" {
		only = strings.Split(s, ",")
	}
	root, err := testdb.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, "chaos-out")

	cfg := chaos.Config{
		Instances: 3, Customers: 24, Stock: 16, TTL: 3 * time.Second,
		Load: 5 * time.Second, FaultAt: 1500 * time.Millisecond, Rounds: 1, Hold: 2 * time.Second,
		OutDir: out,
	}
	skew := 40 * time.Second
	if full {
		cfg.Customers, cfg.Stock, cfg.TTL = 300, 60, 4*time.Second
		cfg.Load, cfg.FaultAt, cfg.Rounds, cfg.Every, cfg.Hold = 120*time.Second, 5*time.Second, 6, 20*time.Second, 5*time.Second
		skew = 5 * time.Minute
	}
	t.Logf("chaos: seed %d (replay: make chaos SEED=%d)", seed, seed)

	var faults []chaos.Fault
	for _, f := range chaos.Faults(skew) {
		if only != nil && !slices.Contains(only, f.Name) || only == nil && f.LongOnly && !full {
			continue
		}
		faults = append(faults, f)
	}
	// The long form runs one fault at a time: two minutes of load each on
	// a shared two-core machine would measure the other shard too.
	shards := min(2, len(faults))
	if full {
		shards = 1
	}
	var (
		mu   sync.Mutex
		rows = map[string]string{}
	)
	t.Run("shards", func(t *testing.T) {
		for s := range shards {
			t.Run(fmt.Sprintf("shard-%d", s+1), func(t *testing.T) {
				if shards > 1 {
					t.Parallel()
				}
				cluster := chaos.StartCluster(t, nil)
				for i := s; i < len(faults); i += shards {
					f := faults[i]
					t.Run(f.Name, func(t *testing.T) {
						row := runFault(t, cluster, cfg, f, seed)
						mu.Lock()
						rows[f.Name] = row
						mu.Unlock()
					})
				}
			})
		}
	})
	var table []string
	for _, f := range faults {
		if row, ok := rows[f.Name]; ok {
			table = append(table, row)
		}
	}
	t.Logf("chaos: seed %d\n| fault | operations / attempts | answers | verdict | worst client wait | ready after heal |\n|---|---|---|---|---|---|\n%s",
		seed, strings.Join(table, "\n"))
}

// runFault runs one fault on cluster and logs what it found; it returns the
// fault's row of the summary table.
func runFault(t *testing.T, cluster *chaos.Cluster, cfg chaos.Config, f chaos.Fault, seed uint64) string {
	c := cfg
	c.Fault, c.Seed = f, seed
	res := chaos.Execute(t, cluster, c)
	t.Logf("%s: %s", f.Name, f.What)
	for _, n := range res.Notes {
		t.Logf("  %s", n)
	}
	t.Logf("  %d operations in %d attempts; answers: %s", res.Ops, res.Attempts, chaos.FormatCounts(res.Answers))
	t.Logf("  outcomes: %s", chaos.FormatCounts(res.Outcomes))
	t.Logf("  verdict %s; worst client wait %.2fs; instances ready %.2fs after healing; run %.0fs",
		res.Verdict, res.WorstWait.Seconds(), res.Ready.Seconds(), res.Took.Seconds())
	for i, fo := range res.Failovers {
		t.Logf("  failover %d: promoted %.2fs after the stop; after the promotion: first 201 %.2fs, first write answered %.2fs, every instance ready %.2fs",
			i+1, fo.Promoted.Sub(fo.Stopped).Seconds(), fo.FirstCreated.Seconds(), fo.FirstWrite.Seconds(), fo.Ready.Seconds())
	}
	if f.Replication != "" {
		t.Logf("  loss: %s", res.Loss)
	}
	for _, l := range res.Losses {
		t.Logf("  lost (reported, not a violation: %s replication): %s", f.Replication, l)
	}
	if f.Gate {
		t.Logf("  gate: selling with its gate OK %.2fs after healing (worst round); counter agreed with the database %.2fs after the load",
			res.GateRecovery.Seconds(), res.GateSettled.Seconds())
	}
	row := fmt.Sprintf("| %s | %d / %d | %s | %s | %.2f s | %.2f s |",
		f.Name, res.Ops, res.Attempts, chaos.FormatCounts(res.Answers), res.Verdict, res.WorstWait.Seconds(), res.Ready.Seconds())
	for _, v := range res.Violations {
		t.Errorf("violation: %s", v)
	}
	if len(res.Files) > 0 {
		t.Logf("  history written to %s", strings.Join(res.Files, ", "))
	}
	return row
}
