package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/waitroom"
	"github.com/flashline/flashline/waitroom/edge"
)

// The edge (flashline serve --role edge): the waiting room without a
// database. An origin (role origin or all) serves the edges' side here:
// the watermarks document they pull (waitroom/roomtoken/documents.go) and the blocks
// of positions they lease; and an edge passes what it does not answer on
// to an origin (originProxy). routes_edge.go lists both sides' routes.

// maxEdgeBody bounds an edge's request to an origin: a report names every
// sale it counted tickets in, the counts of its lines, and a batch of its
// pre-open holders (roomtoken.MaxReportedHolders).
const maxEdgeBody = 1 << 20

// edgeRequest is the body of POST /edge/sync (report) and /edge/lease
// (request): an edge's signed request.
type edgeRequest struct {
	Report  string `json:"report"`
	Request string `json:"request"`
}

// handleWatermarks is GET /edge/watermarks: the waiting room's signed
// document, which reveals nothing secret (the draw's seed is sealed under
// the waiting-room keys): public, and cacheable for a second by a CDN in
// front of origins.
func handleWatermarks(room *waitroom.Room) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=1")
		writeJSON(c, http.StatusOK, api.Watermarks{Document: room.Watermarks()})
	}
}

// handleEdgeSync is POST /edge/sync, an edge's pull: its signed report of
// the pre-open tickets it counted (and a batch of their holders, written
// before the answer), answered with the document.
func handleEdgeSync(room *waitroom.Room, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req edgeRequest
		if err := decodeJSONLimit(c, &req, maxEdgeBody); err != nil {
			writeError(c, logger, err)
			return
		}
		written, err := room.EdgeSync(c.Request.Context(), req.Report)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		c.Header("Cache-Control", "no-store")
		writeJSON(c, http.StatusOK, api.Watermarks{Document: room.Watermarks(), HoldersWritten: written})
	}
}

// handleEdgeLease is POST /edge/lease: a block of positions leased to an
// edge.
func handleEdgeLease(room *waitroom.Room, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req edgeRequest
		if err := decodeJSONLimit(c, &req, maxEdgeBody); err != nil {
			writeError(c, logger, err)
			return
		}
		a, err := room.EdgeLease(c.Request.Context(), req.Request)
		if err != nil {
			writeError(c, logger, err)
			return
		}
		c.Header("Cache-Control", "no-store")
		writeJSON(c, http.StatusOK, a)
	}
}

// originProxy passes requests on to the origins: its customer's first
// (edge.CustomerOrigin of its Authorization header; a request without one,
// the next origin in turn), the origins marked down last (edge.Client's
// OriginDown), the next when one cannot be reached (only before anything
// was sent to it for a request with a body).
type originProxy struct {
	origins []origin
	health  originHealth
	turn    atomic.Uint32 // the requests without a customer, in turn
	proxy   *httputil.ReverseProxy
	logger  *slog.Logger
}

// origin is an origin's URL and its index among the edge's origins.
type origin struct {
	url *url.URL
	n   int
}

// originHealth is what the proxy reads and marks of its origins, by their
// index in the edge's list (edge.Client's).
type originHealth interface {
	OriginDown(n int) bool
	MarkOrigin(n int, up bool)
}

// errNoOrigin is the proxy's error when no origin could be reached.
var errNoOrigin = errors.New("no origin answers")

func newOriginProxy(origins []string, health originHealth, timeout time.Duration, logger *slog.Logger) *originProxy {
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	p := &originProxy{health: health, logger: logger}
	for n, o := range origins {
		u, err := url.Parse(strings.TrimRight(o, "/"))
		if err == nil {
			p.origins = append(p.origins, origin{url: u, n: n})
		}
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: timeout,
		TLSHandshakeTimeout:   2 * time.Second,
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(originKey{}).(*url.URL)
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Host = target.Host
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			failed := r.Context().Value(failedKey{}).(*error)
			*failed = err
		},
	}
	return p
}

// order is the order r tries the origins in (indexes of p.origins, in
// buf): from its customer's on, those marked down after the others.
func (p *originProxy) order(r *http.Request, buf []int) []int {
	k := len(p.origins)
	if k == 0 {
		return buf[:0]
	}
	var first int
	if key := r.Header.Get("Authorization"); key != "" {
		first = edge.CustomerOrigin(key, k)
	} else {
		first = int(p.turn.Add(1) % uint32(k))
	}
	out := buf[:0]
	for i := range k {
		if o := (first + i) % k; !p.health.OriginDown(p.origins[o].n) {
			out = append(out, o)
		}
	}
	for i := range k {
		if o := (first + i) % k; !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

type originKey struct{}
type failedKey struct{}

func (p *originProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The body is read once, bounded, so that it can be sent again to the
	// next origin when the first cannot be reached.
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, maxEdgeBody+1))
		if err != nil || len(body) > maxEdgeBody {
			writeBareError(w, http.StatusBadRequest, "invalid_request", "the request body could not be read, or is too large")
			return
		}
	}
	// The origin's answer carries its own CORS headers (or none, on the
	// admin's routes): none of the edge's are left to double them.
	h := w.Header()
	h.Del("Access-Control-Allow-Origin")
	h.Del("Access-Control-Expose-Headers")
	var buf [8]int
	var lastErr error
	for _, o := range p.order(r, buf[:]) {
		var failed error
		ctx := context.WithValue(r.Context(), originKey{}, p.origins[o].url)
		ctx = context.WithValue(ctx, failedKey{}, &failed)
		out := r.WithContext(ctx)
		if body != nil {
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		p.proxy.ServeHTTP(w, out)
		if failed == nil {
			if p.health.OriginDown(p.origins[o].n) {
				p.health.MarkOrigin(p.origins[o].n, true)
			}
			return
		}
		lastErr = failed
		if r.Context().Err() == nil {
			// Not its client gone: the origin could not be reached,
			// or did not answer in time.
			p.health.MarkOrigin(p.origins[o].n, false)
		}
		// Only a request that never reached the origin (it could not be
		// connected to) is sent to the next one, or one that changes
		// nothing: a reservation that reached an origin and got no answer
		// may have been made, and its client retries with its key.
		if r.Context().Err() != nil || !(notConnected(failed) || r.Method == http.MethodGet || r.Method == http.MethodHead) {
			break
		}
	}
	p.logger.WarnContext(r.Context(), "handlers: edge: passing on to an origin", "path", r.URL.Path, "err", errors.Join(errNoOrigin, lastErr))
	h.Set("Retry-After", "2")
	// Readable by a page served from another host, which then says "come
	// back shortly" rather than seeing a network error.
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", CORSExposeHeaders)
	writeBareError(w, http.StatusServiceUnavailable, "overloaded", "no origin answers right now; retry shortly")
}

// writeBareError answers the API's error shape (api.ErrorBody) on a bare
// ResponseWriter, where there is no gin context for writeError.
func writeBareError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: message}})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// notConnected reports whether err is a failure to connect: nothing of the
// request was sent.
func notConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
