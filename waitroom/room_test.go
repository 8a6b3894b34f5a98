package waitroom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/salecache"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

var keys = roomtoken.DeriveKeyring("waitroom-test-secret")

// capacity is a limiter with a fixed headroom.
type capacity struct{ limit, inFlight int64 }

func (c capacity) Limit() int64    { return c.limit }
func (c capacity) InFlight() int64 { return c.inFlight }

func (c capacity) Latency() time.Duration { return 0 }

type env struct {
	pool  *pgxpool.Pool
	store *postgres.Store
}

func newEnv(t *testing.T) env {
	t.Helper()
	pool, _ := testdb.NewPool(t)
	return env{pool: pool, store: postgres.NewStore(postgres.SinglePool(pool), postgres.Options{})}
}

// testRoom is a Room with the sale cache it reads.
type testRoom struct {
	*waitroom.Room
	cache *salecache.Cache
}

// EdgeReport hands the origin an edge's signed report, as POST /edge/sync
// does, and says only whether it was taken.
func (r testRoom) EdgeReport(token string) error {
	_, err := r.EdgeSync(context.Background(), token)
	return err
}

// Load reads every sale into the room's cache.
func (r testRoom) Load(ctx context.Context) error { return r.cache.Load(ctx) }

// room returns a Room on the test's database. It is not kept current unless
// the test runs it (see run).
func (e env) room(t *testing.T, opts waitroom.Options) testRoom {
	t.Helper()
	return e.roomWith(t, opts, salecache.Options{}, e.store)
}

// roomWith is room with the cache's options and the store it writes through.
func (e env) roomWith(t *testing.T, opts waitroom.Options, cacheOpts salecache.Options, store flashline.RoomStore) testRoom {
	t.Helper()
	cache := salecache.New(e.store, cacheOpts)
	return testRoom{Room: waitroom.NewRoom(cache, store, keys, capacity{limit: 20}, opts), cache: cache}
}

// run keeps r current (and, with pacer, pacing) until the test ends.
func run(t *testing.T, r testRoom, pacer bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	go func() { _ = r.cache.Run(ctx); done <- struct{}{} }()
	go func() { _ = r.RunCounts(ctx); done <- struct{}{} }()
	n := 2
	if pacer {
		n++
		go func() { _ = r.RunPacer(ctx); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range n {
			<-done
		}
	})
}

func (e env) sale(t *testing.T, n flashline.NewSale) flashline.Sale {
	t.Helper()
	if n.SKU == "" {
		n.SKU = "sku_wait"
	}
	if n.InitialStock == 0 {
		n.InitialStock = 10
	}
	n.Admission = flashline.AdmissionWaitingRoom
	sale, err := e.store.CreateSale(context.Background(), n)
	require.NoError(t, err)
	return sale
}

func later() *time.Time {
	t := time.Now().Add(time.Hour)
	return &t
}

func (e env) seed(t *testing.T, saleID string) []byte {
	t.Helper()
	var seed []byte
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT draw_seed FROM sales WHERE sale_id = $1`, saleID).Scan(&seed))
	require.Len(t, seed, 16)
	return seed
}

func (e env) roomRow(t *testing.T, saleID string) (next int64, preopen *int64, admitted int64) {
	t.Helper()
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT next_position, preopen_count, admitted_through FROM waiting_rooms WHERE sale_id = $1`, saleID).Scan(&next, &preopen, &admitted))
	return next, preopen, admitted
}

func ticket(t *testing.T, r testRoom, saleID, customer, previous string) waitroom.TicketResult {
	t.Helper()
	res, err := r.Ticket(context.Background(), waitroom.TicketRequest{SaleID: saleID, CustomerID: customer, PreviousToken: previous})
	require.NoError(t, err)
	return res
}

func status(t *testing.T, r testRoom, saleID, customer, token, solution string) waitroom.StatusResult {
	t.Helper()
	res, err := r.Status(context.Background(), saleID, customer, token, solution)
	require.NoError(t, err)
	return res
}

func TestTicketIsStable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.room(t, waitroom.Options{})
	sale := e.sale(t, flashline.NewSale{OpensAt: later()})
	seed := e.seed(t, sale.ID)

	first := ticket(t, r, sale.ID, "alice", "")
	require.False(t, first.Renewed)
	require.True(t, first.Ticket.PreOpen)
	require.Equal(t, flashline.Draw(seed, sale.ID, "alice"), first.Ticket.Draw)
	require.Equal(t, flashline.FairnessRandomizedAtOpen, first.Policy)
	require.Nil(t, first.Challenge)
	require.Positive(t, first.EstimatedWaitSeconds)
	require.GreaterOrEqual(t, first.EstimatedWaitSeconds, int64(3500), "the time to the open is part of the wait")

	t.Run("PreviousTokenGivenBackUnchanged", func(t *testing.T) {
		again := ticket(t, r, sale.ID, "alice", first.Token)
		require.True(t, again.Renewed)
		require.Equal(t, first.Token, again.Token)
		require.Equal(t, first.Ticket, again.Ticket)
	})
	t.Run("AskingAgainCannotReRoll", func(t *testing.T) {
		fresh := ticket(t, r, sale.ID, "alice", "")
		require.Equal(t, first.Ticket.Draw, fresh.Ticket.Draw, "the draw is fixed per customer and sale")
		if fresh.Ticket.ArrivedAt.Equal(first.Ticket.ArrivedAt) {
			require.Equal(t, first.Token, fresh.Token, "within the hour, the same ticket")
		}
		require.Equal(t, waitroom.Rank(first.Ticket, sale.Fairness, 50), waitroom.Rank(fresh.Ticket, sale.Fairness, 50))
	})
	t.Run("SomeoneElsesTokenIsNotGivenBack", func(t *testing.T) {
		bob := ticket(t, r, sale.ID, "bob", first.Token)
		require.False(t, bob.Renewed)
		require.Equal(t, "bob", bob.Ticket.CustomerID)
	})
	t.Run("AnotherSalesTokenIsNotGivenBack", func(t *testing.T) {
		other := e.sale(t, flashline.NewSale{OpensAt: later()})
		res := ticket(t, r, other.ID, "alice", first.Token)
		require.False(t, res.Renewed)
		require.Equal(t, other.ID, res.Ticket.SaleID)
	})
	t.Run("ForgedTokenIsNotGivenBack", func(t *testing.T) {
		forged := roomtoken.DeriveKeyring("another secret").SignTicket(first.Ticket)
		res := ticket(t, r, sale.ID, "alice", forged)
		require.False(t, res.Renewed)
	})
	t.Run("StatusWaitsBeforeTheOpen", func(t *testing.T) {
		st := status(t, r, sale.ID, "alice", first.Token, "")
		require.Equal(t, waitroom.StatusWaiting, st.State)
		require.False(t, st.Paused)
		require.GreaterOrEqual(t, st.PollAfter, 700*time.Millisecond)
		require.LessOrEqual(t, st.PollAfter, 15*1300*time.Millisecond)
	})
}

func TestTicketRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.room(t, waitroom.Options{TicketsPerMinute: 3})
	ctx := context.Background()

	t.Run("UnknownSale", func(t *testing.T) {
		_, err := r.Ticket(ctx, waitroom.TicketRequest{SaleID: "sale_nope", CustomerID: "alice"})
		require.ErrorIs(t, err, flashline.ErrNotFound)
	})
	t.Run("DirectSale", func(t *testing.T) {
		direct, err := e.store.CreateSale(ctx, flashline.NewSale{SKU: "sku_direct", InitialStock: 5})
		require.NoError(t, err)
		_, err = r.Ticket(ctx, waitroom.TicketRequest{SaleID: direct.ID, CustomerID: "alice"})
		require.ErrorIs(t, err, flashline.ErrNoWaitingRoom)
		_, err = r.Policy(ctx, direct.ID)
		require.ErrorIs(t, err, flashline.ErrNoWaitingRoom)
	})
	t.Run("ClosedSale", func(t *testing.T) {
		sale := e.sale(t, flashline.NewSale{})
		_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionClose)
		require.NoError(t, err)
		_, err = r.Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: "alice"})
		require.ErrorIs(t, err, flashline.ErrSaleNotOpen)
	})
	t.Run("AccountTooNew", func(t *testing.T) {
		sale := e.sale(t, flashline.NewSale{MinAccountAgeSeconds: 86400})
		for _, created := range []time.Time{{}, time.Now().Add(-time.Hour)} {
			_, err := r.Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: "alice", AccountCreated: created})
			require.ErrorIs(t, err, flashline.ErrAccountTooNew)
		}
		_, err := r.Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: "alice", AccountCreated: time.Now().Add(-48 * time.Hour)})
		require.NoError(t, err)
		p, err := r.Policy(ctx, sale.ID)
		require.NoError(t, err)
		require.Contains(t, p.Description, "1 day")
	})
	t.Run("RateLimitedButPresentingTheTicketIsFree", func(t *testing.T) {
		// Before the open of a randomized_at_open room nothing is limited:
		// asking again gives the same ticket. In line by arrival, each ask
		// is a new place at the back, and they are limited.
		sale := e.sale(t, flashline.NewSale{OpensAt: later(), Fairness: flashline.FairnessArrivalOrder})
		var last waitroom.TicketResult
		for range 3 {
			last = ticket(t, r, sale.ID, "greedy", "")
		}
		_, err := r.Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: "greedy"})
		require.ErrorIs(t, err, flashline.ErrRateLimited)
		again := ticket(t, r, sale.ID, "greedy", last.Token)
		require.True(t, again.Renewed)
		// Per customer and sale.
		ticket(t, r, sale.ID, "modest", "")
	})
}

