package edge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/waitroom/roomtoken"
)

// Client is an edge's link to its origins, and the waiting room's source of
// truth on the edge: an instance without a database (flashline serve --role
// edge). Every Interval it sends every origin its report (POST /edge/sync:
// the pre-open tickets it has given out, in total per sale) and takes the
// watermarks document of one of them (see Sync), giving the sale cache what
// it says (a Client is a flashline.FactSource); the report carries, in
// batches, the customers it gave pre-open tickets in a randomized_at_open
// room, until an origin says it wrote them (their room's committed crowd
// holds them); it leases positions from an
// origin for the tickets it places by arrival (a Client is a
// flashline.RoomStore). A waitroom.Room built on it answers tickets and
// status polls from memory, as an origin's does, and asks an origin nothing
// per request but a lease per GatherWindow.
//
// When no origin has answered for the document's lifetime
// (roomtoken.WatermarksTTL), SaleFacts fails: the cache's entries go stale,
// status polls answer "waiting" with stale set, and nobody is admitted (fail
// closed). Safe for concurrent use.
type Client struct {
	keys *roomtoken.Keyring
	opts Options

	mu       sync.Mutex
	doc      roomtoken.Watermarks
	seeds    map[string][]byte
	received time.Time // by this edge's clock
	good     int       // the origin that answered last
	totals   map[string]int64
	queue    map[string][]byte // sale id → this edge's counts of its line (PublishQueue)
	// holders are the customers given a pre-open ticket here in a
	// randomized_at_open room that no origin has said it wrote (AddHolders),
	// by sale: each report carries a batch of them (MaxReportedHolders),
	// forgotten once an origin answers it wrote them, or once the room's
	// crowd is frozen. At most maxHolders in all.
	holders  map[string]map[string]struct{}
	nHolders int
	changed  func(saleID string)
	run      string // this run of the edge, in its reports

	syncs atomic.Int64  // successful pulls, for tests and metrics
	down  []atomic.Bool // by origin: marked down (origins.go)
}

// Options configure a Client. Zero values take the defaults shown.
type Options struct {
	// Origins are the base URLs of the instances with the database. Pulls
	// go to every one; leases to the one that answered the last pull first,
	// then the others in turn; requests passed on as origins.go says.
	Origins []string
	// ID names this edge in its reports (1-64 of [A-Za-z0-9_-]). Default:
	// "edge-" and 8 random hex digits.
	ID string
	// Interval is how often the document is pulled. Default 1s.
	Interval time.Duration
	// HTTPClient makes the requests to origins. Default: a client with a
	// 2 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
}

