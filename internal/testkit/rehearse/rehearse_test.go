// Package rehearse tests the rehearsal on Locust (scripts/rehearse/): a
// crowd of shoppers played by a Locust master and two workers against an
// instance and an edge, and the sale checked against what they saw.
package rehearse

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
)

func TestMain(m *testing.M) { testserver.Main(m) }

// locust finds Debian's locust (python3-locust) and the interpreter it
// runs under: $LOCUST, else /usr/bin/locust, else on PATH. Without it the
// test is skipped, and fails under CI=true: CI must rehearse.
func locust(t *testing.T) (bin, python string) {
	t.Helper()
	for _, b := range []string{os.Getenv("LOCUST"), "/usr/bin/locust"} {
		if b != "" {
			if _, err := os.Stat(b); err == nil {
				bin = b
				break
			}
		}
	}
	if bin == "" {
		bin, _ = exec.LookPath("locust")
	}
	if bin == "" {
		msg := "rehearse: no locust (make locust installs Debian's python3-locust)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// The runner needs only the standard library; /usr/bin/python3 is the
	// one Debian's locust runs under, whatever python3 is first on PATH.
	python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		python = "python3"
	}
	return bin, python
}

type summary struct {
	OK     bool `json:"ok"`
	Checks []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Detail string `json:"detail"`
	} `json:"checks"`
	Admitted struct {
		N int `json:"n"`
	} `json:"admitted"`
	SoldOutHeard struct {
		N   int      `json:"n"`
		P50 *float64 `json:"p50"`
		P99 *float64 `json:"p99"`
	} `json:"soldOutHeard"`
	Outcomes map[string]int `json:"outcomes"`
}

