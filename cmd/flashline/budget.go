package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline/postgres"
)

// defaultDBConns is --db-conns' default: six instances (14 each, 84 in all)
// fit a default PostgreSQL's 100 connections with room left for a DBA's psql
// and a migration, beside the 3 kept for superusers.
const defaultDBConns = 14

// budget is how an instance's connections (--db-conns) are split among its
// roles. Direct ones (listen, session, river, and the migration at start)
// are opened on --database-direct-url; the rest on --database-url, which
// may be a pooler.
type budget struct {
	total int
	// listen is the LISTEN connection; session the pacer's leader (a
	// session advisory lock); both need a session of their own.
	listen, session int
	river, jobs     int
	sale, room      int
	admin           int
}

// roleFlags are the role pool sizes given on the command line (0: from the
// budget).
type roleFlags struct{ sale, admin, room, river, jobs int }

// splitBudget splits total connections among the roles by this rule, which
// docs/configuration.md repeats:
//
//  1. Each role starts at the least it works with: listen 1, session 1,
//     river 2 (River's notifier holds one), jobs 1, sale batches-in-flight
//     + 1 (one sale's batches, and the admitted reservations' rate-limit
//     statements beside them), room 1, admin 1.
//  2. What is left raises the roles, one connection at a time and in this
//     order, to what they need for a sale's peak: admin 2 (confirm, cancel
//     and payment events never queue behind one slow call), sale 2 ×
//     batches-in-flight + 1 (two hot sales' batches at once: coalescing
//     puts a whole sale's buyers into batches-in-flight transactions, so
//     the purchase path needs no more), river 3, room 2, jobs 2.
//  3. Anything more goes to admin and room in turn: the calls that wait for
//     a connection rather than being refused.
//
// A role given on the command line takes what it is given instead; the
// others are split from what is left. It is an error when that is less than
// their least.
func splitBudget(total, batchesInFlight int, given roleFlags) (budget, error) {
	b := budget{total: total}
	type role struct {
		size        *int
		least, need int
		given       int
	}
	roles := map[string]role{
		"listen":  {&b.listen, 1, 1, 0},
		"session": {&b.session, 1, 1, 0},
		"river":   {&b.river, 2, 3, given.river},
		"jobs":    {&b.jobs, 1, 2, given.jobs},
		"sale":    {&b.sale, batchesInFlight + 1, 2*batchesInFlight + 1, given.sale},
		"room":    {&b.room, 1, 2, given.room},
		"admin":   {&b.admin, 1, 2, given.admin},
	}
	order := []string{"listen", "session", "river", "jobs", "sale", "room", "admin"}
	left := total
	var least []string
	for _, name := range order {
		r := roles[name]
		*r.size = r.least
		if r.given > 0 {
			*r.size = r.given
		}
		left -= *r.size
		least = append(least, fmt.Sprintf("%s %d", name, *r.size))
	}
	if left < 0 {
		return budget{}, fmt.Errorf("serve: --db-conns %d is too few: the roles need at least %d (%s); raise --db-conns or give the role flags less",
			total, total-left, strings.Join(least, ", "))
	}
	// raise gives role one more connection if it may have it.
	raise := func(name string, upTo int) bool {
		r := roles[name]
		if left == 0 || r.given > 0 || *r.size >= upTo {
			return false
		}
		*r.size++
		left--
		return true
	}
	for _, name := range []string{"admin", "sale", "river", "room", "jobs"} {
		for raise(name, roles[name].need) {
		}
	}
	for raised := true; raised; {
		raised = raise("admin", total)
		raised = raise("room", total) || raised
	}
	return b, nil
}

// pooled and direct are the connections opened on --database-url and on
// --database-direct-url.
func (b budget) pooled() int { return b.sale + b.admin + b.room + b.jobs }
func (b budget) direct() int { return b.listen + b.session + b.river }

// used is what the split opens in all (at most total).
func (b budget) used() int { return b.pooled() + b.direct() }

func (b budget) attrs() []any {
	return []any{"db_conns", b.total, "sale", b.sale, "admin", b.admin, "room", b.room, "jobs", b.jobs,
		"river", b.river, "session", b.session, "listen", b.listen}
}

