package api

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Status is the answer a waiting crowd polls for every few seconds each, and
// the front door (handlers/frontdoor.go) writes it when memory answers. It
// does so with AppendJSON, by hand, field by field in the struct's order
// with its omitempty rules: what encoding/json writes for it (the route,
// the event stream), at a fraction of the reflection's cost.
// TestStatusJSONAsReflection holds the two to the same bytes.

// AppendJSON appends s's JSON form to b.
func (s Status) AppendJSON(b []byte) []byte {
	b = append(b, `{"state":`...)
	b = appendString(b, s.State)
	b = appendInt(b, `,"position":`, s.Position)
	if r := s.PositionRange; r != nil {
		b = append(b, `,"positionRange":{"p25":`...)
		b = strconv.AppendInt(b, r.P25, 10)
		b = append(b, `,"p75":`...)
		b = strconv.AppendInt(b, r.P75, 10)
		b = append(b, '}')
	}
	b = appendInt(b, `,"estimatedWaitSeconds":`, s.EstimatedWaitSeconds)
	b = appendInt(b, `,"pollAfterMs":`, s.PollAfterMs)
	b = appendTrue(b, `,"paused":true`, s.Paused)
	b = appendTrue(b, `,"held":true`, s.Held)
	b = appendTrue(b, `,"stale":true`, s.Stale)
	if s.Message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, s.Message)
	}
	if c := s.Challenge; c != nil {
		b = append(b, `,"challenge":{"nonce":`...)
		b = appendString(b, c.Nonce)
		b = append(b, `,"bits":`...)
		b = strconv.AppendInt(b, int64(c.Bits), 10)
		b = append(b, '}')
	}
	if s.AdmissionToken != "" {
		b = append(b, `,"admissionToken":`...)
		b = appendString(b, s.AdmissionToken)
	}
	b = appendInt(b, `,"expiresIn":`, s.ExpiresIn)
	if s.QueueIsFull != nil {
		b = append(b, `,"queueIsFull":`...)
		b = strconv.AppendBool(b, *s.QueueIsFull)
	}
	for i, v := range s.Variants {
		if i == 0 {
			b = append(b, `,"variants":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(b, `{"sku":`...)
		b = appendString(b, v.SKU)
		b = append(b, `,"title":`...)
		b = appendString(b, v.Title)
		b = append(b, `,"availability":`...)
		b = appendString(b, v.Availability)
		b = append(b, '}')
	}
	if len(s.Variants) > 0 {
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendInt(b []byte, key string, v *int64) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), *v, 10)
}

func appendTrue(b []byte, field string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, field...)
}

// appendString appends s as a JSON string as encoding/json writes it: as it
// is when every byte is printable ASCII that needs no escape (states,
// tokens, nonces, most messages), else by encoding/json itself, whose
// escapes (HTML-safe, U+2028, invalid UTF-8) are then its own. The bytes
// are judged by a table, eight at a time: a ticket's token (about 400
// bytes) was an eighth of the edge's new ticket, judged byte by byte with
// seven comparisons each.
func appendString(b []byte, s string) []byte {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if plainByte[s[i]]&plainByte[s[i+1]]&plainByte[s[i+2]]&plainByte[s[i+3]]&
			plainByte[s[i+4]]&plainByte[s[i+5]]&plainByte[s[i+6]]&plainByte[s[i+7]] == 0 {
			return appendEscaped(b, s)
		}
	}
	for ; i < len(s); i++ {
		if plainByte[s[i]] == 0 {
			return appendEscaped(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendEscaped appends s as encoding/json writes it. It marshals a copy:
// s itself handed to json.Marshal would leak every string and pointer of
// the answer it is a field of, and the views the doors write on the stack
// (handlers' appendStatus, appendTicket) would go to the heap.
func appendEscaped(b []byte, s string) []byte {
	enc, _ := json.Marshal(strings.Clone(s)) // a string always encodes
	return append(b, enc...)
}

// plainByte is 1 for the bytes encoding/json writes as they are in a
// string: printable ASCII but '"', '\\' and the HTML-escaped '<', '>', '&'.
var plainByte = func() (t [256]uint8) {
	for c := 0x20; c <= 0x7e; c++ {
		if c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
			t[c] = 1
		}
	}
	return t
}()
