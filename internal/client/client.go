package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/flashline/flashline/api"
)

// Client speaks the contract to the instance at BaseURL.
type Client struct {
	// BaseURL is the instance's scheme, host and port
	// ("http://127.0.0.1:8080"), without a trailing slash; paths are
	// appended to it.
	BaseURL string
	HTTP    *http.Client
}

// New returns a client of the instance at baseURL that sends through hc
// (http.DefaultClient when nil).
func New(baseURL string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: hc}
}

// Request is one request, as raw as a test needs it.
type Request struct {
	Method string
	// Path is appended to the base URL as it is, query included
	// ("/sales/sale_…/status?token=…").
	Path string
	// Token, when not empty, is sent as "Authorization: Bearer <Token>".
	// A malformed Authorization goes in Header instead.
	Token string
	// Body, when not empty, is sent with "Content-Type: application/json".
	Body string
	// Header is name/value pairs, added after the above (not set): a name
	// may repeat.
	Header []string
}

// Response is one answer: its status, headers and body byte for byte.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrorBody is the contract's error, {"error": {"code", "message"}}: an
// answer, not a Go error.
type ErrorBody = api.ErrorDetail

// ErrorBody decodes the contract's error from the body; it is zero when the
// body is not one (a success, or not JSON).
func (r Response) ErrorBody() ErrorBody {
	var e api.ErrorBody
	_ = json.Unmarshal(r.Body, &e)
	return e.Error
}

// Code is the contract's error code ("sold_out"), or "" when the body is not
// an error.
func (r Response) Code() string { return r.ErrorBody().Code }

// RetryAfter is the Retry-After header ("" when absent).
func (r Response) RetryAfter() string { return r.Header.Get("Retry-After") }

// Replayed says whether the answer is a stored one replayed
// (Idempotent-Replayed: true).
func (r Response) Replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// Do sends req and reads the whole answer. The error is a transport failure;
// when the body could not be read to its end, the status, headers and the
// part read are returned with it.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, c.BaseURL+req.Path, body)
	if err != nil {
		return Response{}, err
	}
	if req.Token != "" {
		hreq.Header.Set("Authorization", "Bearer "+req.Token)
	}
	if req.Body != "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(req.Header); i += 2 {
		hreq.Header.Add(req.Header[i], req.Header[i+1])
	}
	resp, err := c.HTTP.Do(hreq)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}
