package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 4 << 10

// bodyReadTimeout is how long a request body may take to arrive once the
// headers have: a few KiB that a phone on a poor network still sends in well
// under a second. No purchase slot is held meanwhile.
const bodyReadTimeout = 3 * time.Second

// decodeJSON reads one JSON object from the request body into dst: at most
// MaxBodyBytes, no unknown fields, nothing after it. Any failure is an
// *flashline.InvalidError saying what was wrong.
func decodeJSON(c *gin.Context, dst any) error {
	return decodeJSONLimit(c, dst, MaxBodyBytes)
}

// decodeJSONLimit is decodeJSON for a body of at most limit bytes.
func decodeJSONLimit(c *gin.Context, dst any, limit int64) error {
	body, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBytes(body, dst)
}

// readBody reads the whole request body: at most limit bytes, within
// bodyReadTimeout. A failure is an *flashline.InvalidError.
func readBody(c *gin.Context, limit int64) ([]byte, error) {
	// A client that trickles its body must not hold a goroutine, and its
	// customer's in-flight allowance, for long.
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, flashline.Invalid("request body is larger than " + strconv.FormatInt(limit>>10, 10) + " KiB")
		}
		return nil, flashline.Invalid("could not read the request body")
	}
	return body, nil
}

// drainBody reads the request body and drops it, within the bounds readBody
// keeps (at most MaxBodyBytes, within bodyReadTimeout); false if it could
// not. io.Discard reads through a pooled buffer: nothing is allocated.
func drainBody(c *gin.Context) bool {
	var buf [1024]byte
	return drainRequest(c.Writer, c.Request, buf[:])
}

func decodeBytes(body []byte, dst any) error {
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		return flashline.Invalid("request body must be a JSON object")
	}
	if err := exactKeys(body, dst); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return flashline.Invalid("field " + typeErr.Field + " has the wrong type")
		default:
			return flashline.Invalid("malformed JSON: " + err.Error())
		}
	}
	if dec.More() {
		return flashline.Invalid("request body must hold exactly one JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return flashline.Invalid("request body must hold exactly one JSON object")
	}
	return nil
}

// writeJSON answers with v as JSON.
func writeJSON(c *gin.Context, status int, v any) {
	c.Set(outcomeKey, outcomeForStatus(status))
	c.JSON(status, v)
}

// writeRaw answers with an already encoded JSON body (a stored response).
func writeRaw(c *gin.Context, status int, body []byte) {
	c.Set(outcomeKey, outcomeForStatus(status))
	c.Data(status, "application/json; charset=utf-8", body)
}

func outcomeForStatus(status int) string {
	if status < 300 {
		return "ok"
	}
	return http.StatusText(status)
}

// addKeys adds the JSON keys of struct type t to known, with those of its
// embedded structs (promoted, as encoding/json does).
func addKeys(known map[string]bool, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			addKeys(known, f.Type)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		known[name] = true
	}
}

// exactKeys refuses what encoding/json would let through: object keys that
// match a field only case-insensitively ({"QUANTITY": 2}) and keys given
// twice. Unknown keys are left to DisallowUnknownFields.
func exactKeys(body []byte, dst any) error {
	known := map[string]bool{}
	addKeys(known, reflect.TypeOf(dst).Elem())
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // the opening brace
		return flashline.Invalid("malformed JSON: " + err.Error())
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return flashline.Invalid("malformed JSON: " + err.Error())
		}
		key, _ := tok.(string)
		switch {
		case seen[key]:
			return flashline.Invalid("field " + key + " is given twice")
		case !known[key]:
			return flashline.Invalid("unknown field " + strconv.Quote(key))
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return flashline.Invalid("malformed JSON: " + err.Error())
		}
	}
	return nil
}