// TestRankOrder: before the open under randomized_at_open the draw orders
// the pre-open crowd, and arrivals after the open come after them in arrival
// order; under arrival_order positions decide. Admission follows rank.
func TestRankOrder(t *testing.T) {
	t.Parallel()
	for _, policy := range []flashline.Fairness{flashline.FairnessRandomizedAtOpen, flashline.FairnessArrivalOrder} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			r := e.roomWith(t, waitroom.Options{Tick: 20 * time.Millisecond, LeaderRetry: 50 * time.Millisecond},
				salecache.Options{RefreshInterval: 100 * time.Millisecond}, e.store)
			sale := e.sale(t, flashline.NewSale{InitialStock: 100, OpensAt: later(), Fairness: policy})
			run(t, r, false)

			type waiter struct {
				id     string
				ticket waitroom.TicketResult
				rank   int64
			}
			var waiters []*waiter
			for i := range 30 {
				w := &waiter{id: fmt.Sprintf("pre-%02d", i)}
				w.ticket = ticket(t, r, sale.ID, w.id, "")
				require.True(t, w.ticket.Ticket.PreOpen)
				waiters = append(waiters, w)
			}
			_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
			require.NoError(t, err)
			// The Room hears of the open (flashline_sale_changed).
			require.Eventually(t, func() bool {
				w := &waiter{id: "probe"}
				w.ticket = ticket(t, r, sale.ID, w.id, "")
				if w.ticket.Ticket.PreOpen {
					return false
				}
				waiters = append(waiters, w)
				return true
			}, 5*time.Second, 20*time.Millisecond)
			for i := range 10 {
				w := &waiter{id: fmt.Sprintf("post-%02d", i)}
				w.ticket = ticket(t, r, sale.ID, w.id, "")
				require.False(t, w.ticket.Ticket.PreOpen)
				waiters = append(waiters, w)
			}
			_, preopen, _ := e.roomRow(t, sale.ID)
			require.NotNil(t, preopen, "the first lease after the open freezes the pre-open count")
			var preopenPositions int64
			var finalSeed []byte
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT preopen_positions, final_seed FROM waiting_rooms WHERE sale_id = $1`, sale.ID).Scan(&preopenPositions, &finalSeed))
			for _, w := range waiters {
				w.rank = waitroom.RankIn(w.ticket.Ticket, policy, *preopen, preopenPositions, finalSeed)
				if w.ticket.Ticket.PreOpen {
					require.LessOrEqual(t, w.rank, *preopen)
				} else {
					require.Greater(t, w.rank, *preopen, "post-open arrivals come after the pre-open crowd")
				}
			}
			if policy == flashline.FairnessArrivalOrder {
				for i := 1; i < len(waiters); i++ {
					require.Greater(t, waiters[i].rank, waiters[i-1].rank, "arrival order")
				}
			} else {
				pre := waiters[:30]
				require.False(t, sort.SliceIsSorted(pre, func(i, j int) bool { return pre[i].rank < pre[j].rank }),
					"30 pre-open arrivals drawn in arrival order: not a draw")
			}

			// Admit step by step; at every step, the admitted are exactly the
			// lowest ranks.
			run(t, r, true)
			admitted := map[string]bool{}
			deadline := time.Now().Add(20 * time.Second)
			for len(admitted) < len(waiters) {
				require.True(t, time.Now().Before(deadline), "only %d of %d admitted", len(admitted), len(waiters))
				// Highest rank first: a lower rank, asked later, sees the same
				// watermark or a newer one.
				sort.Slice(waiters, func(i, j int) bool { return waiters[i].rank > waiters[j].rank })
				var maxAdmitted int64
				minWaiting := int64(1 << 62)
				for _, w := range waiters {
					if admitted[w.id] {
						maxAdmitted = max(maxAdmitted, w.rank)
						continue
					}
					st := status(t, r, sale.ID, w.id, w.ticket.Token, "")
					if st.State == waitroom.StatusAdmitted {
						admitted[w.id] = true
						maxAdmitted = max(maxAdmitted, w.rank)
						a, err := keys.ParseAdmission(st.AdmissionToken)
						require.NoError(t, err)
						require.NoError(t, a.Check(sale.ID, w.id, time.Now()))
						require.Equal(t, roomtoken.AdmissionID(w.ticket.Ticket), a.ID)
					} else {
						require.Equal(t, waitroom.StatusWaiting, st.State)
						minWaiting = min(minWaiting, w.rank)
					}
				}
				require.Less(t, maxAdmitted, minWaiting+1, "someone ranked %d waits while rank %d is in", minWaiting, maxAdmitted)
				time.Sleep(30 * time.Millisecond)
			}
		})
	}
}

// TestStatusNeedsNoDatabase: once a sale is in memory, status answers (all
// of them: waiting, admitted, challenge) take no connection from the pool.
func TestStatusNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.roomWith(t, waitroom.Options{}, salecache.Options{StaleAfter: time.Minute}, nopLimiter{e.store})
	sale := e.sale(t, flashline.NewSale{ChallengeBits: 4})
	_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	// Past the quarter second after the open in which arrivals are still
	// placed by the draw: these 20 are placed by arrival.
	time.Sleep(300 * time.Millisecond)
	var tickets []waitroom.TicketResult
	for i := range 20 {
		tickets = append(tickets, ticket(t, r, sale.ID, fmt.Sprintf("c%02d", i), ""))
	}
	_, err = e.pool.Exec(ctx, `UPDATE waiting_rooms SET admitted_through = 10 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	require.NoError(t, r.Load(ctx))

	before := e.pool.Stat().AcquireCount()
	states := map[string]int{}
	for range 50 {
		for i, tk := range tickets {
			solution := ""
			if i%2 == 0 && tk.Challenge != nil {
				solution = roomtoken.Solve(tk.Challenge.Nonce, tk.Challenge.Bits)
			}
			st := status(t, r, sale.ID, tk.Ticket.CustomerID, tk.Token, solution)
			states[st.State]++
		}
	}
	require.Equal(t, before, e.pool.Stat().AcquireCount(), "a status answer took a connection")
	require.Positive(t, states[waitroom.StatusWaiting])
	require.Positive(t, states[waitroom.StatusAdmitted])
	require.Positive(t, states[waitroom.StatusChallengeRequired])

	t.Run("StaleEntryUnreachableDatabaseWaits", func(t *testing.T) {
		closed, err := pgxpool.New(ctx, e.pool.Config().ConnString())
		require.NoError(t, err)
		store := postgres.NewStore(postgres.SinglePool(closed), postgres.Options{})
		cache := salecache.New(store, salecache.Options{StaleAfter: 200 * time.Millisecond})
		r := testRoom{Room: waitroom.NewRoom(cache, store, keys, capacity{}, waitroom.Options{}), cache: cache}
		require.NoError(t, r.Load(ctx))
		tk := tickets[0] // admitted above, with a solution
		solution := roomtoken.Solve(tk.Challenge.Nonce, tk.Challenge.Bits)
		require.Equal(t, waitroom.StatusAdmitted, status(t, r, sale.ID, tk.Ticket.CustomerID, tk.Token, solution).State)
		closed.Close()
		time.Sleep(300 * time.Millisecond)
		st := status(t, r, sale.ID, tk.Ticket.CustomerID, tk.Token, solution)
		require.Equal(t, waitroom.StatusWaiting, st.State, "nobody is admitted on stale knowledge")
		require.GreaterOrEqual(t, st.PollAfter, 5*time.Second)
		require.True(t, st.Stale, "the answer says it is stale")
		_, err = r.Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: "new"})
		require.ErrorIs(t, err, flashline.ErrUnavailable)
	})
}

