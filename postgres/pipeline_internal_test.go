package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline/internal/testkit/testdb"
)

// pipelinedTx commits what fn did when it returns nil, and otherwise leaves
// nothing behind, whether the first statement (sent with BEGIN), a later one
// or fn itself failed; the connection is idle again either way.
func TestPipelinedTx(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.NewPool(t)
	conn, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	ctx := t.Context()
	_, err = conn.Exec(ctx, `CREATE TABLE pipelined (n int PRIMARY KEY)`)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pipelined`).Scan(&n))
		return n
	}
	insert := func(tx *beginFirst, n int) error {
		var got int
		return tx.QueryRow(ctx, `INSERT INTO pipelined VALUES ($1) RETURNING n`, n).Scan(&got)
	}

	require.NoError(t, pipelinedTx(ctx, conn.Conn(), func(tx *beginFirst) error {
		if err := insert(tx, 1); err != nil {
			return err
		}
		return insert(tx, 2)
	}))
	require.Equal(t, 2, count(), "committed")

	err = pipelinedTx(ctx, conn.Conn(), func(tx *beginFirst) error { return insert(tx, 1) })
	require.Error(t, err, "the first statement fails (duplicate key)")
	require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus())

	err = pipelinedTx(ctx, conn.Conn(), func(tx *beginFirst) error {
		if err := insert(tx, 3); err != nil {
			return err
		}
		return insert(tx, 2)
	})
	require.Error(t, err, "a later statement fails")
	require.Equal(t, byte('I'), conn.Conn().PgConn().TxStatus())
	require.Equal(t, 2, count(), "3 rolled back")

	errFn := errors.New("changed my mind")
	err = pipelinedTx(ctx, conn.Conn(), func(tx *beginFirst) error {
		if err := insert(tx, 4); err != nil {
			return err
		}
		return errFn
	})
	require.ErrorIs(t, err, errFn)
	require.Equal(t, 2, count(), "4 rolled back")

	rows, err := (&beginFirst{conn: conn.Conn()}).Query(ctx, `SELECT n FROM pipelined ORDER BY n`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, got, "rows through the pipeline")
	_, err = conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
}
