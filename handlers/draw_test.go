package handlers_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/postgres"
)

// TestDrawTranscriptBuiltOnce: a lottery's transcript before the draw is
// rebuilt for each request, never kept; the first requests after the draw,
// eight at once, share one build and get the drawn transcript, the bytes
// the route answered before it kept them (json.Marshal of the view); the
// ETag answers 304; gzip decodes to the same bytes.
func TestDrawTranscriptBuiltOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	saleID := s.createSale(t, lotteryBody(2, "")).SaleID
	for i := range 5 {
		id := fmt.Sprintf("cust_%02d", i)
		require.Equal(t, http.StatusCreated, s.register(t, saleID, customer(t, id), "card-"+id).Status)
	}
	path := "/sales/" + saleID + "/draw"
	for range 2 {
		r := s.do(t, http.MethodGet, path, "", "")
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
		require.Empty(t, r.Header.Get("ETag"))
		require.Contains(t, string(r.Body), `"status":"registering"`)
	}
	require.Equal(t, "2", s.metricValue(t, `flashline_draw_transcript_builds_total{final="false"}`), "rebuilt, not kept")
	s.dueLottery(t, saleID)
	_, err := store.DrawLottery(t.Context(), saleID, nil)
	require.NoError(t, err)

	replies := make([]reply, 8)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() {
			replies[i], _ = s.send(t.Context(), http.MethodGet, path, "", "", "Accept-Encoding", "identity")
		})
	}
	wg.Wait()
	require.Equal(t, "1", s.metricValue(t, `flashline_draw_transcript_builds_total{final="true"}`), "one build for all")
	l, err := store.Lottery(t.Context(), saleID)
	require.NoError(t, err)
	entries, err := store.LotteryEntries(t.Context(), saleID)
	require.NoError(t, err)
	want, err := json.Marshal(api.NewDrawTranscript(l, flashline.NewDrawTranscript(l, entries)))
	require.NoError(t, err)
	etag := replies[0].Header.Get("ETag")
	require.NotEmpty(t, etag)
	for _, r := range replies {
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "public, max-age=3600", r.Header.Get("Cache-Control"))
		require.Equal(t, etag, r.Header.Get("ETag"))
		require.Equal(t, string(want), string(r.Body))
	}
	require.Contains(t, string(want), `"status":"drawn"`)

	r := s.do(t, http.MethodGet, path, "", "", "If-None-Match", etag, "Accept-Encoding", "identity")
	require.Equal(t, http.StatusNotModified, r.Status)
	require.Empty(t, r.Body)
	require.Equal(t, etag, r.Header.Get("ETag"))
	r = s.do(t, http.MethodGet, path, "", "", "If-None-Match", `"other"`, "Accept-Encoding", "gzip")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "gzip", r.Header.Get("Content-Encoding"))
	zr, err := gzip.NewReader(bytes.NewReader(r.Body))
	require.NoError(t, err)
	body, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, string(want), string(body))
	require.Equal(t, http.StatusNotModified, s.do(t, http.MethodGet, path, "", "", "If-None-Match", r.Header.Get("ETag")).Status)
	require.Equal(t, "1", s.metricValue(t, `flashline_draw_transcript_builds_total{final="true"}`), "served from memory")
}

// TestCrowdTranscriptKeptOnceRanked: a randomized_at_open room's crowd
// transcript before the freeze is not kept; once ranked (no beacon here: at
// the freeze) it is the bytes the route answered before, built once.
func TestCrowdTranscriptKeptOnceRanked(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	store := postgres.NewStore(postgres.SinglePool(s.pool), postgres.Options{})
	opens := time.Now().Add(time.Hour)
	sale, err := store.CreateSale(t.Context(), flashline.NewSale{SKU: "sku_crowd", InitialStock: 3,
		Admission: flashline.AdmissionWaitingRoom, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	require.NoError(t, err)
	require.NoError(t, store.AddHolders(t.Context(), sale.ID, []string{"cust_a", "cust_b", "cust_c"}))
	path := "/sales/" + sale.ID + "/draw"
	r := s.do(t, http.MethodGet, path, "", "")
	require.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	require.Contains(t, string(r.Body), `"status":"registering"`)

	_, err = s.pool.Exec(t.Context(), `UPDATE sales SET opens_at = now() - interval '1 second' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	_, _, err = store.LeasePositions(t.Context(), sale.ID, 1, 0)
	require.NoError(t, err)
	c, err := store.Crowd(t.Context(), sale.ID)
	require.NoError(t, err)
	want, err := json.Marshal(api.NewCrowdTranscript(c, flashline.NewCrowdTranscript(c)))
	require.NoError(t, err)
	for range 2 {
		r = s.do(t, http.MethodGet, path, "", "", "Accept-Encoding", "identity")
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "public, max-age=3600", r.Header.Get("Cache-Control"))
		require.Equal(t, string(want), string(r.Body))
	}
	require.Contains(t, string(want), `"status":"drawn"`)
	require.Equal(t, "1", s.metricValue(t, `flashline_draw_transcript_builds_total{final="true"}`))
}