// NewClient returns a Client pulling from opts.Origins, verifying with keys.
// Call Run to keep it current.
func NewClient(keys *roomtoken.Keyring, opts Options) (*Client, error) {
	if len(opts.Origins) == 0 {
		return nil, errors.New("waitroom: an edge needs at least one origin")
	}
	for i, o := range opts.Origins {
		opts.Origins[i] = strings.TrimRight(o, "/")
	}
	if opts.ID == "" {
		var b [4]byte
		rand.Read(b[:])
		opts.ID = "edge-" + hex.EncodeToString(b[:])
	}
	if err := roomtoken.CheckEdgeID(opts.ID); err != nil {
		return nil, err
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 2 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var run [4]byte
	rand.Read(run[:])
	return &Client{keys: keys, opts: opts, totals: map[string]int64{}, queue: map[string][]byte{},
		holders: map[string]map[string]struct{}{}, run: hex.EncodeToString(run[:]), down: make([]atomic.Bool, len(opts.Origins))}, nil
}

// ID is the edge's id.
func (e *Client) ID() string { return e.opts.ID }

// Syncs is how many pulls have succeeded.
func (e *Client) Syncs() int64 { return e.syncs.Load() }

// Run pulls every Interval until ctx is done, and every nearOpenInterval
// around a room's opening and while a room's sale is open (see fastPull).
func (e *Client) Run(ctx context.Context) error {
	for {
		if err := e.Sync(ctx); err != nil && ctx.Err() == nil {
			e.opts.Logger.WarnContext(ctx, "waitroom: edge: no origin answers", "err", err)
		}
		wait := e.opts.Interval
		// More holders wait than a report carries: the next batch goes
		// at once.
		if e.fastPull() || e.Unreported() > roomtoken.MaxReportedHolders {
			wait = min(wait, nearOpenInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// nearOpenInterval is how often an edge pulls from 2 s before a room's
// opening to 1 s after it, and while the sale is open: the origin freezes
// the pre-open crowd a quarter second after the open, and the pre-open
// tickets this edge counted in its last moments must reach it by then to be
// counted (one counted later shares a rank); and a sell-out must reach the
// waiters within a second.
const nearOpenInterval = 100 * time.Millisecond

// fastPull reports whether a room of the document held opens within 2 s
// or opened less than 1 s ago, by the database's clock as the document says
// (its pre-open tickets must reach the freeze), or is open now: a sale that
// sells out, pauses or gets units back is heard by the edge within a pull,
// and by its waiters' streams at once (handlers' status stream), so "sold
// out" reaches the crowd within a fraction of a second, not a second.
func (e *Client) fastPull() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.received.IsZero() {
		return false
	}
	dbNow := e.doc.DBNow.Add(e.now().Sub(e.received))
	for _, s := range e.doc.Sales {
		if s.State == flashline.StateOpen {
			return true
		}
		if s.OpensAt != nil && s.OpensAt.After(dbNow.Add(-time.Second)) && s.OpensAt.Before(dbNow.Add(2*time.Second)) {
			return true
		}
	}
	return false
}

// Sync sends the report to every origin at once, and takes the document of
// the origin that answered last time, or, if it fails, of the first other
// to answer: sticking to one origin keeps what the edge knows from going
// back and forth between origins whose caches are a moment apart. Every
// origin hears the edge's totals, and answers and publishes places counting
// them.
func (e *Client) Sync(ctx context.Context) error {
	e.mu.Lock()
	held := !e.received.IsZero()
	e.mu.Unlock()
	if !held {
		// The first pull reads the public document first, so that the
		// report is signed by the database's clock, which the origin
		// judges it by, however far off this machine's is.
		for n, origin := range e.opts.Origins {
			var out struct {
				Document string `json:"document"`
			}
			if err := e.get(ctx, origin+"/edge/watermarks", &out); err == nil && e.take(out.Document, n) == nil {
				break
			}
		}
	}
	rep := e.report()
	token := e.keys.SignEdgeReport(rep, e.dbNow())
	e.mu.Lock()
	preferred := e.good
	e.mu.Unlock()
	type answer struct {
		origin int
		doc    string
		err    error
	}
	// Buffered for every origin: those answering after the one taken never
	// block.
	answers := make(chan answer, len(e.opts.Origins))
	for n, origin := range e.opts.Origins {
		go func() {
			doc, written, err := e.pull(ctx, origin, token)
			if err == nil {
				// Answering, so up again for the requests passed on.
				e.down[n].Store(false)
				if written {
					e.written(rep.Holders)
				}
			}
			answers <- answer{n, doc, err}
		}()
	}
	var errs error
	var waiting []answer // others' documents, kept while the preferred origin may still answer
	preferredFailed := false
	for range e.opts.Origins {
		a := <-answers
		if a.err == nil && (a.origin == preferred || preferredFailed) {
			if a.err = e.take(a.doc, a.origin); a.err == nil {
				return nil
			}
		}
		if a.err == nil {
			waiting = append(waiting, a)
			continue
		}
		errs = errors.Join(errs, a.err)
		if a.origin == preferred {
			preferredFailed = true
			for _, w := range waiting {
				err := e.take(w.doc, w.origin)
				if err == nil {
					return nil
				}
				errs = errors.Join(errs, err)
			}
			waiting = nil
		}
	}
	return errs
}

// report is this edge's report now: its pre-open tickets in total, for the
// rooms whose pre-open crowd is not frozen (the others are forgotten: no
// origin counts them any more), and its counts of the lines of the rooms
// the document holds (those of a room gone from it are forgotten).
func (e *Client) report() roomtoken.EdgeReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	rooms := map[string]bool{}
	for _, s := range e.doc.Sales {
		rooms[s.ID] = true
		if s.PreopenCount >= 0 {
			delete(e.totals, s.ID)
			e.dropHolders(s.ID)
		}
	}
	rep := roomtoken.EdgeReport{Edge: e.opts.ID, Preopen: maps.Clone(e.totals), Run: e.run, Holders: e.batch()}
	for id := range e.queue {
		if !rooms[id] {
			delete(e.queue, id)
		}
	}
	// At most maxReportedLines of them (the first by id), so that a report
	// stays well within what an origin reads (a line's counts are 2-3 kB
	// at most).
	for _, id := range slices.Sorted(maps.Keys(e.queue))[:min(len(e.queue), maxReportedLines)] {
		if rep.Queue == nil {
			rep.Queue = map[string]json.RawMessage{}
		}
		rep.Queue[id] = e.queue[id]
	}
	return rep
}

// maxReportedLines bounds the lines whose counts one report carries.
const maxReportedLines = 32

// PublishQueue is waitroom.QueuePublisher's: the edge's counts of the
// lines it serves (the room's RunQueuePublisher gives those that changed,
// once a second at most) join its report, which every origin hears and
// publishes (waitroom's origin.go). Nothing is written here.
func (e *Client) PublishQueue(_ context.Context, _ string, counts map[string][]byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, c := range counts {
		e.queue[id] = c
	}
	return nil
}

func (e *Client) now() time.Time { return e.opts.Now() }

// dbNow is the database's clock as the last document said it (this edge's
// own before any): what the edge's requests are signed by, since origins
// judge their expiry by it.
func (e *Client) dbNow() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.received.IsZero() {
		return e.now()
	}
	return e.doc.DBNow.Add(e.now().Sub(e.received))
}

// get reads url's 200 answer into out.
func (e *Client) get(ctx context.Context, url string, out any) error {
	return e.do(ctx, http.MethodGet, url, nil, out)
}

// pull posts the report to one origin and returns the document it
// answers, and whether it wrote the report's holders.
func (e *Client) pull(ctx context.Context, origin, report string) (doc string, written bool, err error) {
	var out struct {
		Document       string `json:"document"`
		HoldersWritten bool   `json:"holdersWritten"`
	}
	if err := e.post(ctx, origin+"/edge/sync", map[string]string{"report": report}, &out); err != nil {
		return "", false, err
	}
	return out.Document, out.HoldersWritten, nil
}

// post sends body as JSON to url and decodes a 200's answer into out.
func (e *Client) post(ctx context.Context, url string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return e.do(ctx, http.MethodPost, url, b, out)
}

// do sends a request to an origin (a JSON body when body is not nil) and
// decodes a 200's answer into out; it reads at most roomtoken.MaxDocLen+1024 bytes and
// gives up after 2 s.
func (e *Client) do(ctx context.Context, method, url string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.opts.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, roomtoken.MaxDocLen+1024))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %.200s", url, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// take verifies a document and makes it the edge's knowledge, unless it is
// older than the one held.
func (e *Client) take(token string, origin int) error {
	doc, seeds, err := e.keys.OpenWatermarks(token)
	if err != nil {
		return err
	}
	if !doc.ExpiresAt.After(doc.IssuedAt) || doc.ExpiresAt.Sub(doc.IssuedAt) > time.Minute {
		return fmt.Errorf("open watermarks: %w: lifetime out of bounds", roomtoken.ErrMalformed)
	}
	e.mu.Lock()
	if !e.received.IsZero() && doc.IssuedAt.Before(e.doc.IssuedAt) && e.fresh() {
		e.mu.Unlock()
		return nil // an older document than the one held
	}
	e.doc, e.seeds, e.received, e.good = doc, seeds, e.now(), origin
	changed := e.changed
	e.mu.Unlock()
	e.syncs.Add(1)
	if changed != nil {
		changed("")
	}
	return nil
}

// fresh reports whether the document held is within its lifetime, by this
// edge's clock: it was received less than (exp − iat) ago. e.mu is held.
func (e *Client) fresh() bool {
	return !e.received.IsZero() && e.now().Sub(e.received) < e.doc.ExpiresAt.Sub(e.doc.IssuedAt)
}

// Age is how long ago the document held was received (-1 s: none yet).
func (e *Client) Age() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.received.IsZero() {
		return -time.Second
	}
	return e.now().Sub(e.received)
}

// Fresh reports whether the edge holds a document within its lifetime.
func (e *Client) Fresh() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fresh()
}

// Knows reports whether saleID is a waiting room of the document held (fresh
// or not): the edge answers its tickets and polls itself.
func (e *Client) Knows(saleID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.doc.Sales {
		if s.ID == saleID {
			return true
		}
	}
	return false
}
