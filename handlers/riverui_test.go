package handlers_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/loadshed"
)

// TestRiverUIIsAdminOnly: River's UI has no auth of its own; the router puts
// it behind the admin token.
func TestRiverUIIsAdminOnly(t *testing.T) {
	t.Parallel()
	v, err := auth.NewVerifier("ui-secret", "ui-admin")
	require.NoError(t, err)
	lim, err := loadshed.New(loadshed.Options{})
	require.NoError(t, err)
	h := handlers.Routes(handlers.Deps{
		Verifier: v, Limiter: lim, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Ready:   func(context.Context) error { return nil },
		RiverUI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("river ui")) }),
	})
	customer, err := auth.Mint("ui-secret", "alice", time.Hour, time.Time{})
	require.NoError(t, err)
	for _, tt := range []struct {
		name, token string
		status      int
	}{
		{"NoToken", "", http.StatusUnauthorized},
		{"Customer", customer, http.StatusForbidden},
		{"Admin", "ui-admin", http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/admin/riverui/jobs", nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
		})
	}
}
