// Package contract checks HTTP exchanges against the API's OpenAPI document
// (handlers/openapi.json) with kin-openapi's openapi3filter, so that the
// document cannot drift from the server: the tests send every request through
// Handler (in process) or Transport (to a serve process), and a request or
// answer the document does not describe fails the test.
//
// The rules, for one exchange:
//   - a path the document does not have must be answered 404 not_found, and a
//     method it does not list for a path 405 method_not_allowed;
//   - the answer must be one the operation documents: its status, its
//     headers, its body's schema (an error's code among the ones listed for
//     that status);
//   - a request the document refuses (a body that breaks its schema, a
//     missing required header or parameter, no credentials) must be answered
//     with an error (4xx): the server may be stricter than the document,
//     never laxer.
//
// Two leniencies mirror the server's: a request body without a Content-Type
// is read as JSON, and a body the server stopped reading (too large, too
// slow, refused before it was read) is not checked. Everything under
// /admin/riverui/ is River's and is checked as the operation of
// /admin/riverui/ (its statuses and security only).
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/flashline/flashline/auth"
	"github.com/flashline/flashline/handlers"
)

// riverUIPrefix is the subtree River serves; the document has one
// operation for all of it.
const riverUIPrefix = "/admin/riverui/"

// Checker checks exchanges against the document. It is safe for concurrent
// use.
type Checker struct {
	doc    *openapi3.T
	router routers.Router

	mu         sync.Mutex
	operations map[string]int // operationId → exchanges checked
}

func init() {
	// The pages and their assets: text, checked for their content type only.
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
}

var (
	loadOnce sync.Once
	loaded   *openapi3.T
	loadErr  error
)

// Document loads and validates the API's OpenAPI document.
func Document() (*openapi3.T, error) {
	loadOnce.Do(func() {
		loader := openapi3.NewLoader()
		loaded, loadErr = loader.LoadFromData(handlers.OpenAPI())
		if loadErr != nil {
			loadErr = fmt.Errorf("contract: load the document: %w", loadErr)
			return
		}
		if err := loaded.Validate(loader.Context); err != nil {
			loadErr = fmt.Errorf("contract: the document is not valid OpenAPI: %w", err)
		}
	})
	return loaded, loadErr
}

// New returns a checker of the API's document.
func New() (*Checker, error) {
	doc, err := Document()
	if err != nil {
		return nil, err
	}
	// Route on paths alone: the servers the tests start listen on ports of
	// their own.
	local := *doc
	local.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(&local)
	if err != nil {
		return nil, fmt.Errorf("contract: router: %w", err)
	}
	return &Checker{doc: &local, router: router, operations: map[string]int{}}, nil
}

// Exchange is one request and its answer.
type Exchange struct {
	// Request is the request as sent (method, URL path and query, headers).
	Request *http.Request
	// RequestBody is the request's body; RequestBodyKnown says whether it is
	// the whole body (false: the server stopped reading it).
	RequestBody      []byte
	RequestBodyKnown bool
	Status           int
	Header           http.Header
	Body             []byte
}

var (
	exercisedMu sync.Mutex
	exercised   = map[string]int{}
)

// Unexercised lists the document's operations that no checker of this
// process has seen an exchange of, sorted.
func Unexercised() []string {
	doc, err := Document()
	if err != nil {
		return nil
	}
	exercisedMu.Lock()
	defer exercisedMu.Unlock()
	var out []string
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if exercised[op.OperationID] == 0 {
				out = append(out, op.OperationID)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Operations returns how many exchanges were checked per operationId.
func (c *Checker) Operations() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.operations))
	for k, v := range c.operations {
		out[k] = v
	}
	return out
}

// Check returns why x is not what the document describes, or nil.
func (c *Checker) Check(ctx context.Context, x Exchange) error {
	req := x.Request.Clone(ctx)
	u := *req.URL
	if strings.HasPrefix(u.Path, riverUIPrefix) {
		u.Path, u.RawPath = riverUIPrefix, ""
	}
	req.URL = &u
	route, params, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return c.checkComponent(x, http.StatusNotFound, "NotFound", "a path the document does not have")
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return c.checkComponent(x, http.StatusMethodNotAllowed, "MethodNotAllowed", "a method the document does not list for this path")
	case err != nil:
		return fmt.Errorf("contract: %s %s: no route: %w", x.Request.Method, x.Request.URL.Path, err)
	}
	c.mu.Lock()
	c.operations[route.Operation.OperationID]++
	c.mu.Unlock()
	exercisedMu.Lock()
	exercised[route.Operation.OperationID]++
	exercisedMu.Unlock()

	if len(x.RequestBody) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Body = http.NoBody
	if len(x.RequestBody) > 0 {
		req.Body = readCloser{bytes.NewReader(x.RequestBody)}
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:  authenticated,
			ExcludeRequestBody:  !x.RequestBodyKnown,
			SkipSettingDefaults: true,
			MultiError:          true,
		},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	respErr := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.Status,
		Header:                 x.Header,
		Body:                   readCloser{bytes.NewReader(x.Body)},
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	op := route.Operation.OperationID
	switch {
	case respErr != nil:
		return fmt.Errorf("contract: %s %s (%s) answered %d, which the document does not describe: %v\nbody: %s",
			x.Request.Method, x.Request.URL.Path, op, x.Status, respErr, clip(x.Body))
	case reqErr != nil && x.Status < 400:
		return fmt.Errorf("contract: %s %s (%s): the document refuses this request (%v), but the server answered %d\nrequest body: %s",
			x.Request.Method, x.Request.URL.Path, op, reqErr, x.Status, clip(x.RequestBody))
	}
	return nil
}

// checkComponent checks an answer against one of the document's shared
// responses (components/responses/name): the answer to a request that names
// no operation.
func (c *Checker) checkComponent(x Exchange, status int, name, what string) error {
	if x.Status != status {
		return fmt.Errorf("contract: %s %s is %s, yet the server answered %d (want %d)\nbody: %s",
			x.Request.Method, x.Request.URL.Path, what, x.Status, status, clip(x.Body))
	}
	if x.Request.Method == http.MethodHead {
		return nil
	}
	resp := c.doc.Components.Responses[name]
	mt := resp.Value.Content.Get("application/json")
	var v any
	if err := json.Unmarshal(x.Body, &v); err != nil {
		return fmt.Errorf("contract: %s %s answered %d with a body that is not JSON: %s", x.Request.Method, x.Request.URL.Path, x.Status, clip(x.Body))
	}
	if err := mt.Schema.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return fmt.Errorf("contract: %s %s answered %d: %v\nbody: %s", x.Request.Method, x.Request.URL.Path, x.Status, err, clip(x.Body))
	}
	return nil
}

// authenticated says whether the request carries the credential a security
// scheme asks for; whether it is a good one is the server's to say (401, 403).
func authenticated(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	req := in.RequestValidationInput.Request
	s := in.SecurityScheme
	switch {
	case s.Type == "http" && s.Scheme == "bearer":
		if _, ok := auth.BearerToken(req.Header.Get("Authorization")); ok {
			return nil
		}
		return errors.New("no bearer token")
	case s.Type == "apiKey" && s.In == "cookie":
		if _, err := req.Cookie(s.Name); err == nil {
			return nil
		}
		return fmt.Errorf("no %s cookie", s.Name)
	case s.Type == "apiKey" && s.In == "header":
		if req.Header.Get(s.Name) != "" {
			return nil
		}
		return fmt.Errorf("no %s header", s.Name)
	}
	return fmt.Errorf("security scheme %s not understood", in.SecuritySchemeName)
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func clip(b []byte) string {
	const max = 2000
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
