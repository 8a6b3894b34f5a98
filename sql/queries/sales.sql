-- Sales: created and administered by the admin API and `flashline sale`.

-- name: DatabaseNow :one
-- The database's clock: what a new sale's opening time is judged by (not the
-- instance's own clock, which may be off).
SELECT now()::timestamptz AS now;

-- name: SaleInsert :one
INSERT INTO sales (sale_id, sku, state, initial_stock, per_customer_limit,
                   reservation_ttl_seconds, opens_at, admission, buckets,
                   fairness, challenge_bits, per_instrument_limit,
                   min_account_age_seconds, draw_seed, confirmation, gate,
                   title, image_url, price_amount, price_currency, variant_count)
VALUES (@sale_id, @sku, @state, @initial_stock, @per_customer_limit,
        @reservation_ttl_seconds, sqlc.narg(opens_at), @admission, @buckets,
        @fairness, @challenge_bits, sqlc.narg(per_instrument_limit),
        @min_account_age_seconds, @draw_seed, @confirmation, @gate,
        sqlc.narg(title), sqlc.narg(image_url), sqlc.narg(price_amount),
        sqlc.narg(price_currency), @variant_count)
RETURNING sale_id;

-- name: StockInsert :exec
-- One row per bucket; the caller spreads initial_stock over the buckets
-- (of each variant: variants names each row's, '' for a sale without
-- variants, whose rows' variant is NULL).
INSERT INTO stock (sale_id, bucket, quantity, variant)
SELECT @sale_id::text, unnest(@buckets::int[]), unnest(@quantities::int[]), nullif(unnest(@variants::text[]), '');

-- name: VariantInsert :exec
-- A sale's variants (migration 000026), before their stock rows.
INSERT INTO sale_variants (sale_id, sku, position, title, initial_stock, buckets)
SELECT @sale_id::text, unnest(@skus::text[]), unnest(@positions::int[]), unnest(@titles::text[]),
       unnest(@initial_stocks::int[]), unnest(@buckets::int[]);

-- name: VariantsOfSale :many
-- A sale's variants in order, with their live counts (the
-- sale_variant_invariant view).
SELECT v.sku, t.title, v.initial_stock, v.available, v.pending, v.confirmed, v.ok
  FROM sale_variant_invariant v
  JOIN sale_variants t ON t.sale_id = v.sale_id AND t.sku = v.sku
 WHERE v.sale_id = @sale_id
 ORDER BY v.position;

-- name: StockLedgerInsertInitial :exec
-- Records each bucket's opening quantity, so sum(delta) equals the stock.
INSERT INTO stock_ledger (sale_id, bucket, delta, reason)
SELECT st.sale_id, st.bucket, st.quantity, 'initial'
  FROM stock AS st
 WHERE st.sale_id = @sale_id AND st.quantity > 0;

-- name: SaleGet :one
-- The sale with its live counts (units, from the sale_invariant view) and the
-- invariant job's last verdict.
SELECT s.sale_id, s.sku, s.state, s.initial_stock, s.per_customer_limit,
       s.reservation_ttl_seconds, s.opens_at, s.admission, s.buckets,
       s.pause_reason, s.created_at, s.fairness, s.challenge_bits,
       s.per_instrument_limit, s.min_account_age_seconds, s.confirmation, s.gate,
       s.title, s.image_url, s.price_amount, s.price_currency,
       i.available, i.pending, i.confirmed, i.expired, i.cancelled, i.voided,
       i.ledger_total, i.ok AS counts_ok,
       v.ok AS invariant_ok, v.checked_at AS invariant_checked_at,
       v.detail AS invariant_detail,
       now()::timestamptz AS now
  FROM sales s
  JOIN sale_invariant i ON i.sale_id = s.sale_id
  LEFT JOIN invariant_status v ON v.sale_id = s.sale_id
 WHERE s.sale_id = @sale_id;

-- name: SaleSetState :one
-- Moves a sale to a new state if it is in one of the allowed source states,
-- and audits the move under @operator (operator_actions, action @action:
-- open, pause, resume or close) in the same statement: no audit row without
-- the move, no move without its row.
-- Returns no row when the transition is not allowed (or the sale is unknown).
-- Opening (@open_now) moves opens_at to now if it was later or unset. Any
-- other move to 'open' (resume) of a sale whose opening time is still ahead
-- goes back to 'scheduled': resuming a paused sale must not open it early.
WITH moved AS (
    UPDATE sales
       SET state = CASE WHEN @state::text = 'open' AND NOT @open_now::boolean AND opens_at > now()
                        THEN 'scheduled' ELSE @state::text END,
           opens_at = CASE WHEN @open_now::boolean THEN least(coalesce(opens_at, now()), now())
                           ELSE opens_at END,
           pause_reason = sqlc.narg(pause_reason), updated_at = now()
     WHERE sales.sale_id = @sale_id AND sales.state = ANY (@from_states::text[])
    RETURNING sales.sale_id, sales.state
), audit AS (
    INSERT INTO operator_actions (action, sale_id, operator, detail)
    SELECT @action::text, moved.sale_id, @operator::text, 'now ' || moved.state FROM moved
)
SELECT moved.sale_id FROM moved;

-- name: SaleList :many
-- A page of sales, newest first: those made before @after (none: from the
-- newest), in one of @states as a reader sees them (flashline.EffectiveState:
-- a scheduled sale past its opening time is open, an open one with nothing
-- available sold out; none: every state), at most @max_rows. An @after that
-- names no sale is the caller's to tell (SaleExists).
SELECT s.sale_id
  FROM sales s
 CROSS JOIN LATERAL (
       SELECT CASE WHEN s.state = 'scheduled' AND s.opens_at <= now() THEN 'open' ELSE s.state END AS shown) e
 WHERE (@after::text = ''
        OR (s.created_at, s.sale_id) < (SELECT a.created_at, a.sale_id FROM sales a WHERE a.sale_id = @after))
   AND (cardinality(@states::text[]) = 0
        OR (CASE WHEN e.shown = 'open'
                  AND (SELECT coalesce(sum(quantity), 0) FROM stock WHERE stock.sale_id = s.sale_id) = 0
                 THEN 'sold_out' ELSE e.shown END) = ANY (@states::text[]))
 ORDER BY s.created_at DESC, s.sale_id DESC
 LIMIT @max_rows;

-- name: SaleExists :one
SELECT EXISTS (SELECT 1 FROM sales WHERE sale_id = @sale_id);

-- name: VariantInvariantAll :many
-- The invariant of every variant of every sale with variants (the
-- sale_variant_invariant view), as `flashline check` prints it under its
-- sale.
SELECT v.sale_id, v.sku, v.initial_stock, v.available, v.pending, v.confirmed, v.ledger_total, v.ok
  FROM sale_variant_invariant v
 ORDER BY v.sale_id, v.position;

-- name: SaleInvariantAll :many
-- The invariant for every sale, as `flashline check` prints it, with what
-- the state shown is derived from (the opening time, the clock).
SELECT i.sale_id, i.sku, i.state, i.initial_stock, i.available, i.pending, i.confirmed,
       i.expired, i.cancelled, i.voided, i.ledger_total, i.accounted, i.ok,
       s.opens_at, now()::timestamptz AS now
  FROM sale_invariant i
  JOIN sales s ON s.sale_id = i.sale_id
 ORDER BY i.sale_id;
