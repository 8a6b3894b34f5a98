package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestWaitingRoomEndToEnd: 60 customers join a randomized_at_open waiting
// room before the open, across two instances; asking again with the ticket
// held gives it back; after the open they are admitted in rank order (the
// draw's), solve the challenge, and reserve with their admission tokens until
// the stock is gone.
func TestWaitingRoomEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flashline serve processes: not in -short")
	}
	dbURL := testdb.New(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	servers := testserver.StartN(t, 2, dbURL, "--admin-pool-size", "4", "--river-pool-size", "2")
	c := testserver.NewClient()
	ctx := context.Background()
	// Every instance holds the same waiting-room keys.
	keys, err := roomtoken.ParseKeyring(testserver.WaitroomKeys)
	require.NoError(t, err)

	// The sale opens in an hour, and is opened by hand once the pre-open
	// checks are done: they hold whatever the machine's load (a fixed
	// opening time could come while they still ran, and move the places).
	const customers, stock, bits = 60, 20, 6
	opensAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	sale := c.CreateSale(t, servers[0].URL, fmt.Sprintf(`{"sku":"sku_wait","initialStock":%d,"admission":"waiting_room",
		"fairness":"randomized_at_open","challengeBits":%d,"opensAt":%q}`, stock, bits, opensAt.Format(time.RFC3339)))

	type customer struct {
		id, jwt   string
		token     string
		ticket    roomtoken.Ticket
		rank      int64
		admitted  int // poll round in which it was first admitted; -1: not yet
		decided   int // poll round in which it was first admitted or told sold out
		admission string
		final     string
	}
	get := func(base, path, jwt string) (testserver.Response, map[string]json.RawMessage) {
		r, err := c.Do(ctx, http.MethodGet, base+path, jwt, "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, r.Status, "GET %s: %s", path, r.Body)
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(r.Body, &m))
		return r, m
	}
	str := func(m map[string]json.RawMessage, k string) string {
		var s string
		require.NoError(t, json.Unmarshal(m[k], &s), "%s in %v", k, m)
		return s
	}

	// Everyone joins before the open, half on each instance, all at once.
	all := make([]*customer, customers)
	var wg sync.WaitGroup
	for i := range all {
		all[i] = &customer{id: fmt.Sprintf("wr-%02d", i), jwt: testserver.Token(t, fmt.Sprintf("wr-%02d", i)), admitted: -1, decided: 1 << 30}
		wg.Go(func() {
			r, err := c.Do(ctx, http.MethodGet, servers[i%2].URL+"/sales/"+sale+"/ticket", all[i].jwt, "")
			if err != nil || r.Status != http.StatusOK {
				t.Errorf("ticket: %v %d %s", err, r.Status, r.Body)
				return
			}
			var v struct{ Token string }
			if err := json.Unmarshal(r.Body, &v); err != nil {
				t.Error(err)
			}
			all[i].token = v.Token
		})
	}
	wg.Wait()
	require.False(t, t.Failed())
	for _, cu := range all {
		cu.ticket, err = keys.ParseTicket(cu.token)
		require.NoError(t, err)
		require.True(t, cu.ticket.PreOpen)
		require.EqualValues(t, 1, cu.ticket.Position, "placed by the draw: no position is leased")
	}

	// Both instances come to count the whole crowd (each sends its counts to
	// the room and reads the room's back): every place is then the draw's
	// rank among all 60.
	require.Eventually(t, func() bool {
		for _, srv := range servers {
			for _, cu := range all {
				_, m := get(srv.URL, "/sales/"+sale+"/ticket?token="+url.QueryEscape(cu.token), cu.jwt)
				if string(m["position"]) != fmt.Sprint(waitroom.Rank(cu.ticket, flashline.FairnessRandomizedAtOpen, customers)) {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "the instances never counted the whole pre-open crowd")
	// Asking again, on either instance, with the ticket held gives it back:
	// same token, and the same place.
	for i, cu := range all {
		q := "/sales/" + sale + "/ticket?token=" + url.QueryEscape(cu.token)
		_, a := get(servers[i%2].URL, q, cu.jwt)
		_, b := get(servers[(i+1)%2].URL, q, cu.jwt)
		require.Equal(t, cu.token, str(a, "token"))
		require.Equal(t, cu.token, str(b, "token"))
		require.Equal(t, string(a["position"]), string(b["position"]), "the same place on both instances")
		require.JSONEq(t, fmt.Sprintf(`{"nonce":%q,"bits":%d}`, keys.ChallengeNonce(cu.ticket), bits), string(a["challenge"]))
	}
	// Asking again without the ticket held gives the same ticket (within
	// the hour; the same draw always) and the same place: nobody is
	// counted twice.
	for i, cu := range all[:10] {
		_, a := get(servers[i%2].URL, "/sales/"+sale+"/ticket?token="+url.QueryEscape(cu.token), cu.jwt)
		_, b := get(servers[i%2].URL, "/sales/"+sale+"/ticket", cu.jwt)
		if b, err := keys.ParseTicket(str(b, "token")); err == nil && b.ArrivedAt.Equal(cu.ticket.ArrivedAt) {
			require.Equal(t, cu.ticket, b)
		}
		require.Equal(t, string(a["position"]), string(b["position"]), "a re-ask never moves the place")
		require.Equal(t, string(a["positionRange"]), string(b["positionRange"]))
	}
	_, policy := get(servers[1].URL, "/sales/"+sale+"/policy", "")
	require.Equal(t, string(flashline.FairnessRandomizedAtOpen), str(policy, "policy"))
	require.NotContains(t, policy, "drawSeed", "the seed is secret before the open")
	commitment := str(policy, "drawCommitment")
	out, _, err := runCLI(t, dbURL, "sale", "verify-draw", sale, "--url", servers[1].URL)
	require.NoError(t, err)
	require.Contains(t, out, "not revealed yet")

	// The open: ranks come from the draw among the pre-open crowd.
	_, _, err = runCLI(t, dbURL, "sale", "open", sale)
	require.NoError(t, err)
	var preopen *int64
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT preopen_count FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&preopen))
		return preopen != nil
	}, 10*time.Second, 50*time.Millisecond, "the pacer never froze the pre-open count")
	// The crowd drawn among is the people who joined, not the positions
	// leased for them (blocks dropped half used left positions unheld).
	require.EqualValues(t, customers, *preopen, "the pre-open crowd counts tickets")
	// Ranked by the final seed the freeze committed with the holders.
	var finalSeed []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT final_seed FROM waiting_rooms WHERE sale_id = $1`, sale).Scan(&finalSeed))
	require.NotNil(t, finalSeed, "the freeze commits the crowd")
	for _, cu := range all {
		cu.rank = waitroom.RankIn(cu.ticket, flashline.FairnessRandomizedAtOpen, *preopen, 0, finalSeed)
	}
	// Highest rank first within a round: a lower rank, asked later on the
	// same instance, sees the same watermark or a newer one.
	sort.Slice(all, func(i, j int) bool { return all[i].rank > all[j].rank })

	// Each round: ask every customer still waiting where they stand (on one
	// instance, alternating), then let those admitted reserve, lowest rank
	// first, as a crowd let in together would race for the units.
	bought, soldOut := 0, 0
	for round := 0; ; round++ {
		base := servers[round%2].URL
		pending := 0
		var admittedNow []*customer
		for _, cu := range all {
			if cu.final != "" {
				continue
			}
			q := "/sales/" + sale + "/status?token=" + url.QueryEscape(cu.token)
			_, st := get(base, q, cu.jwt)
			state := str(st, "state")
			if state == waitroom.StatusChallengeRequired {
				var ch struct {
					Nonce string
					Bits  int
				}
				require.NoError(t, json.Unmarshal(st["challenge"], &ch))
				require.Equal(t, bits, ch.Bits)
				_, st = get(base, q+"&solution="+roomtoken.Solve(ch.Nonce, ch.Bits), cu.jwt)
				state = str(st, "state")
			}
			switch state {
			case waitroom.StatusSoldOut:
				cu.final, cu.decided = state, min(cu.decided, round)
				soldOut++
			case waitroom.StatusWaiting:
				pending++
			default:
				require.Equal(t, waitroom.StatusAdmitted, state, "%v", st)
				if cu.admitted < 0 {
					cu.admitted, cu.decided = round, min(cu.decided, round)
				}
				cu.admission = str(st, "admissionToken")
				admittedNow = append(admittedNow, cu)
			}
		}
		for i := len(admittedNow) - 1; i >= 0; i-- {
			cu := admittedNow[i]
			r, err := c.Do(ctx, http.MethodPost, base+"/sales/"+sale+"/reservations", cu.jwt, `{"quantity": 1}`,
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
		if pending == 0 && bought+soldOut == customers {
			break
		}
		require.Less(t, round, 2000, "the waiting room never emptied")
		time.Sleep(50 * time.Millisecond)
	}

	// Admission followed the draw: nobody was let in while someone ranked
	// ahead of them was still told to wait.
	admitted := 0
	for _, a := range all {
		if a.admitted < 0 {
			continue
		}
		admitted++
		for _, b := range all {
			if b.rank < a.rank {
				require.LessOrEqual(t, b.decided, a.admitted,
					"rank %d admitted in round %d, rank %d still waiting then", a.rank, a.admitted, b.rank)
			}
		}
	}
	require.GreaterOrEqual(t, admitted, stock)
	t.Logf("%d customers, pre-open count %d, %d admitted, %d bought, %d sold out", customers, *preopen, admitted, bought, soldOut)

	require.Equal(t, stock, bought)
	require.Equal(t, customers-stock, soldOut)
	var available int
	require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(quantity), 0) FROM stock WHERE sale_id = $1`, sale).Scan(&available))
	require.Zero(t, available)

	// The draw, audited from the shell: the seed revealed at the open is the
	// one committed to, and every admission followed the draw.
	_, policy = get(servers[0].URL, "/sales/"+sale+"/policy", "")
	require.Equal(t, commitment, str(policy, "drawCommitment"))
	out, _, err = runCLI(t, dbURL, "sale", "verify-draw", sale, "--url", servers[0].URL)
	require.NoError(t, err, out)
	require.Contains(t, out, "SHA-256 matches the commitment")
	require.Contains(t, out, "The draw checks out.")
	t.Log(out)
	// A customer checks their own rank from the published transcript
	// alone (no database, no token): the crowd committed at the open holds
	// them, and the rank they compute is the one the room admitted them by.
	doc, err := fetchTranscript(ctx, servers[1].URL+"/sales/"+sale+"/draw")
	require.NoError(t, err)
	require.Equal(t, api.CrowdFormula, doc.Formula)
	require.Equal(t, "drawn", doc.Status)
	require.EqualValues(t, customers, doc.RegistrantCount, "every pre-open holder is committed")
	for _, cu := range all[:3] {
		var mine strings.Builder
		require.NoError(t, verifyLotteryDraw(doc, lotteryPins{root: *doc.RegistrantsRoot, customer: cu.id}, &mine), mine.String())
		require.Contains(t, mine.String(), fmt.Sprintf("your rank   %d of %d\n", cu.rank, customers), mine.String())
	}
	tampered := doc
	tampered.Registrants = append(slices.Clone(doc.Registrants), api.TranscriptRegistrant{
		Registrant: flashline.RegistrantOf(sale, "added-after-the-open").String(), Rank: 1})
	var bad strings.Builder
	require.ErrorIs(t, verifyLotteryDraw(tampered, lotteryPins{}, &bad), errDrawMismatch)
	require.Contains(t, bad.String(), `the "registrants" step fails`)
	// An admission slipped in out of order shows up: a customer whose draw
	// ranks last, recorded as having reserved with an admission token. (The
	// audit is decisive while the watermark has not passed the pre-open
	// crowd; hold it there for the check.)
	var seed []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT draw_seed FROM sales WHERE sale_id = $1`, sale).Scan(&seed))
	var cheat string
	for i := 0; cheat == ""; i++ {
		id := fmt.Sprintf("cheat-%d", i)
		if waitroom.RankIn(roomtoken.Ticket{SaleID: sale, CustomerID: id, PreOpen: true, Position: 1}, flashline.FairnessRandomizedAtOpen, *preopen, 0, finalSeed) > *preopen-2 {
			cheat = id
		}
	}
	_, err = pool.Exec(ctx, `UPDATE waiting_rooms SET admitted_through = least(admitted_through, preopen_count - 2) WHERE sale_id = $1`, sale)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO reservations (reservation_id, sale_id, customer_id, bucket, quantity, state, idempotency_key,
		admission_token_id, expires_at, cancelled_at, restocked_at)
		VALUES ('res_cheat', $1, $2, 0, 1, 'cancelled', 'cheat', 'cheat-admission', now(), now(), now())`, sale, cheat)
	require.NoError(t, err)
	out, _, err = runCLI(t, dbURL, "sale", "verify-draw", sale, "--url", servers[0].URL)
	require.ErrorIs(t, err, errDrawMismatch)
	require.Contains(t, out, cheat)
	require.Contains(t, out, "OUT OF ORDER")
}

