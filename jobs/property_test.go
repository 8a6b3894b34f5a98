package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/postgres"
)

// TestReservationLifecycleProperty runs random sequences of reserve, confirm,
// cancel, age (expires_at moved into the past, no sweep yet), expire (age,
// then sweep), retry (the same idempotency key again), and the day after:
// payment events (succeeded, with the order's payment or another; failed;
// refunded; each sometimes delivered twice) and voids, against one sale
// confirmed by its customers or by payment. After every step it checks the
// store against a model: the outcome of each call, each bucket's stock, and
// available + pending + confirmed == initial with the ledger agreeing (voided
// units back in stock, neither pending nor confirmed). Every rapid check gets
// a new sale in the same database.
func TestReservationLifecycleProperty(t *testing.T) {
	t.Parallel()
	store, pool := newStore(t)
	rapid.Check(t, func(rt *rapid.T) {
		m := newLifecycle(rt, store, pool)
		rt.Repeat(map[string]func(*rapid.T){
			"reserve": m.reserve,
			"retry":   m.retry,
			"confirm": m.confirm,
			"cancel":  m.cancel,
			"age":     m.age,
			"expire":  m.expire,
			"pay":     m.pay,
			"fail":    m.fail,
			"refund":  m.refund,
			"void":    m.void,
			"":        m.check,
		})
	})
}

// lifecycle is the model of one sale: what each bucket holds and where each
// reservation stands.
type lifecycle struct {
	store     *postgres.Store
	pool      *pgxpool.Pool
	sale      flashline.Sale
	customers []string
	avail     []int // per bucket
	res       []*modelReservation
	attempts  []*attempt
	keys      int
	events    []*modelEvent
	// late are the late payments, by reservation and payment reference:
	// true once refunded.
	late map[[2]string]bool
	// Payments (reservation, payment reference) whose refund was applied:
	// a success of the same payment delivered after its refund has no
	// effect, the money being back with the customer already.
	refunded map[[2]string]bool
}

type modelReservation struct {
	id, customer string
	qty, bucket  int
	state        flashline.ReservationState
	aged         bool // expires_at is in the past
	orderID      string
	paidBy       string // the payment reference that confirmed it
}

// modelEvent is a payment event delivered once, and what it did.
type modelEvent struct {
	ev  flashline.PaymentEvent
	res flashline.PaymentResult
}

// attempt is one reserve request; body is its stored answer once it
// succeeded, replayed for any retry with the same key.
type attempt struct {
	customer, key string
	qty           int
	body          []byte
}

func newLifecycle(t *rapid.T, store *postgres.Store, pool *pgxpool.Pool) *lifecycle {
	stock := rapid.IntRange(1, 6).Draw(t, "stock")
	sale := createSale(t, store, flashline.NewSale{
		SKU:              "prop",
		InitialStock:     stock,
		PerCustomerLimit: rapid.IntRange(1, 3).Draw(t, "limit"),
		Buckets:          rapid.IntRange(1, min(3, stock)).Draw(t, "buckets"),
		Confirmation:     rapid.SampledFrom([]flashline.Confirmation{flashline.ConfirmByCustomer, flashline.ConfirmByPayment}).Draw(t, "confirmation"),
	})
	m := &lifecycle{store: store, pool: pool, sale: sale, late: map[[2]string]bool{}, refunded: map[[2]string]bool{}}
	// Idempotency keys are scoped per customer, across sales: customers of
	// this sale are its own.
	for _, name := range []string{"ann", "bob", "cat"} {
		m.customers = append(m.customers, name+"-"+sale.ID)
	}
	m.avail = m.bucketStock(t)
	sum := 0
	for _, q := range m.avail {
		sum += q
	}
	require.Equal(t, stock, sum)
	return m
}

func (m *lifecycle) reserve(t *rapid.T) {
	m.keys++
	a := &attempt{
		customer: rapid.SampledFrom(m.customers).Draw(t, "customer"),
		key:      fmt.Sprintf("key-%d", m.keys),
		qty:      rapid.IntRange(1, m.sale.PerCustomerLimit+1).Draw(t, "qty"),
	}
	m.attempts = append(m.attempts, a)
	m.try(t, a, a.qty)
}

// retry sends an earlier request again with the same key: a stored answer is
// replayed byte for byte (or refused if the body differs); a request that
// failed is simply tried again.
func (m *lifecycle) retry(t *rapid.T) {
	if len(m.attempts) == 0 {
		t.Skip("nothing to retry")
	}
	a := rapid.SampledFrom(m.attempts).Draw(t, "attempt")
	qty := a.qty
	if a.body != nil && rapid.Bool().Draw(t, "different body") {
		qty++
	}
	m.try(t, a, qty)
}

