package handlers_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
	"github.com/flashline/flashline/internal/testkit/contract"
	"github.com/flashline/flashline/loadshed"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// TestMain runs the package's tests, every exchange of which is checked
// against the OpenAPI document (routes), and says which of the document's
// operations none of them exercised (-v, or a run of the whole package).
func TestMain(m *testing.M) {
	code := m.Run()
	if missed := contract.Unexercised(); code == 0 && len(missed) > 0 && testing.Verbose() {
		fmt.Fprintf(os.Stderr, "contract: operations no test here exercised: %s\n", strings.Join(missed, ", "))
	}
	os.Exit(code)
}

type noGate struct{}

func (noGate) Rebuild(context.Context, string) (int64, error) { return 0, nil }

// noConsole wires the console's routes in; the route test calls none.
type noConsole struct{ handlers.ConsoleStore }

// noStore wires the store's routes in (the lottery's with them); the route
// test calls none.
type noStore struct{ flashline.Store }

// TestOpenAPIHasEveryRoute: the document and the router list the same
// routes, with every optional part of the API wired in (waiting room,
// lottery, job UI, gate).
func TestOpenAPIHasEveryRoute(t *testing.T) {
	t.Parallel()
	verifier, err := auth.NewVerifier(jwtSecret, adminToken)
	require.NoError(t, err)
	limiter, err := loadshed.New(loadshed.Options{})
	require.NoError(t, err)
	keyring := roomtoken.DeriveKeyring(jwtSecret)
	h := handlers.Routes(handlers.Deps{
		Verifier: verifier, Limiter: limiter, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		Ready:   func(context.Context) error { return nil },
		RiverUI: http.NotFoundHandler(),
		Keyring: keyring,
		Room:    waitroom.NewRoom(nil, nil, keyring, limiter, waitroom.Options{Registry: prometheus.NewRegistry()}),
		Gate:    noGate{},
		Store:   noStore{},
		Console: noConsole{},
	})
	engine, ok := h.(interface{ Routes() gin.RoutesInfo })
	require.True(t, ok, "Routes returns what lists its routes (a *gin.Engine, or the front door in front of one)")

	param := regexp.MustCompile(`:([A-Za-z]+)`)
	var served []string
	for _, r := range engine.Routes() {
		path := param.ReplaceAllString(r.Path, "{$1}")
		if strings.HasPrefix(path, "/admin/riverui/") {
			// River's subtree: GET and POST documented, once for all of it
			// (River's own API is River's).
			if r.Method != http.MethodGet && r.Method != http.MethodPost {
				continue
			}
			path = "/admin/riverui/"
		}
		served = append(served, r.Method+" "+path)
	}
	doc, err := contract.Document()
	require.NoError(t, err)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	slices.Sort(served)
	served = slices.Compact(served)
	slices.Sort(documented)
	require.Equal(t, documented, served, "routes in the document (first) and served by the router (second)")
}

// TestOpenAPIServed: GET /openapi.json is the document.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.do(t, http.MethodGet, "/openapi.json", "", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "application/json; charset=utf-8", r.Header.Get("Content-Type"))
	require.JSONEq(t, string(api.OpenAPI()), string(r.Body))
}
