-- What each instance keeps in memory to answer "sold out" and "not open"
-- without a database round trip (salecache/). Re-read on every
-- flashline_sale_changed notification and once a second as a fallback.

-- name: SaleFlags :many
-- Every sale that is not closed (and closed ones for a day, so that late
-- arrivals are refused without a round trip), or just @sale_id when given.
-- max_bucket is the most any one bucket holds: 0 means sold out.
SELECT s.sale_id, s.state, s.opens_at, s.updated_at,
       coalesce(max(st.quantity), 0)::int AS max_bucket
  FROM sales s
  LEFT JOIN stock st ON st.sale_id = s.sale_id
 WHERE (s.state <> 'closed' OR s.updated_at > now() - interval '1 day')
   AND (sqlc.narg(sale_id)::text IS NULL OR s.sale_id = sqlc.narg(sale_id)::text)
 GROUP BY s.sale_id;

-- name: SaleCustomers :many
-- Customers who have ever held a reservation in the sale. Once a sale is sold
-- out, only they can get anything but "sold out" (a replay of their stored
-- answer, or "limit reached"), so only their requests need the database.
SELECT DISTINCT r.customer_id FROM reservations r WHERE r.sale_id = @sale_id;
