-- What each instance keeps in memory (salecache/): enough to answer "sold out"
-- and "not open" on the purchase path, and every waiting-room status poll,
-- without a database round trip. Re-read on every flashline_sale_changed and
-- flashline_waitroom notification and once a second as a fallback.

-- name: SaleFacts :many
-- Every sale that is not closed (and closed ones for a day, so that late
-- arrivals are refused without a round trip), or just @sale_id when given,
-- with its waiting room's counters when it has one. sold_out: every bucket is
-- empty. stock_version changes whenever any bucket's stock changes (the
-- buckets' row versions, xmin: every decrement and restock writes a new one),
-- so a cache can tell that holders may have come and gone between two reads
-- that both saw the sale sold out, and whenever the sale's own row does (an
-- open, a pause: its xmin too), so that a refusal "not open" is never
-- confirmed by a read that already has the sale open. now is the database's clock at the read:
-- instances judge times by it (an opening, a token's expiry), not by their
-- own, which may be off. available is the units left in every bucket (the
-- waiting room paces its polls by it); pending_holds, asked only of a sold-out
-- sale, whether a pending hold could still give a unit back (an index probe
-- of reservations_one_active_per_customer).
SELECT s.sale_id, s.state, s.opens_at, s.admission, s.fairness, s.challenge_bits,
       s.min_account_age_seconds, s.draw_seed, s.gate, s.per_customer_limit,
       coalesce(s.per_instrument_limit, 0)::int AS per_instrument_limit,
       coalesce((SELECT max(st.quantity) FROM stock st WHERE st.sale_id = s.sale_id), 0)::int <= 0 AS sold_out,
       coalesce((SELECT sum(greatest(st.quantity, 0)) FROM stock st WHERE st.sale_id = s.sale_id), 0)::bigint AS available,
       (coalesce((SELECT max(st.quantity) FROM stock st WHERE st.sale_id = s.sale_id), 0) <= 0
        AND EXISTS (SELECT 1 FROM reservations r WHERE r.sale_id = s.sale_id AND r.state = 'pending'))::boolean AS pending_holds,
       coalesce(w.next_position, 1)::bigint AS next_position,
       w.preopen_count,
       w.preopen_positions,
       coalesce(w.preopen_tickets, 0)::bigint AS preopen_tickets,
       w.final_seed, (w.beacon_public_key IS NOT NULL)::boolean AS beacon, w.beacon_round,
       coalesce(w.held, false)::boolean AS held,
       coalesce(w.broadcast, '')::text AS broadcast,
       coalesce(w.admitted_through, 0)::bigint AS admitted_through,
       coalesce(w.pace_per_second, 0)::float8 AS pace_per_second,
       (s.xmin::text || '/' || coalesce((SELECT string_agg(st.xmin::text, ',' ORDER BY st.bucket) FROM stock st WHERE st.sale_id = s.sale_id), ''))::text AS stock_version,
       coalesce(s.title, s.sku)::text AS title,
       coalesce(s.image_url, '')::text AS image_url,
       -- A sale's variants in order (none without): each one's SKU, title,
       -- initial stock and units left (migration 000026).
       coalesce((SELECT array_agg(v.sku ORDER BY v.position) FROM sale_variants v WHERE v.sale_id = s.sale_id), '{}')::text[] AS variant_skus,
       coalesce((SELECT array_agg(v.title ORDER BY v.position) FROM sale_variants v WHERE v.sale_id = s.sale_id), '{}')::text[] AS variant_titles,
       coalesce((SELECT array_agg(v.initial_stock ORDER BY v.position) FROM sale_variants v WHERE v.sale_id = s.sale_id), '{}')::int[] AS variant_initial,
       coalesce((SELECT array_agg((SELECT coalesce(sum(greatest(st.quantity, 0)), 0) FROM stock st
                                    WHERE st.sale_id = v.sale_id AND st.variant = v.sku) ORDER BY v.position)
                   FROM sale_variants v WHERE v.sale_id = s.sale_id), '{}')::bigint[] AS variant_available,
       now()::timestamptz AS now
  FROM sales s
  LEFT JOIN waiting_rooms w ON w.sale_id = s.sale_id
 WHERE (sqlc.narg(sale_id)::text IS NULL AND (s.state <> 'closed' OR s.updated_at > now() - interval '1 day'))
    OR s.sale_id = sqlc.narg(sale_id)::text;

-- name: SaleCustomers :many
-- Customers who have ever held a reservation in the sale. Once a sale is sold
-- out, only they can get anything but "sold out" (a replay of their stored
-- answer, or "limit reached"), so only their requests need the database.
SELECT DISTINCT r.customer_id FROM sale_reservations r WHERE r.sale_id = @sale_id;

-- name: StockVersions :many
-- The stock_version of SaleFacts alone, for each of the sales given: a cache
-- that refuses a buyer from memory first checks, in one read shared by every
-- refusal waiting, that nobody has reserved since it read the sale (every
-- reservation writes the stock) and that the sale's state has not changed
-- (its row's version). An index scan of each sale's buckets.
SELECT s.sale_id::text AS sale_id,
       (s.xmin::text || '/' || coalesce((SELECT string_agg(st.xmin::text, ',' ORDER BY st.bucket) FROM stock st WHERE st.sale_id = s.sale_id), ''))::text AS stock_version
  FROM sales s
 WHERE s.sale_id = ANY(@sale_ids::text[]);
