package contract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flashline/flashline/api"
	"github.com/flashline/flashline/auth"
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
	compiler   *jsonschema.Compiler
	schemas    map[string]*jsonschema.Schema // JSON pointer → compiled
}

// docURL names the document for the JSON Schema compiler.
const docURL = "mem:///openapi.json"

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
		loaded, loadErr = loader.LoadFromData(api.OpenAPI())
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
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI()))
	if err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020) // OpenAPI 3.1's dialect
	compiler.AssertFormat()                     // date-time is checked
	if err := compiler.AddResource(docURL, raw); err != nil {
		return nil, fmt.Errorf("contract: %w", err)
	}
	return &Checker{doc: &local, router: router, operations: map[string]int{},
		compiler: compiler, schemas: map[string]*jsonschema.Schema{}}, nil
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
	// Bodies are checked below against schemas compiled once (kin-openapi
	// compiles a 3.1 schema again on every check, milliseconds each);
	// openapi3filter checks the rest: security, parameters, status, headers.
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:  authenticated,
			ExcludeRequestBody:  true,
			SkipSettingDefaults: true,
			MultiError:          true,
		},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr == nil && x.RequestBodyKnown {
		reqErr = c.checkRequestBody(route, req.Header.Get("Content-Type"), x.RequestBody)
	}
	respErr := openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.Status,
		Header:                 x.Header,
		Body:                   readCloser{bytes.NewReader(x.Body)},
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true, MultiError: true},
	})
	if respErr == nil && x.Request.Method != http.MethodHead {
		respErr = c.checkResponseBody(route, x.Status, x.Header.Get("Content-Type"), x.Body)
	}
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

// checkRequestBody checks a request's body against its operation's
// requestBody.
func (c *Checker) checkRequestBody(route *routers.Route, contentType string, body []byte) error {
	rb := route.Operation.RequestBody
	if rb == nil || rb.Value == nil {
		return nil
	}
	if len(body) == 0 {
		if rb.Value.Required {
			return errors.New("request body is required")
		}
		return nil
	}
	mt := mediaType(contentType)
	if rb.Value.Content.Get(mt) == nil {
		return fmt.Errorf("request body of content type %q, not one the document lists", contentType)
	}
	if mt != jsonType {
		return nil // a form: its one field is the server's to judge
	}
	base := rb.Ref
	if base == "" {
		base = operationPointer(route) + "/requestBody"
	}
	return c.validateJSON(base+"/content/"+escape(mt)+"/schema", body)
}

// checkResponseBody checks an answer's body against the response the
// document gives for its status (which openapi3filter found).
func (c *Checker) checkResponseBody(route *routers.Route, status int, contentType string, body []byte) error {
	resp := route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return nil
	}
	if len(resp.Value.Content) == 0 {
		return nil
	}
	mt := mediaType(contentType)
	if resp.Value.Content.Get(mt) == nil {
		return fmt.Errorf("content type %q is not one the document lists for %d", contentType, status)
	}
	if mt != jsonType {
		return nil // a page, a script, the metrics: text
	}
	base := resp.Ref
	if base == "" {
		base = operationPointer(route) + "/responses/" + strconv.Itoa(status)
	}
	return c.validateJSON(base+"/content/"+escape(mt)+"/schema", body)
}

const jsonType = "application/json"

// validateJSON validates body against the schema at pointer ("#/…") in the
// document, compiled once.
func (c *Checker) validateJSON(pointer string, body []byte) error {
	c.mu.Lock()
	s, ok := c.schemas[pointer]
	if !ok {
		var err error
		s, err = c.compiler.Compile(docURL + pointer)
		if err != nil {
			c.mu.Unlock()
			return fmt.Errorf("compile %s: %w", pointer, err)
		}
		c.schemas[pointer] = s
	}
	c.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("body does not match %s: %w", pointer, err)
	}
	return nil
}

// operationPointer is the JSON pointer of the route's operation.
func operationPointer(route *routers.Route) string {
	return "#/paths/" + escape(route.Path) + "/" + strings.ToLower(route.Method)
}

// escape escapes a JSON pointer's token.
func escape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType
	}
	return mt
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
	if err := c.validateJSON("#/components/responses/"+name+"/content/"+escape(jsonType)+"/schema", x.Body); err != nil {
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
