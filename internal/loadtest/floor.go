package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// The floor: what answering one request costs on this machine below
// Flashline, so that the front door's cost per refusal can be read against
// it. A floor server answers the overload scenario as a sold-out sale would
// — the admin's create-sale call with a sale id, /healthz with 200, every
// other request with the front door's sold-out refusal, the same status,
// headers and body length — and does nothing else: no router, no token, no
// sale, no metrics. scripts/overload-curve.sh floods it in the same cap as
// the service.
//
//   - "http": net/http's server with one handler that writes the prepared
//     answer: the least any handler behind net/http can cost.
//   - "tcp": a loop per connection that reads a request's head and body and
//     writes the prepared bytes, no net/http at all: what the kernel's
//     reads and writes (and the Go runtime's network poller) cost alone.

// FloorSale is the sale id a floor server hands out.
const FloorSale = "sale_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"

const (
	floorSoldOut = `{"error":{"code":"sold_out","message":"the sale is sold out"}}`
	floorCreated = `{"saleId":"` + FloorSale + `"}`
	floorHealth  = `{"status":"ok"}`
)

// Floor serves kind ("http" or "tcp") on addr until ctx ends.
func Floor(ctx context.Context, addr, kind string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("loadtest: floor: %w", err)
	}
	switch kind {
	case "http":
		srv := &http.Server{Handler: http.HandlerFunc(floorHTTP), ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("loadtest: floor: %w", err)
		}
		return nil
	case "tcp":
		go func() { <-ctx.Done(); _ = ln.Close() }()
		for {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("loadtest: floor: %w", err)
			}
			go floorConn(c)
		}
	default:
		return fmt.Errorf("loadtest: floor: %q is neither http nor tcp", kind)
	}
}

var (
	floorJSON   = []string{"application/json; charset=utf-8"}
	floorAny    = []string{"*"}
	floorExpose = []string{"Retry-After, Idempotent-Replayed"}
	floorLength = []string{strconv.Itoa(len(floorSoldOut))}
	floorBody   = []byte(floorSoldOut)
)

func floorHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/admin/"):
		w.Header().Set("Content-Type", floorJSON[0])
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, floorCreated)
	case r.URL.Path == "/healthz":
		w.Header().Set("Content-Type", floorJSON[0])
		_, _ = io.WriteString(w, floorHealth)
	default:
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
		h := w.Header()
		h["Content-Type"] = floorJSON
		h["Content-Length"] = floorLength
		h["Access-Control-Allow-Origin"] = floorAny
		h["Access-Control-Expose-Headers"] = floorExpose
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write(floorBody)
	}
}

// The tcp floor's answers, whole: floorHTTP's own, recorded once and
// written out as net/http would send them (with a Date of the same length).
var (
	floorRawSoldOut = floorRaw(http.MethodPost, "/sales/"+FloorSale+"/reservations")
	floorRawCreated = floorRaw(http.MethodPost, "/admin/sales")
	floorRawHealth  = floorRaw(http.MethodGet, "/healthz")
)

func floorRaw(method, path string) []byte {
	rec := httptest.NewRecorder()
	floorHTTP(rec, httptest.NewRequest(method, path, http.NoBody))
	res := rec.Result()
	res.ContentLength = int64(rec.Body.Len())
	res.Header.Set("Date", "Thu, 01 Jan 2026 00:00:00 GMT")
	var b bytes.Buffer
	if err := res.Write(&b); err != nil {
		panic(err) // writing to a buffer does not fail
	}
	return b.Bytes()
}

// floorConn answers c's requests in turn: the request line, the headers
// (Content-Length is the only one read), the body dropped, the answer
// written; anything it cannot read ends the connection.
func floorConn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		answer := floorRawSoldOut
		switch {
		case strings.HasPrefix(string(line), "POST /admin/"):
			answer = floorRawCreated
		case strings.HasPrefix(string(line), "GET /healthz"):
			answer = floorRawHealth
		}
		length := 0
		for {
			h, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(h) <= 2 { // the blank line
				break
			}
			if name, value, ok := strings.Cut(string(h), ":"); ok && strings.EqualFold(name, "Content-Length") {
				if length, err = strconv.Atoi(strings.TrimSpace(value)); err != nil || length < 0 || length > 1<<16 {
					return
				}
			}
		}
		if _, err := br.Discard(length); err != nil {
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}
