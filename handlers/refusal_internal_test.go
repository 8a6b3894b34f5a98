package handlers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestRefusalsAnswerAsWriteError: the refusals' prepared answers, which
// the front door and the reservation route write, are what the one error
// table's writer (writeError) writes for the same error: status, body,
// Content-Type, a Retry-After in the same range, the same outcome for the
// metrics.
func TestRefusalsAnswerAsWriteError(t *testing.T) {
	t.Parallel()
	for _, err := range []error{flashline.ErrOverloaded, flashline.ErrSoldOut, flashline.ErrSaleNotOpen} {
		p := routeRefusals.of(err)
		if err == flashline.ErrOverloaded {
			p = &routeRefusals.overloaded
		}
		require.NotNil(t, p, "%v", err)
		answer := func(write func(*gin.Context)) (*httptest.ResponseRecorder, string) {
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			c.Request = httptest.NewRequest(http.MethodPost, "/sales/x/reservations", nil)
			write(c)
			c.Writer.WriteHeaderNow()
			require.True(t, c.IsAborted(), "%v", err)
			return rec, c.GetString(outcomeKey)
		}
		want, wantOutcome := answer(func(c *gin.Context) { writeError(c, nil, err) })
		got, gotOutcome := answer(func(c *gin.Context) { writeRefusal(c, p) })
		require.Equal(t, want.Code, got.Code, "%v", err)
		require.Equal(t, want.Body.String(), got.Body.String(), "%v", err)
		require.Equal(t, want.Header().Values("Content-Type"), got.Header().Values("Content-Type"), "%v", err)
		require.Equal(t, wantOutcome, gotOutcome, "%v", err)
		e := lookupError(err)
		require.Equal(t, want.Header().Get("Retry-After") != "", got.Header().Get("Retry-After") != "", "%v", err)
		if ra := got.Header().Get("Retry-After"); ra != "" {
			s, aerr := strconv.Atoi(ra)
			require.NoError(t, aerr)
			require.True(t, s >= e.retryAfter && s <= 2*e.retryAfter, "Retry-After %d of %v", s, err)
		}
	}
}
