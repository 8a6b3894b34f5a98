package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashline/flashline/internal/client"
)

// SlowRecovery is how long after a heal the instances may take to answer
// /readyz 200 before the run probes why (probe) and notes what it found. A
// healthy recovery takes a second or two, ten on a saturated machine.
const SlowRecovery = 15 * time.Second

// probe notes, once per run, what stands between the instances and their
// database while they are not ready long after a heal: how long a new
// connection takes straight to PostgreSQL and through each instance's
// proxy (the instances' own path), what PostgreSQL's sessions are doing,
// and each instance's /readyz answer. A recovery that took over a minute
// (the reset fault on a saturated CI machine, every instance's connection
// attempts timing out at the startup message) left nothing to tell the
// proxy, the server and the instances apart.
func (r *Run) probe(ctx context.Context) {
	var b strings.Builder
	connect := func(what, url string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		conn, err := pgx.Connect(cctx, url)
		if err == nil {
			err = conn.Ping(cctx)
			conn.Close(context.WithoutCancel(cctx))
		}
		fmt.Fprintf(&b, "; %s: %s in %.2fs", what, errText(err), time.Since(start).Seconds())
	}
	connect("direct connect", r.DirectURL)
	for slot, p := range r.Proxies {
		connect(fmt.Sprintf("instance %d's proxy", slot), viaProxy(r.DirectURL, p.Listen))
	}
	if rows, err := r.sessions(ctx); err != nil {
		fmt.Fprintf(&b, "; pg_stat_activity: %v", err)
	} else {
		fmt.Fprintf(&b, "; sessions: %s", rows)
	}
	for slot := range r.Slots() {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		res, err := client.New(r.URL(slot), nil).Readyz(rctx)
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "; instance %d /readyz: %v", slot, err)
		} else {
			fmt.Fprintf(&b, "; instance %d /readyz: %d %s", slot, res.Status, strings.TrimSpace(string(res.Body)))
		}
	}
	r.Note("not ready %s after the heal%s", SlowRecovery, b.String())
}

// sessions summarises pg_stat_activity on the direct URL: how many
// sessions, by application, state and wait event.
func (r *Run) sessions(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.DirectURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `
		SELECT what || ' x' || count(*) FROM (
			SELECT coalesce(nullif(application_name, ''), backend_type) || ' ' || coalesce(state, '-') ||
			       coalesce(' ' || wait_event_type || ':' || wait_event, '') AS what
			FROM pg_stat_activity) s
		GROUP BY what ORDER BY what`)
	if err != nil {
		return "", err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(got, ", "), err
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
