package waitroom

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestQueueLeftFleetWide (issue 50): three instances, each judging "left"
// alone, and the line's left as the report forms it from their rows
// (MergeQueue, LeftLine), waiter by waiter and all together: one whose
// stream moved to another instance and was admitted there, one whose polls
// spread over all three (each hearing it less often than LeftAfter, so
// each counts it left again and again) and was admitted, one who went quiet
// and came back to be told the sale sold out, one admitted on one instance
// who reserved through another that still followed it: none left; one sold
// out for now for a while, one who stayed on one instance and one who
// moved before leaving: one each, although the instances' own Left add up
// to many more. And the error that remains: one whose first polls spread
// over two instances, the second hearing it within ReturnAfter of its
// ticket (no return), counts one although admitted. The clock is explicit, one second a step, every instance
// sweeping each second as RunQueuePublisher does.
func TestQueueLeftFleetWide(t *testing.T) {
	t.Parallel()
	want := map[string]int64{"moved": 0, "spread": 0, "back": 0, "reserved": 0, "for-now": 1, "left": 1, "moved-left": 1,
		"early": 1} // the error left: it did not leave
	merge := func(fleet *[3]queueStats) (flashline.QueueCounts, []flashline.QueueReport, int64) {
		var rows []flashline.QueueReport
		var left int64
		for i := range fleet {
			require.Empty(t, fleet[i].waiters, "instance %d follows nobody any more", i)
			if fleet[i].sales["s"] == nil {
				continue // never heard of it
			}
			counts, _ := fleet[i].unwritten()
			rows = append(rows, flashline.QueueReport{Instance: string(rune('a' + i)), Counts: counts["s"]})
			left += fleet[i].sales["s"].counts.Left
		}
		merged, _, bad := flashline.MergeQueue(rows)
		require.Empty(t, bad)
		return merged, rows, left
	}
	for customer, n := range want {
		merged, _, _ := merge(fleetRun(customer))
		require.Equal(t, n, merged.LeftLine(), "%s: left %d, returns %d", customer, merged.Left, merged.Returns)
	}

	merged, rows, left := merge(fleetRun(""))
	require.Greater(t, left, int64(10), "the instances' own Left: each counts every waiter that went quiet on it")
	require.EqualValues(t, 4, merged.LeftLine())
	require.EqualValues(t, 4, merged.Admitted())
	require.EqualValues(t, 1, merged.Reserved())
	// A row written before Returns was counted: read as none.
	rows = append(rows, flashline.QueueReport{Instance: "old", Counts: json.RawMessage(`{"arrivals":3,"wait":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"toReserve":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"left":1,"active":0}`)})
	merged, instances, bad := flashline.MergeQueue(rows)
	require.Empty(t, bad)
	require.Equal(t, 4, instances)
	require.Equal(t, left+1, merged.Left, "the rows' Left added raw")
	require.EqualValues(t, 4+1, merged.LeftLine(), "and the old row's one")
}

// fleetRun plays TestQueueLeftFleetWide's line on three instances, for
// one customer (all: "") until every instance has forgotten them.
func fleetRun(only string) *[3]queueStats {
	var fleet [3]queueStats
	const a, b, c = 0, 1, 2
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ask := func(on int, customer, state string, now time.Time) {
		fleet[on].answered("s", roomtoken.Ticket{SaleID: "s", CustomerID: customer, ArrivedAt: t0, Position: 1}, state, t0, now)
	}
	// customer asks on (its instance at that time) from start to end,
	// every period, then is told what at end, if anything.
	type asking struct {
		customer           string
		start, end, period time.Duration
		on                 func(i int) int
		state              string
	}
	same := func(on int) func(int) int { return func(int) int { return on } }
	plan := []asking{
		// A stream on a for five minutes, then on b.
		{"moved", 2 * time.Second, 5 * time.Minute, 10 * time.Second, same(a), StatusWaiting},
		{"moved", 5*time.Minute + time.Second, 9 * time.Minute, 10 * time.Second, same(b), StatusWaiting},
		// Polls every 40 s spread over the three: each hears it every
		// two minutes, more than LeftAfter.
		{"spread", 3 * time.Second, 12 * time.Minute, 40 * time.Second, func(i int) int { return i % 3 }, StatusWaiting},
		// Quiet from the first minute to the fourth, then back on a.
		{"back", time.Second, time.Minute, 10 * time.Second, same(a), StatusWaiting},
		{"back", 4 * time.Minute, 6 * time.Minute, 10 * time.Second, same(a), StatusWaiting},
		// Polls on a for 40 s, then alternating a and c, admitted on c;
		// reserves through a.
		{"reserved", 2 * time.Second, 3 * time.Minute, 5 * time.Second, func(i int) int {
			if i < 8 {
				return a
			}
			return a + 2*(i%2)
		}, StatusWaiting},
		// The error left: polls alternating a and b from the start, so
		// that b first hears it within ReturnAfter; admitted on b.
		{"early", time.Second, 2 * time.Minute, 2 * time.Second, func(i int) int { return i % 2 }, StatusWaiting},
		// Sold out for now for two minutes, then waiting again; leaves.
		{"for-now", time.Second, 2 * time.Minute, 5 * time.Second, same(c), StatusWaiting},
		{"for-now", 2 * time.Minute, 4 * time.Minute, 5 * time.Second, same(c), statusSoldOutForNow},
		{"for-now", 4 * time.Minute, 5 * time.Minute, 5 * time.Second, same(c), StatusWaiting},
		// Leaves after three minutes on b.
		{"left", 2 * time.Second, 3 * time.Minute, 10 * time.Second, same(b), StatusWaiting},
		// On c, then b after its stream's five minutes; leaves.
		{"moved-left", time.Second, 5 * time.Minute, 10 * time.Second, same(c), StatusWaiting},
		{"moved-left", 5*time.Minute + 2*time.Second, 7 * time.Minute, 10 * time.Second, same(b), StatusWaiting},
	}
	ends := []struct {
		customer string
		at       time.Duration
		do       func(now time.Time)
	}{
		{"moved", 9 * time.Minute, func(now time.Time) { ask(b, "moved", StatusAdmitted, now) }},
		{"spread", 12 * time.Minute, func(now time.Time) { ask(c, "spread", StatusAdmitted, now) }},
		{"back", 6 * time.Minute, func(now time.Time) { ask(a, "back", StatusSoldOut, now) }},
		{"early", 2 * time.Minute, func(now time.Time) { ask(b, "early", StatusAdmitted, now) }},
		{"reserved", 3 * time.Minute, func(now time.Time) {
			ask(c, "reserved", StatusAdmitted, now)
			fleet[a].reserved(roomtoken.Admission{SaleID: "s", CustomerID: "reserved", ExpiresAt: now.Add(2 * time.Minute)}, 2*time.Minute, now.Add(time.Second))
		}},
	}
	for step := time.Duration(0); step <= 15*time.Minute; step += time.Second {
		now := t0.Add(step)
		for _, p := range plan {
			if (only == "" || p.customer == only) && step >= p.start && step < p.end && (step-p.start)%p.period == 0 {
				ask(p.on(int((step-p.start)/p.period)), p.customer, p.state, now)
			}
		}
		for _, e := range ends {
			if (only == "" || e.customer == only) && e.at == step {
				e.do(now)
			}
		}
		for i := range fleet {
			fleet[i].sweep(now)
		}
	}
	return &fleet
}

