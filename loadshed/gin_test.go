package loadshed

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"
)

func init() { gin.SetMode(gin.TestMode) }

func overloaded(c *gin.Context) {
	c.Header("Retry-After", "1")
	c.JSON(http.StatusServiceUnavailable, gin.H{"error": "overloaded"})
}

func TestGinShedsAndReleases(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, fixed(1, Options{QueueSize: -1}))
	var sheds, served atomic.Int64
	unblock := make(chan struct{})
	r := gin.New()
	r.GET("/reserve", Gin(l, PriorityReserve, func(c *gin.Context) {
		sheds.Add(1)
		overloaded(c)
	}), func(c *gin.Context) {
		served.Add(1)
		<-unblock
		c.Status(http.StatusCreated)
	})

	first := make(chan *httptest.ResponseRecorder)
	go func() {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/reserve", nil))
		first <- w
	}()
	require.Eventually(t, func() bool { return l.InFlight() == 1 }, 5*time.Second, 100*time.Microsecond)

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/reserve", nil))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.Equal(t, int64(1), sheds.Load())
	require.Equal(t, int64(1), served.Load(), "a shed request never reaches the handler")
	require.Equal(t, int64(1), l.Shed())

	close(unblock)
	require.Equal(t, http.StatusCreated, (<-first).Code)
	require.Zero(t, l.InFlight())

	w = httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/reserve", nil))
	require.Equal(t, http.StatusCreated, w.Code, "the slot was released")
	require.Zero(t, l.InFlight())
}

// TestGinOutcome checks the outcome each response is released with, through
// its effect on the limiter: a latency sample, a Timeout cut, or nothing.
func TestGinOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler gin.HandlerFunc
		want    Outcome
	}{
		{"Created", func(c *gin.Context) { c.Status(http.StatusCreated) }, Success},
		{"Conflict", func(c *gin.Context) { c.Status(http.StatusConflict) }, Success},
		{"NothingWritten", func(*gin.Context) {}, Success},
		{"InternalError", func(c *gin.Context) { c.Status(http.StatusInternalServerError) }, Dropped},
		{"BadGateway", func(c *gin.Context) { c.Status(http.StatusBadGateway) }, Dropped},
		{"Panic", func(*gin.Context) { panic("boom") }, Dropped},
		{"ServiceUnavailable", func(c *gin.Context) { c.Status(http.StatusServiceUnavailable) }, Timeout},
		{"GatewayTimeout", func(c *gin.Context) { c.Status(http.StatusGatewayTimeout) }, Timeout},
		{"DeadlineExceeded", func(c *gin.Context) {
			// As a timeout middleware after the limiter would.
			ctx, cancel := context.WithDeadline(c.Request.Context(), time.Now())
			defer cancel()
			c.Request = c.Request.WithContext(ctx)
			<-ctx.Done()
			c.Status(http.StatusOK)
		}, Timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newFakeClock()
			l := newLimiter(t, Options{InitialLimit: 20, Now: clk.Now})
			r := gin.New()
			r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
			r.GET("/", Gin(l, PriorityReserve, overloaded), func(c *gin.Context) {
				clk.Advance(5 * time.Millisecond)
				tt.handler(c)
			})

			r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))

			require.Zero(t, l.InFlight())
			l.mu.Lock()
			samples, timeouts := l.credits.win.latN, l.credits.win.timeouts
			l.mu.Unlock()
			switch tt.want {
			case Success:
				require.Equal(t, 1, samples)
				require.Equal(t, int64(20), l.Limit())
			case Dropped:
				require.Zero(t, samples)
				require.Zero(t, timeouts)
				require.Equal(t, int64(20), l.Limit())
			case Timeout:
				require.Zero(t, samples)
				require.Equal(t, 1, timeouts)
				require.Equal(t, int64(18), l.Limit())
			}
		})
	}
}

func TestGinContextEndsWhileWaiting(t *testing.T) {
	t.Parallel()
	l := newLimiter(t, fixed(1, Options{MaxWait: time.Hour}))
	hold := mustAcquire(t, l, PriorityReserve)
	t.Cleanup(func() { hold.Release(Success) })
	var sheds atomic.Int64
	r := gin.New()
	r.GET("/", Gin(l, PriorityReserve, func(c *gin.Context) {
		sheds.Add(1)
		overloaded(c)
	}), func(c *gin.Context) { c.Status(http.StatusOK) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	t.Cleanup(cancel)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, int64(1), sheds.Load())
	require.Zero(t, l.Shed(), "not shed by the limiter: the request gave up")
	require.Equal(t, int64(1), l.InFlight())
}
