package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
)

// TestClientGoneIsNotAnInternalError: a request whose client went away
// fails with the context's cancellation; that is logged at debug level and
// counted as client_closed, not logged as an internal error (found by the
// rehearsal: an edge's proxy that gave up left "rate limit reserve: context
// canceled" at error level on its origin).
func TestClientGoneIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		cancel      bool
		wantOutcome string
		wantLog     string
	}{
		{"ClientGone", true, "client_closed", ""},
		{"ClientStillThere", false, "internal", "internal error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel {
				cancel()
			} else {
				defer cancel()
			}
			c, _ := gin.CreateTestContext(httptest.NewRecorder())
			c.Request = httptest.NewRequestWithContext(ctx, http.MethodPost, "/sales/x/reservations", nil)
			writeError(c, logger, fmt.Errorf("rate limit reserve: %w", context.Canceled))
			require.Equal(t, tt.wantOutcome, c.GetString(outcomeKey))
			if tt.wantLog == "" {
				require.Empty(t, logs.String())
			} else {
				require.Contains(t, logs.String(), tt.wantLog)
			}
		})
	}
}

// TestClientGoneIsNotFailingClosed: a cancellation that something on the
// purchase path wrapped as unavailable is still the client's leaving:
// client_closed, 499, nothing logged, never sale_paused_fail_closed.
func TestClientGoneIsNotFailingClosed(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequestWithContext(ctx, http.MethodPost, "/sales/x/reservations", nil)
	writeError(c, logger, errors.Join(flashline.ErrUnavailable, context.Canceled))
	require.Equal(t, "client_closed", c.GetString(outcomeKey))
	require.Equal(t, 499, rec.Code)
	require.Empty(t, logs.String())
}

// rebuildFunc is a GateRebuilder that answers as its function does.
type rebuildFunc func(ctx context.Context, saleID string) (int64, error)

func (f rebuildFunc) Rebuild(ctx context.Context, saleID string) (int64, error) {
	return f(ctx, saleID)
}

// TestGateRebuildRunningAnswer: a rebuild refused because another of the
// same sale runs answers 409 rebuild_in_progress, which says so, not an
// internal error (the refusal itself: gate's
// TestGateRebuildRefusedWhileAnotherRuns).
func TestGateRebuildRunningAnswer(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/admin/sales/s1/gate/rebuild", nil)
	c.Params = gin.Params{{Key: "saleId", Value: "s1"}}
	handleGateRebuild(rebuildFunc(func(context.Context, string) (int64, error) {
		return 0, fmt.Errorf("rebuild gate of sale s1: %w", flashline.ErrRebuildRunning)
	}), slog.New(slog.DiscardHandler))(c)
	require.Equal(t, http.StatusConflict, w.Code)
	require.Contains(t, w.Body.String(), `"code":"rebuild_in_progress"`)
	require.Contains(t, w.Body.String(), "another rebuild of this sale's gate is running")
}
