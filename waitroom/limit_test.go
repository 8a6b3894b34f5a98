package waitroom

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTicketWindowIsTheCustomers: a customer's minute begins at their first
// ticket. Before, the window was the clock's minute, so five tickets just
// before its turn and a sixth just after were all allowed with a limit of
// five (handlers' TestWaitingRoom/RateLimited, failed when its sixth ask
// fell on the turn of a minute).
func TestTicketWindowIsTheCustomers(t *testing.T) {
	l := &ticketLimiter{max: 5}
	turn := time.Date(2026, 12, 7, 19, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return turn.Add(d) }
	for i := range 5 {
		require.True(t, l.allow("greedy", at(-500*time.Millisecond+time.Duration(i)*time.Millisecond)), "ticket %d", i+1)
	}
	require.False(t, l.allow("greedy", at(time.Millisecond)), "a sixth just after the clock's minute turned")
	require.True(t, l.allow("other", at(time.Millisecond)), "another customer has a window of their own")
	require.False(t, l.allow("greedy", at(59*time.Second)), "still in greedy's minute")
	// Greedy's minute is over: a new one begins, and is kept across the
	// maps' turn (at 60 s, by another's ticket, and at 121 s).
	require.True(t, l.allow("other", at(60*time.Second)))
	for range 5 {
		require.True(t, l.allow("greedy", at(90*time.Second)))
	}
	require.False(t, l.allow("greedy", at(121*time.Second)), "the window begun at 90 s, read after the maps turned")
	require.True(t, l.allow("greedy", at(150*time.Second)), "the window begun at 90 s is over")
	// Two turns with no ticket: everything is forgotten.
	require.True(t, l.allow("greedy", at(10*time.Minute)))
	require.Len(t, l.cur, 1)
	require.Nil(t, l.prev)
}
