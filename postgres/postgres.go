package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flashline/flashline/internal/dbsqlc"
)

// PoolOptions sizes one connection pool.
type PoolOptions struct {
	// MaxConns is the most connections the pool holds.
	MaxConns int32
	// MinConns are opened at start and kept open, so the first requests of a
	// sale pay no connection handshake.
	MinConns int32
	// ConnectTimeout bounds one attempt at a new connection (0:
	// DefaultConnectTimeout). It is not how long a caller waits: the
	// caller's context bounds that (the purchase path's deadlines, RoleWait),
	// and an attempt the caller stopped waiting for runs on to its own end,
	// its connection joining the pool for the next caller.
	ConnectTimeout time.Duration
	// Pooler says the URL is a pooler in transaction mode (PgBouncer), which
	// gives each transaction whichever server connection is free: named
	// prepared statements, pgx's default, would be missing on the next one.
	// The pool then caches statement descriptions instead
	// (QueryExecModeCacheDescribe: one round trip, an unnamed statement),
	// unless the URL names its own default_query_exec_mode.
	Pooler bool
}

// DefaultConnectTimeout is how long one attempt at a new connection may
// take: longer than any caller waits, because a server busy starting
// sessions (a saturated machine; every instance reconnecting at once after
// a network fault or a failover) can take seconds to start one, and an
// attempt cut shorter than that never succeeds, however often it is made.
// With attempts of 3 s (a caller's wait, as they were), a fault suite's
// instances on a saturated two-core machine found no connection for 70 s
// after the fault healed, every attempt timing out at the startup message,
// and an instance starting there exited ("start river: failed to connect:
// timeout" after 3.3 s).
const DefaultConnectTimeout = 10 * time.Second

// startWait is how long NewPool waits for the pool's first answer.
const startWait = 3 * DefaultConnectTimeout

// NewPool builds a pgx pool for databaseURL, sized by o, and pings it.
func NewPool(ctx context.Context, databaseURL, name string, o PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.MinConns > 0 {
		cfg.MinConns = min(o.MinConns, cfg.MaxConns)
	}
	cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	if o.ConnectTimeout > 0 {
		cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	}
	if o.Pooler && !strings.Contains(databaseURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "flashline-" + name
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s pool: %w", name, err)
	}
	if err := ping(ctx, pool, max(startWait, 3*o.ConnectTimeout)); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s pool: ping: %w", name, err)
	}
	return pool, nil
}

// ping waits for pool's first answer for up to wait. A connection attempt
// that runs out of its ConnectTimeout is made again until then: a server
// busy starting sessions (a fork, authentication) can take longer than one
// attempt's time, and an instance must not fail to start for that. Every
// other error (refused, unknown database, bad password) is returned at once.
func ping(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		err := pool.Ping(ctx)
		if err == nil || ctx.Err() != nil || !pgconn.Timeout(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// withTx runs fn in a transaction on pool (READ COMMITTED, the default: every
// statement that needs more is written so that READ COMMITTED is enough, and
// says why).
func withTx(ctx context.Context, pool beginner, fn func(q *dbsqlc.Queries) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return fn(dbsqlc.New(tx)) })
}

// beginner is what a transaction is begun on: a db, or a *pgxpool.Pool.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// errRetry marks a request to try again in a later batch, and errRollback a
// batch to roll back and run again (see batch.go).
var (
	errRetry    = errors.New("retry")
	errRollback = errors.New("roll back the batch")
)

// Connections is what the server allows and what is in use (the
// ServerConnections query): every serve process holds one LISTEN
// connection, so Instances counts the instances connected.
type Connections struct {
	// Max is max_connections, Reserved the slots kept for superusers (and
	// reserved_connections' roles): ordinary roles may open Max - Reserved.
	Max, Reserved int
	// InUse are the client sessions open now, Flashline those of flashline
	// (application_name flashline-*), Instances the serve processes.
	InUse, Flashline, Instances int
}

// Available is how many sessions an ordinary role may open in all.
func (c Connections) Available() int { return c.Max - c.Reserved }

// ServerConnections reads the server's connection slots on pool (one
// statement; through a transaction pooler it is answered by the server
// behind it).
func ServerConnections(ctx context.Context, pool *pgxpool.Pool) (Connections, error) {
	r, err := dbsqlc.New(pool).ServerConnections(ctx)
	if err != nil {
		return Connections{}, fmt.Errorf("server connections: %w", translate(err))
	}
	return Connections{Max: int(r.MaxConnections), Reserved: int(r.Reserved), InUse: int(r.InUse),
		Flashline: int(r.Flashline), Instances: int(r.Instances)}, nil
}