func (m *lifecycle) try(t *rapid.T, a *attempt, qty int) {
	ctx := context.Background()
	got, err := m.store.Reserve(ctx, reserveReq(m.sale.ID, a.customer, a.key, qty))
	switch {
	case a.body != nil && qty != a.qty:
		require.ErrorIs(t, err, flashline.ErrIdempotencyKeyReused)
	case a.body != nil:
		require.NoError(t, err)
		require.True(t, got.Replayed)
		require.NotEmpty(t, got.Receipt)
		require.Equal(t, string(a.body), string(got.Receipt), "a retry returns the same body")
	case qty > m.sale.PerCustomerLimit:
		require.ErrorIs(t, err, flashline.ErrQuantityAboveLimit)
	case m.holds(a.customer):
		require.ErrorIs(t, err, flashline.ErrLimitReached)
	case !slices.ContainsFunc(m.avail, func(q int) bool { return q >= qty }):
		require.ErrorIs(t, err, flashline.ErrSoldOut)
	default:
		require.NoError(t, err)
		require.NotEmpty(t, got.Receipt)
		require.False(t, got.Replayed)
		r := &modelReservation{id: reservationID(t, got.Receipt), customer: a.customer, qty: qty, state: flashline.ReservationPending}
		var state flashline.ReservationState
		var dbQty int
		require.NoError(t, m.pool.QueryRow(ctx, `SELECT bucket, quantity, state FROM reservations WHERE reservation_id = $1`, r.id).
			Scan(&r.bucket, &dbQty, &state))
		require.Equal(t, qty, dbQty)
		require.Equal(t, flashline.ReservationPending, state)
		require.GreaterOrEqual(t, m.avail[r.bucket], qty, "reserved from bucket %d holding %d", r.bucket, m.avail[r.bucket])
		m.avail[r.bucket] -= qty
		m.res = append(m.res, r)
		a.body = got.Receipt
	}
}

// holds reports whether the customer has an active (pending or confirmed)
// reservation; one that is past expires_at but not yet swept still counts.
func (m *lifecycle) holds(customer string) bool {
	return slices.ContainsFunc(m.res, func(r *modelReservation) bool {
		return r.customer == customer && (r.state == flashline.ReservationPending || r.state == flashline.ReservationConfirmed)
	})
}

func (m *lifecycle) pick(t *rapid.T, label string, keep func(*modelReservation) bool) *modelReservation {
	var candidates []*modelReservation
	for _, r := range m.res {
		if keep(r) {
			candidates = append(candidates, r)
		}
	}
	if len(candidates) == 0 {
		t.Skip("no reservation to " + label)
	}
	return rapid.SampledFrom(candidates).Draw(t, label)
}

func anyReservation(*modelReservation) bool { return true }

func (m *lifecycle) confirm(t *rapid.T) {
	r := m.pick(t, "confirm", anyReservation)
	got, err := m.store.Confirm(context.Background(), r.id, flashline.Actor{CustomerID: r.customer})
	switch {
	case r.state == flashline.ReservationPending && !r.aged && m.sale.Confirmation == flashline.ConfirmByPayment:
		require.ErrorIs(t, err, flashline.ErrPaymentRequired, "a payment sale's customer cannot confirm")
	case r.state == flashline.ReservationPending && !r.aged:
		require.NoError(t, err)
		require.Equal(t, flashline.ReservationConfirmed, got.State)
		require.NotEmpty(t, got.OrderID)
		r.state, r.orderID = flashline.ReservationConfirmed, got.OrderID
	case r.state == flashline.ReservationPending: // past expires_at, not swept
		require.ErrorIs(t, err, flashline.ErrReservationExpired)
	case r.state == flashline.ReservationConfirmed:
		require.NoError(t, err)
		require.Equal(t, r.orderID, got.OrderID, "confirming again returns the same order")
	case r.state == flashline.ReservationExpired:
		require.ErrorIs(t, err, flashline.ErrReservationExpired)
	case r.state == flashline.ReservationCancelled:
		require.ErrorIs(t, err, flashline.ErrReservationCancelled)
	case r.state == flashline.ReservationVoided:
		require.ErrorIs(t, err, flashline.ErrReservationVoided)
	}
}

// deliver sends a payment event about r, or (sometimes) one delivered before
// again, which must answer the first outcome and change nothing.
func (m *lifecycle) deliver(t *rapid.T, typ flashline.PaymentEventType, r *modelReservation, ref string) (flashline.PaymentResult, bool) {
	if len(m.events) > 0 && rapid.IntRange(0, 3).Draw(t, "redeliver") == 0 {
		old := rapid.SampledFrom(m.events).Draw(t, "event")
		got, err := m.store.ApplyPaymentEvent(context.Background(), old.ev)
		require.NoError(t, err)
		require.True(t, got.Replayed, "event %s delivered again", old.ev.ID)
		require.Equal(t, old.res.Outcome, got.Outcome)
		require.Equal(t, old.res.OrderID, got.OrderID)
		return got, false
	}
	m.keys++
	ev := flashline.PaymentEvent{ID: fmt.Sprintf("evt_%s_%d", m.sale.ID, m.keys), Type: typ, ReservationID: r.id, PaymentReference: ref}
	ev.Hash = []byte(ev.ID + string(typ) + ref)
	got, err := m.store.ApplyPaymentEvent(context.Background(), ev)
	require.NoError(t, err)
	require.False(t, got.Replayed)
	m.events = append(m.events, &modelEvent{ev: ev, res: got})
	return got, true
}

