package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A batch's transaction costs its round trips, and with one batch of a sale
// running at a time they are the batch's time: BEGIN, the read, the
// statement, COMMIT. BEGIN needs no answer before the read can be sent, so
// the two travel together, in one pipeline (pgx's Batch: one Sync, one
// round trip); COMMIT does need the statement's answer (the batch commits
// only if it took what it allocated), so it stays its own round trip.
//
// The transaction control statements are the only SQL written outside
// sql/queries: they are the protocol's and the session's, not the schema's,
// and pgx's own Tx sends the same words.
//
// sqlGenericPlans travels with BEGIN, in the same pipeline: for the rest of
// the transaction, a prepared statement runs its cached generic plan instead
// of being planned again for each execution's values. PostgreSQL plans a
// statement anew at every Bind (a custom plan) while that looks cheaper than
// the generic one, and the batch's statements, which take their rows from
// arrays, always look so: planning them cost 0.75 ms (ReserveBatchBegin) and
// 0.4 ms (ReserveBatchCommit) per batch on this project's machine, more than
// their execution (docs/design.md, "What one reservation costs", has the
// measurement: 1.51x the reservations/s at 1 client). Their plans do not depend
// on the values: every lookup is an index probe per request by construction
// (reserve.sql says why). SET LOCAL ends with the transaction, so nothing
// else on the connection is affected, and it means the same through a
// transaction-mode pooler (whose unnamed statements are planned at every
// Bind anyway).
const (
	sqlBegin        = "begin"
	sqlGenericPlans = "set local plan_cache_mode = force_generic_plan"
	sqlCommit       = "commit"
	sqlRollback     = "rollback"
)

// commitTimeout bounds a COMMIT that pipelinedTx sent: one commit record and
// its fsync, which take milliseconds; a server silent for this long is gone
// or stalled, and the transaction's outcome is then unknown.
const commitTimeout = 5 * time.Second

// preamble is what begin sends in front of the first statement, in order.
var preamble = [...]string{sqlBegin, sqlGenericPlans}

// pipelinedTx runs fn in one transaction on conn, as pgx.BeginFunc does
// (commit when fn returns nil, else roll back), except that BEGIN is sent in
// one round trip with fn's first statement. fn's statements go through the
// DBTX it is given.
func pipelinedTx(ctx context.Context, conn *pgx.Conn, fn func(*beginFirst) error) (err error) {
	tx := &beginFirst{conn: conn}
	err = fn(tx)
	if !tx.begun {
		return err
	}
	if err == nil && conn.PgConn().TxStatus() == 'T' {
		// COMMIT is not cut short by ctx's deadline: cut short, it would
		// leave the transaction's outcome unknown, and its callers answered
		// "overloaded" for what may have committed. It is bounded by
		// commitTimeout instead, for a server that stopped answering.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		defer cancel()
		tag, err := conn.Exec(cctx, sqlCommit)
		if err == nil && tag.String() == "ROLLBACK" {
			err = pgx.ErrTxCommitRollback
		}
		return err
	}
	if err == nil {
		err = fmt.Errorf("reserve batch: transaction status %q before commit", conn.PgConn().TxStatus())
	}
	if status := conn.PgConn().TxStatus(); status == 'T' || status == 'E' {
		// A connection whose rollback fails is closed by the pool on
		// release (it is not idle), which ends the transaction too.
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), sqlRollback); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// beginFirst is a dbsqlc.DBTX that sends BEGIN in front of the first
// statement, in the same pipeline, and the rest as they come, on the
// transaction BEGIN opened.
type beginFirst struct {
	conn  *pgx.Conn
	begun bool
}

func (b *beginFirst) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if b.begun {
		return b.conn.Exec(ctx, sql, args...)
	}
	br := b.begin(ctx, sql, args)
	defer br.Close()
	if err := b.opened(br); err != nil {
		return pgconn.CommandTag{}, err
	}
	return br.Exec()
}

func (b *beginFirst) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if b.begun {
		return b.conn.Query(ctx, sql, args...)
	}
	br := b.begin(ctx, sql, args)
	if err := b.opened(br); err != nil {
		return nil, errors.Join(err, br.Close())
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (b *beginFirst) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if b.begun {
		return b.conn.QueryRow(ctx, sql, args...)
	}
	rows, err := b.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return rowOf{rows}
}

// begin sends BEGIN, the transaction's settings and the first statement in
// one pipeline.
func (b *beginFirst) begin(ctx context.Context, sql string, args []any) pgx.BatchResults {
	b.begun = true
	batch := &pgx.Batch{}
	for _, stmt := range preamble {
		batch.Queue(stmt)
	}
	batch.Queue(sql, args...)
	return b.conn.SendBatch(ctx, batch)
}

// opened reads the answers to the preamble begin sent.
func (b *beginFirst) opened(br pgx.BatchResults) error {
	for range preamble {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// batchRows are the rows of the pipeline's statement; closing them closes
// the pipeline, so that the connection can take the next statement.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// rowOf is pgx.Row over rows, as pgx's QueryRow makes it: the first row, or
// pgx.ErrNoRows.
type rowOf struct{ rows pgx.Rows }

func (r rowOf) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
