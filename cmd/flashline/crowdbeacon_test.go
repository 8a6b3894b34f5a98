package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testbeacon"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestCrowdBeaconEndToEnd: two flashline serve processes with a test
// beacon. A randomized_at_open sale's customers take pre-open tickets on
// both; at the open the freeze commits their holders (N their number) and
// the round, and nobody is admitted while the beacon withholds it; once
// the round is published the lottery's job stores F with it, admissions
// follow the ranks F gives, and verify-draw checks the sale from its
// transcript alone, the beacon's signature included. A second sale, whose
// round the beacon never publishes, is paused --beacon-wait past it, with
// the reason.
func TestCrowdBeaconEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	t.Parallel()
	const customers, stock = 24, 4 // the first sale's
	ctx := context.Background()
	start := time.Now()
	genesis := time.Now().Add(-time.Hour).Truncate(time.Second)
	b := testbeacon.Start(t, t.Name(), genesis, time.Second)
	beaconKey := fmt.Sprintf("%x", b.Chain.PublicKey)
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// --beacon-wait: the second sale waits it out; the first's round is
	// released as soon as the test sees its crowd committed, seconds ahead.
	servers := testserver.StartN(t, 2, dbURL, "--admin-pool-size", "4", "--river-pool-size", "2",
		"--beacon-url", b.URL, "--beacon-public-key", beaconKey, "--beacon-genesis", fmt.Sprint(genesis.Unix()),
		"--beacon-period", "1s", "--beacon-wait", "5s")
	t.Logf("%s: two instances up", time.Since(start).Round(time.Millisecond))
	c := testserver.NewClient()
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)
	room := func(sale string) (root, finalSeed []byte, preopen *int64, admitted int64) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT holders_root, final_seed, preopen_count, admitted_through
			FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&root, &finalSeed, &preopen, &admitted))
		return
	}

	// Both sales open in an hour, and are opened by hand (the round is then
	// fixed at the freeze: still one nobody knows when the holders are
	// committed).
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	create := func() string {
		return c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_crowd_beacon","initialStock":%d,"admission":"waiting_room",
			"fairness":"randomized_at_open","opensAt":%q}`, stock, opensAt))
	}
	drawn, withheld := create(), create()
	type customer struct {
		id, jwt, token string
		ticket         roomtoken.Ticket
		rank           int64
		admitted       int // poll round first admitted in; -1: never
		decided        int // poll round first admitted or told sold out in
		admission      string
		final          string
	}
	join := func(sale, prefix string, n int) []*customer {
		all := make([]*customer, n)
		var wg sync.WaitGroup
		for i := range all {
			id := fmt.Sprintf("%s-%02d", prefix, i)
			all[i] = &customer{id: id, jwt: testserver.Token(t, id), admitted: -1, decided: 1 << 30}
			wg.Go(func() { all[i].token = getTicket(t, c, servers[i%2].URL, sale, all[i].jwt) })
		}
		wg.Wait()
		require.False(t, t.Failed())
		for _, cu := range all {
			cu.ticket, err = keys.ParseTicket(cu.token)
			require.NoError(t, err)
			require.True(t, cu.ticket.PreOpen)
		}
		// Every holder is written before the open (each instance writes its
		// own every 100 ms): the crowd committed at the open holds them all.
		require.Eventually(t, func() bool {
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM waitroom_holders WHERE sale_id = $1`, sale).Scan(&n))
			return n == len(all)
		}, 10*time.Second, 50*time.Millisecond, "the holders are written")
		return all
	}
	open := func(sale string) {
		r, err := c.To(servers[1].URL).OpenSale(ctx, testserver.AdminToken, sale)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.Eventually(t, func() bool {
			root, _, _, _ := room(sale)
			return root != nil
		}, 10*time.Second, 50*time.Millisecond, "the crowd is committed")
	}

	all := join(drawn, "cb", customers)
	open(drawn)
	// Committed, not ranked: the round is not published, and nobody is
	// admitted (the watermark stays at 0).
	_, finalSeed, preopen, admitted := room(drawn)
	require.Nil(t, finalSeed, "ranked before the round")
	require.EqualValues(t, customers, *preopen, "N is the holders committed")
	require.Zero(t, admitted)
	doc, err := fetchTranscript(ctx, servers[0].URL+"/sales/"+drawn+"/draw")
	require.NoError(t, err)
	require.Equal(t, "committed", doc.Status)
	require.NotNil(t, doc.Beacon)
	round := doc.Beacon.Round
	t.Logf("%s: crowd of %d committed, round %d withheld", time.Since(start).Round(time.Millisecond), customers, round)
	st := getStatus(t, c, servers[1].URL, drawn, all[0].jwt, url.QueryEscape(all[0].token))
	require.Equal(t, waitroom.StatusWaiting, st.State)

	// The round is published: F is stored with its value.
	b.Release(round)
	require.Eventually(t, func() bool {
		_, finalSeed, _, _ = room(drawn)
		return finalSeed != nil
	}, 30*time.Second, 100*time.Millisecond, "F is never stored")
	root, _, _, _ := room(drawn)
	var r32 [32]byte
	copy(r32[:], root)
	var seed []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT draw_seed FROM sales WHERE sale_id = $1`, drawn).Scan(&seed))
	f := flashline.LotteryFinalSeed(drawn, r32, b.Signer.Round(round).Randomness, seed)
	require.Equal(t, f[:], finalSeed, "F from the root and the published round")
	t.Logf("%s: round published, F stored", time.Since(start).Round(time.Millisecond))

	// The second sale opens now, its round later than the one published:
	// the beacon never publishes it.
	join(withheld, "cw", 2)
	open(withheld)

	// Admissions follow the ranks F gives: nobody is let in while someone
	// ranked ahead is still told to wait.
	for _, cu := range all {
		cu.rank = waitroom.RankIn(cu.ticket, flashline.FairnessRandomizedAtOpen, *preopen, 0, finalSeed)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].rank > all[j].rank })
	bought, soldOut := 0, 0
	tick := time.NewTicker(50 * time.Millisecond) // the polls' pace
	defer tick.Stop()
	for poll := 0; bought+soldOut < customers; poll++ {
		require.Less(t, poll, 2000, "the waiting room never emptied")
		base := servers[poll%2].URL
		var admittedNow []*customer
		for _, cu := range all {
			if cu.final != "" {
				continue
			}
			st := getStatus(t, c, base, drawn, cu.jwt, url.QueryEscape(cu.token))
			switch st.State {
			case waitroom.StatusSoldOut:
				cu.final, cu.decided = st.State, min(cu.decided, poll)
				soldOut++
			case waitroom.StatusAdmitted:
				if cu.admitted < 0 {
					cu.admitted, cu.decided = poll, min(cu.decided, poll)
				}
				cu.admission = st.AdmissionToken
				admittedNow = append(admittedNow, cu)
			default:
				require.Equal(t, waitroom.StatusWaiting, st.State)
			}
		}
		for i := len(admittedNow) - 1; i >= 0; i-- { // lowest rank first
			cu := admittedNow[i]
			r, err := c.Do(ctx, http.MethodPost, base+"/sales/"+drawn+"/reservations", cu.jwt, `{"quantity": 1}`,
				"Idempotency-Key", "checkout-"+cu.id, "X-Admission-Token", cu.admission)
			require.NoError(t, err)
			switch {
			case r.Status == http.StatusCreated:
				cu.final = "bought"
				bought++
			case r.Status == http.StatusConflict && errorCode(r.Body) == "sold_out":
				cu.final = "sold_out"
				soldOut++
			default:
				t.Fatalf("reserve with an admission token: %d %s", r.Status, r.Body)
			}
		}
		if bought+soldOut < customers {
			<-tick.C
		}
	}
	for _, a := range all {
		for _, o := range all {
			if a.admitted >= 0 && o.rank < a.rank {
				require.LessOrEqual(t, o.decided, a.admitted, "rank %d admitted in poll %d, rank %d still waiting then", a.rank, a.admitted, o.rank)
			}
		}
	}
	require.Equal(t, stock, bought)
	t.Logf("%s: %d bought, %d sold out", time.Since(start).Round(time.Millisecond), bought, soldOut)

	// verify-draw from the transcript alone: no database, no token.
	out, _, err := runCLI(t, "", "sale", "verify-draw", drawn, "--url", servers[1].URL)
	require.NoError(t, err, out)
	require.Contains(t, out, "The draw checks out.")
	me := all[len(all)-1] // the first ranked
	doc, err = fetchTranscript(ctx, servers[0].URL+"/sales/"+drawn+"/draw")
	require.NoError(t, err)
	out, _, err = runCLI(t, "", "sale", "verify-draw", drawn, "--url", servers[0].URL, "--customer", me.id,
		"--root", *doc.RegistrantsRoot, "--beacon-public-key", beaconKey)
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("your rank   %d of %d\n", me.rank, customers))
	require.Contains(t, out, "The draw checks out.")

	// The withheld round: paused --beacon-wait past it, with the reason;
	// never ranked, nobody admitted.
	var sale struct{ State, PauseReason string }
	require.Eventually(t, func() bool {
		r, err := c.To(servers[0].URL).Sale(ctx, testserver.AdminToken, withheld)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(r.Body, &sale))
		return sale.State == string(flashline.StatePaused)
	}, 30*time.Second, 100*time.Millisecond, "the sale without its round is never paused")
	require.True(t, strings.Contains(sale.PauseReason, "beacon's round") && strings.Contains(sale.PauseReason, "resume the sale once the beacon answers"), sale.PauseReason)
	t.Logf("%s: the sale without its round paused: %s", time.Since(start).Round(time.Millisecond), sale.PauseReason)
	_, finalSeed, _, admitted = room(withheld)
	require.Nil(t, finalSeed, "ranked without its round")
	require.Zero(t, admitted)
}