// pay: payment.succeeded with the reservation's own payment, or another.
func (m *lifecycle) pay(t *rapid.T) {
	r := m.pick(t, "pay", anyReservation)
	ref := "pay_" + r.id
	if rapid.Bool().Draw(t, "another payment") {
		ref = "pay2_" + r.id
	}
	got, fresh := m.deliver(t, flashline.PaymentSucceeded, r, ref)
	if !fresh {
		return
	}
	if m.refunded[[2]string{r.id, ref}] {
		require.Equal(t, flashline.OutcomeNoEffect, got.Outcome, "payment %s after its refund", ref)
		return
	}
	late := func() {
		key := [2]string{r.id, ref}
		if _, known := m.late[key]; known {
			// The same payment, announced by another event: recorded once.
			require.Equal(t, flashline.OutcomeNoEffect, got.Outcome, "payment %s again", ref)
			return
		}
		require.Equal(t, flashline.OutcomeLatePayment, got.Outcome, "payment for a %s hold (aged %v)", r.state, r.aged)
		m.late[key] = false
	}
	switch {
	case r.state == flashline.ReservationPending && !r.aged:
		require.Equal(t, flashline.OutcomeConfirmed, got.Outcome)
		require.NotEmpty(t, got.OrderID)
		r.state, r.orderID, r.paidBy = flashline.ReservationConfirmed, got.OrderID, ref
	case r.state == flashline.ReservationConfirmed && r.paidBy == ref:
		require.Equal(t, flashline.OutcomeAlreadyConfirmed, got.Outcome)
		require.Equal(t, r.orderID, got.OrderID)
	case r.state == flashline.ReservationVoided && r.paidBy == ref:
		require.Equal(t, flashline.OutcomeNoEffect, got.Outcome)
	default: // expired (swept or not), cancelled, voided, or paid by another payment
		late()
	}
}

// fail: payment.failed cancels a pending hold, aged or not; nothing else.
func (m *lifecycle) fail(t *rapid.T) {
	r := m.pick(t, "fail", anyReservation)
	got, fresh := m.deliver(t, flashline.PaymentFailed, r, "")
	if !fresh {
		return
	}
	if r.state == flashline.ReservationPending {
		require.Equal(t, flashline.OutcomeCancelled, got.Outcome)
		m.avail[r.bucket] += r.qty
		r.state = flashline.ReservationCancelled
		return
	}
	require.Equal(t, flashline.OutcomeNoEffect, got.Outcome)
}

// refund: refund.succeeded of the order's payment voids it; of a late
// payment, records it refunded.
func (m *lifecycle) refund(t *rapid.T) {
	r := m.pick(t, "refund", anyReservation)
	ref := "pay_" + r.id
	if rapid.Bool().Draw(t, "another payment") {
		ref = "pay2_" + r.id
	}
	got, fresh := m.deliver(t, flashline.RefundSucceeded, r, ref)
	if !fresh {
		return
	}
	m.refunded[[2]string{r.id, ref}] = true
	switch {
	case r.state == flashline.ReservationConfirmed && (r.paidBy == "" || r.paidBy == ref):
		require.Equal(t, flashline.OutcomeVoided, got.Outcome)
		m.avail[r.bucket] += r.qty
		r.state = flashline.ReservationVoided
	case m.isLate(r.id, ref):
		require.Equal(t, flashline.OutcomeRefundRecorded, got.Outcome)
		m.late[[2]string{r.id, ref}] = true
	default:
		require.Equal(t, flashline.OutcomeNoEffect, got.Outcome)
	}
}

// isLate: a late payment not refunded yet.
func (m *lifecycle) isLate(id, ref string) bool {
	refunded, known := m.late[[2]string{id, ref}]
	return known && !refunded
}