// nopLimiter is the store without rate limits.
type nopLimiter struct{ *postgres.Store }

func (nopLimiter) RateLimit(context.Context, string, string, time.Duration, int) error { return nil }

func TestStatusRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.room(t, waitroom.Options{})
	sale := e.sale(t, flashline.NewSale{OpensAt: later()})
	tk := ticket(t, r, sale.ID, "alice", "")
	for name, call := range map[string]func() error{
		"Forged": func() error {
			_, err := r.Status(ctx, sale.ID, "alice", roomtoken.DeriveKeyring("x-another-secret").SignTicket(tk.Ticket), "")
			return err
		},
		"Garbage":       func() error { _, err := r.Status(ctx, sale.ID, "alice", "not a ticket", ""); return err },
		"Empty":         func() error { _, err := r.Status(ctx, sale.ID, "alice", "", ""); return err },
		"OtherCustomer": func() error { _, err := r.Status(ctx, sale.ID, "mallory", tk.Token, ""); return err },
		"OtherSale":     func() error { _, err := r.Status(ctx, "sale_other", "alice", tk.Token, ""); return err },
	} {
		require.ErrorIs(t, call(), flashline.ErrAdmissionInvalid, name)
	}
}

func TestChallengeThenAdmitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.room(t, waitroom.Options{Tick: 20 * time.Millisecond, LeaderRetry: 50 * time.Millisecond})
	sale := e.sale(t, flashline.NewSale{ChallengeBits: 10})
	_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	run(t, r, true)
	tk := ticket(t, r, sale.ID, "alice", "")
	require.NotNil(t, tk.Challenge)
	require.Equal(t, 10, tk.Challenge.Bits)
	require.Equal(t, keys.ChallengeNonce(tk.Ticket), tk.Challenge.Nonce)

	var st waitroom.StatusResult
	require.Eventually(t, func() bool {
		st = status(t, r, sale.ID, "alice", tk.Token, "")
		return st.State != waitroom.StatusWaiting
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, waitroom.StatusChallengeRequired, st.State)
	require.Equal(t, tk.Challenge.Nonce, st.Challenge.Nonce)

	wrong := status(t, r, sale.ID, "alice", tk.Token, "12345")
	if !keys.VerifyChallenge(tk.Ticket, "12345", 10) {
		require.Equal(t, waitroom.StatusChallengeRequired, wrong.State)
	}
	st = status(t, r, sale.ID, "alice", tk.Token, roomtoken.Solve(st.Challenge.Nonce, st.Challenge.Bits))
	require.Equal(t, waitroom.StatusAdmitted, st.State)
	require.Equal(t, 120*time.Second, st.ExpiresIn)
	a, err := keys.ParseAdmission(st.AdmissionToken)
	require.NoError(t, err)
	require.Equal(t, roomtoken.AdmissionID(tk.Ticket), a.ID)
	require.NoError(t, a.Check(sale.ID, "alice", time.Now()))
	require.Error(t, a.Check(sale.ID, "alice", time.Now().Add(121*time.Second)))
}

func TestPausedAndSoldOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.room(t, waitroom.Options{Tick: 20 * time.Millisecond, LeaderRetry: 50 * time.Millisecond})
	sale := e.sale(t, flashline.NewSale{InitialStock: 3})
	_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	run(t, r, false)
	tk := ticket(t, r, sale.ID, "alice", "")

	_, err = e.store.SetSaleState(ctx, sale.ID, flashline.ActionPause)
	require.NoError(t, err)
	// Admitted by the watermark, but paused: waiting, and told why.
	_, err = e.pool.Exec(ctx, `UPDATE waiting_rooms SET admitted_through = 100 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st := status(t, r, sale.ID, "alice", tk.Token, "")
		return st.State == waitroom.StatusWaiting && st.Paused
	}, 5*time.Second, 20*time.Millisecond)
	st := status(t, r, sale.ID, "alice", tk.Token, "")
	require.GreaterOrEqual(t, st.PollAfter, 3500*time.Millisecond, "nobody is let in while paused: no need to ask every second")

	_, err = e.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return status(t, r, sale.ID, "alice", tk.Token, "").State == waitroom.StatusAdmitted
	}, 5*time.Second, 20*time.Millisecond)

	// Every unit gone (the trigger on stock tells the Room at once).
	_, err = e.pool.Exec(ctx, `UPDATE stock SET quantity = 0 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	// No hold is pending: sold out for good.
	require.Eventually(t, func() bool {
		st := status(t, r, sale.ID, "alice", tk.Token, "")
		return st.State == waitroom.StatusSoldOut && st.QueueIsFull
	}, 5*time.Second, 20*time.Millisecond)
	_, err = r.Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: "late"})
	require.ErrorIs(t, err, flashline.ErrSoldOut)

	// Closed: the line is over, whatever the stock.
	_, err = e.pool.Exec(ctx, `UPDATE stock SET quantity = 3 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	_, err = e.store.SetSaleState(ctx, sale.ID, flashline.ActionClose)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := r.Status(ctx, sale.ID, "alice", tk.Token, "")
		return err == nil && st.State == waitroom.StatusSoldOut && st.QueueIsFull
	}, 5*time.Second, 20*time.Millisecond)
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.room(t, waitroom.Options{})
	random := e.sale(t, flashline.NewSale{ChallengeBits: 8})
	arrival := e.sale(t, flashline.NewSale{Fairness: flashline.FairnessArrivalOrder})

	p, err := r.Policy(context.Background(), random.ID)
	require.NoError(t, err)
	require.Equal(t, flashline.FairnessRandomizedAtOpen, p.Policy)
	require.Contains(t, p.Description, "random draw")
	require.Contains(t, p.Description, "puzzle")
	require.Contains(t, p.Description, "no public randomness beacon", "a deployment without a beacon says so")

	// Under a store with a beacon, the policy names the crowd's round, fixed
	// at the sale's creation.
	signer, err := flashline.NewBeaconSigner([]byte("policy beacon test key material ..............................."))
	require.NoError(t, err)
	chain := flashline.BeaconChain{PublicKey: signer.PublicKey(), Genesis: time.Now().Add(-time.Hour), Period: 3 * time.Second}
	opens := time.Now().Add(time.Hour)
	withBeacon, err := postgres.NewStore(postgres.SinglePool(e.pool), postgres.Options{Beacon: &chain}).CreateSale(context.Background(),
		flashline.NewSale{SKU: "sku_wait", InitialStock: 10, Admission: flashline.AdmissionWaitingRoom, OpensAt: &opens})
	require.NoError(t, err)
	p, err = r.Policy(context.Background(), withBeacon.ID)
	require.NoError(t, err)
	require.Contains(t, p.Description, fmt.Sprintf("round %d of a public randomness beacon", flashline.CrowdRound(chain, opens)))

	p, err = r.Policy(context.Background(), arrival.ID)
	require.NoError(t, err)
	require.Equal(t, flashline.FairnessArrivalOrder, p.Policy)
	require.Contains(t, p.Description, "order they joined")
	require.NotContains(t, p.Description, "puzzle")
	require.Contains(t, p.Description, "may cancel an order after it is made", "voids are published")
}

// TestLeaderFailover: one of two rooms leads the pacer; when it stops, the
// other takes over within a retry or two.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	opts := waitroom.Options{Tick: 20 * time.Millisecond, LeaderRetry: 50 * time.Millisecond}
	e.sale(t, flashline.NewSale{OpensAt: later()})
	a, b := e.room(t, opts), e.room(t, opts)
	for _, r := range []testRoom{a, b} {
		require.NoError(t, r.Load(context.Background()))
	}
	ctxA, stopA := context.WithCancel(context.Background())
	doneA := make(chan struct{})
	go func() { _ = a.RunPacer(ctxA); close(doneA) }()
	t.Cleanup(func() { stopA(); <-doneA })
	require.Eventually(t, a.IsLeader, 5*time.Second, 10*time.Millisecond)
	run(t, b, true)
	time.Sleep(200 * time.Millisecond)
	require.False(t, b.IsLeader(), "two leaders")
	stopA()
	<-doneA
	require.False(t, a.IsLeader())
	start := time.Now()
	require.Eventually(t, b.IsLeader, 5*time.Second, 10*time.Millisecond)
	t.Logf("takeover after a shutdown: %v", time.Since(start).Round(time.Millisecond))

	t.Run("LeadersConnectionKilled", func(t *testing.T) {
		c := e.room(t, opts)
		require.NoError(t, c.Load(context.Background()))
		run(t, c, true)
		// The session holding the leader's lock dies (a network cut, a
		// DBA's pg_terminate_backend): b finds out at its next tick, and
		// one of them leads again soon after.
		var killed bool
		require.NoError(t, e.pool.QueryRow(context.Background(), `
			SELECT pg_terminate_backend(pid) FROM pg_locks
			 WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed))
		require.True(t, killed)
		start := time.Now()
		require.Eventually(t, func() bool { return !b.IsLeader() || c.IsLeader() }, 5*time.Second, 5*time.Millisecond)
		require.Eventually(t, func() bool { return b.IsLeader() != c.IsLeader() }, 5*time.Second, 10*time.Millisecond)
		t.Logf("a leader again %v after the kill", time.Since(start).Round(time.Millisecond))
	})
}

// leaseCounter counts the leases a Room takes.
type leaseCounter struct {
	flashline.RoomStore
	leases atomic.Int64
}

func (c *leaseCounter) LeasePositions(ctx context.Context, saleID string, n, preopenTickets int64) (int64, bool, error) {
	c.leases.Add(1)
	return c.RoomStore.LeasePositions(ctx, saleID, n, preopenTickets)
}

