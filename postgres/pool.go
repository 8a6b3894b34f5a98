package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is one role's pool as the Store uses it. Every statement run on it
// takes its connection through Acquire, which waits for a connection for at
// most wait: a busy pool, and a server that refuses a new session because
// it is full (SQLSTATE 53300, too many clients), are waited out, with
// backoff, until then. What is still refused after that is overload
// (translate: flashline.ErrOverloaded, 503 overloaded with Retry-After),
// never an outage: a full server is a busy server.
//
// wait 0 (the purchase path) waits only as long as the caller's context,
// and a full server is answered at once: a buyer is told to come back
// rather than held, and a batch is never run late.
type db struct {
	*pgxpool.Pool
	wait time.Duration
}

// fullServerBackoff is the first pause after a full server refused a
// session; it doubles up to maxFullServerBackoff, with jitter, so that the
// instances waiting do not all ask again at once.
const (
	fullServerBackoff    = 20 * time.Millisecond
	maxFullServerBackoff = 500 * time.Millisecond
)

// Acquire returns a connection of the pool, waiting as db says.
func (d *db) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if d.wait <= 0 {
		return d.Pool.Acquire(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	for pause := fullServerBackoff; ; pause = min(2*pause, maxFullServerBackoff) {
		conn, err := d.Pool.Acquire(ctx)
		if err == nil || !serverFull(err) {
			return conn, err
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// serverFull reports whether err is the server refusing a session because
// it has no slot left for it (53300: max_connections, or the slots it keeps
// for superusers).
func serverFull(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.TooManyConnections
}

// Exec, Query and QueryRow make db a dbsqlc.DBTX, and Begin makes it what
// pgx.BeginFunc takes: each acquires through Acquire and releases the
// connection when done with it, as pgxpool.Pool's own do.

func (d *db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := d.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	return c.Exec(ctx, sql, args...)
}

func (d *db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := d.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingRows{Rows: rows, conn: c}, nil
}

func (d *db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := d.Acquire(ctx)
	if err != nil {
		return errRow{err} // pipeline.go's
	}
	return releasingRow{row: c.QueryRow(ctx, sql, args...), conn: c}
}

func (d *db) Begin(ctx context.Context) (pgx.Tx, error) {
	return d.BeginTx(ctx, pgx.TxOptions{})
}

// BeginTx is Begin with options (a read-only transaction: the console's
// snapshot).
func (d *db) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	c, err := d.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.BeginTx(ctx, opts)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingTx{Tx: tx, conn: c}, nil
}

// releasingRows gives its connection back when closed (rows are closed when
// read to the end, by CollectRows, or by Close).
type releasingRows struct {
	pgx.Rows
	conn *pgxpool.Conn
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	if r.conn != nil {
		r.conn.Release()
		r.conn = nil
	}
}

func (r *releasingRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

type releasingRow struct {
	row  pgx.Row
	conn *pgxpool.Conn
}

func (r releasingRow) Scan(dest ...any) error {
	defer r.conn.Release()
	return r.row.Scan(dest...)
}

// releasingTx gives its connection back once the transaction has ended.
type releasingTx struct {
	pgx.Tx
	conn *pgxpool.Conn
}

func (t *releasingTx) Commit(ctx context.Context) error {
	err := t.Tx.Commit(ctx)
	t.release()
	return err
}

func (t *releasingTx) Rollback(ctx context.Context) error {
	err := t.Tx.Rollback(ctx)
	t.release()
	return err
}

func (t *releasingTx) release() {
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
}