func TestSaleCreateWaitingRoomFlags(t *testing.T) {
	t.Parallel()
	dbURL := testdb.New(t)
	out, _, err := runCLI(t, dbURL, "sale", "create", "--sku", "sku_cli_wr", "--stock", "5",
		"--admission", "waiting_room", "--fairness", "arrival_order", "--challenge-bits", "10",
		"--per-instrument-limit", "2", "--min-account-age-seconds", "3600")
	require.NoError(t, err)
	var sale struct {
		Admission            string
		Fairness             string
		ChallengeBits        int
		PerInstrumentLimit   *int
		MinAccountAgeSeconds int
	}
	require.NoError(t, json.Unmarshal([]byte(out), &sale))
	require.Equal(t, "waiting_room", sale.Admission)
	require.Equal(t, "arrival_order", sale.Fairness)
	require.Equal(t, 10, sale.ChallengeBits)
	require.Equal(t, 2, *sale.PerInstrumentLimit)
	require.Equal(t, 3600, sale.MinAccountAgeSeconds)

	_, _, err = runCLI(t, dbURL, "sale", "create", "--sku", "s", "--stock", "5", "--fairness", "fastest")
	require.ErrorContains(t, err, "fairness must be")
	_, _, err = runCLI(t, dbURL, "sale", "create", "--sku", "s", "--stock", "5", "--challenge-bits", "8")
	require.ErrorContains(t, err, "waiting_room")
}
