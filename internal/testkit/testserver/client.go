package testserver

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/internal/client"
)

// Token mints a customer JWT valid for an hour.
func Token(t testing.TB, customerID string) string {
	t.Helper()
	tok, err := auth.Mint(JWTSecret, customerID, time.Hour, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Client speaks the HTTP contract to any of a test's servers: every call
// names its server. It is internal/client, addressed by URL.
type Client struct {
	HTTP *http.Client
}

// NewClient returns a client with a connection pool big enough for a crowd.
func NewClient() *Client {
	tr := &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	return &Client{HTTP: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// running maps the URL of each server Start started to the server.
var running sync.Map

// To is the typed client of the server at base, sharing c's connections.
// To a server Start started, every exchange is checked against the OpenAPI
// document (internal/testkit/contract) and a mismatch fails the test that started
// it.
func (c *Client) To(base string) *client.Client {
	base = strings.TrimRight(base, "/")
	if v, ok := running.Load(base); ok {
		checked := *c.HTTP
		checked.Transport = v.(*Server).contract.Transport(c.HTTP.Transport)
		return client.New(base, &checked)
	}
	return client.New(base, c.HTTP)
}

// Checked wraps a transport (http.DefaultTransport when nil) so that every
// exchange through it is checked against the OpenAPI document, as To's are,
// and a mismatch fails the test that started s: for a client that is not
// this package's (the load test's). The check is the document's, whichever
// server the exchange is with.
func (s *Server) Checked(rt http.RoundTripper) http.RoundTripper {
	return s.contract.Transport(rt)
}

// Response is a status, headers and body.
type Response = client.Response

// Do sends a request to url with a bearer token (none when empty), a body
// (none when empty) and headers (name/value pairs, added).
func (c *Client) Do(ctx context.Context, method, url, token, body string, headers ...string) (Response, error) {
	base, path := splitURL(url)
	return c.To(base).Do(ctx, client.Request{Method: method, Path: path, Token: token, Body: body, Header: headers})
}

// splitURL cuts "http://host:port/path?query" after the host.
func splitURL(url string) (base, path string) {
	scheme, rest, ok := strings.Cut(url, "://")
	if i := strings.IndexByte(rest, '/'); ok && i >= 0 {
		return scheme + "://" + rest[:i], rest[i:]
	}
	return url, ""
}

// Reserve posts a reservation.
func (c *Client) Reserve(ctx context.Context, base, saleID, token, key string, quantity int) (Response, error) {
	r, err := c.To(base).Reserve(ctx, token, client.ReserveRequest{SaleID: saleID, IdempotencyKey: key, Quantity: quantity})
	return r.Response, err
}

// CreateSale creates a sale through the admin API and returns its id.
func (c *Client) CreateSale(t testing.TB, base, body string) string {
	t.Helper()
	r, err := c.To(base).CreateSaleJSON(context.Background(), AdminToken, body)
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("create sale: %v %d %s", err, r.Status, r.Body)
	}
	if r.Value.SaleID == "" {
		t.Fatalf("create sale: no saleId in %s", r.Body)
	}
	return r.Value.SaleID
}