// TestRehearsal runs the rehearsal as `make rehearse` does, at a small
// size: 3,000 shoppers for 300 units through an edge in front of one
// instance, the units in three variants of 100 (--variants 3: each shopper
// reserves one at random and switches when it is gone), on a Locust master
// and two workers, with both workers paused
// for six seconds once the spawn begins (as a saturated machine holds them:
// Locust's master gives up on a worker four seconds without its
// heartbeat, locustfile.py a minute), and requires every check
// of the runner to pass (every shopper reported; sold exactly the units; no
// customer with two holds; every 201 a reservation that exists, the
// owner's; every paid hold an order; each variant sold exactly; every
// receipt of the variant asked for; sold_out told only once every variant
// was gone). It asserts counts and consistency, never how fast: the figures
// it prints are for people.
func TestRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearse: starts serve processes and a Locust master and workers")
	}
	bin, python := locust(t)
	root, err := testdb.RepoRoot()
	require.NoError(t, err)
	origin := testserver.Start(t, testdb.New(t))
	edge := testserver.StartEdge(t, []string{origin.URL})

	const users, units, variants = 3000, 300, 3
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join(root, "scripts", "rehearse", "rehearse.py"),
		"--target", edge.URL, "--admin-target", origin.URL,
		"--users", strconv.Itoa(users), "--units", strconv.Itoa(units), "--variants", strconv.Itoa(variants), "--workers", "2",
		"--out", out, "--locust", bin,
		// A short lead: the workers start in a few seconds here, and one
		// that starts late only makes some arrivals later than planned.
		"--startup", "5", "--spread", "3")
	cmd.Env = append(os.Environ(),
		"FLASHLINE_ADMIN_TOKEN="+testserver.AdminToken,
		"FLASHLINE_JWT_SECRET="+testserver.JWTSecret,
		"FLASHLINE_PAYMENT_WEBHOOK_SECRET="+testserver.PaymentSecret)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	require.NoError(t, cmd.Start())
	pctx, stopPausing := context.WithCancel(ctx)
	paused := make(chan int, 1)
	go func() { paused <- pauseWorkers(pctx, cmd.Process.Pid, filepath.Join(out, "master.log"), 6*time.Second) }()
	err = cmd.Wait()
	stopPausing()
	t.Logf("rehearsal:\n%s", output.Bytes())
	if err != nil {
		for _, f := range []string{"master.log", "worker-1.log", "worker-2.log"} {
			if b, rerr := os.ReadFile(filepath.Join(out, f)); rerr == nil {
				t.Logf("%s (last 4 KiB):\n%s", f, tail(b, 4<<10))
			}
		}
	}
	require.NoError(t, err, "the rehearsal's checks (above)")
	require.Equal(t, 2, <-paused, "both Locust workers paused once the spawn began")

	raw, err := os.ReadFile(filepath.Join(out, "summary.json"))
	require.NoError(t, err)
	var s summary
	require.NoError(t, json.Unmarshal(raw, &s))
	require.True(t, s.OK)
	for _, c := range s.Checks {
		require.True(t, c.OK, "%s: %s", c.Name, c.Detail)
	}
	var names []string
	for _, c := range s.Checks {
		names = append(names, c.Name)
	}
	require.Subset(t, names, []string{"each variant sold exactly", "every receipt of its variant", "sold_out only after the last variant"},
		"the runner checked the variants")
	require.GreaterOrEqual(t, s.Admitted.N, units, "everyone who bought was admitted")
	require.Equal(t, units, s.Outcomes["bought"], "every unit bought by a shopper who saw its order")
	require.Positive(t, s.SoldOutHeard.N, "the crowd far beyond the units heard it was sold out")
	for _, f := range []string{"report.html", "locust_stats.csv", "locust_failures.csv", "shoppers.jsonl"} {
		require.FileExists(t, filepath.Join(out, f))
	}

	// The sale as the service tells it, read here too rather than only
	// trusted from the runner: every unit an order.
	var sale struct {
		SaleID    string `json:"saleId"`
		Available int    `json:"available"`
		Pending   int    `json:"pending"`
		Confirmed int    `json:"confirmed"`
		Invariant struct {
			OK bool `json:"ok"`
		} `json:"invariant"`
		Variants []struct {
			SKU          string `json:"sku"`
			InitialStock int    `json:"initialStock"`
			Available    int    `json:"available"`
			Pending      int    `json:"pending"`
			Confirmed    int    `json:"confirmed"`
		} `json:"variants"`
	}
	var ids struct {
		SaleID string `json:"saleId"`
	}
	require.NoError(t, json.Unmarshal(raw, &ids))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL+"/admin/sales/"+ids.SaleID, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testserver.AdminToken)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.NoError(t, json.NewDecoder(res.Body).Decode(&sale))
	require.Equal(t, 0, sale.Available)
	require.Equal(t, 0, sale.Pending)
	require.Equal(t, units, sale.Confirmed)
	require.True(t, sale.Invariant.OK)
	// Each variant: every one of its units an order.
	require.Len(t, sale.Variants, variants)
	for _, v := range sale.Variants {
		require.Equal(t, units/variants, v.InitialStock, v.SKU)
		require.Equal(t, 0, v.Available, v.SKU)
		require.Equal(t, 0, v.Pending, v.SKU)
		require.Equal(t, units/variants, v.Confirmed, v.SKU)
	}
}

// pauseWorkers waits for the Locust master (its log at masterLog) to begin
// the spawn, stops every Locust worker that the runner (pid runner) started
// for d, and returns how many it paused.
func pauseWorkers(ctx context.Context, runner int, masterLog string, d time.Duration) int {
	for {
		if b, _ := os.ReadFile(masterLog); bytes.Contains(b, []byte("Sending spawn jobs")) {
			break
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(100 * time.Millisecond):
		}
	}
	var workers []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after its ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if len(fields) > 1 && fields[1] == strconv.Itoa(runner) && bytes.Contains(cmdline, []byte("--worker\x00")) {
			workers = append(workers, pid)
		}
	}
	for _, pid := range workers {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	for _, pid := range workers {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	return len(workers)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