// checkServer compares the footprint this instance plans with what the
// server allows and what it sees in use, and says plainly when the fleet
// cannot fit: every other flashline instance is counted by its LISTEN
// connection and assumed to open as many as this one. It only warns: the
// instances may be about to be replaced, and the server is the judge.
func checkServer(ctx context.Context, logger *slog.Logger, c postgres.Connections, b budget, throughPooler bool) {
	others := c.Instances // this instance's LISTEN is not open yet
	fleet := (others + 1) * b.used()
	logger.InfoContext(ctx, "flashline: database connections",
		append(b.attrs(), "server_max", c.Max, "server_reserved", c.Reserved, "server_in_use", c.InUse,
			"instances_seen", others, "fleet_planned", fleet)...)
	if throughPooler {
		// The pooler's own server connections are what the server sees
		// of the pooled roles; only the direct ones reach it from here.
		fleet = (others + 1) * b.direct()
	}
	switch {
	case c.InUse-c.Flashline+fleet > c.Available():
		logger.WarnContext(ctx, "flashline: the fleet cannot fit the database's connections: lower --db-conns, run fewer instances, put a pooler in front (--database-direct-url), or raise max_connections",
			"instances", others+1, "per_instance", b.used(), "fleet", fleet, "others_in_use", c.InUse-c.Flashline,
			"server_allows", c.Available(), "max_connections", c.Max, "reserved", c.Reserved)
	case c.InUse+b.used() > c.Available():
		logger.WarnContext(ctx, "flashline: the database has fewer free connections than this instance plans to open; it will wait for them (overloaded answers meanwhile)",
			"planned", b.used(), "server_in_use", c.InUse, "server_allows", c.Available())
	}
}

// connectionsCollector exports the server's connection slots against this
// instance's budget. The server is asked at most once per
// connectionsCacheFor, however often /metrics is scraped, and never for
// longer than a second.
type connectionsCollector struct {
	pool   *pgxpool.Pool
	budget budget

	mu      sync.Mutex
	at      time.Time
	last    postgres.Connections
	lastErr error

	max, reserved, inUse, flashline, instances, planned *prometheus.Desc
}

const connectionsCacheFor = 5 * time.Second

func newConnectionsCollector(pool *pgxpool.Pool, b budget) *connectionsCollector {
	return &connectionsCollector{pool: pool, budget: b,
		max:       prometheus.NewDesc("flashline_db_server_max_connections", "The database server's max_connections.", nil, nil),
		reserved:  prometheus.NewDesc("flashline_db_server_reserved_connections", "Connection slots the server keeps for superusers (superuser_reserved_connections, reserved_connections).", nil, nil),
		inUse:     prometheus.NewDesc("flashline_db_server_connections", "Client sessions open on the database server, every application's.", nil, nil),
		flashline: prometheus.NewDesc("flashline_db_server_flashline_connections", "Sessions flashline holds on the server (application_name flashline-*), every instance's.", nil, nil),
		instances: prometheus.NewDesc("flashline_db_server_instances", "flashline serve processes connected to the server (each holds one LISTEN connection).", nil, nil),
		planned:   prometheus.NewDesc("flashline_db_conns_budget", "The most connections this instance opens (--db-conns, as split among its roles).", nil, nil),
	}
}

func (c *connectionsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.max, c.reserved, c.inUse, c.flashline, c.instances, c.planned} {
		ch <- d
	}
}

func (c *connectionsCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.planned, prometheus.GaugeValue, float64(c.budget.used()))
	c.mu.Lock()
	if time.Since(c.at) > connectionsCacheFor {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.last, c.lastErr = postgres.ServerConnections(ctx, c.pool)
		cancel()
		c.at = time.Now()
	}
	last, err := c.last, c.lastErr
	c.mu.Unlock()
	if err != nil {
		return // the server's figures are missing from this scrape
	}
	for d, v := range map[*prometheus.Desc]int{c.max: last.Max, c.reserved: last.Reserved, c.inUse: last.InUse,
		c.flashline: last.Flashline, c.instances: last.Instances} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
}
