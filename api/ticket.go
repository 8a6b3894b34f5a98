package api

import "strconv"

// Ticket is what a crowd asks for before an open, and the edge's front door
// (handlers/edgedoor.go) writes it when memory answers: by hand, as
// Status's AppendJSON does, field by field in the struct's order with its
// omitempty rules (challenge is null when there is none), the bytes
// encoding/json writes for it. TestTicketJSONAsReflection holds the two to
// the same bytes.

// AppendJSON appends t's JSON form to b.
func (t Ticket) AppendJSON(b []byte) []byte {
	b = append(b, `{"token":`...)
	b = appendString(b, t.Token)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, t.Position, 10)
	if r := t.PositionRange; r != nil {
		b = append(b, `,"positionRange":{"p25":`...)
		b = strconv.AppendInt(b, r.P25, 10)
		b = append(b, `,"p75":`...)
		b = strconv.AppendInt(b, r.P75, 10)
		b = append(b, '}')
	}
	b = append(b, `,"estimatedWaitSeconds":`...)
	b = strconv.AppendInt(b, t.EstimatedWaitSeconds, 10)
	b = append(b, `,"pollAfterMs":`...)
	b = strconv.AppendInt(b, t.PollAfterMs, 10)
	b = append(b, `,"policy":`...)
	b = appendString(b, t.Policy)
	if c := t.Challenge; c != nil {
		b = append(b, `,"challenge":{"nonce":`...)
		b = appendString(b, c.Nonce)
		b = append(b, `,"bits":`...)
		b = strconv.AppendInt(b, int64(c.Bits), 10)
		return append(b, `}}`...)
	}
	return append(b, `,"challenge":null}`...)
}
