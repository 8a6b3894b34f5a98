package waitroom

import (
	"bytes"
	"sync"
	"time"

	"github.com/flashline/flashline"
)

// edgeLines is what an origin heard of the edges' counts of the lines:
// each run of each edge's latest counts of each sale's line, as its last
// report said (cumulative since that run started, so a report lost or heard
// twice changes nothing). Every origin hears every report; each writes the
// counts that changed once a second at most, as of the report's signing, so
// the first origin's write of a report stands and the others' change no row
// (postgres: ConsoleQueuePublishEdges). At most maxEdges rows per sale; a
// row not heard from for edgeLineForget after it was written is forgotten
// (its row in the table stays, as an instance's does).
type edgeLines struct {
	mu   sync.Mutex
	rows map[string]map[string]*edgeLine // sale id → row (edge/id/run) → counts
}

type edgeLine struct {
	counts  []byte
	at      time.Time // when the edge signed the report they came in
	heard   time.Time // when this instance heard them, by its clock
	written bool
}

// edgeLineForget is how long an origin keeps a run's counts it has written
// and heard nothing new of.
const edgeLineForget = 10 * time.Minute

// set records row's counts of saleID's line from a report signed at, heard
// at now: kept unless a later report's are held. The same counts as held
// are written again (as of at) only when they have active waiters and
// were written activeRefresh before, as an instance's own are.
func (l *edgeLines) set(saleID, row string, counts []byte, active bool, at, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rows == nil {
		l.rows = map[string]map[string]*edgeLine{}
	}
	m := l.rows[saleID]
	if m == nil {
		m = map[string]*edgeLine{}
		l.rows[saleID] = m
	}
	old := m[row]
	switch {
	case old == nil && len(m) >= maxEdges:
		return
	case old == nil:
		m[row] = &edgeLine{counts: counts, at: at, heard: now}
	case at.After(old.at):
		old.heard = now
		if !bytes.Equal(old.counts, counts) || (active && at.Sub(old.at) >= activeRefresh) {
			old.counts, old.at, old.written = counts, at, false
		}
	}
}

// keep forgets the sales for which keep is false, and the rows written and
// not heard from for edgeLineForget.
func (l *edgeLines) keep(keep func(saleID string) bool, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, m := range l.rows {
		if !keep(id) {
			delete(l.rows, id)
			continue
		}
		for row, c := range m {
			if c.written && now.Sub(c.heard) > edgeLineForget {
				delete(m, row)
			}
		}
	}
}

// unwritten is the rows whose counts changed since they were written.
func (l *edgeLines) unwritten() []flashline.QueueRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []flashline.QueueRow
	for id, m := range l.rows {
		for row, c := range m {
			if !c.written {
				out = append(out, flashline.QueueRow{SaleID: id, Instance: row, Counts: c.counts, At: c.at})
			}
		}
	}
	return out
}

// wrote records that rows were written (those since replaced by a later
// report's counts stay unwritten).
func (l *edgeLines) wrote(rows []flashline.QueueRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range rows {
		if c := l.rows[w.SaleID][w.Instance]; c != nil && c.at.Equal(w.At) {
			c.written = true
		}
	}
}