// TestPositionsAreGatheredAndConsecutive: 600 customers arrive at once in an
// arrival_order room, half on each of two instances. Every position handed
// out is held (1-600, none twice, none skipped), so each place counts the
// people ahead; and the leases number one per instance and GatherWindow,
// not one per ticket.
func TestPositionsAreGatheredAndConsecutive(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	sale := e.sale(t, flashline.NewSale{Fairness: flashline.FairnessArrivalOrder})
	const customers = 600
	opts := waitroom.Options{TicketsPerMinute: customers}
	counters := []*leaseCounter{{RoomStore: e.store}, {RoomStore: e.store}}
	rooms := []testRoom{e.roomWith(t, opts, salecache.Options{}, counters[0]), e.roomWith(t, opts, salecache.Options{}, counters[1])}
	for _, r := range rooms {
		require.NoError(t, r.Load(ctx))
	}
	positions := make([]int64, customers)
	places := make([]int64, customers)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range customers {
		wg.Go(func() {
			res, err := rooms[i%2].Ticket(ctx, waitroom.TicketRequest{SaleID: sale.ID, CustomerID: fmt.Sprintf("c%03d", i)})
			if !assert.NoError(t, err) {
				return
			}
			positions[i], places[i] = res.Ticket.Position, res.Position
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i := range customers {
		require.Equal(t, positions[i], places[i], "the place is the position: nobody is let in yet")
	}
	slices.Sort(positions)
	for i, p := range positions {
		require.Equal(t, int64(i+1), p, "positions are consecutive")
	}
	next, _, _ := e.roomRow(t, sale.ID)
	require.Equal(t, int64(customers+1), next, "no position leased that nobody holds")
	leases := counters[0].leases.Load() + counters[1].leases.Load()
	windows := int64(elapsed/(20*time.Millisecond)) + 1
	require.LessOrEqual(t, leases, 2*windows, "more than one lease per instance and window")
	t.Logf("%d tickets on two instances in %s: %d leases", customers, elapsed.Round(time.Millisecond), leases)
}

// TestEdgeTicketsReachTheFreezeThroughAnyOrigin: two edges report their
// pre-open tickets to one origin only (a load balancer in front of the
// origins sends each report to one), and another leads the pacer. No count
// is written before the open (the holders are, as heard); the origin that
// heard the reports writes the freshest totals at the open, and the
// leader's freeze commits every holder, N their number (issue 48).
func TestEdgeTicketsReachTheFreezeThroughAnyOrigin(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opens := time.Now().Add(2 * time.Second)
	sale := e.sale(t, flashline.NewSale{Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	heard, leader := e.room(t, waitroom.Options{}), e.room(t, waitroom.Options{})
	require.NoError(t, heard.Load(ctx))
	run(t, heard, false)
	// Each report carries the edge's total and a batch of its holders,
	// those from..n-1 (the crowd committed at the open is its holders).
	report := func(edge string, from, n int64) {
		var holders []string
		for i := from; i < n; i++ {
			holders = append(holders, fmt.Sprintf("%s-%d", edge, i))
		}
		token := keys.SignEdgeReport(roomtoken.EdgeReport{Edge: edge, Preopen: map[string]int64{sale.ID: n},
			Holders: map[string][]string{sale.ID: holders}}, time.Now())
		require.NoError(t, heard.EdgeReport(token))
	}
	report("edge-1", 0, 600)
	report("edge-2", 0, 300)
	report("edge-1", 600, 700) // a later total
	report("edge-2", 0, 250)   // an older one, arriving late
	// The origin that heard them counts them in the places it gives.
	res := ticket(t, heard, sale.ID, "c1", "")
	require.LessOrEqual(t, res.PositionHigh, int64(1000))
	require.Greater(t, res.PositionHigh, int64(1), "the crowd counted is the edges' 1,000")
	var rows int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM waitroom_edge_tickets`).Scan(&rows))
	require.Zero(t, rows, "nothing is written before the open")

	run(t, leader, true)
	require.Eventually(t, func() bool {
		_, preopen, _ := e.roomRow(t, sale.ID)
		return preopen != nil
	}, 10*time.Second, 50*time.Millisecond, "the crowd is frozen")
	_, preopen, _ := e.roomRow(t, sale.ID)
	// 1,000 from the edges and the one ticket the origin gave itself.
	require.Equal(t, int64(1001), *preopen)
}

// laggingSource is the database as a FactSource whose reads of the sale
// lagged say the database's clock is lag behind: what an edge takes from an
// origin whose estimate lags (its read took long, or its document was
// signed a moment before it was sent).
type laggingSource struct {
	*postgres.Store
	lagged string
	lag    time.Duration
}

func (s laggingSource) SaleFacts(ctx context.Context, saleID string) ([]flashline.SaleFacts, error) {
	rows, err := s.Store.SaleFacts(ctx, saleID)
	if saleID == s.lagged {
		for i := range rows {
			rows[i].DBNow = rows[i].DBNow.Add(-s.lag)
		}
	}
	return rows, err
}

// TestNoPreopenTicketOnceTheOpenIsKnown: a room whose clock estimate
// stepped back behind an open it already knows of (a later read said the
// clock was behind) gives tickets after the open, not drawn pre-open ones,
// as its policy already reveals the seed; and a room that knows its crowd
// frozen never draws a ticket, whatever its clock says. Before, both were
// signed pre-open: late arrivals through an edge placed by the draw, not
// counted in the frozen crowd (issue 43's TestEdgesTicketsAndAdmissions).
func TestNoPreopenTicketOnceTheOpenIsKnown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	newRoom := func(src flashline.FactSource) testRoom {
		cache := salecache.New(src, salecache.Options{RefreshInterval: time.Hour, StaleAfter: time.Hour})
		return testRoom{Room: waitroom.NewRoom(cache, e.store, keys, capacity{limit: 20}, waitroom.Options{}), cache: cache}
	}
	lateTicket := func(t *testing.T, r testRoom, saleID string) {
		t.Helper()
		res := ticket(t, r, saleID, "late-arrival", "")
		require.False(t, res.Ticket.PreOpen, "a ticket after the open placed by the draw: %+v", res.Ticket)
	}

	t.Run("ClockSteppedBack", func(t *testing.T) {
		sale := e.sale(t, flashline.NewSale{OpensAt: later()})
		other := e.sale(t, flashline.NewSale{OpensAt: later()})
		_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
		require.NoError(t, err)
		// Past the moment the crowd freezes (none has taken a lease yet):
		// any ticket from now on is placed after the crowd.
		require.Eventually(t, func() bool {
			var past bool
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT opens_at <= now() - interval '250 milliseconds' FROM sales WHERE sale_id = $1`, sale.ID).Scan(&past))
			return past
		}, 10*time.Second, 20*time.Millisecond)
		r := newRoom(laggingSource{Store: e.store, lagged: other.ID, lag: time.Minute})
		_, _, err = r.cache.Sale(ctx, sale.ID) // read at the database's clock, after the open
		require.NoError(t, err)
		_, _, err = r.cache.Sale(ctx, other.ID) // read later, saying the clock is a minute behind
		require.NoError(t, err)
		p, err := r.Policy(ctx, sale.ID)
		require.NoError(t, err)
		require.NotEmpty(t, p.Draw.Seed, "the policy knows the sale opened")
		lateTicket(t, r, sale.ID)
	})
	t.Run("CrowdFrozen", func(t *testing.T) {
		sale := e.sale(t, flashline.NewSale{OpensAt: later()})
		_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
		require.NoError(t, err)
		// The first lease a quarter second after the open freezes the crowd.
		require.Eventually(t, func() bool {
			_, preOpen, err := e.store.LeasePositions(ctx, sale.ID, 1, 0)
			return err == nil && !preOpen
		}, 10*time.Second, 50*time.Millisecond)
		r := newRoom(laggingSource{Store: e.store, lagged: sale.ID, lag: time.Minute})
		s, _, err := r.cache.Sale(ctx, sale.ID)
		require.NoError(t, err)
		require.GreaterOrEqual(t, s.Room.PreopenCount, int64(0), "the facts say the crowd is frozen")
		lateTicket(t, r, sale.ID)
	})
}