// TestQueueReturns: a waiter is a return only the first time an instance
// hears it more than ReturnAfter after its page began asking, whatever it
// is told then (admitted, sold out); a pre-open ticket placed by the draw
// (arrived at the start of the hour) began asking at the open.
func TestQueueReturns(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var q queueStats
	tk := func(c string) roomtoken.Ticket {
		return roomtoken.Ticket{SaleID: "s", CustomerID: c, ArrivedAt: t0, Position: 1}
	}
	returns := func() int64 { return q.sales["s"].counts.Returns }
	q.answered("s", tk("first"), StatusWaiting, t0, t0.Add(ReturnAfter))
	require.Zero(t, returns(), "first asked within ReturnAfter")
	q.answered("s", tk("late"), StatusWaiting, t0, t0.Add(ReturnAfter+time.Second))
	q.answered("s", tk("late"), StatusWaiting, t0, t0.Add(ReturnAfter+10*time.Second))
	require.EqualValues(t, 1, returns(), "heard twice, returned once")
	q.answered("s", tk("admitted"), StatusAdmitted, t0, t0.Add(time.Minute))
	q.answered("s", tk("sold-out"), StatusSoldOut, t0, t0.Add(time.Minute))
	require.EqualValues(t, 3, returns())
	q.answered("s", tk("unknown"), StatusWaiting, time.Time{}, t0.Add(time.Hour))
	require.EqualValues(t, 3, returns(), "no start known: never a return")
	// A page that asks again once told sold out for good (a reload, or a
	// hostile client asking on purpose), or once its admission made a
	// reservation here, is no return: its time in line ended here.
	for i := range 5 {
		q.answered("s", tk("sold-out"), StatusSoldOut, t0, t0.Add(time.Minute+time.Duration(i)*time.Second))
	}
	q.reserved(roomtoken.Admission{SaleID: "s", CustomerID: "admitted", ExpiresAt: t0.Add(3 * time.Minute)}, 2*time.Minute, t0.Add(time.Minute))
	q.answered("s", tk("admitted"), StatusAdmitted, t0, t0.Add(70*time.Second))
	require.EqualValues(t, 3, returns(), "asked again after sold out, or after a reservation")
	q.sweep(t0.Add(time.Minute + LeftAfter + 10*time.Second))
	require.EqualValues(t, 2, q.sales["s"].counts.Left, "first and late went quiet; sold out and admitted are forgotten, not left")

	hour := t0.Truncate(time.Hour)
	opens := t0.Add(10 * time.Minute)
	drawn := roomtoken.Ticket{SaleID: "s", CustomerID: "d", ArrivedAt: hour, Position: 1, PreOpen: true, Draw: 42}
	require.Equal(t, opens, asksFrom(flashline.SaleFacts{OpensAt: &opens}, drawn))
	require.True(t, asksFrom(flashline.SaleFacts{}, drawn).IsZero(), "opened by hand: unknown")
	placed := roomtoken.Ticket{SaleID: "s", CustomerID: "p", ArrivedAt: t0, Position: 3, PreOpen: true}
	require.Equal(t, t0, asksFrom(flashline.SaleFacts{OpensAt: &opens}, placed), "a pre-open ticket with its own arrival")
}
