package handlers

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom"
)

// The status stream, GET /sales/{saleId}/status/stream?token=...: a waiting
// client's one long request instead of a poll every pollAfterMs. Its
// answer is server-sent events (text/event-stream), each an "event: status"
// whose data is the answer GET .../status would give now, sent when it
// changes: at once when what every waiter is told changes (the sale sold
// out, back with units, paused, resumed, the queue held or released, a
// message: salecache's Watch), and otherwise at the pace the answers set
// (PollAfter), as a poll would. The stream ends after an answer the client
// must act on (admitted: the admission token is in it; challenge_required:
// solve it and connect again with the solution, or ask GET .../status with
// it), after "sold out" for
// good, after streamLifetime (reconnect), or when the server begins to shut
// down (Deps.Draining: the client asks again elsewhere); a comment every
// streamHeartbeat keeps proxies from closing it. A client that cannot
// stream (or is refused one: 503 overloaded past --max-streams) polls as
// before.
//
// What an open stream costs is a goroutine, the connection's buffers and
// the last answer sent (measured in TestStatusStreamMemory), no database
// and no admission slot: streams are bounded by their own count instead.

const (
	streamLifetime  = 5 * time.Minute
	streamHeartbeat = 10 * time.Second
	// streamMinPoll bounds how often one stream asks the room again when
	// nothing every waiter hears has changed.
	streamMinPoll = 250 * time.Millisecond
	// streamWriteTimeout bounds one event's write: a client that stops
	// reading is dropped, its resources freed.
	streamWriteTimeout = 10 * time.Second
)

// DefaultMaxStreams is how many status streams an instance keeps open at
// once unless told otherwise: each holds a connection, so serve's
// --max-conns (10,000 by default) bounds them too.
const DefaultMaxStreams = 5000

func orDefault(n int) int {
	if n <= 0 {
		return DefaultMaxStreams
	}
	return n
}

// streams counts the open status streams against their bound; draining
// (nil: never) ends them all.
type streams struct {
	max      int64
	open     atomic.Int64
	draining <-chan struct{}
}

func newStreams(max int, reg prometheus.Registerer, draining <-chan struct{}) *streams {
	s := &streams{max: int64(max), draining: draining}
	if reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flashline_status_streams",
			Help: "Waiting clients' status streams open on this instance.",
		}, func() float64 { return float64(s.open.Load()) }))
	}
	return s
}

// take reserves a stream if the bound allows one; done gives it back.
func (s *streams) take() bool {
	if s.open.Add(1) > s.max {
		s.open.Add(-1)
		return false
	}
	return true
}

func (s *streams) done() { s.open.Add(-1) }

func handleStatusStream(room *waitroom.Room, s *streams, logger *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !s.take() {
			writeError(c, logger, flashline.ErrOverloaded)
			return
		}
		defer s.done()
		ctx := c.Request.Context()
		saleID, customerID, token, solution := c.Param("saleId"), actorOf(c).CustomerID, c.Query("token"), c.Query("solution")
		// The watch is taken before each answer is made: a change between
		// the two wakes the wait that follows.
		watch := room.Watch(saleID)
		res, err := room.Status(ctx, saleID, customerID, token, solution)
		if err != nil {
			// A ticket not valid, a sale without a room: the poll's answer.
			writeError(c, logger, err)
			return
		}
		rc := http.NewResponseController(c.Writer)
		// The request was read: no read deadline (the server's ReadTimeout)
		// may end the stream; each write has its own deadline instead.
		_ = rc.SetReadDeadline(time.Time{})
		h := c.Writer.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Accel-Buffering", "no")
		c.Status(http.StatusOK)
		c.Set(outcomeKey, "stream")
		var last []byte
		send := func(b ...[]byte) bool {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			for _, p := range b {
				if _, err := c.Writer.Write(p); err != nil {
					return false
				}
			}
			return rc.Flush() == nil
		}
		end := time.NewTimer(streamLifetime)
		defer end.Stop()
		heartbeat := time.NewTicker(streamHeartbeat)
		defer heartbeat.Stop()
		for {
			// An answer is sent when it differs from the last one sent in
			// more than its jittered pollAfterMs (a poll's pace, which a
			// stream does not need): a waiter far back hears of its place
			// when it moves, not every time it is worked out.
			view := NewStatusView(res)
			pollAfter := view.PollAfterMs
			view.PollAfterMs = nil
			same, err := json.Marshal(view)
			if err != nil {
				logger.ErrorContext(ctx, "handlers: status stream", "err", err)
				return
			}
			if !bytes.Equal(same, last) {
				view.PollAfterMs = pollAfter
				body, _ := json.Marshal(view)
				if !send(eventStatus, body, eventEnd) {
					return
				}
				last = same
			}
			if res.State == waitroom.StatusAdmitted || res.State == waitroom.StatusChallengeRequired ||
				(res.State == waitroom.StatusSoldOut && res.QueueIsFull) {
				return
			}
			again := time.NewTimer(max(res.PollAfter, streamMinPoll))
			for waiting := true; waiting; {
				select {
				case <-ctx.Done():
					again.Stop()
					return
				case <-s.draining:
					again.Stop()
					return
				case <-end.C:
					again.Stop()
					return
				case <-heartbeat.C:
					if !send(heartbeatComment) {
						again.Stop()
						return
					}
				case <-watch:
					waiting = false
				case <-again.C:
					waiting = false
				}
			}
			again.Stop()
			watch = room.Watch(saleID)
			if res, err = room.Status(ctx, saleID, customerID, token, solution); err != nil {
				// Nothing more to stream (the ticket expired meanwhile):
				// the client's next poll hears why.
				return
			}
		}
	}
}

var (
	eventStatus      = []byte("event: status\ndata: ")
	eventEnd         = []byte("\n\n")
	heartbeatComment = []byte(": still here\n\n")
)
