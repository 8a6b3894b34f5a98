package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/flashline/flashline"
	"github.com/flashline/flashline/internal/testkit/testdb"
)

// holderReads records the statements that read the room's holders.
type holderReads struct {
	mu   sync.Mutex
	sqls []string
}

func (h *holderReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM waitroom_holders") {
		h.mu.Lock()
		h.sqls = append(h.sqls, d.SQL)
		h.mu.Unlock()
	}
	return ctx
}

func (h *holderReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestFreezeReadsHoldersUnsorted: the freeze, with the room's row locked,
// and the crowd's transcript read every holder, and the database does not
// sort them: both sort the holders' hashes themselves, and at a million
// holders the database's sort (on disk) was most of the freeze's time in
// the database, every lease of the room waiting (issue 48,
// BenchmarkCrowdFreeze). Each read's plan has no Sort.
func TestFreezeReadsHoldersUnsorted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.New(t))
	require.NoError(t, err)
	reads := &holderReads{}
	cfg.ConnConfig.Tracer = reads
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := NewStore(SinglePool(pool), Options{})
	opens := time.Now().Add(time.Hour)
	sale, err := store.CreateSale(ctx, flashline.NewSale{SKU: "sku_unsorted", InitialStock: 10,
		Admission: flashline.AdmissionWaitingRoom, Fairness: flashline.FairnessRandomizedAtOpen, OpensAt: &opens})
	require.NoError(t, err)
	holders := make([]string, 50)
	for i := range holders {
		holders[i] = fmt.Sprintf("cust-%02d", 49-i)
	}
	require.NoError(t, store.AddHolders(ctx, sale.ID, holders))
	_, err = pool.Exec(ctx, `UPDATE sales SET opens_at = now() - interval '1 second' WHERE sale_id = $1`, sale.ID)
	require.NoError(t, err)
	_, _, err = store.LeasePositions(ctx, sale.ID, 1, 0)
	require.NoError(t, err)
	c, err := store.Crowd(ctx, sale.ID)
	require.NoError(t, err)
	require.ElementsMatch(t, holders, c.Holders)

	reads.mu.Lock()
	sqls := reads.sqls
	reads.mu.Unlock()
	var selects []string
	for _, sql := range sqls {
		if strings.Contains(sql, "SELECT customer_id FROM waitroom_holders") {
			selects = append(selects, sql)
		}
	}
	require.Len(t, selects, 2, "the freeze's read and the transcript's")
	for _, sql := range selects {
		rows, err := pool.Query(ctx, "EXPLAIN "+sql, sale.ID)
		require.NoError(t, err)
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.NotContains(t, strings.Join(plan, "\n"), "Sort", "the database sorts the holders: %s", sql)
	}
}
