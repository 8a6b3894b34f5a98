package contract

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// maxReported bounds the mismatches one test reports (the first ones).
const maxReported = 20

// Recorder checks the exchanges of one test and fails it, when it ends, on
// every mismatch found.
type Recorder struct {
	*Checker
	mu     sync.Mutex
	failed []error
	n      int
}

// For returns a recorder whose mismatches fail t when t ends (the exchanges
// may happen on other goroutines; t.Cleanup reports them).
func For(t testing.TB) *Recorder {
	t.Helper()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	r := &Recorder{Checker: c}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, err := range r.failed {
			t.Error(err)
		}
		if r.n > len(r.failed) {
			t.Errorf("contract: %d more mismatches", r.n-len(r.failed))
		}
	})
	return r
}

func (r *Recorder) record(ctx context.Context, x Exchange) {
	if err := r.Check(ctx, x); err != nil {
		r.mu.Lock()
		r.n++
		if len(r.failed) < maxReported {
			r.failed = append(r.failed, err)
		}
		r.mu.Unlock()
	}
}

// Handler serves through h and checks every exchange against the document.
func (r *Recorder) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body := &teeBody{rc: req.Body}
		if req.Body == nil || req.Body == http.NoBody {
			body.done = true
		} else {
			req.Body = body
		}
		rw := &recordingWriter{w: w, header: http.Header{}}
		sent := req.Clone(req.Context())
		h.ServeHTTP(rw, req)
		if rw.status == 0 {
			rw.status = http.StatusOK
			rw.header = w.Header().Clone()
		}
		if rw.hijacked {
			return
		}
		body.mu.Lock()
		reqBody, known := bytes.Clone(body.buf.Bytes()), body.done
		body.mu.Unlock()
		r.record(context.WithoutCancel(req.Context()), Exchange{
			Request: sent, RequestBody: reqBody, RequestBodyKnown: known,
			Status: rw.status, Header: rw.header, Body: rw.body.Bytes(),
		})
	})
}

// teeBody keeps what the handler reads of a request body, and whether it
// read it to its end.
type teeBody struct {
	rc   io.ReadCloser
	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	b.buf.Write(p[:n])
	if errors.Is(err, io.EOF) {
		b.done = true
	}
	b.mu.Unlock()
	return n, err
}

func (b *teeBody) Close() error { return b.rc.Close() }

// recordingWriter passes an answer through and keeps a copy of it.
type recordingWriter struct {
	w        http.ResponseWriter
	status   int
	header   http.Header
	body     bytes.Buffer
	hijacked bool
}

func (rw *recordingWriter) Header() http.Header { return rw.w.Header() }

func (rw *recordingWriter) WriteHeader(status int) {
	if rw.status == 0 && status >= 200 {
		rw.status = status
		rw.header = rw.w.Header().Clone()
	}
	rw.w.WriteHeader(status)
}

func (rw *recordingWriter) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	rw.body.Write(p)
	return rw.w.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (read deadlines).
func (rw *recordingWriter) Unwrap() http.ResponseWriter { return rw.w }

func (rw *recordingWriter) Flush() { _ = http.NewResponseController(rw.w).Flush() }

func (rw *recordingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	rw.hijacked = true
	return http.NewResponseController(rw.w).Hijack()
}

// Transport sends through base (http.DefaultTransport when nil) and checks
// every exchange against the document. It reads each answer's body whole
// before handing it on.
func (r *Recorder) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper{r: r, base: base}
}

type roundTripper struct {
	r    *Recorder
	base http.RoundTripper
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	sent := req.Clone(req.Context())
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		// The answer was cut short (a cancelled request, a dead server):
		// nothing whole to check. The caller sees the same failure.
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return resp, nil
	}
	t.r.record(context.WithoutCancel(req.Context()), Exchange{
		Request: sent, RequestBody: reqBody, RequestBodyKnown: true,
		Status: resp.StatusCode, Header: resp.Header, Body: body,
	})
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
