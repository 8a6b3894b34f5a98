package edge

import (
	"maps"
	"slices"

	"github.com/flashline/flashline/waitroom/roomtoken"
)

// An edge's pre-open holders (docs/edge.md, "The pre-open holders"): the
// customers it gave a pre-open ticket in a randomized_at_open room
// (AddHolders), carried in batches by its reports until an origin says it
// wrote them, so that the crowd committed at the open holds them.

// batch is the holders the next report carries: at most
// roomtoken.MaxReportedHolders of those not written yet, the sales by id.
// e.mu is held.
func (e *Client) batch() map[string][]string {
	var out map[string][]string
	room := roomtoken.MaxReportedHolders
	for _, id := range slices.Sorted(maps.Keys(e.holders)) {
		if room == 0 {
			break
		}
		for c := range e.holders[id] {
			if room == 0 {
				break
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[id] = append(out[id], c)
			room--
		}
	}
	return out
}

// written forgets holders, written by an origin. Those of a later report
// stay until an answer to it says so.
func (e *Client) written(holders map[string][]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, cs := range holders {
		m := e.holders[id]
		for _, c := range cs {
			if _, ok := m[c]; ok {
				delete(m, c)
				e.nHolders--
			}
		}
		if len(m) == 0 {
			delete(e.holders, id)
		}
	}
}

// dropHolders forgets saleID's holders not written: its crowd is frozen,
// and no origin takes them any more. e.mu is held.
func (e *Client) dropHolders(saleID string) {
	if n := len(e.holders[saleID]); n > 0 {
		e.opts.Logger.Warn("waitroom: edge: pre-open holders left out of the committed crowd", "sale_id", saleID, "holders", n)
		e.nHolders -= n
	}
	delete(e.holders, saleID)
}

// maxHolders bounds the holders an edge keeps for its reports, all sales
// together: beyond it, AddHolders refuses them (the room tries again a few
// times, then leaves them out of the committed crowd, and says so).
const maxHolders = 1 << 18

// Unreported is how many pre-open holders no origin has said it wrote.
func (e *Client) Unreported() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nHolders
}