// void: an operator voids an order.
func (m *lifecycle) void(t *rapid.T) {
	r := m.pick(t, "void", anyReservation)
	got, err := m.store.Void(context.Background(), r.id, "automation pattern", "prop-test")
	switch r.state {
	case flashline.ReservationConfirmed, flashline.ReservationVoided:
		require.NoError(t, err)
		require.Equal(t, flashline.ReservationVoided, got.State)
		require.Equal(t, r.orderID, got.OrderID, "the voided order keeps its id")
		if r.state == flashline.ReservationConfirmed {
			m.avail[r.bucket] += r.qty
			r.state = flashline.ReservationVoided
		}
	case flashline.ReservationPending:
		require.ErrorIs(t, err, flashline.ErrReservationNotConfirmed)
	case flashline.ReservationExpired:
		require.ErrorIs(t, err, flashline.ErrReservationExpired)
	case flashline.ReservationCancelled:
		require.ErrorIs(t, err, flashline.ErrReservationCancelled)
	}
}

func (m *lifecycle) cancel(t *rapid.T) {
	r := m.pick(t, "cancel", anyReservation)
	got, err := m.store.Cancel(context.Background(), r.id, flashline.Actor{CustomerID: r.customer})
	switch r.state {
	case flashline.ReservationPending, flashline.ReservationCancelled:
		require.NoError(t, err)
		require.Equal(t, flashline.ReservationCancelled, got.State)
		if r.state == flashline.ReservationPending {
			m.avail[r.bucket] += r.qty
			r.state = flashline.ReservationCancelled
		}
	case flashline.ReservationExpired:
		require.ErrorIs(t, err, flashline.ErrReservationExpired)
	case flashline.ReservationConfirmed:
		require.ErrorIs(t, err, flashline.ErrReservationConfirmed)
	case flashline.ReservationVoided:
		require.ErrorIs(t, err, flashline.ErrReservationVoided)
	}
}

// age moves a pending reservation's expires_at into the past, as time would,
// without sweeping.
func (m *lifecycle) age(t *rapid.T) {
	r := m.pick(t, "age", func(r *modelReservation) bool { return r.state == flashline.ReservationPending && !r.aged })
	m.ageOne(t, r)
}

func (m *lifecycle) ageOne(t *rapid.T, r *modelReservation) {
	tag, err := m.pool.Exec(context.Background(),
		`UPDATE reservations SET expires_at = now() - interval '1 second' WHERE reservation_id = $1`, r.id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
	r.aged = true
}

// expire ages a pending reservation (if there is one) and sweeps: exactly the
// pending reservations past their time come back.
func (m *lifecycle) expire(t *rapid.T) {
	pending := slices.DeleteFunc(slices.Clone(m.res), func(r *modelReservation) bool { return r.state != flashline.ReservationPending || r.aged })
	if len(pending) > 0 {
		m.ageOne(t, rapid.SampledFrom(pending).Draw(t, "expire"))
	}
	expired, err := m.store.ExpireDue(context.Background(), 1000)
	require.NoError(t, err)
	var got, want []string
	for _, e := range expired {
		// Earlier checks' sales may leave aged reservations behind.
		if e.SaleID == m.sale.ID {
			got = append(got, e.ReservationID)
		}
	}
	for _, r := range m.res {
		if r.state == flashline.ReservationPending && r.aged {
			want = append(want, r.id)
			m.avail[r.bucket] += r.qty
			r.state = flashline.ReservationExpired
		}
	}
	require.ElementsMatch(t, want, got)
}

// check runs after every step.
func (m *lifecycle) check(t *rapid.T) {
	sale := requireInvariant(t, m.store, m.sale.ID)
	units := map[flashline.ReservationState]int{}
	for _, r := range m.res {
		units[r.state] += r.qty
	}
	sum := 0
	for _, q := range m.avail {
		sum += q
	}
	require.Equal(t, []int{sum, units[flashline.ReservationPending], units[flashline.ReservationConfirmed],
		units[flashline.ReservationExpired], units[flashline.ReservationCancelled], units[flashline.ReservationVoided]},
		[]int{sale.Available, sale.Pending, sale.Confirmed, sale.Expired, sale.Cancelled, sale.Voided},
		"available, pending, confirmed, expired, cancelled, voided")
	var late int
	require.NoError(t, m.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM late_payments WHERE sale_id = $1 AND refunded_at IS NULL`, m.sale.ID).Scan(&late))
	toRefund := 0
	for _, refunded := range m.late {
		if !refunded {
			toRefund++
		}
	}
	require.Equal(t, toRefund, late, "late payments to refund")
	require.Equal(t, m.avail, m.bucketStock(t), "stock per bucket")
	requireRestockedOnce(t, m.pool, m.sale.ID)
}

func (m *lifecycle) bucketStock(t tb) []int {
	rows, err := m.pool.Query(context.Background(), `SELECT quantity FROM stock WHERE sale_id = $1 ORDER BY bucket`, m.sale.ID)
	require.NoError(t, err)
	q, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return q
}

// tb is what the helpers need of a *testing.T or a *rapid.T.
type tb interface {
	require.TestingT
	Helper()
}

var (
	_ tb = (*testing.T)(nil)
	_ tb = (*rapid.T)(nil)
)