// TestAdmissionIsGivenAgainOnlyWithinItsLife: an admitted ticket that polls
// again gets a fresh admission token while its admission lives
// (AdmissionTTL from its turn), and none after: it is refused
// admission_invalid, and takes a new ticket. (Before, it was admitted again
// for its ticket's whole day.) A pause starts its admission's life again.
func TestAdmissionIsGivenAgainOnlyWithinItsLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	r := e.room(t, waitroom.Options{Tick: 20 * time.Millisecond, LeaderRetry: 50 * time.Millisecond, AdmissionTTL: 2 * time.Minute, Now: now})
	sale := e.sale(t, flashline.NewSale{})
	_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	run(t, r, true)
	tk := ticket(t, r, sale.ID, "alice", "")
	require.Eventually(t, func() bool {
		return status(t, r, sale.ID, "alice", tk.Token, "").State == waitroom.StatusAdmitted
	}, 10*time.Second, 20*time.Millisecond)

	// A minute later, its admission still lives: admitted again.
	offset.Store(int64(time.Minute))
	st := status(t, r, sale.ID, "alice", tk.Token, "")
	require.Equal(t, waitroom.StatusAdmitted, st.State)
	require.NotEmpty(t, st.AdmissionToken)

	// Past its life: no fresh admission token.
	offset.Store(int64(2*time.Minute + 5*time.Second))
	_, err = r.Status(ctx, sale.ID, "alice", tk.Token, "")
	require.ErrorIs(t, err, flashline.ErrAdmissionInvalid)
	_, ok := r.StatusFromMemory(sale.ID, "alice", tk.Token, "")
	require.False(t, ok)

	// Another ticket admitted now is admitted; a pause gives it (and
	// every admitted ticket) a new life from the moment it was seen.
	bob := ticket(t, r, sale.ID, "bob", "")
	require.Eventually(t, func() bool {
		return status(t, r, sale.ID, "bob", bob.Token, "").State == waitroom.StatusAdmitted
	}, 10*time.Second, 20*time.Millisecond)
	_, err = e.store.SetSaleState(ctx, sale.ID, flashline.ActionPause)
	require.NoError(t, err)
	require.NoError(t, r.Load(ctx))
	offset.Store(int64(4 * time.Minute))
	require.Equal(t, waitroom.StatusWaiting, status(t, r, sale.ID, "bob", bob.Token, "").State)
	_, err = e.store.SetSaleState(ctx, sale.ID, flashline.ActionResume)
	require.NoError(t, err)
	require.NoError(t, r.Load(ctx))
	offset.Store(int64(5 * time.Minute))
	require.Equal(t, waitroom.StatusAdmitted, status(t, r, sale.ID, "bob", bob.Token, "").State)
	offset.Store(int64(6*time.Minute + 5*time.Second))
	_, err = r.Status(ctx, sale.ID, "bob", bob.Token, "")
	require.ErrorIs(t, err, flashline.ErrAdmissionInvalid)
}

