package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashline/flashline"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 4 << 10

// decodeJSON reads one JSON object from the request body into dst: at most
// MaxBodyBytes, no unknown fields, nothing after it. Any failure is an
// *flashline.InvalidError saying what was wrong.
func decodeJSON(c *gin.Context, dst any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return flashline.Invalid("request body is larger than 4 KiB")
		}
		return flashline.Invalid("could not read the request body")
	}
	return decodeBytes(body, dst)
}

func decodeBytes(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return flashline.Invalid("request body must be a JSON object")
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
