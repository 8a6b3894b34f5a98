package worker

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerBodyBound: a reservation (a request with an Idempotency-Key,
// whose body the Worker reads once to send it again to another origin) is
// read at most 1 MiB also when it comes chunked, declaring no length: a
// longer one is 400 invalid_request and reaches no origin; one within the
// bound reaches the origin whole.
func TestWorkerBodyBound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts workerd: not in -short")
	}
	var (
		mu     sync.Mutex
		bodies [][]byte
	)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/reservations") {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(origin.Close)
	base := startWorker(t, origin.URL)

	post := func(t *testing.T, body []byte) *http.Response {
		t.Helper()
		// No length declared: the body goes chunked.
		req, err := http.NewRequest(http.MethodPost, base+"/sales/sale_body/reservations", io.NopCloser(bytes.NewReader(body)))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "k1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	// One byte past the bound, chunked: the Worker reads it all (the byte
	// past is in the last chunk) before it answers, so the client's write
	// ends before the answer. (A declared length past the bound is answered
	// before anything is read.)
	resp := post(t, bytes.Repeat([]byte("x"), 1<<20+1))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	b, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(b), `"invalid_request"`)
	mu.Lock()
	require.Empty(t, bodies, "a body past the bound reaches no origin")
	mu.Unlock()

	within := bytes.Repeat([]byte("y"), 1<<20)
	resp = post(t, within)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, bodies, 1)
	require.Equal(t, within, bodies[0], "the body reaches the origin whole")
}
