package waitroom

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestOutstandingAgesOut: admissions given out long ago and never used stop
// holding the pacer back; a new leader (no history) is conservative.
func TestOutstandingAgesOut(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	window := time.Minute
	h := &roomHistory{}
	// A leader that has just started knows nothing of the past: admitted
	// minus reserved.
	require.Equal(t, int64(70), h.outstanding(start, start, 100, 30, window))
	for s := range 120 {
		h.record(start.Add(time.Duration(s)*time.Second), int64(100+s), window)
	}
	now := start.Add(119 * time.Second)
	// 60 s ago the watermark was 159; 219 now: 60 given out lately, of which
	// at most admitted − reserved are unused.
	require.Equal(t, int64(60), h.outstanding(now, start, 219, 30, window))
	require.Equal(t, int64(9), h.outstanding(now, start, 219, 210, window))
	require.Equal(t, int64(0), h.outstanding(now, start, 219, 300, window))
	require.LessOrEqual(t, len(h.marks), 62, "history is trimmed to the window")
	for i := range h.marks[1:] {
		require.True(t, h.marks[i+1].at.After(h.marks[i].at), fmt.Sprint(i))
	}
}

// TestPollAfter: a ticket the pacer may reach at its next tick asks again
// within about a second, and before the open just after it; one beyond
// reach keeps the interval of its wait.
func TestPollAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	opens := now.Add(5 * time.Second)
	open := flashline.SaleFacts{Available: 100, Room: flashline.RoomFacts{AdmittedThrough: 50}}
	scheduled := flashline.SaleFacts{Available: 100, OpensAt: &opens}
	reach := int64(OutstandingFactor*100 + OutstandingFloor)
	for range 200 {
		d := pollAfter(open, reach, 300, now)
		require.True(t, d >= 700*time.Millisecond && d <= 1300*time.Millisecond, "within reach after the open: %v", d)
		d = pollAfter(open, reach+1, 300, now)
		require.True(t, d >= 2100*time.Millisecond && d <= 3900*time.Millisecond, "just beyond reach after the open: within the floor, %v", d)
		d = pollAfter(open, reach+20000, 300, now)
		require.True(t, d >= 7000*time.Millisecond && d <= 13000*time.Millisecond, "20,000 beyond: the poll budget's 10 s, %v", d)
		d = pollAfter(open, reach+100000, 3000, now)
		require.True(t, d >= 10500*time.Millisecond && d <= 19500*time.Millisecond, "far beyond: the usual 15 s, %v", d)
		d = pollAfter(scheduled, 10, 300, now)
		require.True(t, d >= 5300*time.Millisecond && d <= 6300*time.Millisecond, "within reach before the open: just after it, %v", d)
		d = pollAfter(scheduled, reach+1, 300, now)
		require.True(t, d >= 7100*time.Millisecond && d <= 8900*time.Millisecond, "beyond reach before the open: 3 s after it, %v", d)
		far := now.Add(time.Hour)
		d = pollAfter(flashline.SaleFacts{Available: 100, OpensAt: &far}, 10, 3600, now)
		require.True(t, d >= 10500*time.Millisecond && d <= 19500*time.Millisecond, "an open an hour away: the usual interval, %v", d)
		d = pollAfter(flashline.SaleFacts{SoldOut: true, Room: flashline.RoomFacts{AdmittedThrough: 50}}, 10, 300, now)
		require.True(t, d >= 10500*time.Millisecond, "sold out: nothing to reach, %v", d)
	}
}

// pacerRooms is a PacerStore over rooms held in memory.
type pacerRooms struct{ rooms []flashline.PacerRoom }

func (p *pacerRooms) PaceInputs(context.Context) ([]flashline.PacerRoom, error) {
	return append([]flashline.PacerRoom(nil), p.rooms...), nil
}

func (p *pacerRooms) Advance(_ context.Context, saleID string, target int64, _ float64) (int64, bool, error) {
	for i := range p.rooms {
		if r := &p.rooms[i]; r.SaleID == saleID && target > r.AdmittedThrough {
			r.AdmittedThrough = target
			return target, true, nil
		}
	}
	return 0, false, nil
}

func (p *pacerRooms) Ping(context.Context) error { return nil }

type headroom struct{}

func (headroom) Limit() int64           { return 1000 }
func (headroom) InFlight() int64        { return 0 }
func (headroom) Latency() time.Duration { return 0 }

// TestVariantSaleAdmissionsHaveLongerToBeUsed: admissions of a sale with
// variants count as outstanding for VariantUseWindow (60 s by default)
// rather than UseWindow (20 s): its shoppers choose a variant before they
// reserve, and counting them abandoned at 20 s would admit more shoppers
// than the units left serve. Those of a sale without variants age out at
// 20 s as before; a reservation uses an admission at once in both; the
// variant sale's unused admissions age out too, later.
func TestVariantSaleAdmissionsHaveLongerToBeUsed(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := start
	r := &Room{capacity: headroom{}, opts: Options{Now: func() time.Time { return now }}}
	r.opts.setDefaults()
	require.Equal(t, 20*time.Second, r.opts.UseWindow)
	require.Equal(t, 60*time.Second, r.opts.VariantUseWindow)
	room := func(id string, variants bool) flashline.PacerRoom {
		return flashline.PacerRoom{SaleID: id, State: flashline.StateOpen, Available: 10, NextPosition: 10_000, Variants: variants}
	}
	db := &pacerRooms{rooms: []flashline.PacerRoom{room("plain", false), room("variants", true)}}
	p := newPacerState()
	at := func(d time.Duration) (plain, variants int64) {
		now = start.Add(d)
		require.NoError(t, r.tick(context.Background(), db, p))
		return db.rooms[0].AdmittedThrough, db.rooms[1].AdmittedThrough
	}
	bound := int64(OutstandingFactor*10 + OutstandingFloor) // 28 outstanding at most

	plain, variants := at(0)
	require.Equal(t, [2]int64{bound, bound}, [2]int64{plain, variants}, "the first tick admits up to the bound")
	plain, variants = at(10 * time.Second)
	require.Equal(t, [2]int64{bound, bound}, [2]int64{plain, variants}, "none used, none aged out: nobody more")
	plain, variants = at(30 * time.Second)
	require.Equal(t, 2*bound, plain, "unused for 20 s: abandoned, topped up")
	require.Equal(t, bound, variants, "a sale with variants: still choosing at 30 s")

	db.rooms[1].AdmittedReserved = 10 // ten of them chose and reserved
	_, variants = at(35 * time.Second)
	require.Equal(t, bound+10, variants, "a reservation uses its admission at once")
	_, variants = at(61 * time.Second)
	// The first ones unused for 60 s are abandoned too; the ten admitted at
	// 35 s are still choosing.
	require.Equal(t, bound+10+(bound-10), variants, "unused for 60 s: abandoned too")

	o := Options{UseWindow: 30 * time.Second, VariantUseWindow: 10 * time.Second}
	o.setDefaults()
	require.Equal(t, 30*time.Second, o.VariantUseWindow, "never shorter than UseWindow")
	o = Options{AdmissionTTL: 30 * time.Second}
	o.setDefaults()
	require.Equal(t, 45*time.Second, o.VariantUseWindow, "never longer than an admission lives (+ a poll)")
}
