package edgeconformance

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testserver"
	"github.com/flashline/flashline/waitroom/edge"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// suite is what the steps share: the test (or step) they check in, the
// client, the waiting-room keys.
type suite struct {
	t    *testing.T
	c    *testserver.Client
	keys *roomtoken.Keyring
}

// in is s checking in a step's test.
func (s *suite) in(t *testing.T) *suite { return &suite{t: t, c: s.c, keys: s.keys} }

// document is the origin's watermarks document, opened: its sales by id.
func (s *suite) document(origin string) map[string]roomtoken.EdgeSale {
	s.t.Helper()
	r, err := s.c.Do(context.Background(), http.MethodGet, origin+"/edge/watermarks", "", "")
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, r.Status, "%s", r.Body)
	var out struct{ Document string }
	require.NoError(s.t, json.Unmarshal(r.Body, &out))
	d, _, err := s.keys.OpenWatermarks(out.Document)
	require.NoError(s.t, err)
	sales := make(map[string]roomtoken.EdgeSale, len(d.Sales))
	for _, sale := range d.Sales {
		sales[sale.ID] = sale
	}
	return sales
}

// ready says whether base's /readyz answers 200: an edge with a fresh
// document.
func (s *suite) ready(base string) bool {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ticket takes jwt's ticket of sale at base, retried until it is given.
func (s *suite) ticket(base, sale, jwt string) string {
	s.t.Helper()
	var token string
	var last string
	eventually(s.t, func() bool {
		r, err := s.c.Do(context.Background(), http.MethodGet, base+"/sales/"+sale+"/ticket", jwt, "")
		if err != nil {
			last = err.Error()
			return false
		}
		if r.Status != http.StatusOK {
			last = fmt.Sprintf("%d %s", r.Status, r.Body)
			return false
		}
		var v struct{ Token string }
		require.NoError(s.t, json.Unmarshal(r.Body, &v))
		token = v.Token
		return true
	}, "a ticket of %s at %s: %v", sale, base, seen(&last))
	return token
}

// Status is what the steps read of a status answer (GET …/status, or an
// event of the stream).
type Status struct {
	State          string
	Position       int64
	PositionRange  struct{ P25, P75 int64 }
	AdmissionToken string
	ExpiresIn      int64
	Stale          bool
	Challenge      struct {
		Nonce string
		Bits  int
	}
}

// status is jwt's status answer for ticket (and what follows it in the
// query) at base, which must be 200.
func (s *suite) status(base, sale, jwt, ticket string) Status {
	s.t.Helper()
	r, err := s.c.Do(context.Background(), http.MethodGet, base+"/sales/"+sale+"/status?token="+ticket, jwt, "")
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, r.Status, "%s", r.Body)
	var st Status
	require.NoError(s.t, json.Unmarshal(r.Body, &st))
	return st
}

// buysOnce reserves a unit of sale with the admission through base, then
// again as a new request: the second is admission_invalid (its single use
// is the database's, whoever signed it).
func (s *suite) buysOnce(base, sale, jwt, admission, key string) {
	s.t.Helper()
	r, err := s.c.Do(context.Background(), http.MethodPost, base+"/sales/"+sale+"/reservations", jwt, `{"quantity":1}`,
		"Idempotency-Key", key+"-1", "X-Admission-Token", admission)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusCreated, r.Status, "the admission buys through the edge: %s", r.Body)
	r, err = s.c.Do(context.Background(), http.MethodPost, base+"/sales/"+sale+"/reservations", jwt, `{"quantity":1}`,
		"Idempotency-Key", key+"-2", "X-Admission-Token", admission)
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusForbidden, r.Status, "the same admission again: %s", r.Body)
	require.True(s.t, strings.Contains(string(r.Body), "admission_invalid"), "%s", r.Body)
}

// reservations is how many reservations origin has answered, whatever the
// outcome (its flashline_http_requests_total of the route).
func (s *suite) reservations(origin string) int {
	s.t.Helper()
	r, err := s.c.Do(context.Background(), http.MethodGet, origin+"/metrics", testserver.AdminToken, "")
	require.NoError(s.t, err)
	require.Equal(s.t, http.StatusOK, r.Status)
	n := 0
	for line := range strings.SplitSeq(string(r.Body), "\n") {
		if strings.HasPrefix(line, "flashline_http_requests_total{") && strings.Contains(line, `route="/sales/:saleId/reservations"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			require.NoError(s.t, err, line)
			n += int(v)
		}
	}
	return n
}

// customerAt is the token of the first customer named prefix and a number
// whose requests an edge in front of n origins passes on to origin first
// (edge.CustomerOrigin of the Authorization header, on both edges).
func customerAt(t testing.TB, prefix string, origin, n int) string {
	for i := 0; ; i++ {
		tok := testserver.Token(t, fmt.Sprintf("%s-%d", prefix, i))
		if edge.CustomerOrigin("Bearer "+tok, n) == origin {
			return tok
		}
	}
}
