package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/flashline/flashline/internal/apiclient"
	"github.com/flashline/flashline/internal/client"
)

// edge: what an edge (flashline serve --role edge) answers per second, per
// process, against its own /healthz: Targets[0] is an origin (the room is
// created there), Targets[1] the edge measured. Three phases on the edge,
// taking turns as in the no scenario, each connection a customer of a
// randomized_at_open room that opens in an hour:
//   - GET /healthz, the mark;
//   - a ticket asked for without the one held (a new pre-open ticket: the
//     draw's, signed by the edge, counted once per customer);
//   - a status poll of the customer's ticket: 200 waiting.
func (r *runner) edge(ctx context.Context) (*Result, error) {
	if len(r.cfg.Targets) < 2 {
		return nil, fmt.Errorf("loadtest: edge: --target ORIGIN,EDGE (the origin creates the room, the edge is measured)")
	}
	base, err := url.Parse(r.cfg.Targets[1])
	if err != nil || base.Host == "" || base.Scheme != "http" {
		return nil, fmt.Errorf("loadtest: edge: target %q is not an http:// URL", r.cfg.Targets[1])
	}
	host := base.Host
	opens := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	room, err := r.createSale(ctx, client.NewSale{SKU: "sku_edge", InitialStock: 1000, Admission: "waiting_room",
		Fairness: "randomized_at_open", OpensAt: &opens})
	if err != nil {
		return nil, err
	}
	edge := r.generated(1)
	n := r.cfg.Clients
	healthz, tickets, statuses := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i := range n {
		healthz[i] = []byte("GET /healthz HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
		token := r.token("edge-" + strconv.Itoa(i))
		tickets[i] = []byte("GET /sales/" + room + "/ticket HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token + "\r\n\r\n")
		// The edge hears of the room within a pull (a second).
		var tr *apiclient.TicketResponse
		for try := 0; ; try++ {
			if tr, err = edge.TicketWithResponse(ctx, room, &apiclient.TicketParams{}, bearer(token)); err != nil {
				return nil, fmt.Errorf("loadtest: edge: ticket: %w", err)
			}
			if tr.JSON200 != nil {
				break
			}
			if try == 50 || ctx.Err() != nil {
				return nil, fmt.Errorf("loadtest: edge: ticket: %d %s", tr.StatusCode(), tr.Body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		statuses[i] = []byte("GET /sales/" + room + "/status?" + url.Values{"token": {tr.JSON200.Token}}.Encode() +
			" HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token + "\r\n\r\n")
	}
	res, err := r.alternate(ctx, "edge", host, []phase{
		{"edge /healthz", healthz, http.StatusOK},
		{"edge ticket", tickets, http.StatusOK},
		{"edge status poll", statuses, http.StatusOK},
	})
	if err != nil {
		return nil, err
	}
	res.SaleID = room
	return res, nil
}
