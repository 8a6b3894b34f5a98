package handlers_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/postgres"
	"github.com/flashline/flashline/salecache"
)

// withSaleCache wires the sale cache as serve does: reservations answered
// from memory, before their body is read, when the cache can refuse them.
func withSaleCache(t testing.TB) func(*handlers.Deps) {
	return func(d *handlers.Deps) {
		store := d.Store.(*postgres.Store)
		cache := salecache.New(store, salecache.Options{Logger: testLogger(t), RefreshInterval: 50 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = cache.Run(ctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })
		d.Refusals = flashline.NewRefusals(store, cache)
		d.Store = cache.Wrap(store, d.Refusals)
	}
}

func TestSoldOutFromMemory(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil, withSaleCache(t))
	sale := s.createSale(t, `{"sku":"sku_1","initialStock":1}`)
	alice := customer(t, "alice")
	first := requireCreated(t, s.reserve(t, sale.SaleID, alice, "k", `{"quantity":1}`), sale.SaleID, 1)
	bob := customer(t, "bob")
	// Until the cache has heard of the sell-out: a body that is not even
	// JSON is refused from memory (409), and by the full path otherwise (400).
	require.Eventually(t, func() bool {
		return s.reserve(t, sale.SaleID, bob, "k-bob", `not json`).Status == http.StatusConflict
	}, 5*time.Second, 20*time.Millisecond)

	t.Run("AnyBodyAnyKey", func(t *testing.T) {
		// Sold out holds for every request in the sale, so it is the answer
		// before the body or the key is looked at.
		requireError(t, s.reserve(t, sale.SaleID, bob, "k-bob", `{"quantity":1}`), 409, "sold_out")
		requireError(t, s.reserve(t, sale.SaleID, bob, "k2", `{"quantity":7}`), 409, "sold_out")
		requireError(t, s.do(t, http.MethodPost, "/sales/"+sale.SaleID+"/reservations", bob, `not json`), 409, "sold_out")
	})
	t.Run("CallerFirst", func(t *testing.T) {
		// Who still reaches the database depends on the customer: nobody
		// hears it without proving who they are.
		requireError(t, s.reserve(t, sale.SaleID, "", "k", `{"quantity":1}`), 401, "unauthenticated")
		requireError(t, s.reserve(t, sale.SaleID, "Bearer not-a-token", "k", `{"quantity":1}`), 401, "unauthenticated")
		requireError(t, s.reserve(t, sale.SaleID, adminAuth, "k", `{"quantity":1}`), 403, "forbidden")
	})
	t.Run("HolderReplays", func(t *testing.T) {
		// A customer who held a reservation reaches the database: the retry
		// is the stored answer, byte for byte.
		r := s.reserve(t, sale.SaleID, alice, "k", `{"quantity":1}`)
		require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Body)
		require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
		require.Equal(t, first.ReservationID, requireCreated(t, r, sale.SaleID, 1).ReservationID)
		held, _ := requireLimitReached(t, s.reserve(t, sale.SaleID, alice, "k-other", `{"quantity":1}`))
		require.Equal(t, first.ReservationID, held.ReservationID)
	})
	// rawReserve sends reservations of body over one connection and returns
	// each answer's status and whether the server closes the connection.
	rawReserve := func(t *testing.T, body string, times int) (statuses []int, closed bool) {
		u, err := url.Parse(s.api.BaseURL)
		require.NoError(t, err)
		conn, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		br := bufio.NewReader(conn)
		req := "POST /sales/" + sale.SaleID + "/reservations HTTP/1.1\r\nHost: x\r\nAuthorization: " + bob +
			"\r\nIdempotency-Key: k\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		for range times {
			_, err := conn.Write([]byte(req))
			require.NoError(t, err)
			resp, err := http.ReadResponse(br, nil)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			statuses = append(statuses, resp.StatusCode)
			if resp.Close {
				return statuses, true
			}
		}
		return statuses, false
	}
	t.Run("KeepAlive", func(t *testing.T) {
		// The refused request's body is read, so the connection carries
		// the next request.
		statuses, closed := rawReserve(t, `{"quantity":1}`, 3)
		require.Equal(t, []int{409, 409, 409}, statuses)
		require.False(t, closed)
	})
	t.Run("BodyTooLargeCloses", func(t *testing.T) {
		body := `{"quantity":1,"paymentInstrument":"` + strings.Repeat("x", handlers.MaxBodyBytes) + `"}`
		statuses, closed := rawReserve(t, body, 2)
		require.Equal(t, []int{409}, statuses)
		require.True(t, closed, "a body over the bound is not read to its end: the connection is closed")
	})
}