// TestAdmissionOfATicketArrivingAfterItsTurn: the pacer admits at its pace
// whether or not the line is that long, so a ticket may arrive to find its
// rank admitted already. Its admission lives from its arrival, not from when
// the watermark passed its rank (TestAdmissionIsGivenAgainOnlyWithinItsLife
// failed so on a busy machine: bob, ticketed after the clock moved on, was
// refused as if his turn had come and gone).
func TestAdmissionOfATicketArrivingAfterItsTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	r := e.roomWith(t, waitroom.Options{AdmissionTTL: 2 * time.Minute, Now: now}, salecache.Options{StaleAfter: time.Hour}, e.store)
	sale := e.sale(t, flashline.NewSale{})
	_, err := e.store.SetSaleState(ctx, sale.ID, flashline.ActionOpen)
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // past the open's quarter second: placed by arrival
	// Admitted further than the line is long.
	_, err = e.pool.Exec(ctx, `UPDATE waiting_rooms SET admitted_through = 10 WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	require.NoError(t, r.Load(ctx))
	alice := ticket(t, r, sale.ID, "alice", "")
	require.Equal(t, waitroom.StatusAdmitted, status(t, r, sale.ID, "alice", alice.Token, "").State)

	// Longer than an admission lives: alice's turn came and went; bob,
	// arriving now to a turn already come, is admitted.
	offset.Store(int64(2*time.Minute + 5*time.Second))
	_, err = r.Status(ctx, sale.ID, "alice", alice.Token, "")
	require.ErrorIs(t, err, flashline.ErrAdmissionInvalid)
	bob := ticket(t, r, sale.ID, "bob", "")
	st := status(t, r, sale.ID, "bob", bob.Token, "")
	require.Equal(t, waitroom.StatusAdmitted, st.State)
	require.NotEmpty(t, st.AdmissionToken)
}

// TestEdgeQueueCountsWrittenOnce: two origins hear the same reports of an
// edge's counts of a line (an edge sends each to every origin); each writes
// the edge's row, as of the report's signing: the row holds the latest
// report's counts, an older report heard late never replaces them, and a
// report whose run is not a name is refused.
func TestEdgeQueueCountsWrittenOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opens := time.Now().Add(time.Hour)
	sale := e.sale(t, flashline.NewSale{Fairness: flashline.FairnessArrivalOrder, OpensAt: &opens})
	origins := []testRoom{e.room(t, waitroom.Options{}), e.room(t, waitroom.Options{})}
	pctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	for i, o := range origins {
		require.NoError(t, o.Load(ctx))
		go func() { _ = o.RunQueuePublisher(pctx, e.store, fmt.Sprintf("origin-%d", i), slog.Default()) }()
	}
	counts := func(arrivals int64) json.RawMessage {
		c := flashline.NewQueueCounts()
		c.Arrivals = arrivals
		b, err := json.Marshal(c)
		require.NoError(t, err)
		return b
	}
	report := func(arrivals int64, at time.Time) string {
		return keys.SignEdgeReport(roomtoken.EdgeReport{Edge: "edge-1", Run: "r1", Queue: map[string]json.RawMessage{sale.ID: counts(arrivals)}}, at)
	}
	row := func() (arrivals int64) {
		var b []byte
		if err := e.pool.QueryRow(ctx, `SELECT counts FROM console_queues WHERE sale_id = $1 AND instance = 'edge/edge-1/r1'`, sale.ID).Scan(&b); err != nil {
			return -1
		}
		c, err := flashline.DecodeQueueCounts(b)
		require.NoError(t, err)
		return c.Arrivals
	}
	now := time.Now()
	older, newer := report(5, now.Add(-time.Second)), report(7, now)
	for _, o := range origins {
		require.NoError(t, o.EdgeReport(newer))
	}
	require.Eventually(t, func() bool { return row() == 7 }, 10*time.Second, 50*time.Millisecond, "the edge's row is written")
	// The older report, heard late by one origin: its write changes nothing.
	require.NoError(t, origins[1].EdgeReport(older))
	fresh := testRoom{Room: waitroom.NewRoom(origins[1].cache, e.store, keys, capacity{limit: 20}, waitroom.Options{})}
	require.NoError(t, fresh.EdgeReport(older))
	require.NoError(t, fresh.RunQueuePublisher(timeoutCtx(t, 2500*time.Millisecond), e.store, "origin-late", slog.Default()))
	require.EqualValues(t, 7, row())

	bad := keys.SignEdgeReport(roomtoken.EdgeReport{Edge: "edge-1", Run: "no/slash", Queue: map[string]json.RawMessage{sale.ID: counts(1)}}, now)
	require.ErrorIs(t, origins[0].EdgeReport(bad), flashline.ErrAdmissionInvalid)
}

// timeoutCtx is a context done after d, or when the test ends.
func timeoutCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestEdgeHoldersReachTheCommittedCrowd (issue 48): an edge's pre-open
// holders ride on its report, and whichever origin hears it writes them
// before it answers; the same batch heard by two origins, or twice, is one
// row each; the crowd committed at the open holds them; a batch after the
// freeze is answered written (the edge forgets it) and left out; a batch
// out of bounds is refused whole.
func TestEdgeHoldersReachTheCommittedCrowd(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	opens := time.Now().Add(2 * time.Second)
	sale := e.sale(t, flashline.NewSale{Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	origins := []testRoom{e.room(t, waitroom.Options{}), e.room(t, waitroom.Options{})}
	for _, o := range origins {
		require.NoError(t, o.Load(ctx))
	}
	sync := func(o testRoom, edge string, holders ...string) (bool, error) {
		token := keys.SignEdgeReport(roomtoken.EdgeReport{Edge: edge, Preopen: map[string]int64{sale.ID: int64(len(holders))},
			Holders: map[string][]string{sale.ID: holders}}, time.Now())
		return o.EdgeSync(ctx, token)
	}
	holders := func() (n int64) {
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM waitroom_holders WHERE sale_id = $1`, sale.ID).Scan(&n))
		return n
	}
	for _, o := range origins {
		for range 2 {
			written, err := sync(o, "edge-1", "e1-a", "e1-b", "e1-c")
			require.NoError(t, err)
			require.True(t, written)
		}
	}
	written, err := sync(origins[1], "edge-2", "e2-a", "e2-b")
	require.NoError(t, err)
	require.True(t, written)
	require.Equal(t, int64(5), holders(), "each holder once, whichever origins heard it")

	tooMany := make([]string, roomtoken.MaxReportedHolders+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("many-%d", i)
	}
	for name, batch := range map[string][]string{"TooMany": tooMany, "Empty": {""}, "Long": {strings.Repeat("x", flashline.MaxCustomerIDLen+1)}} {
		_, err := sync(origins[0], "edge-3", batch...)
		require.ErrorIs(t, err, flashline.ErrAdmissionInvalid, name)
	}
	require.Equal(t, int64(5), holders(), "a batch refused writes nothing")

	run(t, origins[0], true)
	require.Eventually(t, func() bool {
		_, preopen, _ := e.roomRow(t, sale.ID)
		return preopen != nil
	}, 10*time.Second, 50*time.Millisecond, "the crowd is frozen")
	crowd, err := e.store.Crowd(ctx, sale.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"e1-a", "e1-b", "e1-c", "e2-a", "e2-b"}, crowd.Holders)
	require.Equal(t, int64(5), crowd.HolderCount)

	// After the freeze, whether or not the origin's cache has heard of it.
	written, err = sync(origins[1], "edge-2", "late")
	require.NoError(t, err)
	require.True(t, written, "a batch after the freeze is never written: the edge forgets it")
	require.Equal(t, int64(5), holders(), "nothing is written after the freeze")
}
