package waitroom

import (
	"sync"
	"time"

	"github.com/flashline/flashline/waitroom/roomtoken"
)

// An admission is given again, to a ticket that polls again, only within its
// own life (AdmissionTTL) from the moment its rank was admitted: a ticket
// whose turn came and went (its holder never reserved, and the pacer has
// let another in its place) gets no fresh admission token for the rest of
// its day, but ErrAdmissionInvalid, and the page takes a new ticket at the
// back of the line. Tokens themselves are stateless, so the moment is the
// one this instance saw the watermark pass the rank (admittedMarks): an
// instance that starts, or first hears of a room, counts every rank already
// admitted from then (a later moment than the truth, never an earlier one),
// and a pause or a held queue counts as a new moment for every rank, since
// nobody could use an admission meanwhile.

// admittedMarks is, per sale, when this instance saw the watermark reach
// each value (kept for AdmissionTTL, and one older), and when it last saw the
// sale paused or its queue held.
type admittedMarks struct {
	mu    sync.Mutex
	rooms map[string]*roomMarks
}

type roomMarks struct {
	marks   []mark // watermarks rising
	stopped time.Time
}

func (a *admittedMarks) room(saleID string) *roomMarks {
	if a.rooms == nil {
		a.rooms = map[string]*roomMarks{}
	}
	h := a.rooms[saleID]
	if h == nil {
		h = &roomMarks{}
		a.rooms[saleID] = h
	}
	return h
}

// stopped records that the sale is paused or its queue held at now.
func (a *admittedMarks) stop(saleID string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.room(saleID).stopped = now
}

// since returns the moment rank counts as admitted from, having seen the
// watermark at watermark (≥ rank) at now; keep is how long a moment matters.
func (a *admittedMarks) since(saleID string, rank, watermark int64, now time.Time, keep time.Duration) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.room(saleID)
	if n := len(h.marks); n == 0 || watermark > h.marks[n-1].watermark {
		h.marks = append(h.marks, mark{at: now, watermark: watermark})
	}
	// Marks older than keep but the last of them tell nothing more: a rank
	// they admitted was admitted longer ago than keep either way.
	cutoff := now.Add(-keep)
	drop := 0
	for drop+1 < len(h.marks) && !h.marks[drop+1].at.After(cutoff) {
		drop++
	}
	h.marks = h.marks[drop:]
	at := now
	for _, m := range h.marks {
		if m.watermark >= rank {
			at = m.at
			break
		}
	}
	if h.stopped.After(at) {
		at = h.stopped
	}
	return at
}

// admittedSince is the moment t's turn came: when the watermark passed its
// rank (seen), but never before the ticket arrived. The watermark may pass a
// rank before anyone holds it (the pacer admits at its pace whether or not
// the line is that long), and a ticket that arrives to find its turn already
// come has the whole of an admission's life from its arrival.
func admittedSince(seen time.Time, t roomtoken.Ticket) time.Time {
	if t.ArrivedAt.After(seen) {
		return t.ArrivedAt
	}
	return seen
}
