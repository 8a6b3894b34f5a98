package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
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
// good, after streamLifetime, or when the server begins to shut down
// (Deps.Draining); a comment every
// streamHeartbeat keeps proxies from closing it. A client that cannot
// stream (or is refused one: 503 overloaded past --max-streams) polls as
// before.
//
// A stream ended by its lifetime or by the server's shutdown ends with the
// stream's instruction to reconnect: an "event: reconnect" without data,
// whose "retry:" field says in how many milliseconds (reconnectFrame). An
// EventSource keeps the retry and dispatches nothing; the page (api.js's
// streamStatus) connects again after its backoff, never sooner. At its
// lifetime the stream says come back at once; at shutdown, in one to three
// seconds, spread so that a thousand streams ended together do not all
// land on the next instance in the same instant. Shutdown ends every stream
// this way at once, so that an instance or an edge with a thousand waiting
// clients drains within its deadline (TestShutdownEndsStatusStreams).
//
// What an open stream costs is a goroutine, the connection's buffers and
// the last answer sent (measured in TestStatusStreamMemory), no database
// and no admission slot: streams are bounded by their own count instead,
// and per customer. A stream holds one of its customer's requests in flight
// (--customer-in-flight) only until its first answer is made; after that,
// one customer keeps at most streamsPerCustomer streams for a sale open on
// an instance, and a newer one ends the oldest with the instruction to
// reconnect in streamReplacedRetry. So a page reloaded, or left for another
// page, whose old stream the server has not yet seen closed (a busy
// machine, a browser that keeps the connection), never stands in the way
// of the new page, and a customer who opens streams in a loop holds no
// more than two.

const (
	streamLifetime  = 5 * time.Minute
	streamHeartbeat = 10 * time.Second
	// streamMinPoll bounds how often one stream asks the room again when
	// nothing every waiter hears has changed.
	streamMinPoll = 250 * time.Millisecond
	// streamWriteTimeout bounds one event's write: a client that stops
	// reading is dropped, its resources freed.
	streamWriteTimeout = 10 * time.Second
	// streamDrainRetry is the least a stream ended by shutdown tells its
	// client to wait before connecting again; each is told up to twice
	// that more, at random.
	streamDrainRetry = time.Second
	// streamsPerCustomer is how many streams one customer keeps open for
	// one sale on one instance: two tabs; a third ends the oldest.
	streamsPerCustomer = 2
	// streamReplacedRetry is how long a stream a newer one ended tells its
	// client to wait before it connects again: a third tab's stream comes
	// and goes at about this pace, not in a loop.
	streamReplacedRetry = 5 * time.Second
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

	mu sync.Mutex
	// byCustomer holds each customer's streams for a sale (the key: sale
	// id, NUL, customer id), oldest first: each one's channel is closed
	// when a newer stream ends it. An entry lives only while its streams
	// are open, so the map is bounded by max.
	byCustomer map[string][]chan struct{}
}

func newStreams(max int, reg prometheus.Registerer, draining <-chan struct{}) *streams {
	s := &streams{max: int64(max), draining: draining, byCustomer: map[string][]chan struct{}{}}
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

// hold counts a stream of the customer's for the sale, ending the oldest
// beyond streamsPerCustomer; replaced is closed when a newer stream ends
// this one, and release forgets it.
func (s *streams) hold(saleID, customerID string) (replaced <-chan struct{}, release func()) {
	key := saleID + "\x00" + customerID
	mine := make(chan struct{})
	s.mu.Lock()
	held := append(s.byCustomer[key], mine)
	for len(held) > streamsPerCustomer {
		close(held[0])
		held = held[1:]
	}
	s.byCustomer[key] = held
	s.mu.Unlock()
	return mine, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		held := s.byCustomer[key]
		i := slices.Index(held, mine)
		if i < 0 {
			return // ended by a newer one, and forgotten then
		}
		if held = slices.Delete(held, i, i+1); len(held) == 0 {
			delete(s.byCustomer, key)
		} else {
			s.byCustomer[key] = held
		}
	}
}

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
		// The first answer is made: from here on the stream holds none of
		// the customer's requests in flight (given back before the answer
		// can reach the client, who may ask again as soon as it has it).
		streaming(c)
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
		// This customer's newest streams, not the oldest, stay open.
		replaced, release := s.hold(saleID, customerID)
		defer release()
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
					send(reconnectFrame(drainRetry()))
					return
				case <-end.C:
					again.Stop()
					send(reconnectFrame(0))
					return
				case <-replaced:
					again.Stop()
					send(reconnectFrame(streamReplacedRetry))
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

// reconnectFrame is the stream's last event when the server ends it with
// the client still waiting: "event: reconnect" and "retry:" after, in
// milliseconds (the SSE field an EventSource obeys); no data line, so a
// client that reads only data lines sees the stream end as before.
func reconnectFrame(after time.Duration) []byte {
	return fmt.Appendf(nil, "event: reconnect\nretry: %d\n\n", after.Milliseconds())
}

// drainRetry is how long a stream ended by shutdown tells its client to
// wait: one to three seconds, at random.
func drainRetry() time.Duration {
	return streamDrainRetry + rand.N(2*streamDrainRetry)
}

// passOnStream passes a status stream on to an origin through proxy (a sale
// the edge has not heard of as a waiting room, or not yet) and, as the
// edge's own streams do, ends it when the server begins to shut down
// (draining), with the instruction to reconnect: the origin's stream would
// otherwise hold the edge's drain to its deadline.
func passOnStream(proxy http.Handler, draining <-chan struct{}, w http.ResponseWriter, r *http.Request) {
	// The request to the origin runs on a context of its own, without the
	// server's values: a copy that ReverseProxy serves for the server
	// panics (http.ErrAbortHandler, the connection cut) when it is cut
	// short, where we want the stream's last event written after it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(r.Context(), cancel)()
	var drained atomic.Bool
	go func() {
		select {
		case <-draining:
			drained.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	proxy.ServeHTTP(w, r.WithContext(ctx))
	if drained.Load() && r.Context().Err() == nil && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		// A blank line first ends whatever the origin's last event had
		// written when it was cut (an event cut short has no ending and
		// would swallow the next).
		if _, err := w.Write(append([]byte("\n\n"), reconnectFrame(drainRetry())...)); err == nil {
			_ = rc.Flush()
		}
	}
}

var (
	eventStatus      = []byte("event: status\ndata: ")
	eventEnd         = []byte("\n\n")
	heartbeatComment = []byte(": still here\n\n")
)
